package bridge

import (
	"sort"
	"strconv"
	"strings"

	"github.com/hadar-sched/hadar/internal/statedb"
)

// HistoryRecord is what `hadar history` keeps of a round (the state
// database's history tables): the GPUs of every GPU type (total, allocated,
// allocated to hadar's running jobs, reserved for its launching jobs,
// usable), the number of pending and running jobs, and the running jobs
// for their run spans. ok is false for a round that observed nothing.
func HistoryRecord(rep RoundReport) (h statedb.HistoryRecord, ok bool) {
	v := rep.View
	if v == nil {
		return h, false
	}
	h = statedb.HistoryRecord{Round: rep.Number, At: rep.Started}
	type agg struct{ total, used, hadar, reserved, usable int }
	byType := map[string]*agg{}
	// The sample is of the cluster after the round: the GPUs it placed
	// (released), moved or stopped, not only what it observed before.
	delta := roundGPUDelta(rep)
	for _, n := range v.Nodes {
		if n.Total == 0 {
			continue
		}
		t := nodeTypeLabel(n)
		a := byType[t]
		if a == nil {
			a = &agg{}
			byType[t] = a
		}
		a.total += n.Total
		a.used += max(0, min(n.Used+delta[n.Name], n.Total))
		a.hadar += max(0, n.Hadar+delta[n.Name])
		a.reserved += n.Reserved
		if n.Usable {
			a.usable += n.Total
		}
	}
	for _, t := range histSortedKeys(byType) {
		a := byType[t]
		h.GPUs = append(h.GPUs, statedb.GPUSample{Type: t, Total: a.total, Used: a.used, Hadar: a.hadar, Reserved: a.reserved, Usable: a.usable})
	}
	for _, j := range v.Jobs {
		switch {
		case j.State == "PENDING" && j.Tagged:
			h.Queue.PendingTagged++
		case j.State == "PENDING":
			h.Queue.PendingOther++
		case j.State == "RUNNING" && j.Tagged:
			h.Queue.RunningTagged++
		case j.State == "RUNNING":
			h.Queue.RunningOther++
		}
	}
	for _, j := range v.Jobs {
		if j.State != "RUNNING" || len(j.Nodes) == 0 {
			continue
		}
		types := map[string]bool{}
		for _, name := range j.Nodes {
			if n := historyNode(v, name); n != nil && n.Total > 0 {
				types[nodeTypeLabel(*n)] = true
			}
		}
		h.Running = append(h.Running, statedb.RunningJob{JobID: j.ID, Tagged: j.Tagged, Model: j.Model, Nodes: j.Nodes,
			GPUType: strings.Join(histSortedKeys(types), "+"), GPUsPerNode: j.GPUsPerNode, Submitted: j.Submit, RunTime: j.TimeUsed})
	}
	return h, true
}

// historyNode finds a node of v (also in a View not made by BuildView).
func historyNode(v *View, name string) *NodeView {
	if n := v.Node(name); n != nil {
		return n
	}
	for i := range v.Nodes {
		if v.Nodes[i].Name == name {
			return &v.Nodes[i]
		}
	}
	return nil
}

// nodeTypeLabel is the GPU type a node's GPUs are counted under: its
// canonical type, else its site type name(s) ("a+b" for a node with two).
func nodeTypeLabel(n NodeView) string {
	if n.Type != "" {
		return n.Type
	}
	names := make([]string, 0, len(n.SiteTypes))
	for t := range n.SiteTypes {
		if t == "" {
			t = "untyped"
		}
		names = append(names, t)
	}
	sort.Strings(names)
	return strings.Join(names, "+")
}

func histSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// roundGPUDelta is, per node, the GPUs the round's carried-out decisions
// took (a placement or the target of a move, once started) or gave back
// (a preemption, or the source of a move, once requeued).
func roundGPUDelta(rep RoundReport) map[string]int {
	if rep.DryRun {
		return nil
	}
	released, requeued := map[string]bool{}, map[string]bool{}
	for _, r := range rep.Results {
		if r.Err != nil {
			continue
		}
		for _, id := range r.Sent {
			switch r.Action.Kind {
			case ActStartNow:
				released[id] = true
			case ActRequeueHold:
				requeued[id] = true
			}
		}
	}
	out := map[string]int{}
	add := func(placement string, sign int) {
		for _, part := range strings.Split(placement, ",") {
			node, gpus, ok := strings.Cut(part, ":")
			if n, err := strconv.Atoi(gpus); ok && err == nil {
				out[node] += sign * n
			}
		}
	}
	for _, d := range rep.Decisions {
		switch d.Kind {
		case DecidePlace:
			if released[d.JobID] {
				add(d.To, +1)
			}
		case DecideMigrate:
			if requeued[d.JobID] {
				add(d.From, -1)
			}
			if released[d.JobID] {
				add(d.To, +1)
			}
		case DecidePreempt:
			if requeued[d.JobID] {
				add(d.From, -1)
			}
		}
	}
	return out
}
