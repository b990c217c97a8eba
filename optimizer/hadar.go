package optimizer

import (
	"math"
	"slices"
	"time"
)

// Hadar is hadar's own policy: task-level, heterogeneity-aware, re-planned
// every round (docs/policies.md, "hadar"). It follows the primal-dual idea of
// OASiS: GPU types carry prices (duals of their capacity), each job takes the
// GPUs that are cheapest per unit of its throughput, and the order in which
// jobs are served decides completion times.
//
//   - Prices. A price per GPU type is found by tatonnement: every job picks
//     the type that is cheapest for its remaining work (price x GPU-seconds it
//     needs there), and prices rise on types whose work would take longer than
//     the others' until the loads balance. The balanced load is the fluid
//     estimate of the remaining makespan (the horizon), and each job's
//     preferred type is where the whole workload finishes soonest.
//   - Fluid plan. Prices alone cannot say that a type needs several jobs at
//     once to stay busy (a job uses its gang's GPUs, no more), so every few
//     rounds Hadar also solves the fluid min-makespan LP (Gavel's
//     min_total_duration shape, on the same interior-point solver). Its
//     optimum gives the horizon, and a job that the LP runs mostly on some
//     types prefers those; GPUs left free after the first pass go first to
//     jobs the LP runs on that type. Prices decide for the rest.
//   - Time. Jobs whose remaining time on their preferred type is close to the
//     horizon are critical (they set the makespan) and are served first,
//     longest first; the others follow shortest remaining area first
//     (remaining time x GPUs / weight), which keeps the average JCT low.
//     Two exceptions: a job that is short against the horizon (QuickShare)
//     goes before the critical ones, since it delays them by little and
//     would otherwise wait behind them (wide gangs wait for hundreds of
//     hours behind long wide gangs on production traces); and a job whose
//     age has reached Starvation times its fair-share time goes before
//     everyone (the starvation bound).
//   - Fair deadlines. The horizon rule trusts the estimates: a long job
//     whose steps are underestimated is never critical and can wait until
//     it alone sets the makespan. Hadar therefore also keeps a virtual
//     fair-sharing system (every job on an equal share of every type since
//     it was first seen, as Friedman and Henderson's fair sojourn protocol
//     does); a long job becomes critical when it has fallen behind it
//     (FairDeadline).
//   - Space. A job runs on its preferred type when that type has room for its
//     gang; GPUs still free after that go to the next jobs in priority order
//     on any type, and a gang that fits on no single type spans types
//     (task-level placement), running at the pace of its slowest worker.
//     Jobs keep their nodes when they stay on the same type. In a round
//     where every job's gang fits at once, no type is scarce and every job
//     prefers its fastest type.
type Hadar struct {
	// Critical is the fraction of the horizon above which a job is critical.
	Critical float64
	// MigrationPenalty is the time (seconds) a running job loses when moved to
	// another GPU type; a move is made only when it saves more than that.
	MigrationPenalty float64
	// PriceRounds bounds the tatonnement iterations.
	PriceRounds int
	// FluidEvery is the number of rounds between solves of the fluid LP
	// (also re-solved when a job appears); 0 turns the LP off.
	FluidEvery int
	// LeadShare, MinShare, ShareTie, Uncontended, LeadRemaining,
	// QuickShare and Starvation: see HadarOptions (0 turns the last three
	// off here).
	LeadShare, MinShare, ShareTie, Uncontended float64
	LeadRemaining, QuickShare, Starvation      float64
	// FairDeadline, Incumbency and Probe: see HadarOptions (0: off).
	FairDeadline, Incumbency, Probe float64

	// prices are the last round's balanced prices, the next round's start.
	prices map[string]float64
	// fluid is the last solve of the fluid LP.
	fluid fluidPlan
	// fairDone is each job's fraction done in the virtual fair-sharing
	// system as of fairAt (fairDeadlines).
	fairDone map[string]float64
	fairAt   time.Time
	// probing is the GPU type each job is being tried on (probe) until
	// its rate there is measured, probeHome the GPUs it left, held for it
	// meanwhile, and probed the types each job has been tried on.
	probing   map[string]string
	probeHome map[string][]Task
	probed    map[string][]string
}

// fluidPlan is a solution of the fluid min-makespan LP: the fraction of the
// remaining time each job spends on each GPU type, and when the workload
// ends.
type fluidPlan struct {
	share map[string]map[string]float64 // job ID -> GPU type -> fraction
	end   time.Time
	age   int // rounds since the solve
}

func init() {
	Register("hadar", "Hadar: task-level, heterogeneity-aware, primal-dual prices per GPU type and a fluid LP; critical jobs first, then shortest remaining area", func(o Options) Policy {
		return NewHadar(o)
	})
}

// NewHadar returns hadar with o's knobs (zero fields: the defaults).
func NewHadar(o Options) *Hadar {
	h := o.Hadar.withDefaults()
	return &Hadar{Critical: h.Critical, MigrationPenalty: o.MigrationPenalty.Seconds(), PriceRounds: h.PriceRounds, FluidEvery: h.FluidEvery,
		LeadShare: h.LeadShare, MinShare: h.MinShare, ShareTie: h.ShareTie, Uncontended: h.Uncontended,
		LeadRemaining: h.LeadRemaining, QuickShare: h.QuickShare, Starvation: h.Starvation,
		FairDeadline: h.FairDeadline, Incumbency: h.Incumbency, Probe: h.Probe}
}

// Name implements Policy.
func (p *Hadar) Name() string { return "hadar" }

type hadarJob struct {
	*Job
	// rate is the whole-job rate on each of the round's GPU types (by
	// index in types, fastest first; 0 where it cannot run) and share the
	// fluid plan's share of each (0 without one). They are slices, not maps
	// keyed by type name, because the sorts below look them up for every
	// pair of types of every job, 10,000 jobs a round at scale.
	rate      []float64
	share     []float64
	prefs     []int   // type indices, cheapest per unit of work first
	remaining float64 // seconds left on the preferred type
	fastest   float64 // seconds left on the fastest type
	fairTime  float64 // all its steps on an equal share of every type (fairShareTime)
	// area (GPUs x remaining / weight) and longest (remaining) are the
	// keys of the two orders, with the incumbency rule applied to a
	// running job.
	area, longest float64
	critical      bool
	quick         bool // short against the horizon: served before critical jobs
	starving      bool // past its starvation bound: served first
}

// Plan implements Policy.
func (p *Hadar) Plan(s *Snapshot) (*Plan, error) {
	types := s.TypesFastestFirst()
	capacity := s.Capacity()
	hj := runnableJobs(s, types, capacity)
	p.keepProbes(s, hj, types)
	prices, horizon := p.balancePrices(hj, types, capacity)
	// The balanced load (the remaining work spread over the cluster) is
	// what the fair deadlines measure "long" against: unlike the horizon
	// below, one job's overestimated steps cannot raise it above every
	// other job's length.
	load := horizon
	fluid := p.fluidShares(s, hj, types, capacity)
	if fluid != nil {
		horizon = math.Max(p.fluid.end.Sub(s.Now).Seconds(), 0)
		for _, h := range hj {
			row := fluid[h.ID]
			for t, name := range types {
				h.share[t] = row[name]
			}
		}
	}
	for _, h := range hj {
		h.fastest = h.RemainingSteps / h.bestRate()
		h.fairTime = fairShareTime(h, types, capacity, len(hj))
		horizon = math.Max(horizon, h.fastest)
	}
	p.orderPrefs(hj, prices, horizon, totalGPUs(capacity))
	p.setKeys(hj, types)
	p.markCritical(hj, types, capacity, horizon, fluid != nil)
	if p.FairDeadline > 0 {
		p.fairDeadlines(s, hj, load)
	}
	p.setKeys(hj, types) // markCritical may have changed remaining times
	for _, h := range hj {
		h.quick = !h.critical && h.fastest <= p.QuickShare*horizon
		h.starving = p.Starvation > 0 && s.Elapsed(h.Job) >= p.Starvation*h.fairTime
	}
	stableSort(hj, hadarBefore)
	return p.place(s, hj, types, fluid != nil), nil
}

func totalGPUs(capacity map[string]int) int {
	n := 0
	for _, c := range capacity {
		n += c
	}
	return n
}

// runnableJobs returns the snapshot's jobs that can run somewhere, in
// arrival order, with their rates on each type and their types in order.
// Rates are looked up once per job type and gang size (a free-shaped job's
// rates depend on nothing else), not once per job.
func runnableJobs(s *Snapshot, types []string, capacity map[string]int) []*hadarJob {
	k := len(types)
	jobs := sortedJobs(s)
	all := make([]hadarJob, len(jobs))
	rates := make([]float64, len(jobs)*k)
	shares := make([]float64, len(jobs)*k)
	prefs := make([]int, len(jobs)*k)
	type rateKey struct {
		jobType string
		workers int
	}
	cache := make(map[rateKey][]float64, 64)
	total := totalGPUs(capacity)
	hj := make([]*hadarJob, 0, len(jobs))
	for i, j := range jobs {
		h := &all[i]
		h.Job = j
		h.rate, h.share, h.prefs = rates[i*k:(i+1)*k:(i+1)*k], shares[i*k:(i+1)*k:(i+1)*k], prefs[i*k:i*k:(i+1)*k]
		key := rateKey{j.Type, j.Workers}
		if cached, ok := cache[key]; ok && j.Shape.Free() {
			copy(h.rate, cached)
		} else {
			for t, name := range types {
				if r := s.JobRate(j, name, j.Workers); r > 0 && capacity[name] > 0 {
					h.rate[t] = r
				}
			}
			if j.Shape.Free() {
				cache[key] = h.rate
			}
		}
		for t, r := range h.rate {
			if r > 0 {
				h.prefs = append(h.prefs, t)
			}
		}
		if len(h.prefs) == 0 || j.Workers > total || j.RemainingSteps <= 0 {
			continue // nothing here can run it
		}
		hj = append(hj, h)
	}
	return hj
}

// orderPrefs sorts every job's types by preference and sets its remaining
// time on the first.
func (p *Hadar) orderPrefs(hj []*hadarJob, prices []float64, horizon float64, total int) {
	// When every job's gang fits at once, no GPU type is scarce: its price
	// is zero (complementary slackness) and every job prefers its fastest
	// type; the order below only decides who gets a contended fast type.
	// "Fits" keeps a margin (Uncontended) for gangs that do not fit
	// the GPUs a node has left.
	demand := 0
	for _, h := range hj {
		demand += h.Workers
	}
	uncontended := float64(demand) <= p.Uncontended*float64(total)
	for _, h := range hj {
		if uncontended {
			h.preferFastest()
			h.critical = h.fastest >= p.Critical*horizon
			continue
		}
		// The LP's order where it gives the job a real share and the job
		// is long enough for its type to matter to the makespan (the LP
		// minimizes the makespan only, so for a job with slack its types
		// are arbitrary: on production traces it sent 200-500 h jobs to
		// K80s because they still ended within a 1,400 h horizon);
		// otherwise cheapest per unit of work first, but a type too slow to
		// finish the job within the horizon comes after every type that can.
		lead := false
		for _, t := range h.prefs {
			lead = lead || h.share[t] >= p.LeadShare
		}
		lead = lead && h.fastest >= p.LeadRemaining*horizon
		fits := func(t int) bool { return h.RemainingSteps/h.rate[t] <= p.Critical*horizon }
		stableSort(h.prefs, func(ta, tb int) bool {
			if xa, xb := h.share[ta], h.share[tb]; lead && math.Abs(xa-xb) > p.ShareTie {
				return xa > xb
			}
			if fa, fb := fits(ta), fits(tb); fa != fb {
				return fa
			}
			if !fits(ta) {
				return h.rate[ta] > h.rate[tb]
			}
			return prices[ta]/h.rate[ta] < prices[tb]/h.rate[tb]
		})
		h.remaining = h.RemainingSteps / h.rate[h.prefs[0]]
		h.critical = h.fastest >= p.Critical*horizon
	}
}

// fairDeadlines marks critical the long jobs that have fallen behind fair
// sharing. A virtual processor-sharing system runs beside the real one:
// every job of the round progresses at its fair-share rate (its steps on
// an equal 1/n share of every GPU type, fairShareTime), whatever it really
// runs on, and keeps that progress from round to round. From there the
// jobs end in the order of their fair-share time left, each ending job
// speeding up the others (n/k times faster while k remain). A long job
// (time on its fastest type at least LeadRemaining of load, the balanced
// load of the remaining work) is critical when that time reaches
// FairDeadline of the time to its virtual end, or when that end has passed.
func (p *Hadar) fairDeadlines(s *Snapshot, hj []*hadarJob, load float64) {
	n := len(hj)
	dt := 0.0
	if s.Now.After(p.fairAt) && !p.fairAt.IsZero() {
		dt = s.Now.Sub(p.fairAt).Seconds()
	}
	p.fairAt = s.Now
	type virtual struct {
		h    *hadarJob
		left float64 // fair-share time left at this round's share
	}
	jobs := make([]virtual, 0, n)
	done := make(map[string]float64, n)
	for _, h := range hj {
		rate := h.TotalSteps / h.fairTime
		if !(rate > 0) || h.TotalSteps <= 0 {
			continue
		}
		f := p.fairDone[h.ID] + dt*rate/h.TotalSteps
		done[h.ID] = f
		jobs = append(jobs, virtual{h, math.Max(1-f, 0) * h.TotalSteps / rate})
	}
	p.fairDone = done // jobs that left are dropped
	stableSort(jobs, func(a, b virtual) bool { return a.left < b.left })
	end, prev := 0.0, 0.0
	for i, v := range jobs {
		end += (v.left - prev) * float64(n-i) / float64(n)
		prev = v.left
		// A running job's time counts Incumbency more here too: a long job
		// near the lead_remaining line would otherwise cross it each round
		// (running, its time falls faster than half the load does; stopped,
		// the load falls and it is long again) and be stopped every other
		// round.
		fastest := v.h.fastest
		if p.incumbent(v.h) {
			fastest /= 1 - p.Incumbency
		}
		if v.h.critical || fastest < p.LeadRemaining*load {
			continue
		}
		v.h.critical = v.left <= 0 || fastest >= p.FairDeadline*math.Max(end, fastest)
	}
}

// setKeys sets each job's keys of the two orders from its remaining time:
// a running job's area counts Incumbency less and its remaining time
// Incumbency more, so a waiting job displaces it only when it is clearly
// smaller or longer, not when it is merely equal. A running job that holds
// its preferred type counts its remaining time Incumbency more again: two
// running critical jobs that prefer the same type would otherwise trade it
// every round, since the one elsewhere has become the longer after a round
// on the slower type (Philly week 5 draw 1 on 12:12:12: two 8-GPU gangs
// swapped the V100s and the K80s, one of them moved 11,432 times).
func (p *Hadar) setKeys(hj []*hadarJob, types []string) {
	for _, h := range hj {
		h.area = float64(h.Workers) * h.remaining / h.Weight
		h.longest = h.remaining
		if p.incumbent(h) {
			h.area *= 1 - p.Incumbency
			h.longest /= 1 - p.Incumbency
			if currentType(h.Current) == types[h.prefs[0]] {
				h.longest /= 1 - p.Incumbency
			}
		}
	}
}

// incumbent reports whether the incumbency rule favours the job: it runs.
func (p *Hadar) incumbent(h *hadarJob) bool {
	return p.Incumbency > 0 && len(h.Current) > 0
}

// preferFastest orders the job's types fastest first; its remaining time is
// then the fastest.
func (h *hadarJob) preferFastest() {
	stableSort(h.prefs, func(a, b int) bool { return h.rate[a] > h.rate[b] })
	h.remaining = h.fastest
}

// markCritical adds the critical jobs that chains of whole-type gangs
// make: a gang that needs every GPU of a type can start there only when
// the type is empty, so no other work overlaps it and the times of such
// gangs add up; when such a chain nears the horizon its longest job becomes
// critical. A gang that leaves GPUs beside it (8 of 12) is not chained: it
// starts while other jobs still run there, and chained such gangs ran
// ahead of the one-GPU jobs queued beside them on production traces
// (docs/decisions/0008-hadar-whole-type-gang-chain.md). Without a
// fluid plan, a critical job then wants its fastest type (with one, the
// type the LP gives it).
func (p *Hadar) markCritical(hj []*hadarJob, types []string, capacity map[string]int, horizon float64, fluid bool) {
	for t, name := range types {
		chain, longest := 0.0, (*hadarJob)(nil)
		for _, h := range hj {
			if h.prefs[0] == t && h.Workers >= capacity[name] {
				chain += h.remaining
				if longest == nil || h.longest > longest.longest {
					longest = h
				}
			}
		}
		if longest != nil && chain >= p.Critical*horizon {
			longest.critical = true
		}
	}
	if fluid {
		return
	}
	for _, h := range hj {
		if h.critical {
			h.preferFastest()
		}
	}
}

// place lays the jobs out in priority order (hj is sorted).
func (p *Hadar) place(s *Snapshot, hj []*hadarJob, types []string, fluid bool) *Plan {
	pool := newFreePool(s.Nodes)
	for _, h := range hj {
		if home, ok := p.probeHome[h.ID]; ok && pool.holds(home) {
			for _, t := range home {
				pool.useFor(h.Job, t)
			}
		}
	}
	// Pass 1: every job on its preferred type, critical jobs on the best type
	// that has room. Jobs that stay on their current type are placed first
	// so that they keep their nodes.
	kept := keepNoStop(pool, hj)
	chosen := make(map[string]string, len(hj))
	left := make([]int, len(types))
	for t, name := range types {
		left[t] = pool.Free(name)
	}
	var first []*Job
	for _, h := range hj {
		cands := h.prefs[:1]
		if h.critical || h.starving {
			cands = h.prefs
		}
		if _, ok := kept[h.ID]; ok {
			p.moveNoStop(s, pool, h, cands, left, types, kept)
			continue
		}
		if t := p.pickType(h, cands, left, types); t >= 0 {
			left[t] -= h.Workers
			chosen[h.ID] = types[t]
			first = append(first, h.Job)
		}
	}
	plan := placeChosen(pool, first, chosen)
	for id, tasks := range kept {
		plan.Assign(id, tasks...)
	}
	// Pass 1b: GPUs still free go to the next jobs in priority order that
	// the fluid plan runs on that type.
	if fluid {
		for t, name := range types {
			free := pool.Free(name) // changes only when a job is placed
			for _, h := range hj {
				if free == 0 {
					break
				}
				if h.share[t] < p.MinShare || h.Workers > free {
					continue
				}
				if _, placed := plan.Assignments[h.ID]; placed {
					continue
				}
				if tasks := pool.placeOnType(h.Job, name); tasks != nil {
					plan.Assign(h.ID, tasks...)
					free = pool.Free(name)
				}
			}
		}
	}
	// Pass 2: GPUs still free go to the next jobs in priority order, on any
	// type, or spanning types.
	for _, h := range hj {
		if pool.Total() == 0 {
			break
		}
		if _, placed := plan.Assignments[h.ID]; placed || h.Workers > pool.Total() {
			continue
		}
		var tasks []Task
		for _, t := range h.prefs {
			if pool.Free(types[t]) >= h.Workers {
				if tasks = pool.placeOnType(h.Job, types[t]); tasks != nil {
					break
				}
			}
		}
		// A gang across types runs at its slowest type's pace; without
		// preemption a waiting job started so would keep that pace to its
		// end, so it waits for one type instead.
		if tasks == nil && (!s.NoPreemption || len(h.Current) > 0) {
			tasks = spanTypes(pool, h, types)
		}
		if tasks != nil {
			plan.Assign(h.ID, tasks...)
		}
	}
	if !s.NoPreemption {
		defragment(pool, plan, hj, types)
		p.probe(s, pool, plan, hj, types)
	}
	return plan
}

// measured reports whether the snapshot's rate of job j on gpuType is one
// this cluster measured.
func measured(s *Snapshot, j *Job, gpuType string) bool {
	_, ok := s.Confirmed[j.Type][gpuType][j.Workers]
	return ok
}

// keepProbes plans each job under a probe with its rate on the probed type
// at (1 + Probe) times its value until that rate is measured, so that the
// try lasts until then; after it, the job's types are ranked on what was
// measured, and the GPUs held for its return are let go.
func (p *Hadar) keepProbes(s *Snapshot, hj []*hadarJob, types []string) {
	if len(p.probed) == 0 {
		return
	}
	live := make(map[string]bool, len(hj))
	for _, h := range hj {
		live[h.ID] = true
		name, ok := p.probing[h.ID]
		if !ok {
			continue
		}
		// h.rate may be the slice runnableJobs cached for the job's type
		// and size; every job has copied it by now.
		if t := indexOf(types, name); t >= 0 && h.rate[t] > 0 && !measured(s, h.Job, name) && p.Probe > 0 && s.Confirmed != nil {
			h.rate[t] *= 1 + p.Probe
			continue
		}
		delete(p.probing, h.ID)
		delete(p.probeHome, h.ID)
	}
	for id := range p.probed {
		if !live[id] {
			delete(p.probed, id)
			delete(p.probing, id)
			delete(p.probeHome, id)
		}
	}
}

// probe is the plan's last pass with preemption: a critical job running on
// a type whose rate for it this cluster measured moves to GPUs left free
// this round of a type whose rate it has not measured and that would be
// faster at (1 + Probe) times its value, and its GPUs are held for it until
// the try is measured. Without it, a long job stays for its whole run on
// the type an imported or prior rate put it on, since nothing measures the
// other (Philly week 2 on 36:36:36 with --noise-rate 0.3: makespan up to
// 1.5x Gavel's, docs/decisions/0012-hadar-probes.md). It displaces nobody, and each job tries
// each type once.
func (p *Hadar) probe(s *Snapshot, pool *freePool, plan *Plan, hj []*hadarJob, types []string) {
	if p.Probe <= 0 || s.Confirmed == nil {
		return
	}
	for _, h := range hj {
		if pool.Total() == 0 {
			return
		}
		tasks := plan.Assignments[h.ID]
		cur := currentType(tasks)
		if !h.critical || cur == "" || cur != currentType(h.Current) || !measured(s, h.Job, cur) {
			continue
		}
		if _, ok := p.probing[h.ID]; ok {
			continue
		}
		c := indexOf(types, cur)
		best, bestRate := -1, h.rate[c]
		for t, name := range types {
			r := h.rate[t] * (1 + p.Probe)
			if t == c || h.rate[t] <= 0 || r <= bestRate || pool.Free(name) < h.Workers || measured(s, h.Job, name) ||
				slices.Contains(p.probed[h.ID], name) || h.RemainingSteps/h.rate[c]-h.RemainingSteps/r <= p.MigrationPenalty {
				continue
			}
			best, bestRate = t, r
		}
		if best < 0 {
			continue
		}
		for _, t := range tasks {
			pool.releaseFor(h.Job, t)
		}
		moved := pool.placeOnType(h.Job, types[best])
		if moved == nil {
			for _, t := range tasks {
				pool.useFor(h.Job, t)
			}
			continue
		}
		for _, t := range tasks {
			pool.useFor(h.Job, t) // held for its return
		}
		plan.Assignments[h.ID] = moved
		if p.probed == nil {
			p.probed = map[string][]string{}
		}
		if p.probing == nil {
			p.probing = map[string]string{}
		}
		if p.probeHome == nil {
			p.probeHome = map[string][]Task{}
		}
		p.probing[h.ID], p.probeHome[h.ID] = types[best], tasks
		p.probed[h.ID] = append(p.probed[h.ID], types[best])
	}
}

// defragment is the plan's last pass: a waiting gang whose type has the
// free GPUs for it, but scattered over nodes that jobs kept (one-GPU jobs
// that stayed where they started, one per node), is placed by packing that
// type's small jobs again around it. On production traces, wide gangs
// otherwise waited for days beside a third of the cluster idle. Moved jobs
// restart on their new nodes, as any move does, so it needs preemption.
func defragment(pool *freePool, plan *Plan, hj []*hadarJob, types []string) {
	// A request that could not be packed on a type (same nodes x GPUs, no
	// other constraint) cannot be for the next job either: not tried again.
	type request struct{ t, nodes, perNode int }
	failed := map[request]bool{}
	for _, g := range hj {
		if _, placed := plan.Assignments[g.ID]; placed || g.Workers > pool.Total() {
			continue
		}
		sh := g.Shape
		plain := len(sh.Types) == 0 && sh.Eligible == nil && sh.CPUsPerNode <= 0 && sh.MemMBPerNode <= 0
		for _, t := range g.prefs {
			key := request{t, sh.Nodes, sh.GPUsPerNode}
			if pool.Free(types[t]) < g.Workers || plain && failed[key] {
				continue
			}
			if repack(pool, plan, hj, g, types[t]) {
				break
			}
			if plain {
				failed[key] = true
			}
		}
	}
}

// repack places gang g on GPU type gpuType by taking back the GPUs of the
// type's movable jobs (one task of at most half its node) and placing g
// first, then them again, widest first, each on its current nodes where
// they are still free, else on the tightest node. It reports whether all
// fit; if not, the pool and the plan are as they were.
func repack(pool *freePool, plan *Plan, hj []*hadarJob, g *hadarJob, gpuType string) bool {
	var movers []*hadarJob
	for _, h := range hj {
		tasks := plan.Assignments[h.ID]
		if h.NoStop || len(tasks) != 1 || tasks[0].Type != gpuType || 2*tasks[0].GPUs > pool.nodeGPUs(tasks[0].Node, gpuType) {
			continue
		}
		movers = append(movers, h)
	}
	if len(movers) == 0 {
		return false
	}
	old := make(map[string]Task, len(movers))
	for _, h := range movers {
		old[h.ID] = plan.Assignments[h.ID][0]
		pool.releaseFor(h.Job, old[h.ID])
	}
	type placement struct {
		h     *hadarJob
		tasks []Task
	}
	placed := make([]placement, 0, len(movers)+1)
	undo := func() bool {
		for _, pl := range placed {
			for _, t := range pl.tasks {
				pool.releaseFor(pl.h.Job, t)
			}
		}
		for _, h := range movers {
			pool.useFor(h.Job, old[h.ID])
		}
		return false
	}
	gang := pool.take(g.Job, gpuType)
	if gang == nil {
		return undo()
	}
	placed = append(placed, placement{g, gang})
	stableSort(movers, func(a, b *hadarJob) bool { return a.Workers > b.Workers })
	for _, h := range movers {
		tasks := pool.placeOnType(h.Job, gpuType)
		if tasks == nil {
			return undo()
		}
		placed = append(placed, placement{h, tasks})
	}
	for _, pl := range placed {
		plan.Assignments[pl.h.ID] = pl.tasks
	}
	return true
}

// keepNoStop is the plan's pass 0: a running job that may not be stopped
// (Job.NoStop) keeps its GPUs, taken from the pool before any other job is
// placed, so that no waiting job is planned onto GPUs the guard
// (KeepNoStop) would give back. It returns the kept jobs' tasks; pass 1
// may still move them (moveNoStop).
func keepNoStop(pool *freePool, hj []*hadarJob) map[string][]Task {
	var kept map[string][]Task
	for _, h := range hj {
		if h.NoStop && len(h.Current) > 0 && pool.holds(h.Current) {
			for _, t := range h.Current {
				pool.useFor(h.Job, t)
			}
			if kept == nil {
				kept = map[string][]Task{}
			}
			kept[h.ID] = append([]Task(nil), h.Current...)
		}
	}
	return kept
}

// moveNoStop moves kept job h, in its turn in priority order, onto the
// first of cands with free GPUs that hold it if the move saves more than
// the migration penalty (the guard's rule): its new tasks are taken from
// the pool and its old ones given back, for the jobs after it. left counts
// the free GPUs per type.
func (p *Hadar) moveNoStop(s *Snapshot, pool *freePool, h *hadarJob, cands, left []int, types []string, kept map[string][]Task) {
	cur := currentType(h.Current)
	for _, t := range cands {
		if types[t] == cur || left[t] < h.Workers {
			continue
		}
		next := pool.take(h.Job, types[t])
		if next == nil {
			continue
		}
		if moveGain(s, h.Job, next) <= p.MigrationPenalty {
			for _, n := range next {
				pool.releaseFor(h.Job, n)
			}
			return
		}
		for _, c := range h.Current {
			pool.releaseFor(h.Job, c)
			if i := indexOf(types, c.Type); i >= 0 {
				left[i] += c.GPUs
			}
		}
		left[t] -= h.Workers
		kept[h.ID] = next
		return
	}
}

// balancePrices finds GPU-type prices at which the jobs' choices (each job
// on the type cheapest for its remaining work) load every type about
// equally, and returns them with the resulting load: the time the busiest
// type needs for its share of the work, a fluid estimate of the remaining
// makespan. It starts from the previous round's prices (the workload changes
// little between rounds) and stops once the loads are within 1%. The prices
// are returned by type index (as in types).
func (p *Hadar) balancePrices(jobs []*hadarJob, types []string, capacity map[string]int) ([]float64, float64) {
	k := len(types)
	prices := make([]float64, k)
	for t, name := range types {
		prices[t] = 1
		if v, ok := p.prices[name]; ok && v > 0 {
			prices[t] = v
		}
	}
	// work[j*k+t] is job j's GPU-seconds on type t (0: cannot run there).
	work := make([]float64, len(jobs)*k)
	for j, h := range jobs {
		for t, r := range h.rate {
			if r > 0 {
				work[j*k+t] = float64(h.Workers) * h.RemainingSteps / r
			}
		}
	}
	best := make([]float64, k)
	copy(best, prices)
	bestLoad := math.Inf(1)
	load := make([]float64, k)
	for iter := 0; iter < max(1, p.PriceRounds) && len(jobs) > 0; iter++ {
		clear(load)
		for j := range jobs {
			pick, cost := -1, math.Inf(1)
			for t := 0; t < k; t++ {
				if w := work[j*k+t]; w > 0 && prices[t]*w < cost {
					pick, cost = t, prices[t]*w
				}
			}
			if pick >= 0 {
				load[pick] += work[j*k+pick]
			}
		}
		maxLoad, mean, n := 0.0, 0.0, 0
		for t, name := range types {
			if capacity[name] == 0 {
				continue
			}
			load[t] /= float64(capacity[name])
			maxLoad = math.Max(maxLoad, load[t])
			mean += load[t]
			n++
		}
		if n == 0 {
			break
		}
		mean /= float64(n)
		if maxLoad < bestLoad {
			bestLoad = maxLoad
			copy(best, prices)
		}
		if mean <= 0 || maxLoad <= 1.01*mean {
			break
		}
		// Raise the price of overloaded types, lower the others; the step
		// shrinks so that jobs stop flapping between types.
		step := 0.5 / (1 + float64(iter)/10)
		for t := range prices {
			f := math.Pow(math.Max(load[t], 1e-9*mean)/mean, step)
			prices[t] *= math.Min(2, math.Max(0.5, f))
		}
	}
	out := make(map[string]float64, k)
	for t, name := range types {
		out[name] = best[t]
	}
	p.prices = out
	if math.IsInf(bestLoad, 1) {
		bestLoad = 0
	}
	return best, bestLoad
}

// fluidShares returns the fluid plan's shares for this round, solving the
// LP again when FluidEvery rounds have passed or a job is new to it, or nil
// when the LP is off or fails (Hadar then decides by prices alone). Between
// solves the jobs keep their shares, which stay good for a few rounds
// because the workload changes little; jobs that left are never looked up.
func (p *Hadar) fluidShares(s *Snapshot, jobs []*hadarJob, types []string, capacity map[string]int) map[string]map[string]float64 {
	if p.FluidEvery <= 0 || len(jobs) == 0 {
		return nil
	}
	p.fluid.age++
	stale := p.fluid.share == nil || p.fluid.age >= p.FluidEvery
	for _, h := range jobs {
		if _, ok := p.fluid.share[h.ID]; !ok {
			stale = true
			break
		}
	}
	if !stale {
		return p.fluid.share
	}
	thr := make([][]float64, len(jobs))
	scale := make([]float64, len(jobs))
	remaining := make([]float64, len(jobs))
	capv := make([]float64, len(types))
	for t, name := range types {
		capv[t] = float64(capacity[name])
	}
	for i, h := range jobs {
		thr[i] = append([]float64(nil), h.rate...)
		scale[i] = float64(h.Workers)
		remaining[i] = h.RemainingSteps
	}
	X, T, err := minTotalDurationAlloc(thr, scale, remaining, capv)
	if err != nil {
		p.fluid = fluidPlan{}
		return nil
	}
	share := make(map[string]map[string]float64, len(jobs))
	for i, h := range jobs {
		row := make(map[string]float64, len(types))
		for t, name := range types {
			row[name] = X[i][t]
		}
		share[h.ID] = row
	}
	p.fluid = fluidPlan{share: share, end: s.Now.Add(time.Duration(T * float64(time.Second)))}
	return share
}

// pickType returns the first of cands (type indices) with room for the
// job's gang, keeping a running job on its current type unless moving saves
// more than the migration penalty; -1 if none has room.
func (p *Hadar) pickType(h *hadarJob, cands []int, left []int, types []string) int {
	cur := -1
	if name := currentType(h.Current); name != "" {
		cur = indexOf(types, name)
	}
	for _, t := range cands {
		if left[t] < h.Workers {
			continue
		}
		if cur >= 0 && cur != t && p.MigrationPenalty > 0 && left[cur] >= h.Workers && h.rate[cur] > 0 {
			saved := h.RemainingSteps/h.rate[cur] - h.RemainingSteps/h.rate[t]
			if saved <= p.MigrationPenalty {
				return cur
			}
		}
		return t
	}
	return -1
}

// spanTypes places a gang across GPU types: the shortest prefix of the job's
// types (by rate, fastest first) whose free GPUs hold the gang maximises the
// slowest worker's rate.
func spanTypes(pool *freePool, h *hadarJob, types []string) []Task {
	byRate := append([]int(nil), h.prefs...)
	stableSort(byRate, func(a, b int) bool { return h.rate[a] > h.rate[b] })
	need := h.Workers
	var use []string
	for _, t := range byRate {
		if pool.Free(types[t]) == 0 {
			continue
		}
		use = append(use, types[t])
		need -= pool.Free(types[t])
		if need <= 0 {
			break
		}
	}
	if need > 0 || (h.Shape.GPUsPerNode > 0 && h.Shape.Nodes <= 1) {
		return nil
	}
	return pool.takeAcross(h.Job, use)
}

func (h *hadarJob) bestRate() float64 {
	best := 0.0
	for _, r := range h.rate {
		best = math.Max(best, r)
	}
	return best
}

// hadarBefore is Hadar's priority order: starving jobs first (oldest first),
// then quick jobs, critical jobs (longest first), and the rest; quick jobs
// and the rest by shortest remaining area (remaining time x GPUs / weight).
func hadarBefore(x, y *hadarJob) bool {
	if x.starving != y.starving {
		return x.starving
	}
	if x.starving && !x.Arrival.Equal(y.Arrival) {
		return x.Arrival.Before(y.Arrival)
	}
	if x.quick != y.quick {
		return x.quick
	}
	if x.critical != y.critical {
		return x.critical
	}
	if x.critical {
		return x.longest > y.longest
	}
	return x.area < y.area
}

// fairShareTime is the time the job needs for all its steps alone on an
// equal 1/n share of every GPU type (finish-time fairness's reference, with
// n the jobs of this round): the yardstick of the starvation bound.
func fairShareTime(h *hadarJob, types []string, capacity map[string]int, n int) float64 {
	sum := 0.0
	for _, t := range types {
		sum += float64(capacity[t]) / float64(n*h.Workers)
	}
	norm := math.Max(sum, 1)
	rate := 0.0
	for k, t := range types {
		rate += float64(capacity[t]) / float64(n*h.Workers) / norm * h.rate[k]
	}
	if rate <= 0 {
		return math.Inf(1)
	}
	return h.TotalSteps / rate
}
