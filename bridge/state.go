package bridge

import (
	"slices"
	"strings"

	"github.com/hadar-sched/hadar/internal/statedb"
)

// The bridge's side of its state database (internal/statedb): what of a
// round is worth storing, in the database's rows.

// storedDecisions are the decisions a round stores: all but the common
// no-change ones, which would swamp the history.
func storedDecisions(ds []Decision) []statedb.Decision {
	var out []statedb.Decision
	for _, d := range ds {
		if d.Kind == DecideWait || d.Kind == DecideKeep && d.From == d.To && strings.HasPrefix(d.Reason, "the policy keeps") {
			continue
		}
		out = append(out, statedb.Decision{JobID: d.JobID, Kind: string(d.Kind), From: d.From, To: d.To, GPUType: d.GPUType, Reason: d.Reason})
	}
	return out
}

// storedActions are a round's action results as the history shows them.
func storedActions(results []ActionResult, dryRun bool) []statedb.Action {
	out := make([]statedb.Action, 0, len(results))
	for _, res := range results {
		a := statedb.Action{Kind: string(res.Action.Kind), Result: "ok", Detail: strings.Join(res.Action.Nodes, ",")}
		switch {
		case res.Err != nil:
			a.Result, a.Error = "error", res.Err.Error()
		case len(res.Refused) > 0:
			a.Result = "refused"
		case len(res.Ended) > 0:
			a.Result = "partial"
			if len(res.Sent) == 0 {
				a.Result = "skipped"
			}
			a.Error = "not requeued, no longer running: " + strings.Join(res.Ended, ",")
		case len(res.Sent) == 0 && len(res.Skipped) > 0:
			a.Result = "skipped"
		case len(res.Skipped) > 0:
			// Done for Sent only: the history must not show the skipped
			// jobs as released (or placed) by this action.
			a.Result = "partial"
			a.Error = "skipped (an earlier step for them failed): " + strings.Join(res.Skipped, ",")
		case dryRun:
			a.Result = "dry-run"
		}
		a.JobIDs = strings.Join(slices.Concat(res.Sent, res.Ended, res.Skipped, res.Refused), ",")
		switch res.Action.Kind {
		case ActComment:
			a.Detail = res.Action.Text
		case ActRetype:
			a.Detail = res.Action.Gres
		}
		out = append(out, a)
	}
	return out
}
