// Package jobproto is the contract between hadar-slurmd and the jobs it
// schedules: what a job says to hadar and what hadar says back, with no
// scheduling in it. `hadar report` and the Python helpers
// (contrib/python/hadar-progress, contrib/examples/hadare/hadar_copies.py)
// need this package alone, so they do not link the daemon.
//
//   - The tag (tag.go, model.go): a job is hadar's when its comment is
//     "hadar" or starts with "hadar " (IsTagged, the rule of
//     contrib/slurm/job_submit.lua); ParseTag reads its key=value words
//     (model=, steps=, copies=, weight=); ModelResolver maps model= to a job
//     type of the throughput matrix, compared after NormalizeModel.
//   - Progress reports (progress.go): spool_dir/progress/<jobid>.json, one
//     JSON object (Progress), written atomically by WriteReport (what
//     `hadar report --steps N` calls) and read by ReadProgress, which skips
//     symlinks, large and malformed files and returns each file's owner so
//     the daemon trusts only the job's own user.
//   - Training logs (logparse.go, logfollow.go): LogParser finds the step
//     in tqdm bars and `step N/M` lines, LogFollower reads a growing log
//     like tail -F; `hadar report --follow` uses both.
//   - HadarE copy plans (copyplan.go): spool_dir/copies/<array id>/plan.json
//     (CopyPlan), what the daemon tells a copies job's copies every round;
//     written through an os.Root so a job cannot redirect it.
package jobproto
