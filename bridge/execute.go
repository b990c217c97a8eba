package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hadar-sched/hadar/slurm"
)

// ErrNotTagged is the executor's refusal to act on a job that was not a
// tagged job in the round's observation.
var ErrNotTagged = errors.New("refused: not a hadar-tagged job in this round's observation")

// errSkipped marks an action not run because an earlier step for the same
// job failed, or because slurmctld went away during the round.
var errSkipped = errors.New("skipped")

// ActionResult is the outcome of one action.
type ActionResult struct {
	Action Action
	// Sent are the ids given to Slurm; Skipped those left out because an
	// earlier step for them failed in this round; Refused those the guard
	// rejected (not tagged).
	Sent, Skipped, Refused []string
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
	down := false
	out := make([]ActionResult, 0, len(actions))
	for _, a := range actions {
		r := ActionResult{Action: a}
		for _, id := range a.JobIDs {
			switch {
			case !e.Allowed[id]:
				r.Refused = append(r.Refused, id)
			case down || (failed[id] && dependent(a.Kind)):
				r.Skipped = append(r.Skipped, id)
			default:
				r.Sent = append(r.Sent, id)
			}
		}
		if len(r.Refused) > 0 {
			log.Error("refusing to act on jobs that are not tagged for hadar", "action", a.Kind, "jobs", r.Refused)
		}
		if len(r.Sent) > 0 {
			start := time.Now()
			r.Err = e.run(ctx, a, r.Sent)
			r.Duration = time.Since(start)
		}
		if r.Err != nil {
			if a.Kind != ActComment {
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
		for _, id := range r.Skipped {
			failed[id] = true
		}
		out = append(out, r)
	}
	return out
}

// dependent kinds need the job's earlier steps of the round to have worked.
func dependent(k ActionKind) bool {
	return k == ActPlace || k == ActStartNow || k == ActRelease
}

func (e *Executor) run(ctx context.Context, a Action, ids []string) error {
	c := e.Cluster
	switch a.Kind {
	case ActComment:
		return c.SetAdminComment(ctx, ids, a.Text)
	case ActHold:
		return c.Hold(ctx, ids...)
	case ActRequeueHold:
		return c.RequeueHold(ctx, ids...)
	case ActPlace:
		if len(ids) != 1 {
			return fmt.Errorf("place: one job per call, got %d", len(ids))
		}
		return c.PlaceOnNodes(ctx, ids[0], a.Nodes)
	case ActStartNow:
		return c.UpdateJobs(ctx, ids, "StartTime=now")
	case ActRelease:
		return c.Release(ctx, ids...)
	}
	return fmt.Errorf("unknown action kind %q", a.Kind)
}
