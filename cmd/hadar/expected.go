package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/optimizer"
)

// expectedStart is `hadar plan --job`'s answer, like sbatch --test-only's:
// when the job could start. A job the round places starts now; a waiting
// one at the earliest time the running jobs, ending at their estimated
// rates (remaining steps over their placement's rate), free GPUs where its
// request fits. Jobs ahead of it in the queue may take those GPUs first, so
// this is the earliest start, not a promise.
func expectedStart(rep bridge.RoundReport, id string) (time.Time, string) {
	now := rep.Started
	if rep.View == nil || rep.Snapshot == nil {
		return time.Time{}, "the round observed nothing"
	}
	jv := rep.View.Job(id)
	if jv == nil {
		return time.Time{}, "not in the queue"
	}
	for _, d := range rep.Decisions {
		if d.JobID != id {
			continue
		}
		switch d.Kind {
		case bridge.DecidePlace:
			return now, "placed this round on " + d.To
		case bridge.DecideKeep, bridge.DecideMigrate:
			return now, "running"
		case bridge.DecidePassThrough:
			return time.Time{}, "passed through to Slurm's scheduler: `sbatch --test-only` or `squeue --start` tells"
		}
	}
	s := rep.Snapshot
	var job *optimizer.Job
	for i := range s.Jobs {
		if s.Jobs[i].ID == id {
			job = &s.Jobs[i]
		}
	}
	if job == nil {
		return time.Time{}, fmt.Sprintf("hadar does not plan it (%s)", jv.Class)
	}
	free := map[string]int{}
	nodeOf := map[string]optimizer.Node{}
	for _, n := range s.Nodes {
		free[n.Name] += n.GPUs
		nodeOf[n.Name] = n
	}
	type ending struct {
		at    time.Time
		tasks []optimizer.Task
	}
	var ends []ending
	for i := range s.Jobs {
		r := &s.Jobs[i]
		if len(r.Current) == 0 || r.ID == id {
			continue
		}
		for _, t := range r.Current {
			free[t.Node] -= t.GPUs
		}
		rate := s.Throughput.PlacementRate(r.Type, r.Workers, r.Current)
		if rate <= 0 {
			continue
		}
		ends = append(ends, ending{now.Add(time.Duration(r.RemainingSteps / rate * float64(time.Second))), r.Current})
	}
	sort.Slice(ends, func(a, b int) bool { return ends[a].at.Before(ends[b].at) })
	fits := func() bool {
		var nodes []optimizer.Node
		for name, f := range free {
			if f > 0 {
				n := nodeOf[name]
				n.GPUs = f
				nodes = append(nodes, n)
			}
		}
		for _, t := range s.Types() {
			if s.Throughput.Rate(job.Type, t, job.Workers) > 0 && job.Shape.FitsType(nodes, t, job.Workers) {
				return true
			}
		}
		return false
	}
	if fits() {
		return now, "GPUs that fit it are free now; the policy gave them to jobs it ranks first or keeps them for a faster type"
	}
	for _, e := range ends {
		for _, t := range e.tasks {
			free[t.Node] += t.GPUs
		}
		if fits() {
			return e.at, "when running jobs end at their estimated rates, if no job ahead of it takes the GPUs first"
		}
	}
	return time.Time{}, "no end of the running jobs frees GPUs its request fits"
}
