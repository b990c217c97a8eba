// Package slurmsim is an in-memory Slurm: the nodes of a test-cluster layout
// (contrib/testcluster/layouts), a queue, and the behaviour of Slurm 22.05 as
// measured on the test cluster (/work docs: slurm-testcluster.md), on a
// virtual clock. *Cluster has the verbs hadar-slurmd uses (bridge.Cluster:
// squeue, scontrol show node / show job, update, hold, release,
// requeuehold) and is a bridge.Clock, so `hadar simulate --layout` runs the
// daemon's own loop against it, round by round, in virtual time.
//
// What it models:
//
//   - job_submit.lua: a job whose comment is "hadar" or starts with "hadar "
//     gets a begin-time lease at submission (Timing.Lease): it waits with
//     reason BeginTime until hadar starts it (StartTime=now) or renews the
//     lease, or the lease runs out and Slurm starts it.
//   - scontrol update NodeList= pins a pending job (it then runs exactly
//     there, or waits); StartTime= sets its begin time; hold and release;
//     requeuehold puts a running job back to pending held at once, its old
//     allocation ends Config.RequeueDelay later, and then its begin time is
//     set Config.EligibleDelay (120 s) on, overriding an earlier
//     StartTime=now, as 22.05 does. A job started again on a node it was
//     requeued from, in the same second as the requeue, fails (the node's
//     slurmd has revoked its credential; seen on 24.11).
//   - Slurm's own scheduling (sched/backfill, select/cons_tres): a pass
//     Config.SchedDelay after every submission, release, update or job end
//     starts the pending jobs that are not held and whose begin time
//     (--begin, JobSpec.Begin) has come, in priority order (FIFO, or
//     priority/multifactor's with Config.Priority), until the first that
//     cannot start; backfill (every
//     Config.BackfillInterval) starts every later job that fits, since jobs
//     have no time limit. Nodes are chosen as cons_tres's best fit does (as
//     observed): the usable nodes with the fewest free CPUs first, in layout
//     order among equals.
//   - Jobs that train like contrib/examples/toyjob: Config.StartupDelay (or
//     Config.Startup of their model) after they start, every Config.Tick (plus Config.TickOverhead) they do
//     Rate(model, GPU type of their first node, workers) x that time in
//     steps (toyjob paces itself by the clock) and
//     report them in the spool's progress files (jobproto.ProgressPath's
//     format), and end when all their steps are done; a requeued job resumes
//     from its last report. Other jobs run for a fixed time. The report files
//     are brought up to date when they can be read: at JobDetails (the
//     daemon reads the spool right after it, once a round), a requeue and a
//     job's end.
//   - The site (Config.Limits, Priority, Reservations, DefaultTime; a site
//     file, Site, gives them): a job whose start would exceed a GPU or
//     running-job limit of its QOS or association (slurm.Limits.CheckGPUJob)
//     waits with Slurm's reason without holding up the queue;
//     priority/multifactor orders jobs by fairshare (the classic factor of
//     the job's account, from decayed GPU-second usage) and age, as squeue's
//     %Q shows; a job does not start on a reservation's nodes if its time
//     limit runs into the reservation; a job past its time limit ends in
//     TIMEOUT. *Cluster reads the limits and reservations back as sacctmgr
//     and scontrol show reservation do (bridge.SiteReader), and scontrol
//     show job gives each job's account, QOS and allocated GPUs.
//   - sbatch -H (JobSpec.Hold) holds a job for its user (JobHeldUser), and
//     scontrol hold for an admin (JobHeldAdmin): priority 0 until released.
package slurmsim
