// Package reliability holds hadar-slurmd's fault, load and hostile-input
// tests on a real Slurm 22.05 test cluster (contrib/testcluster). It has no
// code of its own outside its tests.
//
// The tests run only with HADAR_E2E=1, as root (they start their own test
// cluster, submit jobs as root and as an unprivileged user, and signal
// slurmctld); otherwise they are skipped. They start their own cluster in
// HADAR_REL_CLUSTER_DIR (default /tmp/hadar-rel-tc) on HADAR_REL_CLUSTER_PORT
// (default 21000), so they never touch another test cluster, and stop it at
// the end (HADAR_REL_KEEP=1 leaves it up). HADAR_REL_SEED seeds the random
// kill moments (default 1). The measured figures are printed at the end
// ("RESULT ..." lines) and written to the artifacts directory, which is kept
// when a test fails. See docs/reliability.md.
//
//	HADAR_E2E=1 go test -count=1 -timeout 20m -v ./e2e/reliability/
package reliability
