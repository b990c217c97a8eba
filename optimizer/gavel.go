package optimizer

import (
	"math"
	"math/bits"
	"time"
)

// Gavel's round mechanism (Narayanan et al., OSDI 2020), reimplemented from
// the behaviour of Gavel's simulator (scheduler/scheduler.py at commit
// c4fa400; docs/fidelity.md lists every detail and how it was checked: with
// it, our yarn-cs reproduces Gavel's published FIFO figures to the digit). A
// policy computes an allocation X[j][h], the fraction of time job j should
// spend on GPU type h; each round the mechanism turns X into whole-job
// placements:
//
//   - X is recomputed only when jobs arrived or finished since the last
//     computation, and then at most once per resetInterval of simulated time
//     (a computation at time 0, the first one, does not start that clock:
//     Gavel compares its last reset time with 0).
//   - Just before each recomputation the time each job received on each type
//     is folded into a per-type deficit (X*elapsed - received) and restarted
//     at half a round for every job; the per-type total restarts at the sum
//     of those halves.
//   - A job that arrives is charged half a round on every type. A job that
//     runs is charged the time it ran (whole steps, see chargeLastRound), and
//     so is its type's total; its share of a type is its charge over the
//     type's total.
//   - priority[j][h] = X[j][h] / share, X*1e9 when the type has no recorded
//     time yet, 0 when X or the throughput is 0 or when the job is not in X
//     (it arrived since the last computation).
//   - Types are visited in a fixed order, fastest first (shuffled every round
//     for heterogeneity-agnostic policies, with Gavel's random stream);
//     within a type, jobs are ranked by (priority, deficit, X), highest
//     first, remaining ties in arrival order; the per-type lists are
//     concatenated and scanned greedily: a job takes the first listed type
//     that still has all its workers free, once. FIFO policies skip entries
//     of zero priority. A job not in X can be picked (after every job in X)
//     but gets no GPUs: they stay idle that round, as in Gavel.
//   - Placement keeps a job on its current GPUs when it stays on the same
//     type (lease extension); the rest go largest first onto as few nodes
//     as possible.

// resetInterval is Gavel's minimum time between allocation recomputations
// (_minimum_time_between_allocation_resets).
const resetInterval = 1920 * time.Second

// allocation maps job ID -> GPU type -> fraction of time.
type allocation map[string]map[string]float64

// gavelInput is what Gavel hands its policies when it recomputes X: the
// active jobs in arrival order and, per job, its throughput on every GPU type
// (steps/s of the whole job at its scale factor), scale factor, priority
// weight, remaining steps and time since arrival; and the GPUs per type.
type gavelInput struct {
	Jobs []*Job
	// Types are the cluster's GPU types sorted by name (Gavel's flatten
	// order); Capacity[k] is the number of GPUs of Types[k].
	Types    []string
	Capacity []float64
	// Thr[i][k] is Jobs[i]'s throughput on Types[k] at its scale factor.
	Thr       [][]float64
	Scale     []float64
	Weight    []float64
	Remaining []float64
	Elapsed   []float64
}

func newGavelInput(s *Snapshot, jobs []*Job) *gavelInput {
	in := &gavelInput{Jobs: jobs, Types: s.Types()}
	capacity := s.Capacity()
	for _, h := range in.Types {
		in.Capacity = append(in.Capacity, float64(capacity[h]))
	}
	for _, j := range jobs {
		row := make([]float64, len(in.Types))
		for k, h := range in.Types {
			row[k] = s.JobRate(j, h, j.Workers)
		}
		w := j.Weight
		if w <= 0 {
			w = 1
		}
		in.Thr = append(in.Thr, row)
		in.Scale = append(in.Scale, float64(j.Workers))
		in.Weight = append(in.Weight, w)
		in.Remaining = append(in.Remaining, j.RemainingSteps)
		in.Elapsed = append(in.Elapsed, s.Elapsed(j))
	}
	return in
}

// allocator computes a Gavel allocation.
type allocator interface {
	allocate(in *gavelInput) (allocation, error)
}

// gavelRounds is the round mechanism driving one allocator. It keeps Gavel's
// bookkeeping between rounds, so each run needs a fresh instance.
type gavelRounds struct {
	name string
	// agnostic shuffles the order of GPU types each round, as Gavel does for
	// policies without "Perf" in their name.
	agnostic bool
	// fifo skips entries of zero priority (Gavel's FIFO policies).
	fifo  bool
	alloc allocator
	rng   *pyRandom

	started bool
	origin  time.Time // Now of the first snapshot: Gavel's time 0
	lastNow time.Time // Now of the previous snapshot
	// clock is Gavel's timestamp, in seconds since origin, of the previous
	// snapshot; roundStart is Gavel's start of the last round in which a
	// job ran (see chargeLastRound).
	clock, roundStart float64

	allocation allocation // nil until first computed
	lastReset  float64    // clock at the last reset
	needUpdate bool

	// prev remembers each job as last planned: to charge the time a job ran
	// in the round that just ended, including a job that finished in it.
	prev map[string]prevJob
	// jobTime is the time each job ran on each type since the last reset,
	// plus the half round every job is charged; workerTime sums the time
	// jobs ran on each type since the last reset, plus the halves charged
	// at that reset.
	jobTime    map[string]map[string]float64
	workerTime map[string]float64
	deficits   map[string]map[string]float64 // type -> job -> seconds
}

type prevJob struct {
	job  Job
	typ  string  // type it was placed on ("" if it did not run)
	rate float64 // its rate there, steps/s
}

func newGavelRounds(name string, alloc allocator, agnostic, fifo bool, seed int64) *gavelRounds {
	return &gavelRounds{
		name: name, alloc: alloc, agnostic: agnostic, fifo: fifo,
		rng:        newPyRandom(seed + 5), // Gavel's worker-type shuffler
		prev:       map[string]prevJob{},
		jobTime:    map[string]map[string]float64{},
		workerTime: map[string]float64{},
		deficits:   map[string]map[string]float64{},
	}
}

func (g *gavelRounds) Name() string { return g.name }

func (g *gavelRounds) Plan(s *Snapshot) (*Plan, error) {
	types := s.TypesFastestFirst()
	jobs := sortedJobs(s)
	if s.MidRound && g.started {
		return g.keepRound(s, jobs), nil
	}
	half := s.Round.Seconds() / 2
	if !g.started {
		g.started = true
		g.origin = s.Now
		g.lastNow = s.Now
	}
	g.chargeLastRound(s, jobs)

	// Arrivals and completions call for a new allocation.
	present := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		present[j.ID] = true
		t := g.jobTime[j.ID]
		if t == nil {
			t = map[string]float64{}
			g.jobTime[j.ID] = t
			g.needUpdate = true
		}
		for _, h := range types {
			if _, ok := t[h]; !ok {
				t[h] = half // as Gavel charges a new job, or a job a new type
			}
		}
	}
	for id := range g.jobTime {
		if !present[id] {
			delete(g.jobTime, id)
			delete(g.allocation, id)
			for _, d := range g.deficits {
				delete(d, id)
			}
			g.needUpdate = true
		}
	}

	// Recompute the allocation when needed and allowed: Gavel compares the
	// time since the last reset with resetInterval, and lets a reset at
	// time 0 (the first one) not count.
	if g.needUpdate && (g.lastReset == 0 || g.clock-g.lastReset >= resetInterval.Seconds()) {
		g.resetTimeSoFar(types, jobs, half)
		a, err := g.alloc.allocate(newGavelInput(s, jobs))
		if err != nil {
			return nil, err
		}
		if a == nil {
			a = allocation{}
		}
		g.allocation = a
		g.needUpdate = false
	}

	order := types
	if g.agnostic {
		order = append([]string(nil), types...)
		g.rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	}
	chosen, picked := g.pick(s, order, jobs)
	plan := placeChosen(newFreePool(s.Nodes), picked, chosen)

	// Remember what runs, to charge it at the next plan.
	g.prev = make(map[string]prevJob, len(jobs))
	for _, j := range jobs {
		p := prevJob{job: *j}
		if tasks := plan.Assignments[j.ID]; len(tasks) > 0 {
			p.typ = currentType(tasks)
			p.rate = s.Throughput.PlacementRate(j.Type, j.Workers, tasks)
		}
		g.prev[j.ID] = p
	}
	g.lastNow = s.Now
	return plan, nil
}

// keepRound is a plan within the round last planned: the jobs it chose
// keep their types (and nodes, where they still run), as in Gavel, where
// nothing changes until the round ends; the GPUs a finished job left stay
// idle and an arrival waits for the next round. It changes no bookkeeping:
// the next full round charges the whole time since the last one.
func (g *gavelRounds) keepRound(s *Snapshot, jobs []*Job) *Plan {
	chosen := map[string]string{}
	var picked []*Job
	for _, j := range jobs {
		if p, ok := g.prev[j.ID]; ok && p.typ != "" {
			chosen[j.ID] = p.typ
			picked = append(picked, j)
		}
	}
	return placeChosen(newFreePool(s.Nodes), picked, chosen)
}

// chargeLastRound adds the time each job ran in the round that just ended to
// its type's shares (Gavel's _done_callback), also for a job that finished in
// it, and advances the mechanism's clock to s.Now.
//
// When the snapshot's time is the end of the round as Gavel's simulator
// models it (each job ran whole steps, int(rate x round), or its remaining
// steps, and the round ended with the last of them), the clock and the
// charges are computed as Gavel computes them, in floating point: a job that
// ran for a seconds is charged (start + a) - roundStart, where start is the
// round's start and roundStart the start of the last round in which jobs ran
// (they differ after a round in which nothing ran, when Gavel charges the
// idle gap too). Equal-priority jobs are ranked by these charges' last bits,
// so reproducing them is what makes the mechanism pick the jobs Gavel picks.
// Otherwise (a live cluster, or a driver with other round semantics) a job
// still present is charged the growth of its Executed time, or the time
// since the previous plan if the driver does not report it, and one that
// finished its modelled run time.
func (g *gavelRounds) chargeLastRound(s *Snapshot, jobs []*Job) {
	nowSec := s.Now.Sub(g.origin).Seconds()
	dt := s.Now.Sub(g.lastNow).Seconds()
	type run struct {
		id, typ string
		a       float64 // modelled run time in the round, seconds
	}
	var runs []run
	end := g.clock
	for id, p := range g.prev {
		if p.typ == "" {
			continue
		}
		a := s.Round.Seconds()
		if p.rate > 0 {
			if steps := wholeRoundSteps(p.rate, a); p.job.RemainingSteps <= steps {
				a = p.job.RemainingSteps / p.rate
			} else {
				a = steps / p.rate
			}
		}
		runs = append(runs, run{id: id, typ: p.typ, a: a})
		end = math.Max(end, g.clock+a)
	}
	// Gavel charges micro-tasks in the order they leave its heap: latest
	// finish first, ties by job ID (the order of float additions).
	stableSort(runs, func(x, y run) bool {
		if x.a != y.a {
			return x.a > y.a
		}
		return lessID(x.id, y.id)
	})
	modelled := len(runs) > 0 && math.Abs(end-nowSec) <= 1e-6
	here := make(map[string]*Job, len(jobs))
	for _, j := range jobs {
		here[j.ID] = j
	}
	for _, r := range runs {
		j, present := here[r.id]
		var ran float64
		switch {
		case modelled:
			ran = (g.clock + r.a) - g.roundStart
		case present:
			ran = dt
			if d := j.Executed - g.prev[r.id].job.Executed; d > 0 && d < dt {
				ran = d
			}
		default:
			ran = math.Min(dt, r.a)
		}
		if present {
			g.jobTime[r.id][r.typ] += ran
		}
		g.workerTime[r.typ] += ran
	}
	switch {
	case modelled:
		g.roundStart, g.clock = end, end
	case len(runs) > 0:
		g.roundStart, g.clock = nowSec, nowSec
	default:
		g.clock = nowSec
	}
}

// wholeRoundSteps is the work a job at rate steps/s does in a full round:
// whole steps, int(rate x round) as Gavel leases them (the fraction of a step
// for a job slower than a step per round).
func wholeRoundSteps(rate, round float64) float64 {
	s := rate * round
	if s >= 1 {
		return math.Floor(s)
	}
	return s
}

// resetTimeSoFar folds the time received since the last reset into the
// deficits and restarts every job's share at half a round, as Gavel does
// just before it recomputes X (_reset_time_run_so_far).
func (g *gavelRounds) resetTimeSoFar(types []string, jobs []*Job, half float64) {
	elapsed := g.clock - g.lastReset
	for _, h := range types {
		g.workerTime[h] = 0
		if g.deficits[h] == nil {
			g.deficits[h] = map[string]float64{}
		}
		for _, j := range jobs {
			received := g.jobTime[j.ID][h] - half
			should := g.allocation[j.ID][h] * elapsed
			g.deficits[h][j.ID] += should - received
			g.jobTime[j.ID][h] = half
			g.workerTime[h] += half
		}
	}
	g.lastReset = g.clock
}

// priority is Gavel's priority of job j on type h (_update_priorities).
func (g *gavelRounds) priority(s *Snapshot, j *Job, h string) float64 {
	row, ok := g.allocation[j.ID]
	if !ok {
		return 0
	}
	x := row[h]
	if x == 0 || s.JobRate(j, h, j.Workers) == 0 {
		return 0
	}
	if wt := g.workerTime[h]; wt > 0 {
		if frac := g.jobTime[j.ID][h] / wt; frac > 0 {
			return x / frac
		}
	}
	return x * 1e9
}

// pick chooses a GPU type for as many jobs as fit, scanning each type's jobs
// in priority order (_schedule_jobs_on_workers_helper). It returns the type
// per job and the jobs to place, in the order they were picked.
func (g *gavelRounds) pick(s *Snapshot, order []string, jobs []*Job) (map[string]string, []*Job) {
	type entry struct {
		job                      *Job
		h                        string
		priority, deficit, alloc float64
	}
	// The keys are sorted without the job pointers: swapping elements with
	// pointers costs a write barrier each while the GC runs.
	type key struct {
		priority, deficit, alloc float64
		j                        int
	}
	queue := make([]entry, 0, len(order)*len(jobs))
	per := make([]key, len(jobs))
	for _, h := range order {
		for i, j := range jobs {
			per[i] = key{priority: g.priority(s, j, h), deficit: g.deficits[h][j.ID], alloc: g.allocation[j.ID][h], j: i}
		}
		stableSort(per, func(ea, eb key) bool {
			if ea.priority != eb.priority {
				return ea.priority > eb.priority
			}
			if ea.deficit != eb.deficit {
				return ea.deficit > eb.deficit
			}
			return ea.alloc > eb.alloc
		})
		for _, k := range per {
			queue = append(queue, entry{job: jobs[k.j], h: h, priority: k.priority, deficit: k.deficit, alloc: k.alloc})
		}
	}

	pool := newFreePool(s.Nodes)
	left := map[string]int{}
	for _, h := range order {
		left[h] = pool.Free(h)
	}
	chosen := map[string]string{}
	var picked []*Job
	for _, e := range queue {
		j := e.job
		if left[e.h] == 0 {
			continue
		}
		if _, done := chosen[j.ID]; done {
			continue
		}
		if s.JobRate(j, e.h, j.Workers) <= 0 {
			continue
		}
		if g.fifo && e.priority <= 0 {
			continue
		}
		if j.Workers > left[e.h] {
			continue
		}
		left[e.h] -= j.Workers
		chosen[j.ID] = e.h
		if _, ok := g.allocation[j.ID]; !ok {
			// Gavel selects a job that arrived since the last computation
			// (priority 0, last in line) but gives it no workers: its
			// GPUs stay idle this round.
			continue
		}
		picked = append(picked, j)
	}
	return chosen, picked
}

// placeChosen turns a type per job into node placements: jobs that can keep
// their current GPUs do (lease extension), then the rest, largest first, on
// as few nodes as possible. Gavel extends leases per scale factor, largest
// first, interleaved with new placements; extending every lease first keeps
// at least as many, and placement does not change simulated progress (Gavel
// models no restart cost).
func placeChosen(pool *freePool, picked []*Job, chosen map[string]string) *Plan {
	plan := &Plan{Assignments: make(map[string][]Task, len(picked))}
	var rest []*Job
	for _, j := range picked {
		if tasks, ok := pool.keep(j, chosen[j.ID]); ok {
			plan.Assign(j.ID, tasks...)
			continue
		}
		rest = append(rest, j)
	}
	stableSort(rest, func(a, b *Job) bool { return a.Workers > b.Workers })
	for _, j := range rest {
		if tasks := pool.take(j, chosen[j.ID]); tasks != nil {
			plan.Assign(j.ID, tasks...)
		}
	}
	return plan
}

// sortedJobs returns pointers to the snapshot's jobs in arrival order (ties by
// ID), the order Gavel's dictionaries keep.
func sortedJobs(s *Snapshot) []*Job {
	out := make([]*Job, len(s.Jobs))
	for i := range s.Jobs {
		out[i] = &s.Jobs[i]
	}
	stableSort(out, func(a, b *Job) bool {
		if !a.Arrival.Equal(b.Arrival) {
			return a.Arrival.Before(b.Arrival)
		}
		return lessID(a.ID, b.ID)
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

// pyRandom reproduces the random stream of CPython's random.Random seeded
// with an integer (MT19937 seeded by init_by_array), for the two calls Gavel
// makes: randrange(n) and shuffle. With it, a seed here draws the same
// numbers as Gavel's simulator run with that seed.
type pyRandom struct {
	mt  [624]uint32
	idx int
}

func newPyRandom(seed int64) *pyRandom {
	r := &pyRandom{}
	u := uint64(seed)
	if seed < 0 {
		u = uint64(-seed)
	}
	key := []uint32{uint32(u)}
	if hi := uint32(u >> 32); hi != 0 {
		key = append(key, hi)
	}
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(624, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= 624 {
			r.mt[0] = r.mt[623]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := 623; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= 624 {
			r.mt[0] = r.mt[623]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
	r.idx = 624
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < 624; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
}

func (r *pyRandom) uint32() uint32 {
	if r.idx >= 624 {
		for k := 0; k < 624; k++ {
			y := (r.mt[k] & 0x80000000) | (r.mt[(k+1)%624] & 0x7fffffff)
			v := r.mt[(k+397)%624] ^ (y >> 1)
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			r.mt[k] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// IntN is Python's randrange(n) for 0 < n < 2^32.
func (r *pyRandom) IntN(n int) int {
	k := bits.Len(uint(n))
	for {
		v := int(r.uint32() >> (32 - k))
		if v < n {
			return v
		}
	}
}

// Shuffle is Python's random.shuffle.
func (r *pyRandom) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.IntN(i+1))
	}
}
