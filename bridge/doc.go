// Package bridge is hadar-slurmd's core: every round it observes Slurm,
// asks an optimizer.Policy for a plan, checks it (optimizer.Check) and
// carries it out with scontrol.
//
//	        +------------------+   View    +----------+  Snapshot  +--------+  Plan  +-------+  Derive  +---------+
//	round ->| observe: squeue, | --------> | snapshot | ---------> | Policy | -----> | Check | -------> | enforce |
//	        | scontrol show    |  classify |  (pure)  |            | (pure) |        |       | (pure)   | Executor|
//	        | node (2 commands)|  (pure)   +----------+            +--------+        +-------+          +---------+
//	        +------------------+
//
// Everything between the two Slurm ends is pure and unit-tested:
// BuildView classifies the queue, BuildSnapshot builds the optimizer's
// input, Derive turns the plan into Decisions and Actions. Bridge.Cycle runs
// one round (what tests and `hadar-slurmd --once` call); Bridge.Run loops.
//
// # Which jobs are hadar's
//
// A job is tagged when its comment is exactly "hadar" or starts with
// "hadar " (jobproto.IsTagged: the rule of contrib/slurm/job_submit.lua). The
// bridge never acts on any other job: the Executor refuses every id that was
// not tagged in the round's own observation, whatever the action list says.
//
// # The lease
//
// job_submit.lua gives a tagged job a begin time of max(its user's --begin,
// now) + lease (hadar.toml lease, HADAR_LEASE_SECONDS in the script): it
// waits with reason BeginTime and keeps the priority the site's policy gives
// it (squeue %Q). hadar renews the lease of every job it keeps waiting once
// less than half of it is left (Derive's lease action, and every poll between
// rounds: renewLeases), and starts a job by pinning it (NodeList) and ending
// its lease (StartTime=now). If hadar-slurmd dies or hangs, nobody renews
// the leases and Slurm schedules every tagged job alone within one lease:
// fail-open needs no action. A lease that ran out before Slurm started the
// job is taken back by the next round. hadar reads the user's own begin time
// back as the begin time minus the lease (ReadLease) and plans no job
// before it. Holds are not hadar's: a job held by its owner (sbatch -H,
// scontrol hold) or an admin (JobHeldAdmin) keeps its lease and is planned
// only once they release it; hadar holds a job itself only to migrate it
// (requeuehold, released in the same round), and such a job's hold reasons
// (hadarHoldReasons) are the only ones it ever releases. A job with an
// unmet dependency is not planned either (ClassNotReady). Waiting jobs are
// placed in the site's priority order (then oldest first).
//
// The tag is "hadar" followed by space-separated key=value words
// (jobproto.ParseTag): model= (job type of the matrix), steps= (total steps, > 0),
// copies= (HadarE limit, 1..64) and weight= (priority weight, > 0); a value
// may be double-quoted to hold spaces. model= is compared after
// jobproto.NormalizeModel (lower case, letters and digits only, "batchsize" -> "bs"),
// so "ResNet-50 (batch size 64)", "resnet50-bs64" and "resnet-50_bs64" all
// name the same job type; [models] aliases in the config add names
// (jobproto.ModelResolver).
//
// A tagged job hadar cannot schedule is passed through: a bad tag, an
// unknown or missing model that neither default_model nor the cross-model
// prior covers, a GPU request it cannot read (no GPUs, a GPU type hadar
// does not know, --gpus that do not split evenly over the job's nodes, a
// --constraint with operators it does not evaluate: request.go), no known
// throughput on this cluster's GPU types, or a request no node could ever
// hold. If hadar still holds it (its lease, or hadar's own hold) it is
// handed to Slurm once: AdminComment "hadar: <reason>; released to Slurm's
// scheduler", then StartTime=now, and logged; a job whose user's --begin is
// ahead is handed over once that has passed, and keeps its begin time (the
// user's plus the lease) until then: given back the user's alone, it would
// read as a lease on top of a begin time one lease earlier. It does not compete with hadar's placements: it is handed over
// last in the round, in its own update, and only after an await-start has
// seen every job hadar started (this round or earlier) running, on a lease
// again or gone; otherwise it waits for the next round. Its lease is not
// renewed, so it is Slurm's at the latest when that runs out; once it has
// waited launch_timeout (since submission or its last requeue), rounds
// place, move and stop nothing until it is handed over.
//
// # Observe
//
// One squeue (slurm.JobQueryArgs) and one scontrol show node
// (slurm.NodeQueryArgs) per round, never per job, and once per daemon
// scontrol --version (slurm.VersionArgs); a poll between rounds is one
// squeue. A round that passes jobs through while jobs hadar released
// may be pending adds an await-start: at most 20 squeue, 0.5 s apart
// (typically one). Jobs are classified (JobClass): waiting (tagged, pending,
// on hadar's lease or one that ran out, or in hadar's own hold), launching
// (started by hadar, not running yet; the state database remembers where),
// held (by its owner or an admin), not-ready (its --begin is ahead or a
// dependency is unmet), running, pinned (suspended, completing, or on a
// node hadar does not use), pass-through and untagged.
//
// Nodes: hadar places work only on schedulable nodes whose GPU types
// resolve ([gres] aliases, then profiles.Store.ResolveGPUType); drained or
// down nodes get no new work. A node with two or more GPU types depends on
// the Slurm release, read once (SlurmVersioner: scontrol --version; a
// Cluster without it, such as slurmsim, counts as 22.05): from 24.11 it is
// used per type (ViewInput.Retype, NodeView.Pools: one pool per type, each
// with its own GresUsed figures, listed in the snapshot once per type with
// the node's CPUs and memory); before 24.11 it is shown but not used (Slurm
// would choose the type). A node (or pool) offers the policy its
// configured GPUs minus those allocated to work hadar does not manage
// (GresUsed minus running hadar jobs; GresUsed also counts --gpus jobs that
// squeue shows as N/A) minus launching hadar jobs. GPUs of running hadar
// jobs are the plan's to hand out again; the job's Current says where it is.
// A running job on a node used per type counts in the pool its Gres names;
// one whose Gres names none of the node's types (Slurm chose) is pinned.
//
// # Enforce
//
// hadar chooses a job's GPU type by choosing its node (NodeList), because
// changing a pending job's GPU type is broken in Slurm 22.05 (the new type
// is added to the old one). On a node used per type (Slurm 24.11) the
// NodeList pin alone does not say the type, so Derive also sets it: a
// retype (scontrol update JobId=a,b Gres=gpu:SITE_TYPE:N, SITE_TYPE in the
// node's own spelling, one call per distinct value) before the place. Only
// one-node per-node requests squeue shows (--gres, and on 24.11
// --gpus-per-node) are retyped (Request.Retypable); every other job is
// kept off such nodes (Request.Eligible). The user's own request is
// stored first (State.RememberGresRequests, table gres_requests, kept while
// the job is in the queue; if it cannot be stored nothing is retyped that
// round) and every later round reads the job's request from it
// (ViewInput.Requested), so a type hadar set is never taken for the user's
// constraint; a job placed again where no type need be named (a migration
// to a node of one type) gets its user's request back in the same way. A
// job whose Gres already says what its placement needs gets no retype, so
// clusters without such nodes never see one. Derive:
//
//   - A running job keeps its nodes unless the plan moves it; every planned
//     move is made, since the plan weighed it: without preemption a
//     running job moves only when the estimated gain (remaining steps at
//     the current rate minus at the new rate) exceeds migration_penalty
//     (optimizer.KeepNoStop, for every policy); hadar weighs its own moves
//     the same way; a move to a slower type frees GPUs the plan gives to
//     another job. A move is a migration: requeuehold ->
//     update NodeList -> StartTime=now -> release. NodeList is never sent
//     to a running job. A running job the plan drops is stopped (requeuehold)
//     only with preemption = true; otherwise it keeps running and keeps its
//     GPUs.
//   - A waiting job the plan schedules is placed on a shape Slurm enforces
//     with NodeList alone: one node holding all its GPUs (--nodes=1), or
//     exactly its --nodes nodes with --gres GPUs each (the nodes may differ
//     in type: Hadar's task-level placement; the gang runs at its slowest
//     worker's pace). The policies plan each job in its request's shape
//     (optimizer.Shape), so this is the plan's own placement; where the
//     planned nodes are not free (a move the plan counted on was given
//     up), the same placement rule (optimizer.PlaceOn) finds other free
//     nodes of the planned types. Otherwise the job is deferred (keeps
//     its lease) to the next round, and the log says why: the GPU type is the
//     policy's decision, never Derive's.
//   - Order of a round: leases (given again or renewed, one update for
//     all), one requeuehold for all moves, the
//     retypes (Gres=, one per distinct value), one NodeList update per
//     placed job, one StartTime=now for all of them, a settle wait of
//     RequeueSettle (1.1 s) when a moved job's new place shares a node with
//     its old one (a node used per type: the node's slurmd refuses a launch
//     in the second of the requeue, "Job credential revoked"),
//     one release for the moved ones (hadar's own hold; a job on a lease
//     needs none); then, if jobs are passed through, an await-start
//     (squeue until every job hadar started is running, on a lease or
//     gone; the rest of the round is skipped if that does not happen
//     within 10 s), the AdminComments of the pass-throughs and the end of
//     their leases. Slurm's scheduler could otherwise start a pass-through job
//     on the GPUs hadar chose for a placed job, which would then wait
//     until launch_timeout.
//   - Only jobs in hadar's own hold are released and NodeList goes only to
//     pending jobs, all judged from the round's own observation, so a
//     restart or a repeated round never applies an action twice (a
//     repeated release would lower a job's priority in 22.05).
//   - A started job that does not start within launch_timeout (its GPUs
//     were taken meanwhile) gets a lease again and is re-planned. A started
//     job with a begin time ahead gets StartTime=now again: in 22.05 a
//     requeue completes after scontrol returns and then sets EligibleTime
//     to now+120 s, overriding the StartTime=now sent with the migration;
//     the loop looks again min_round_gap after any migration for this.
//     Only for hadar's own migrations (the job was seen running on other
//     nodes): a job requeued from the node it was placed on gets a lease and
//     is placed again a round later, as starting it there at once races the
//     node's revocation of its old credential (the job fails).
//   - hadar's own hold is "job requeued in held state" (scontrol
//     requeuehold), so a migration cut short after its requeuehold is
//     re-placed, and released by fail-open. A tagged job that Slurm
//     requeued on its own (a node failure, a user's plain requeue) has a
//     begin time 120 s on, which reads as a lease: it is waiting and is
//     re-placed on live nodes; a started job whose nodes went down or were
//     drained gets a lease again at once (docs/reliability.md).
//   - HadarE copies (copies.go, behind copiesOnSlurm; docs/hadare-slurm.md): a job array tagged
//     copies=K is one copies job (CopyGroup, id: the array id) whose tasks
//     are its copies: each planned copy is a held task placed on its node
//     and released; a copy whose GPUs the plan gives to other jobs is
//     stopped (requeuehold); never two copies of a job on one node, never
//     more than K (CheckCopies, on every derivation). Every round the
//     bridge writes spool_dir/copies/<array id>/plan.json (jobproto.CopyPlan) for the copies.
//     A copies tag on a job that is not an array runs as its fastest copy
//     that holds the whole gang.
//
// Execution (Executor): a failed action does not stop the others; later
// steps of the same job (a retype or place after its failed requeuehold, a
// place after its failed retype, a release after its failed place) are
// skipped; nothing is retried within the round:
// the next round derives the work again from what Slurm then shows.
// Batched scontrol calls go on past a bad id (observed on 22.05). After
// slurmctld is found unreachable the rest of the round is skipped.
//
// # Progress
//
// A job reports its total steps done with jobproto.WriteReport (what `hadar
// report --steps N` calls): spool_dir/progress/<jobid>.json, written
// atomically. spool_dir must be on a filesystem the compute nodes share;
// its progress directory is mode 1777 (sticky) so every job can report and
// none can replace another user's report. jobproto.ReadProgress skips symlinks,
// large or malformed files without echoing them; the bridge trusts a report
// only if the file belongs to the job's user (or root). A report replaces
// the estimate; two reports on an unchanged single-type placement give a
// learned-throughput sample (profiles.Store.RecordObservation; not in dry
// runs). Jobs that never report are estimated from run time x matrix rate
// on the GPU type they ran on, accumulated per round in the state database.
// A job without steps= is assumed to run default_duration on its fastest
// type.
//
// # State and restarts
//
// state.db (SQLite, 0600, in data_dir, separate from the throughput
// database) holds rounds, decisions, actions, where released jobs were
// placed, progress and learned samples, and the users' own GPU requests of
// the jobs it retyped (internal/statedb). On start the bridge continues the round
// numbering and rebuilds everything else from Slurm: a missing database
// loses history and estimates, never jobs (a job hadar retyped then reads
// as a request for that type until it ends). A file that is not SQLite or
// fails PRAGMA quick_check is moved to state.db.corrupt-<time> and
// replaced, with an error in the log.
//
// # Loop and failure
//
// Run starts a round at once, then every round, and early (no sooner than
// min_round_gap after the last) when a poll every poll_interval sees a
// tagged job arrive or leave. A round that cannot observe (slurmctld down:
// slurm.ErrControllerDown, timeouts, ...) changes nothing, is logged, and
// is retried after an exponential backoff (1 s doubling, at most 2 min).
// Dry run: actions are logged (and printed by --once), nothing is changed.
// ReleaseAll hands every tagged job hadar holds to Slurm at once (the end
// of its lease, the release of hadar's own holds; a job whose user's
// --begin is ahead keeps its begin time, Slurm's one lease after it), called when the daemon stops (SIGTERM/SIGINT) and by
// `hadar-slurmd --release-all`; without it the leases run out by
// themselves.
package bridge
