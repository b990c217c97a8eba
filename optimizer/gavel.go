package optimizer

import (
	"math/rand/v2"
	"sort"
	"time"
)

// Gavel's round mechanism (Narayanan et al., OSDI 2020), reimplemented from
// the description in docs/policies.md: a policy computes an allocation X[j][h]
// (fraction of time job j should spend on GPU type h); each round the
// mechanism ranks (job, type) pairs by priority = X / share of time received
// and places whole jobs greedily on one type. X is recomputed only when jobs
// arrive or finish, and at most once per resetInterval of simulated time.

// resetInterval is Gavel's minimum time between allocation recomputations.
const resetInterval = 1920 * time.Second

// allocation maps job ID -> GPU type -> fraction of time.
type allocation map[string]map[string]float64

// allocator computes a Gavel allocation for the jobs of a snapshot.
type allocator interface {
	allocate(s *Snapshot, jobs []*Job, types []string) (allocation, error)
}

type gavelRounds struct {
	name string
	// agnostic shuffles the order of GPU types each round, as Gavel does for
	// its heterogeneity-agnostic policies.
	agnostic bool
	// fifo skips jobs of zero priority (Gavel's FIFO policies).
	fifo  bool
	alloc allocator
	rng   *rand.Rand

	allocation allocation
	haveAlloc  bool
	lastReset  time.Time
	lastNow    time.Time
	started    bool
	known      map[string]bool
	needUpdate bool
	jobTime    map[string]map[string]float64 // job -> type -> seconds since reset
	workerTime map[string]float64            // type -> seconds since reset
	deficits   map[string]map[string]float64 // type -> job -> seconds
}

func newGavelRounds(name string, alloc allocator, agnostic, fifo bool, seed int64) *gavelRounds {
	return &gavelRounds{
		name: name, alloc: alloc, agnostic: agnostic, fifo: fifo,
		rng:        rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)),
		known:      map[string]bool{},
		jobTime:    map[string]map[string]float64{},
		workerTime: map[string]float64{},
		deficits:   map[string]map[string]float64{},
	}
}

func (g *gavelRounds) Name() string { return g.name }

func (g *gavelRounds) Plan(s *Snapshot) (*Plan, error) {
	types := s.TypesFastestFirst()
	jobs := sortedJobs(s)

	// Account for the round that just ended.
	if g.started {
		dt := s.Now.Sub(g.lastNow).Seconds()
		for _, j := range jobs {
			if h := currentType(j.Current); h != "" && dt > 0 {
				if g.jobTime[j.ID] == nil {
					g.jobTime[j.ID] = map[string]float64{}
				}
				g.jobTime[j.ID][h] += dt
				g.workerTime[h] += dt
			}
		}
	}
	g.started = true
	g.lastNow = s.Now

	// Arrivals and completions call for a new allocation.
	present := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		present[j.ID] = true
		if !g.known[j.ID] {
			g.known[j.ID] = true
			g.needUpdate = true
		}
	}
	for id := range g.known {
		if !present[id] {
			delete(g.known, id)
			delete(g.jobTime, id)
			delete(g.allocation, id)
			for _, d := range g.deficits {
				delete(d, id)
			}
			g.needUpdate = true
		}
	}
	if g.needUpdate && (!g.haveAlloc || s.Now.Sub(g.lastReset) >= resetInterval) {
		g.resetTimeSoFar(s, types)
		a, err := g.alloc.allocate(s, jobs, types)
		if err != nil {
			return nil, err
		}
		g.allocation = a
		g.haveAlloc = true
		g.lastReset = s.Now
		g.needUpdate = false
	}

	order := types
	if g.agnostic {
		order = append([]string(nil), types...)
		g.rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	}

	type candidate struct {
		job                      *Job
		h                        string
		priority, deficit, alloc float64
	}
	var cands []candidate
	for _, h := range order {
		for _, j := range jobs {
			x := g.allocation[j.ID][h]
			c := candidate{job: j, h: h, alloc: x, deficit: g.deficits[h][j.ID]}
			switch {
			case x == 0, s.Throughput.Rate(j.Type, h, j.Workers) == 0:
				c.priority = 0
			default:
				frac := 0.0
				if wt := g.workerTime[h]; wt > 0 {
					frac = g.jobTime[j.ID][h] / wt
				}
				if frac > 0 {
					c.priority = x / frac
				} else {
					c.priority = x * 1e9
				}
			}
			cands = append(cands, c)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		ca, cb := cands[a], cands[b]
		if ca.priority != cb.priority {
			return ca.priority > cb.priority
		}
		if ca.deficit != cb.deficit {
			return ca.deficit > cb.deficit
		}
		return ca.alloc > cb.alloc
	})

	pool := newFreePool(s.Nodes)
	left := map[string]int{}
	for _, h := range types {
		left[h] = pool.Free(h)
	}
	chosen := map[string]string{}
	var picked []*Job
	for _, c := range cands {
		j := c.job
		if _, done := chosen[j.ID]; done || left[c.h] == 0 {
			continue
		}
		if s.Throughput.Rate(j.Type, c.h, j.Workers) <= 0 {
			continue
		}
		if g.fifo && c.priority <= 0 {
			continue
		}
		if j.Workers > left[c.h] {
			continue
		}
		left[c.h] -= j.Workers
		chosen[j.ID] = c.h
		picked = append(picked, j)
	}
	return placeChosen(pool, picked, chosen), nil
}

// placeChosen turns a type per job into node placements: jobs that can keep
// their current GPUs do, then the rest, largest first, on as few nodes as
// possible.
func placeChosen(pool *freePool, picked []*Job, chosen map[string]string) *Plan {
	plan := NewPlan()
	var rest []*Job
	for _, j := range picked {
		if tasks, ok := pool.keep(chosen[j.ID], j.Workers, j.Current); ok {
			plan.Assign(j.ID, tasks...)
			continue
		}
		rest = append(rest, j)
	}
	sort.SliceStable(rest, func(a, b int) bool { return rest[a].Workers > rest[b].Workers })
	for _, j := range rest {
		if tasks := pool.take(chosen[j.ID], j.Workers); tasks != nil {
			plan.Assign(j.ID, tasks...)
		}
	}
	return plan
}

// resetTimeSoFar folds the time received since the last reset into the
// deficits and restarts the shares, as Gavel does before recomputing X.
func (g *gavelRounds) resetTimeSoFar(s *Snapshot, types []string) {
	elapsed := 0.0
	if g.haveAlloc {
		elapsed = s.Now.Sub(g.lastReset).Seconds()
	}
	half := s.Round.Seconds() / 2
	for _, h := range types {
		g.workerTime[h] = 0
		if g.deficits[h] == nil {
			g.deficits[h] = map[string]float64{}
		}
		for id, x := range g.allocation {
			received := g.jobTime[id][h]
			g.deficits[h][id] += x[h]*elapsed - received
			if g.jobTime[id] == nil {
				g.jobTime[id] = map[string]float64{}
			}
			g.jobTime[id][h] = half
			g.workerTime[h] += half
		}
	}
}

// sortedJobs returns pointers to the snapshot's jobs in arrival order (ties by
// ID), the order Gavel's dictionaries keep.
func sortedJobs(s *Snapshot) []*Job {
	out := make([]*Job, len(s.Jobs))
	for i := range s.Jobs {
		out[i] = &s.Jobs[i]
	}
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].Arrival.Equal(out[b].Arrival) {
			return out[a].Arrival.Before(out[b].Arrival)
		}
		return lessID(out[a].ID, out[b].ID)
	})
	return out
}

// lessID orders numeric IDs numerically and others lexically.
func lessID(a, b string) bool {
	if len(a) != len(b) && isDigits(a) && isDigits(b) {
		return len(a) < len(b)
	}
	return a < b
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
