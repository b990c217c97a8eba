package bridge

import (
	"github.com/hadar-sched/hadar/internal/statedb"
	"sort"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
)

// JobProgress is what the bridge knows of a job's work, kept in the state
// database across rounds and restarts (fields: statedb.JobProgress).
type JobProgress = statedb.JobProgress

// SnapshotParams tune BuildSnapshot.
type SnapshotParams struct {
	Round time.Duration
	// DefaultDuration is the run time assumed, on the job's fastest GPU
	// type, for a job that gives no steps=.
	DefaultDuration time.Duration
	// Preemption is the site's setting: without it no running job may be
	// stopped (optimizer.Job.NoStop), only moved.
	Preemption bool
	// MidRound marks a round the daemon runs early, within the last full
	// round (optimizer.Snapshot.MidRound).
	MidRound bool
	// MoveWithoutProgress lets the policy move (and, with Preemption, stop)
	// running jobs that never reported progress; otherwise such a job
	// keeps its GPUs until it ends (optimizer.Job.NoMove): it may not
	// checkpoint, and a move would throw its run away.
	MoveWithoutProgress bool
	// Limits and JobLimits are the site's limits (limitBudgets):
	// optimizer.Snapshot.Limits and each waiting job's Job.Limits.
	Limits    map[string]optimizer.Limit
	JobLimits map[string][]string
	// SiteWeights are the jobs' weights under the site's [weights]
	// (siteWeights); a job not in it weighs 1, times its tag's weight=.
	SiteWeights map[string]float64
}

// BuildSnapshot turns a view into the optimizer's input: one Node per
// usable node and GPU type (a node used per type, NodeView.Pools, is
// listed once per type, with the node's CPUs and memory on each entry)
// with the GPUs available to hadar, one Job per waiting or running tagged
// job. It is pure.
func BuildSnapshot(v *View, tp optimizer.Throughputs, progress map[string]JobProgress, p SnapshotParams) *optimizer.Snapshot {
	s := &optimizer.Snapshot{Now: v.Now, Round: p.Round, Throughput: tp, MidRound: p.MidRound, NoPreemption: !p.Preemption,
		Limits: p.Limits}
	for _, n := range v.Nodes {
		cpus, cpuLeft := n.AvailableCPUs()
		mem, memLeft := n.AvailableMem()
		for _, p := range n.TypePools() {
			if a := n.AvailableOf(p); a > 0 && cpuLeft && memLeft {
				s.Nodes = append(s.Nodes, optimizer.Node{Name: n.Name, Type: p.Type, GPUs: a, CPUs: cpus, MemMB: mem})
			}
		}
	}
	capacity := usableCapacity(v)
	for _, jv := range v.Jobs {
		if (jv.Class != ClassWaiting && jv.Class != ClassRunning) || jv.CopyOf != "" {
			continue // copies enter as their job, below
		}
		pr := progress[jv.ID]
		total, remaining := plannedWork(jv, believableDone(jv, pr, tp, capacity), tp, capacity, p.DefaultDuration)
		weight := jobWeight(p.SiteWeights, jv.ID, jv.Tag.Weight)
		arrival := jv.Submit
		if arrival.IsZero() {
			arrival = v.Now
		}
		j := optimizer.Job{
			ID: jv.ID, Type: jv.Model, Workers: jv.Workers, Arrival: arrival,
			TotalSteps: total, RemainingSteps: remaining, Weight: weight,
			Attained: pr.Attained, Executed: pr.Executed, MaxCopies: jv.Tag.Copies,
			Shape: jv.Request.Shape(), Priority: jv.Priority, Limits: p.JobLimits[jv.ID],
		}
		if jv.Class == ClassRunning {
			j.Current = currentTasks(v, jv)
			j.NoMove = !p.MoveWithoutProgress && !pr.Reported
			j.NoStop = !p.Preemption || j.NoMove
			// Reports are the user's: they may not make the work left
			// smaller than the run so far implies at the matrix rate
			// (Slurm's TimeUsed of this run), so a report of "1 step
			// left" after hours neither jumps the queue nor shields the
			// job from preemption.
			implied := tp.PlacementRate(jv.Model, jv.Workers, j.Current) * jv.TimeUsed.Seconds()
			j.RemainingSteps = max(j.RemainingSteps, optimizer.RemainingEstimate(total, implied))
		}
		s.Jobs = append(s.Jobs, j)
	}
	s.Jobs = append(s.Jobs, hadarE.snapshotJobs(v, tp, progress, p)...)
	sort.SliceStable(s.Jobs, func(a, b int) bool { return s.Jobs[a].ID < s.Jobs[b].ID })
	return s
}

// plannedWork is a job's total and remaining steps as the policy plans
// them, given the steps it reported done: its steps=, else its --time or
// default_duration on its fastest type (estimatedDuration). Ordinary and
// copies jobs both take it.
func plannedWork(jv *JobView, done float64, tp optimizer.Throughputs, capacity map[string]int, fallback time.Duration) (total, remaining float64) {
	byTime := func() float64 {
		return tp.BestRate(jv.Model, jv.Workers, capacity) * estimatedDuration(jv, fallback).Seconds()
	}
	total = jv.Tag.Steps
	if total <= 0 {
		total = byTime()
	}
	remaining = optimizer.RemainingEstimate(total, done)
	if jv.PriorOnly && jv.Tag.Steps > 0 {
		// The prior's steps/s are another model's: steps= over them says
		// nothing of how long the job runs (a 700-step job of a 30x slower
		// model looked like 6 s of work, so starting it on a 4x slower type
		// cost nothing in the plan). Its time does, until its first
		// progress is learned; the part of its steps it has done carries
		// over.
		left := remaining / total
		total = byTime()
		remaining = total * left
	}
	return total, remaining
}

// maxTimeLimitEstimate: a --time longer than this is a partition's
// default (often a year), not the user's estimate.
const maxTimeLimitEstimate = 30 * 24 * time.Hour

// estimatedDuration is how long a job without steps= is assumed to run on
// its fastest type: its --time limit when it has a real one, else
// default_duration. Progress reports correct it.
func estimatedDuration(jv *JobView, fallback time.Duration) time.Duration {
	if jv.TimeLimit > 0 && jv.TimeLimit <= maxTimeLimitEstimate {
		return jv.TimeLimit
	}
	return fallback
}

// currentTasks is a running job's placement as optimizer tasks.
func currentTasks(v *View, jv *JobView) []optimizer.Task {
	var out []optimizer.Task
	for _, name := range jv.Nodes {
		if v.Node(name) == nil {
			continue
		}
		out = append(out, optimizer.Task{Node: name, Type: v.typeOn(jv, name), GPUs: jv.GPUsPerNode})
	}
	return out
}

// usableCapacity is the GPUs per type of the nodes hadar places work on.
func usableCapacity(v *View) map[string]int {
	capacity := map[string]int{}
	for _, n := range v.Nodes {
		if n.Usable {
			for _, p := range n.TypePools() {
				capacity[p.Type] += p.Total
			}
		}
	}
	return capacity
}

// sampleBase is the start of a job's next learned-throughput sample: the
// steps of a report, its time as the daemon vouches for it (reportTime),
// and the placement then. The bridge keeps it in memory: after a restart a
// job's first report starts a new one.
type sampleBase struct {
	steps     float64
	at        time.Time
	placement string
}

// reportTime is when a report new this round was written, on the daemon's
// clock: its own timestamp, the user's, is believed only within the window
// the daemon can vouch for, after its previous look at the job or the
// start of its run, whichever is later (lastLook), and no later than this
// look (now). An honest report keeps its time; a
// forged one moves a sample's ends by at most a round each.
func reportTime(at, lastLook, now time.Time) time.Time {
	if lastLook.IsZero() || lastLook.After(now) {
		return now
	}
	if at.Before(lastLook) {
		return lastLook
	}
	if at.After(now) {
		return now
	}
	return at
}

// advanceProgress updates a job's progress for one round: a new report
// (newer than the last one used) replaces the estimate; otherwise, while
// the job runs, the estimate grows by the matrix rate on its GPU type times
// the time since the last update. It returns the updated progress and
// sample base and, when the new report allows it, a learned-throughput
// sample: the steps since the base over the time between the two reports
// as the daemon vouches for it (reportTime), at least minInterval, on one
// GPU type, with the placement unchanged and within one run.
func advanceProgress(pr JobProgress, base sampleBase, jv *JobView, gpuType string, rate float64, rep *jobproto.Progress,
	now time.Time, minInterval time.Duration) (JobProgress, sampleBase, *sample) {
	pr.JobID = jv.ID
	lastLook := pr.EstimatedAt // the previous round that saw the job running
	running := jv.Class == ClassRunning || (jv.Class == ClassPinned && jv.State == "RUNNING")
	placement := placementString(jv.Nodes, jv.GPUsPerNode)
	var smp *sample
	if running && pr.EstimatedAt.IsZero() && !pr.Reported && pr.Done == 0 && jv.TimeUsed > 0 {
		// First seen running (a restart that lost the database, or a job
		// started by someone else): credit its run time so far.
		t := jv.TimeUsed.Seconds()
		pr.Done, pr.Executed, pr.Attained = rate*t, t, t*float64(jv.Workers)
	} else if running && !pr.EstimatedAt.IsZero() && now.After(pr.EstimatedAt) {
		dt := now.Sub(pr.EstimatedAt).Seconds()
		if jv.TimeUsed > 0 {
			dt = min(dt, jv.TimeUsed.Seconds())
		}
		pr.Attained += dt * float64(jv.Workers)
		pr.Executed += dt
		pr.Done += rate * dt
	}
	if rep != nil && rep.At.After(pr.ReportedAt) && !rep.At.After(now.Add(time.Minute)) {
		// Both reads must fall in this run: a job requeued and started
		// again on the same nodes keeps its placement, and a sample across
		// the restart would count the time it did not run (the run began
		// TimeUsed ago; Slurm gives whole seconds, so this errs on the
		// side of no sample).
		runStart := now.Add(-jv.TimeUsed)
		if jv.TimeUsed > 0 && runStart.After(lastLook) {
			lastLook = runStart // this run's reports are written after it began
		}
		at := reportTime(rep.At, lastLook, now)
		sameRun := running && gpuType != "" && !base.at.IsZero() && base.placement == placement && base.at.After(runStart)
		elapsed := at.Sub(base.at)
		switch {
		case sameRun && elapsed < minInterval:
			// Too soon to measure (a mid-round): the base stays, so the
			// next sample spans a longer interval.
		case sameRun && rep.Steps > base.steps:
			smp = &sample{steps: rep.Steps - base.steps, seconds: elapsed.Seconds()}
			base = sampleBase{steps: rep.Steps, at: at, placement: placement}
		default:
			base = sampleBase{steps: rep.Steps, at: at, placement: placement}
		}
		if !running {
			base = sampleBase{}
		}
		pr.Reported = true
		pr.ReportedSteps = rep.Steps
		pr.ReportedAt = rep.At
		pr.ReportedPlacement = placement
		// The report, plus what the job did since it wrote it.
		pr.Done = rep.Steps
		if running && now.After(rep.At) {
			pr.Done += rate * now.Sub(rep.At).Seconds()
		}
	}
	if running {
		pr.EstimatedAt = now
	} else {
		pr.EstimatedAt = time.Time{}
	}
	return pr, base, smp
}

type sample struct {
	steps, seconds float64
}
