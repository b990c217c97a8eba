// Package e2e holds hadar's end-to-end tests on a real Slurm 22.05 test
// cluster (contrib/testcluster). It has no code outside its tests.
//
// The tests run only with HADAR_E2E=1; otherwise they are skipped. They
// need root, a running test cluster of the demo layout whose SLURM_CONF is
// in the environment, and bin/hadar and bin/hadar-slurmd built (or
// HADAR_BIN_DIR naming where they are). `make e2e` (part of `make test`)
// does all of it:
//
//	make build
//	eval "$(contrib/testcluster/up)"
//	HADAR_E2E=1 go test -count=1 -v ./e2e/
//	contrib/testcluster/down
//
// What they check, on the real cluster:
//
//   - TestWorkload: the demo's mixed workload (contrib/demo/run: 14 tagged
//     toy training jobs of different models and sizes plus untagged jobs,
//     then the same workload untagged under Slurm alone). Every tagged job
//     ran on the node, and so the GPU type, of the daemon's last place or
//     migrate decision for it (daemon log and state database against
//     Slurm's jobcomp log); every job COMPLETED; no daemon action or log
//     line names an untagged job, and each ran exactly once; the workload
//     finishes sooner under hadar than under Slurm alone; at least one job
//     was migrated and still COMPLETED. `hadar status`, `hadar plan` and
//     `hadar explain` are run against the live daemon meanwhile. Both
//     measured makespans are within 25% of the demo's PREDICTED line
//     (`hadar simulate --layout`, printed before the workload runs).
//   - TestPredictedGPUTypes: a short workload through `hadar simulate
//     --layout` (the demo's prediction) and through hadar-slurmd on the
//     cluster finds the same GPU type for at least 90% of the jobs.
//   - TestStatusDemoLayout and TestStatusSiteLayout: `hadar status --json`
//     against the cluster's own view (scontrol) on the demo layout and on a
//     second cluster of the site layout (started by the test in its own
//     state dir and port: site GRES names, a node with two GPU types, a
//     CPU-only node, a drained node, GPUs held by untagged jobs).
//   - TestRoundTime100: one round of hadar-slurmd (observe + solve +
//     enforce) with 100 pending tagged jobs stays under a second.
//   - TestHoldsAndBegin: on tagged jobs, an admin's hold (scontrol hold by
//     root) and a user's own (sbatch -H, as an unprivileged user) stay
//     through the daemon's rounds, its stop (SIGTERM, which ends hadar's
//     leases) and a restart, and are placed by hadar once released; a
//     user's --begin=now+3minutes is kept through all of it: the job (and
//     one with a bad tag, passed through) starts after it, not before.
//
// Environment: HADAR_E2E=1 (run), HADAR_BIN_DIR, HADAR_E2E_SITE_DIR and
// HADAR_E2E_SITE_PORT (the site cluster's state dir and slurmctld port,
// default /tmp/hadar-e2e-site and 23000), HADAR_E2E_KEEP=1 (keep the work
// directories of passing tests too; those of failing tests are always
// kept and named in the output). Measured figures are printed as
// "E2E name=value" lines (go test -v).
//
// What this suite shares with e2e/reliability and e2e/hadare (running
// commands, sbatch, squeue, the jobcomp log, a test cluster of a suite's
// own, waiting) is in internal/e2eutil.
package e2e
