package optimizer

import (
	"math"
	"sort"
	"time"
)

// guarded wraps every registered policy (New) so that its plans keep the
// promises a snapshot makes for all of them: a NoStop job keeps running,
// and moves only where that saves more than the migration penalty.
type guarded struct {
	Policy
	migrationPenalty time.Duration
}

// guardedCopies is guarded for a policy that forks copies, keeping its
// CopyLimiter visible to drivers.
type guardedCopies struct {
	guarded
	CopyLimiter
}

// guard wraps p (see guarded).
func guard(p Policy, migrationPenalty time.Duration) Policy {
	g := guarded{p, migrationPenalty}
	if l, ok := p.(CopyLimiter); ok {
		return guardedCopies{g, l}
	}
	return g
}

// Plan implements Policy.
func (g guarded) Plan(s *Snapshot) (*Plan, error) {
	p, err := g.Policy.Plan(s)
	if err != nil || p == nil {
		return p, err
	}
	return KeepLimits(s, KeepNoStop(s, p, g.migrationPenalty)), nil
}

// KeepNoStop returns plan with every running NoStop job still running where
// it runs, unless the plan moves it and the move saves more than
// migrationPenalty of its remaining time (never for a NoMove job): a job the plan dropped, or moved
// for less, gets its current tasks back, and the jobs the plan had put on
// those GPUs (never NoStop ones) wait this round instead. It is the one
// place the site's "no preemption" and the worth of a move of a job that
// may not be stopped are decided, for every policy, so the simulator and
// the daemon see the same plans. plan is modified.
func KeepNoStop(s *Snapshot, plan *Plan, migrationPenalty time.Duration) *Plan {
	capacity := map[string]int{}
	for _, n := range s.Nodes {
		capacity[nodeKey(n.Name, n.Type)] += n.GPUs
	}
	var restore []*Job
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if !(j.NoStop || j.NoMove) || !keepable(j, capacity) {
			continue
		}
		planned := plan.Assignments[j.ID]
		if len(planned) == 0 {
			restore = append(restore, j)
			continue
		}
		if !sameTaskSet(planned, j.Current) && (j.NoMove || moveGain(s, j, planned) <= migrationPenalty.Seconds()) {
			delete(plan.Assignments, j.ID)
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
	byID := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		byID[s.Jobs[i].ID] = &s.Jobs[i]
	}
	unplan := func(id string) {
		for _, u := range plan.Assignments[id] {
			used[nodeKey(u.Node, u.Type)] -= u.GPUs
		}
		delete(plan.Assignments, id)
	}
	sort.Slice(restore, func(a, b int) bool { return restore[a].ID < restore[b].ID })
	restored := map[string]bool{}
	for _, j := range restore {
		restored[j.ID] = true
	}
	evicted := map[string]string{} // job ID -> the type it was planned on
	// A restored job may find its GPUs planned to other jobs: those that
	// may be stopped are evicted first, then the moves of jobs that may
	// not be stopped onto them are undone (those jobs are restored in
	// turn), in ID order for determinism. Running jobs' current GPUs are
	// disjoint, so this ends with every restored job on its own GPUs.
	for n := 0; n < len(restore); n++ {
		j := restore[n]
		for _, t := range j.Current {
			key := nodeKey(t.Node, t.Type)
			var stoppable, moved []string
			for id, tasks := range plan.Assignments {
				if restored[id] || !hasKey(tasks, key) {
					continue
				}
				switch o := byID[id]; {
				case o == nil || !o.NoStop:
					stoppable = append(stoppable, id)
				case !sameTaskSet(tasks, o.Current) && keepable(o, capacity):
					moved = append(moved, id)
				}
			}
			sort.Strings(stoppable)
			sort.Strings(moved)
			for _, id := range stoppable {
				if used[key]+t.GPUs <= capacity[key] {
					break
				}
				evicted[id] = currentType(plan.Assignments[id])
				unplan(id)
			}
			for _, id := range moved {
				if used[key]+t.GPUs <= capacity[key] {
					break
				}
				unplan(id)
				restored[id] = true
				restore = append(restore, byID[id])
			}
		}
		for _, t := range j.Current {
			used[nodeKey(t.Node, t.Type)] += t.GPUs
		}
		plan.Assignments[j.ID] = append([]Task(nil), j.Current...)
	}
	placeEvicted(s, plan, evicted)
	return plan
}

// placeEvicted places the jobs KeepNoStop took off a kept job's GPUs on
// what the plan leaves free (a kept job's planned destination, for one):
// on the type each was planned on, else on its other types, fastest
// first, as the policies' own last passes place what is left. Jobs go in
// ID order, for determinism.
func placeEvicted(s *Snapshot, plan *Plan, evicted map[string]string) {
	if len(evicted) == 0 {
		return
	}
	jobs := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	pool := newFreePool(s.Nodes)
	for id, tasks := range plan.Assignments {
		for _, t := range tasks {
			if j := jobs[id]; j != nil {
				pool.useFor(j, t)
			} else {
				pool.use(t)
			}
		}
	}
	ids := make([]string, 0, len(evicted))
	for id := range evicted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		j := jobs[id]
		types := []string{evicted[id]}
		for _, h := range s.TypesFastestFirst() {
			if h != evicted[id] {
				types = append(types, h)
			}
		}
		sort.SliceStable(types[1:], func(a, b int) bool {
			return s.JobRate(j, types[1+a], j.Workers) > s.JobRate(j, types[1+b], j.Workers)
		})
		for _, h := range types {
			if h == "" || s.JobRate(j, h, j.Workers) <= 0 {
				continue
			}
			if tasks := pool.placeOnType(j, h); tasks != nil {
				plan.Assign(id, tasks...)
				break
			}
		}
	}
}

// moveGain is MoveGain for job j of the snapshot, from its current tasks.
func moveGain(s *Snapshot, j *Job, next []Task) float64 {
	return MoveGain(s.Throughput, j.Type, j.Workers, j.RemainingSteps, j.Current, next)
}

// MoveGain is the seconds a job with remaining steps saves by moving from
// the tasks cur to next: its remaining time at the current rate minus at
// the new one; -Inf if next makes no progress, +Inf if cur makes none.
// The policies' migration guards and the daemon's decision texts use it.
func MoveGain(tp Throughputs, jobType string, workers int, remaining float64, cur, next []Task) float64 {
	rc := tp.PlacementRate(jobType, workers, cur)
	rn := tp.PlacementRate(jobType, workers, next)
	switch {
	case rn <= 0:
		return math.Inf(-1)
	case rc <= 0:
		return math.Inf(1)
	}
	return remaining/rc - remaining/rn
}

// hasKey reports whether one of tasks is on the node and type of key.
func hasKey(tasks []Task, key string) bool {
	for _, t := range tasks {
		if nodeKey(t.Node, t.Type) == key {
			return true
		}
	}
	return false
}

// sameTaskSet reports whether a and b hold the same GPUs, in any order.
func sameTaskSet(a, b []Task) bool {
	count := map[string]int{}
	for _, t := range a {
		count[nodeKey(t.Node, t.Type)] += t.GPUs
	}
	for _, t := range b {
		count[nodeKey(t.Node, t.Type)] -= t.GPUs
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
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
