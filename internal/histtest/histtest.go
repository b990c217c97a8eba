// Package histtest writes a hadar-slurmd state database with a few hours
// of made-up but consistent history, for the tests of `hadar history` and
// of the documentation. Only tests import it.
package histtest

import (
	"context"
	"fmt"
	"time"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/internal/statedb"
)

// Nodes of the made-up cluster: the test cluster's demo layout.
var Nodes = []struct {
	Name, Type string
	GPUs       int
}{
	{"node1", "v100", 4}, {"node2", "v100", 4}, {"node3", "p100", 4}, {"node4", "k80", 4}, {"node5", "k80", 4},
}

type job struct {
	id     string
	tagged bool
	model  string
	node   string
	gpus   int
	submit time.Duration // after the start of the history
	start  time.Duration
	end    time.Duration
	moveTo string // migrated at moveAt
	moveAt time.Duration
}

// Jobs of the made-up history: hadar jobs on the fast types first, an
// untagged job on a v100, one migration from a k80 to a v100.
var jobs = []job{
	{id: "101", tagged: true, model: "ResNet-50 (batch size 64)", node: "node1", gpus: 2, submit: 0, start: 10 * time.Minute, end: 3 * time.Hour},
	{id: "102", tagged: true, model: "Transformer (batch size 64)", node: "node3", gpus: 4, submit: 0, start: 10 * time.Minute, end: 2 * time.Hour},
	{id: "103", tagged: true, model: "LM (batch size 20)", node: "node4", gpus: 2, submit: 5 * time.Minute, start: 20 * time.Minute, end: 5 * time.Hour,
		moveTo: "node2", moveAt: 3*time.Hour + 10*time.Minute},
	{id: "104", tagged: false, node: "node2", gpus: 1, submit: 30 * time.Minute, start: 30 * time.Minute, end: 2*time.Hour + 30*time.Minute},
	{id: "105", tagged: true, model: "CycleGAN", node: "node5", gpus: 4, submit: time.Hour, start: 2*time.Hour + 10*time.Minute, end: 4 * time.Hour},
	{id: "106", tagged: true, model: "ResNet-18 (batch size 64)", node: "node3", gpus: 2, submit: 90 * time.Minute, start: 2*time.Hour + 10*time.Minute, end: 6 * time.Hour},
}

// Span is the length of the history WriteState writes: it ends at now.
const Span = 6 * time.Hour

// WriteState creates the state database at path with one round every 10
// minutes over the Span before now.
func WriteState(ctx context.Context, path string, now time.Time) error {
	st, _, err := statedb.Open(ctx, path, now)
	if err != nil {
		return err
	}
	defer st.Close()
	begin := now.Add(-Span).Truncate(time.Minute)
	round := int64(0)
	for at := time.Duration(0); at <= Span-10*time.Minute; at += 10 * time.Minute {
		round++
		t := begin.Add(at)
		v := &bridge.View{Now: t}
		used := map[string]int{}
		hadarUsed := map[string]int{}
		var decisions []statedb.Decision
		var actions []statedb.Action
		for _, j := range jobs {
			if at < j.submit || at >= j.end {
				continue
			}
			jv := &bridge.JobView{ID: j.id, User: "alice", Tagged: j.tagged, Model: j.model, Submit: begin.Add(j.submit),
				NumNodes: 1, GPUsPerNode: j.gpus, Workers: j.gpus, State: "PENDING"}
			if !j.tagged {
				jv.Class = bridge.ClassUntagged
			}
			node, started := j.node, j.start
			if j.moveTo != "" && at >= j.moveAt {
				node, started = j.moveTo, j.moveAt
			}
			if at >= started {
				jv.State, jv.Nodes, jv.TimeUsed = "RUNNING", []string{node}, at-started
				used[node] += j.gpus
				if j.tagged {
					jv.Class = bridge.ClassRunning
					hadarUsed[node] += j.gpus
				}
			} else if j.tagged {
				jv.Class, jv.Held = bridge.ClassWaiting, true
			}
			v.Jobs = append(v.Jobs, jv)
			if j.tagged && (at == j.start-10*time.Minute || j.moveTo != "" && at == j.moveAt-10*time.Minute) {
				kind, from, to := bridge.DecidePlace, "-", j.node+fmt.Sprintf(":%d", j.gpus)
				if at >= j.start {
					kind, from, to = bridge.DecideMigrate, j.node+fmt.Sprintf(":%d", j.gpus), j.moveTo+fmt.Sprintf(":%d", j.gpus)
				}
				decisions = append(decisions, statedb.Decision{JobID: j.id, Kind: string(kind), From: from, To: to, Reason: "the policy's placement"})
				actions = append(actions, statedb.Action{Kind: string(bridge.ActPlace), JobIDs: j.id, Result: "ok"})
			}
		}
		for _, n := range Nodes {
			v.Nodes = append(v.Nodes, bridge.NodeView{Name: n.Name, State: "MIXED", Schedulable: true, Type: n.Type,
				SiteTypes: map[string]int{n.Type: n.GPUs}, Total: n.GPUs, Used: used[n.Name], Hadar: hadarUsed[n.Name], Usable: true})
		}
		rep := bridge.RoundReport{Number: round, Started: t, Policy: "hadar", View: v, Jobs: len(v.Jobs),
			Observe: 40 * time.Millisecond, Solve: 15 * time.Millisecond, Enforce: 120 * time.Millisecond}
		rec := statedb.Round{Number: round, Started: t, Observe: rep.Observe, Solve: rep.Solve, Enforce: rep.Enforce,
			Policy: "hadar", Jobs: len(v.Jobs), Placed: len(decisions)}
		if at == 4*time.Hour {
			rec.Error = "observe jobs: slurmctld is not responding (controller down)"
		}
		if err := st.WriteRound(ctx, statedb.RoundWrite{Round: rec, Decisions: decisions, Actions: actions}); err != nil {
			return err
		}
		if rec.Error == "" {
			h, _ := bridge.HistoryRecord(rep)
			if err := st.RecordHistory(ctx, h); err != nil {
				return err
			}
		}
	}
	return nil
}
