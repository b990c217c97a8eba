// Package site holds hadar's end-to-end tests on the Slurm that sites run:
// the one-host test cluster with slurmdbd and MariaDB
// (contrib/testcluster/up --accounting: multifactor priority with
// fairshare, QOS and association limits enforced, typed GPU TRES, two
// partitions, accounts acct_a (alice) and acct_b (bob, QOS gpu4 with
// MaxTRESPerUser=gres/gpu=4)). It has no code outside its tests.
//
// The tests run only with HADAR_E2E=1, as root, with bin/hadar-slurmd
// built (or HADAR_BIN_DIR naming where it is). TestMain starts the cluster
// in its own state directory and port (HADAR_E2E_ACCT_DIR, default
// /tmp/hadar-e2e-acct; HADAR_E2E_ACCT_PORT, default 24000), so it runs
// beside the other suites' clusters, and stops it at the end. `make
// e2e-site` (part of `make test`) runs it. With HADAR_E2E_SITE_CONF naming
// the slurm.conf of a running cluster with the same accounts, the tests run
// on that one and leave it running: contrib/ci/e2e-containers runs them so
// on the container cluster with Slurm 24.11 (contrib/docker/cluster up
// --accounting), from its login host.
//
//   - TestFairshareOrderKept: after bob's account has used the cluster,
//     alice's tagged jobs start before his, whatever the submission order,
//     and waiting tagged jobs show their real priority.
//   - TestQOSLimitPredicted: with bob over his QOS limit, 18 jobs run at
//     once as under Slurm alone, none is requeued, and the makespan is no
//     worse than Slurm alone's, measured first on the same workload.
//   - TestReservationRespected: tagged jobs that would run into a
//     maintenance reservation start elsewhere at once.
//
// Measured figures are printed as "E2E name=value" lines (go test -v).
package site
