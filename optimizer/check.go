package optimizer

import (
	"errors"
	"fmt"
)

// ErrInvariant marks a plan that breaks a safety invariant.
var ErrInvariant = errors.New("plan breaks an invariant")

// Check verifies the safety invariants of a plan against its snapshot: every
// job and node exists, every task's GPU type is its node's, no node is over
// capacity, a gang job gets exactly its workers or nothing, and a HadarE job
// runs at most its allowed copies, each on a node of its own. The simulator
// runs it on every round and the bridge before it enforces anything.
func Check(s *Snapshot, p *Plan) error {
	if p == nil {
		return fmt.Errorf("%w: nil plan", ErrInvariant)
	}
	nodes := make(map[string]Node, len(s.Nodes))
	for _, n := range s.Nodes {
		if _, dup := nodes[n.Name+"\x00"+n.Type]; dup {
			return fmt.Errorf("%w: node %s type %s listed twice in snapshot", ErrInvariant, n.Name, n.Type)
		}
		nodes[n.Name+"\x00"+n.Type] = n
	}
	jobs := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	used := map[string]int{}
	for id, tasks := range p.Assignments {
		j, ok := jobs[id]
		if !ok {
			return fmt.Errorf("%w: plan assigns unknown job %s", ErrInvariant, id)
		}
		if len(tasks) == 0 {
			continue
		}
		copies := map[int]bool{}
		copyNodes := map[string]bool{}
		gang := 0
		for _, t := range tasks {
			key := t.Node + "\x00" + t.Type
			n, ok := nodes[key]
			if !ok {
				return fmt.Errorf("%w: job %s placed on unknown node %s with GPU type %s", ErrInvariant, id, t.Node, t.Type)
			}
			if t.GPUs <= 0 {
				return fmt.Errorf("%w: job %s has a task of %d GPUs on %s", ErrInvariant, id, t.GPUs, t.Node)
			}
			used[key] += t.GPUs
			if used[key] > n.GPUs {
				return fmt.Errorf("%w: node %s (%s) over capacity: %d > %d GPUs", ErrInvariant, t.Node, t.Type, used[key], n.GPUs)
			}
			if t.Copy > 0 {
				if copies[t.Copy] {
					return fmt.Errorf("%w: job %s copy %d has two tasks", ErrInvariant, id, t.Copy)
				}
				if copyNodes[t.Node] {
					return fmt.Errorf("%w: job %s runs two copies on node %s", ErrInvariant, id, t.Node)
				}
				if t.GPUs > j.Workers {
					return fmt.Errorf("%w: job %s copy %d uses %d GPUs, more than the job's %d", ErrInvariant, id, t.Copy, t.GPUs, j.Workers)
				}
				copies[t.Copy] = true
				copyNodes[t.Node] = true
			} else {
				gang += t.GPUs
			}
		}
		switch {
		case len(copies) > 0 && gang > 0:
			return fmt.Errorf("%w: job %s mixes copies and gang tasks", ErrInvariant, id)
		case len(copies) > 0:
			limit := j.MaxCopies
			if limit < 1 {
				limit = 1
			}
			if len(copies) > limit {
				return fmt.Errorf("%w: job %s runs %d copies, allowed %d", ErrInvariant, id, len(copies), limit)
			}
		case gang != j.Workers:
			return fmt.Errorf("%w: job %s gets %d GPUs, its gang is %d", ErrInvariant, id, gang, j.Workers)
		}
	}
	return nil
}
