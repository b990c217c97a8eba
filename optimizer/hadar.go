package optimizer

import (
	"math"
	"sort"
)

// Hadar is hadar's own policy: task-level, heterogeneity-aware, re-planned
// every round (docs/policies.md, "hadar"). Each round it decides
//
//   - time: which jobs run. Jobs whose remaining time on their fastest GPU
//     type is close to the workload's remaining horizon are critical (they
//     set the makespan) and run first, longest first; the others follow in
//     shortest-remaining-area-first order (remaining time x GPUs / weight),
//     which is what keeps the average JCT low. A job is admitted while its
//     gang fits in the free GPUs of any types: task-level placement means a
//     gang never waits for W GPUs of one type.
//   - space: which GPU type each admitted job gets. Critical jobs take their
//     fastest type; the others are placed by comparative advantage (the job
//     that gains most from the fast type gets it). A gang that fits on no
//     single type spans types, choosing the fastest set of types that holds
//     it, and runs at the pace of its slowest worker.
type Hadar struct {
	// Critical is the fraction of the horizon above which a job is critical.
	Critical float64
	// MigrationPenalty is the time (seconds) a running job loses when moved to
	// another GPU type; a move is made only when it saves more than that.
	MigrationPenalty float64
}

func init() {
	Register("hadar", "Hadar: task-level, heterogeneity-aware; critical jobs first, then shortest remaining area, comparative-advantage placement", func(o Options) Policy {
		return &Hadar{Critical: 0.9, MigrationPenalty: o.MigrationPenalty.Seconds()}
	})
}

// Name implements Policy.
func (p *Hadar) Name() string { return "hadar" }

type hadarJob struct {
	*Job
	rates     map[string]float64 // whole-job rate per GPU type
	prefs     []string           // GPU types by rate, fastest first
	best      float64            // fastest rate
	remaining float64            // seconds left at the fastest rate
	advantage float64            // fastest rate / slowest usable rate
	critical  bool
}

// Plan implements Policy.
func (p *Hadar) Plan(s *Snapshot) (*Plan, error) {
	types := s.TypesFastestFirst()
	capacity := s.Capacity()
	totalGPUs := 0
	for _, c := range capacity {
		totalGPUs += c
	}
	jobs := sortedJobs(s)
	hj := make([]*hadarJob, 0, len(jobs))
	longest, areaBest, areaMean := 0.0, 0.0, 0.0
	for _, j := range jobs {
		h := &hadarJob{Job: j, rates: map[string]float64{}}
		worst := math.Inf(1)
		meanRate := 0.0
		for _, t := range types {
			r := s.Throughput.Rate(j.Type, t, j.Workers)
			if r <= 0 {
				continue
			}
			h.rates[t] = r
			h.prefs = append(h.prefs, t)
			h.best = math.Max(h.best, r)
			worst = math.Min(worst, r)
			meanRate += r * float64(capacity[t])
		}
		if h.best <= 0 || j.Workers > totalGPUs {
			continue // nothing here can run it
		}
		meanRate /= float64(totalGPUs)
		sort.SliceStable(h.prefs, func(a, b int) bool { return h.rates[h.prefs[a]] > h.rates[h.prefs[b]] })
		h.remaining = j.RemainingSteps / h.best
		h.advantage = h.best / worst
		longest = math.Max(longest, h.remaining)
		areaBest += float64(j.Workers) * h.remaining
		areaMean += float64(j.Workers) * j.RemainingSteps / meanRate
		hj = append(hj, h)
	}
	// The workload's remaining horizon: the longest job alone, or the total
	// work spread over the cluster (between its best-type and mean-type cost).
	horizon := math.Max(longest, (areaBest+areaMean)/2/float64(totalGPUs))
	for _, h := range hj {
		h.critical = h.remaining >= p.Critical*horizon
	}
	sort.SliceStable(hj, func(a, b int) bool {
		x, y := hj[a], hj[b]
		if x.critical != y.critical {
			return x.critical
		}
		if x.critical {
			return x.remaining > y.remaining
		}
		return float64(x.Workers)*x.remaining/x.Weight < float64(y.Workers)*y.remaining/y.Weight
	})

	// Time: admit jobs while their gangs fit in the free GPUs.
	pool := newFreePool(s.Nodes)
	free := pool.Total()
	var admitted []*hadarJob
	for _, h := range hj {
		if h.Workers <= free {
			admitted = append(admitted, h)
			free -= h.Workers
		}
	}

	// Space: critical jobs first on their fastest type, then the rest by
	// comparative advantage; jobs keep their nodes where they can.
	var critical, rest []*hadarJob
	for _, h := range admitted {
		if h.critical {
			critical = append(critical, h)
		} else {
			rest = append(rest, h)
		}
	}
	sort.SliceStable(rest, func(a, b int) bool { return rest[a].advantage > rest[b].advantage })
	left := map[string]int{}
	for _, t := range types {
		left[t] = pool.Free(t)
	}
	chosen := map[string]string{}
	var whole []*Job
	var spill []*hadarJob
	for _, group := range [][]*hadarJob{critical, rest} {
		for _, h := range group {
			t := p.pickType(h, left)
			if t == "" {
				spill = append(spill, h)
				continue
			}
			left[t] -= h.Workers
			chosen[h.ID] = t
			whole = append(whole, h.Job)
		}
	}
	plan := placeChosen(pool, whole, chosen)
	// Gangs that fit on no single type span the fastest set of types that
	// holds them.
	for _, h := range spill {
		if tasks := spanTypes(pool, h); tasks != nil {
			plan.Assign(h.ID, tasks...)
		}
	}
	return plan, nil
}

// pickType returns the fastest type (for this job) with room for its whole
// gang, keeping a running job where it is unless moving saves more than the
// migration penalty.
func (p *Hadar) pickType(h *hadarJob, left map[string]int) string {
	cur := currentType(h.Current)
	for _, t := range h.prefs {
		if left[t] < h.Workers {
			continue
		}
		if cur != "" && cur != t && p.MigrationPenalty > 0 && left[cur] >= h.Workers {
			saved := h.RemainingSteps/h.rates[cur] - h.RemainingSteps/h.rates[t]
			if saved <= p.MigrationPenalty {
				return cur
			}
		}
		return t
	}
	return ""
}

// spanTypes places a gang across GPU types: the shortest prefix of the job's
// types (fastest first) whose free GPUs hold the gang maximises the slowest
// worker's rate.
func spanTypes(pool *freePool, h *hadarJob) []Task {
	need := h.Workers
	var use []string
	for _, t := range h.prefs {
		if pool.Free(t) == 0 {
			continue
		}
		use = append(use, t)
		need -= pool.Free(t)
		if need <= 0 {
			break
		}
	}
	if need > 0 {
		return nil
	}
	// Take from the slowest chosen type last so the fast GPUs are all used.
	var tasks []Task
	left := h.Workers
	for _, t := range use {
		n := min(pool.Free(t), left)
		tasks = append(tasks, pool.take(t, n)...)
		left -= n
	}
	return tasks
}
