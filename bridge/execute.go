package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hadar-sched/hadar/slurm"
)

// ErrNotTagged is the executor's refusal to act on a job that was not a
// tagged job in the round's observation.
var ErrNotTagged = errors.New("refused: not a hadar-tagged job in this round's observation")

// ErrStillPending is the result of an await-start whose jobs did not all
// start (or get held) in time; the rest of the round is skipped.
var ErrStillPending = errors.New("released jobs still pending")

// Defaults of Executor.AwaitInterval and AwaitTries: a released job starts
// within about a second on an idle slurmctld; a moved one waits for its old
// allocation to end (KillWait). At most 20 squeue calls, 10 s.
const (
	DefaultAwaitInterval = 500 * time.Millisecond
	DefaultAwaitTries    = 20
)

// ActionResult is the outcome of one action.
type ActionResult struct {
	Action Action
	// Sent are the ids given to Slurm; Skipped those left out because an
	// earlier step for them failed in this round; Refused those the guard
	// rejected (not tagged).
	Sent, Skipped, Refused []string
	// Ended (requeuehold only) are the jobs left alone because they no
	// longer ran when it was sent (see dropEnded).
	Ended []string
	// Err is the error of the Slurm command, if any.
	Err      error
	Duration time.Duration
}

// OK reports whether the action ran for all its jobs without error.
func (r ActionResult) OK() bool {
	return r.Err == nil && len(r.Skipped) == 0 && len(r.Refused) == 0
}

// Executor carries out a round's actions on a Cluster.
type Executor struct {
	Cluster Cluster
	// Allowed is the set of job ids that were tagged in this round's
	// observation; any other id is refused (ErrNotTagged) whatever the
	// action list says. Nil allows nothing.
	Allowed map[string]bool
	Log     *slog.Logger
	// AwaitInterval and AwaitTries bound an await-start: it looks at the
	// queue AwaitTries times, AwaitInterval apart (zero: the defaults).
	AwaitInterval time.Duration
	AwaitTries    int
	// Clock times the await-start's looks (default SystemClock).
	Clock Clock
	// Parallel is how many of a run of placements (scontrol update
	// NodeList=, one job per call), or of a run of AdminComment updates
	// (one call per distinct text), go out at once; 0 or 1: one after the
	// other. Neither depends on another of its run. Across a network each
	// call costs ~60 ms (docs/docker.md: 16 placements took 941 ms of a
	// round on the container cluster).
	Parallel int
}

// Execute runs actions in order and returns one result per action. A
// failed action does not stop the others: only the later steps of the same
// job (a place after its failed requeuehold, a release after its failed
// place) are skipped. Failed work is not retried here: the next round
// derives it again from what Slurm then shows. After slurmctld is found
// unreachable the remaining actions are skipped.
func (e *Executor) Execute(ctx context.Context, actions []Action) []ActionResult {
	log := e.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	failed := map[string]bool{}
	// down: slurmctld is gone; gated: an await-start did not succeed, so
	// nothing after it may run (the pass-through jobs stay held).
	down, gated := false, false
	out := make([]ActionResult, 0, len(actions))
	for i := 0; i < len(actions); {
		// A run of placements (NodeList takes one job per call) or of
		// comments goes out Parallel at a time: none of a run depends on
		// another.
		n := 1
		if k := actions[i].Kind; e.Parallel > 1 && (k == ActPlace || k == ActComment) {
			for i+n < len(actions) && actions[i+n].Kind == k {
				n++
			}
		}
		batch := make([]ActionResult, n)
		for k := range batch {
			batch[k] = e.gate(actions[i+k], failed, down || gated)
			if len(batch[k].Refused) > 0 {
				log.Error("refusing to act on jobs that are not tagged for hadar", "action", batch[k].Action.Kind, "jobs", batch[k].Refused)
			}
		}
		e.send(ctx, batch)
		for _, r := range batch {
			if r.Err != nil {
				if r.Action.Kind != ActComment {
					for _, id := range r.Sent {
						failed[id] = true
					}
				}
				// slurmctld unreachable, or so slow that a command timed out:
				// every later command would wait as long (22.05's clients
				// retry ~9 s each), so the rest of the round is skipped.
				if errors.Is(r.Err, slurm.ErrControllerDown) || errors.Is(r.Err, slurm.ErrTimeout) ||
					errors.Is(r.Err, context.Canceled) || ctx.Err() != nil {
					down = true
				}
			}
			for _, id := range append(r.Skipped, r.Ended...) {
				failed[id] = true
			}
			if r.Action.Kind == ActAwaitStart && !r.OK() {
				gated = true
			}
			out = append(out, r)
		}
		i += n
	}
	return out
}

// gate sorts an action's jobs into those to send, those skipped (stopped:
// slurmctld is gone or an await-start failed; or an earlier step of the
// job failed) and those refused (not tagged).
func (e *Executor) gate(a Action, failed map[string]bool, stopped bool) ActionResult {
	r := ActionResult{Action: a}
	for _, id := range a.JobIDs {
		switch {
		case !e.Allowed[id]:
			r.Refused = append(r.Refused, id)
		case stopped || (failed[id] && dependent(a.Kind)):
			r.Skipped = append(r.Skipped, id)
		default:
			r.Sent = append(r.Sent, id)
		}
	}
	return r
}

// send runs the actions of batch that have jobs to send, at most
// Parallel at once (a batch of more than one is placements or comments).
func (e *Executor) send(ctx context.Context, batch []ActionResult) {
	if len(batch) == 1 {
		if r := &batch[0]; len(r.Sent) > 0 {
			start := time.Now()
			if r.Action.Kind == ActRequeueHold {
				if e.dropEnded(ctx, r); r.Err != nil || len(r.Sent) == 0 {
					r.Duration = time.Since(start)
					return
				}
			}
			r.Err = e.run(ctx, r.Action, r.Sent)
			r.Duration = time.Since(start)
		}
		return
	}
	sem := make(chan struct{}, max(e.Parallel, 1))
	var wg sync.WaitGroup
	for k := range batch {
		r := &batch[k]
		if len(r.Sent) == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			r.Err = e.run(ctx, r.Action, r.Sent)
			r.Duration = time.Since(start)
		}()
	}
	wg.Wait()
}

// dropEnded leaves out of a requeuehold the jobs that no longer run: Slurm
// requeues a job that has just completed too (it requeues "done/exit/
// exiting" jobs), and the job would then run again from its start. The
// round's snapshot is some hundred milliseconds old when the requeue goes
// out; one squeue just before narrows that window to its own few
// milliseconds (it cannot close it). If the queue cannot be read, nothing
// is requeued this round.
func (e *Executor) dropEnded(ctx context.Context, r *ActionResult) {
	jobs, err := e.Cluster.Jobs(ctx)
	if err != nil {
		r.Err = fmt.Errorf("looking whether the jobs still run before requeuing them: %w", err)
		return
	}
	running := map[string]bool{}
	for _, j := range jobs {
		if j.State == "RUNNING" || j.State == "CONFIGURING" {
			running[j.ID()] = true
		}
	}
	var keep []string
	for _, id := range r.Sent {
		if running[id] {
			keep = append(keep, id)
		} else {
			r.Ended = append(r.Ended, id)
		}
	}
	r.Sent = keep
}

// dependent kinds need the job's earlier steps of the round to have worked:
// a job whose retype failed is not placed (Slurm would choose its type on
// the node, or keep the type hadar set before).
func dependent(k ActionKind) bool {
	return k == ActRetype || k == ActPlace || k == ActStartNow || k == ActRelease || k == ActSettle
}

func (e *Executor) run(ctx context.Context, a Action, ids []string) error {
	c := e.Cluster
	switch a.Kind {
	case ActComment:
		return c.SetAdminComment(ctx, ids, a.Text)
	case ActLease:
		return c.UpdateJobs(ctx, ids, LeaseArg(a.Lease))
	case ActRequeueHold:
		return c.RequeueHold(ctx, ids...)
	case ActRetype:
		return c.UpdateJobs(ctx, ids, "Gres="+a.Gres)
	case ActPlace:
		if len(ids) != 1 {
			return fmt.Errorf("place: one job per call, got %d", len(ids))
		}
		return c.PlaceOnNodes(ctx, ids[0], a.Nodes)
	case ActStartNow:
		if a.Text != "" {
			return c.UpdateJobs(ctx, ids, "StartTime=now", "AdminComment="+slurm.SanitizeComment(a.Text, slurm.MaxAdminComment))
		}
		return c.UpdateJobs(ctx, ids, "StartTime=now")
	case ActRelease:
		return c.Release(ctx, ids...)
	case ActAwaitStart:
		return e.awaitStart(ctx, ids)
	case ActSettle:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.clock().After(RequeueSettle):
			return nil
		}
	}
	return fmt.Errorf("unknown action kind %q", a.Kind)
}

// awaitStart looks at the queue until none of ids is pending and released
// (each one runs or completes, is held, or has left the queue). It waits
// before every look: a job is never running right after its release.
func (e *Executor) awaitStart(ctx context.Context, ids []string) error {
	interval, tries := e.AwaitInterval, e.AwaitTries
	if interval <= 0 {
		interval = DefaultAwaitInterval
	}
	if tries <= 0 {
		tries = DefaultAwaitTries
	}
	clock := e.clock()
	var pending []string
	for range tries {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clock.After(interval):
		}
		jobs, err := e.Cluster.Jobs(ctx)
		if err != nil {
			return fmt.Errorf("await start: %w", err)
		}
		pending = stillPending(jobs, ids, clock.Now())
		if len(pending) == 0 {
			return nil
		}
	}
	return fmt.Errorf("%w after %s: %v", ErrStillPending, time.Duration(tries)*interval, pending)
}

func (e *Executor) clock() Clock {
	if e.Clock == nil {
		return SystemClock{}
	}
	return e.Clock
}

// stillPending returns the ids that are pending in jobs and that Slurm
// may start now: not held, no begin time ahead (a lease).
func stillPending(jobs []slurm.Job, ids []string, now time.Time) []string {
	state := map[string]slurm.Job{}
	for _, j := range jobs {
		state[j.ID()] = j
	}
	var out []string
	for _, id := range ids {
		if j, ok := state[id]; ok && j.State == "PENDING" && !heldReasons[j.Reason] && !j.StartTime.After(now) {
			out = append(out, id)
		}
	}
	return out
}

// updatesParallel is the daemon's Executor.Parallel: slurmctld serves each
// update in a few milliseconds, so the network's round trip and the
// client's start, not slurmctld, bound one-at-a-time updates.
const updatesParallel = 8
