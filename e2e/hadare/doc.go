// Package hadare is the end-to-end test of HadarE copies on a real Slurm
// 22.05 test cluster (docs/hadare-slurm.md). It has no code outside its
// test.
//
// It runs only with HADAR_E2E=1 (it is skipped otherwise) and needs root,
// Slurm and munge (contrib/testcluster/up installs them), python3 with
// Debian's python3-torch and python3-sklearn (apt-get install -y
// python3-torch python3-sklearn), and bin/hadar and bin/hadar-slurmd (built
// into a temporary directory when missing; HADAR_BIN_DIR names another
// place). It starts its own test cluster of the demo layout (two v100
// nodes, a p100, two k80, four GPUs each) in HADAR_E2E_HADARE_DIR (default
// /tmp/hadar-hadare-tc) with slurmctld on HADAR_E2E_HADARE_PORT (default
// 22000), so it can run beside the other e2e tests, and stops it at the
// end. hadar-slurmd runs with policy hadare and 8 s rounds; the jobs are
// submitted as an unprivileged user (hadartest, created when missing).
//
// TestCopies trains contrib/examples/hadare/train_digits.py (an MLP on
// sklearn's digits, 3000 steps, paced to the matrix's lm-bs20 throughput
// on the GPU type of its node) three times:
//
//   - (a) as one tagged job: it runs on a v100 node;
//   - (b) as a job array of 4 tasks tagged copies=4: the bridge places the
//     copies on 4 different nodes of 3 GPU types, they train in rounds and
//     average their models. (b) must finish sooner in wall time than (a)
//     and reach at least (a)'s held-out accuracy minus 1 point; no two
//     copies ever ran on one node at once (jobcomp records);
//   - (c) as (b) with two spare tasks, where one copy is cancelled with
//     scancel in the first round and another one is killed (SIGKILL of its
//     python) in the second: the job still does all its steps, with its
//     remaining copies and spares the bridge places as replacements.
//
// Figures are printed as "E2E name=value" lines (go test -v). The work
// directory is removed when the test passes (HADAR_E2E_KEEP=1 keeps it)
// and named in the output when it fails. It takes about 2.5 minutes.
package hadare
