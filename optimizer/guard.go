package optimizer

import "sort"

// guarded wraps every registered policy (New) so that its plans keep the
// promises a snapshot makes for all of them: a NoStop job keeps running.
type guarded struct{ Policy }

// guardedCopies is guarded for a policy that forks copies, keeping its
// CopyLimiter visible to drivers.
type guardedCopies struct {
	guarded
	CopyLimiter
}

// guard wraps p (see guarded).
func guard(p Policy) Policy {
	if l, ok := p.(CopyLimiter); ok {
		return guardedCopies{guarded{p}, l}
	}
	return guarded{p}
}

// Plan implements Policy.
func (g guarded) Plan(s *Snapshot) (*Plan, error) {
	p, err := g.Policy.Plan(s)
	if err != nil || p == nil {
		return p, err
	}
	return KeepNoStop(s, p), nil
}

// KeepNoStop returns plan with every running NoStop job still running: a
// job the plan dropped gets its current tasks back, and the jobs the plan
// had put on those GPUs (never NoStop ones) wait this round instead. It is
// the one place the site's "no preemption" is enforced, for every policy,
// so the simulator and the daemon see the same plans. plan is modified.
func KeepNoStop(s *Snapshot, plan *Plan) *Plan {
	capacity := map[string]int{}
	for _, n := range s.Nodes {
		capacity[nodeKey(n.Name, n.Type)] += n.GPUs
	}
	var restore []*Job
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.NoStop && len(plan.Assignments[j.ID]) == 0 && keepable(j, capacity) {
			restore = append(restore, j)
		}
	}
	if len(restore) == 0 {
		return plan
	}
	used := map[string]int{}
	for _, tasks := range plan.Assignments {
		for _, t := range tasks {
			used[nodeKey(t.Node, t.Type)] += t.GPUs
		}
	}
	noStop := map[string]bool{}
	for i := range s.Jobs {
		noStop[s.Jobs[i].ID] = s.Jobs[i].NoStop
	}
	sort.Slice(restore, func(a, b int) bool { return restore[a].ID < restore[b].ID })
	for _, j := range restore {
		for _, t := range j.Current {
			key := nodeKey(t.Node, t.Type)
			// Evict, in ID order for determinism, the jobs that hold the
			// GPUs it needs on this node.
			var on []string
			for id, tasks := range plan.Assignments {
				if noStop[id] {
					continue
				}
				for _, u := range tasks {
					if nodeKey(u.Node, u.Type) == key {
						on = append(on, id)
						break
					}
				}
			}
			sort.Strings(on)
			for _, id := range on {
				if used[key]+t.GPUs <= capacity[key] {
					break
				}
				for _, u := range plan.Assignments[id] {
					used[nodeKey(u.Node, u.Type)] -= u.GPUs
				}
				delete(plan.Assignments, id)
			}
		}
		for _, t := range j.Current {
			used[nodeKey(t.Node, t.Type)] += t.GPUs
		}
		plan.Assignments[j.ID] = append([]Task(nil), j.Current...)
	}
	return plan
}

// keepable reports whether a job runs now on nodes of the snapshot that
// can hold it (a node the snapshot leaves out is not the plan's to give).
func keepable(j *Job, capacity map[string]int) bool {
	if len(j.Current) == 0 {
		return false
	}
	need := map[string]int{}
	for _, t := range j.Current {
		need[nodeKey(t.Node, t.Type)] += t.GPUs
	}
	for k, n := range need {
		if capacity[k] < n {
			return false
		}
	}
	return true
}
