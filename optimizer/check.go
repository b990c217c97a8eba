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
	cpus, mem := map[string]int{}, map[string]int64{}
	for _, n := range s.Nodes {
		if n.CPUs > 0 {
			cpus[n.Name] = n.CPUs
		}
		if n.MemMB > 0 {
			mem[n.Name] = n.MemMB
		}
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
		if err := checkShape(j, tasks, nodes, cpus, mem); err != nil {
			return err
		}
	}
	capacity := map[string]int{}
	for _, n := range s.Nodes {
		capacity[nodeKey(n.Name, n.Type)] += n.GPUs
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.NoStop && keepable(j, capacity) && len(p.Assignments[j.ID]) == 0 {
			return fmt.Errorf("%w: job %s may not be stopped, and the plan stops it", ErrInvariant, j.ID)
		}
	}
	return nil
}

// checkShape verifies that a job's tasks honour its Shape: only allowed
// nodes and types, exactly its nodes x GPUs per node for a gang, and no
// node's CPUs or memory overcommitted (cpus and mem hold what is left).
func checkShape(j *Job, tasks []Task, nodes map[string]Node, cpus map[string]int, mem map[string]int64) error {
	if j.Shape.Free() {
		return nil
	}
	onNode := map[string]bool{}
	gangTasks := 0
	for _, t := range tasks {
		n := nodes[t.Node+"\x00"+t.Type]
		if !j.Shape.AllowsType(t.Type) || (j.Shape.Eligible != nil && !j.Shape.Eligible[t.Node]) {
			return fmt.Errorf("%w: job %s placed on %s (%s), which its request rules out", ErrInvariant, j.ID, t.Node, t.Type)
		}
		if onNode[t.Node] {
			continue // a node listed once per GPU type: count its needs once
		}
		onNode[t.Node] = true
		if t.Copy == 0 {
			gangTasks++
		}
		if c, ok := cpus[n.Name]; ok && j.Shape.CPUsPerNode > 0 {
			if c < j.Shape.CPUsPerNode {
				return fmt.Errorf("%w: node %s has not the %d CPUs job %s needs", ErrInvariant, t.Node, j.Shape.CPUsPerNode, j.ID)
			}
			cpus[n.Name] = c - j.Shape.CPUsPerNode
		}
		if m, ok := mem[n.Name]; ok && j.Shape.MemMBPerNode > 0 {
			if m < j.Shape.MemMBPerNode {
				return fmt.Errorf("%w: node %s has not the %d MB job %s needs", ErrInvariant, t.Node, j.Shape.MemMBPerNode, j.ID)
			}
			mem[n.Name] = m - j.Shape.MemMBPerNode
		}
	}
	if g := j.Shape.GPUsPerNode; g > 0 && gangTasks > 0 {
		if gangTasks != max(j.Shape.Nodes, 1) || len(tasks) != gangTasks {
			return fmt.Errorf("%w: job %s runs on %d node(s), its request is %d node(s) x %d GPUs", ErrInvariant, j.ID, gangTasks, max(j.Shape.Nodes, 1), g)
		}
		for _, t := range tasks {
			if t.GPUs != g {
				return fmt.Errorf("%w: job %s has %d GPUs on %s, its request is %d per node", ErrInvariant, j.ID, t.GPUs, t.Node, g)
			}
		}
	}
	return nil
}
