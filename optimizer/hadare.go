package optimizer

import (
	"math"
	"sort"
)

// HadarE forks jobs into copies (hadar.md section 4, docs/hadare.md): k
// independent data-parallel replicas of a job that train at once on
// different nodes, each on GPUs of one type on one node, and are combined at
// every round's end by averaging their parameters weighted by the steps they
// did. The job then progresses at the sum of its copies' rates times the
// combining efficiency of that many copies (CopyEfficiency.At,
// Throughputs.CopiesRate).
//
// A copy may hold fewer GPUs than the job's Workers: it is a replica with
// fewer data-parallel workers, and the throughput matrix counts steps per
// worker batch, so its rate is Rate(job type, GPU type, copy GPUs) in the
// same units as the job's. That is what lets an 8-worker job run as two
// 4-GPU copies on 4-GPU nodes, and a 4-worker job take the two GPUs a node
// has left.
//
// Each round:
//
//  1. Hadar plans the round as it always does (every job in Hadar's
//     priority order, as a gang), so no job starves and the average JCT stays
//     Hadar's.
//  2. The GPUs Hadar leaves idle go to copies, one copy at a time, each on
//     the node where it is fastest, never on a node that already holds a
//     copy of the job. Jobs are served in Hadar's spirit: first the jobs
//     Hadar could not place (smallest remaining area first); then the
//     critical jobs, longest time left first (time left = remaining steps /
//     current rate), which is water filling on the makespan: a job whose
//     shortest possible time (all its copies on its best nodes) is close to
//     the fluid horizon (all remaining work spread over the whole cluster)
//     would otherwise set the makespan alone at the end, as the longest jobs
//     do under every other policy; then the other jobs, shortest time left
//     first, which lowers the average JCT (a job that finishes in this
//     round anyway gets no more copies, which would idle soon). A job Hadar
//     runs as a gang becomes copies (its task on each node a copy) only if
//     that, plus new copies, beats its gang rate after the efficiency loss,
//     and a job gets one more copy only if the efficiency at one more copy
//     still leaves it faster: with the measured curve the speed-up grows
//     slowly with the copies, so a slow copy may not pay.
//  3. A job's steps for the round are split among its copies in proportion
//     to their rates, so that they finish the round together; the shares sum
//     to min(remaining steps, efficiency(k) x summed rate x round).
//
// A job forks only when its Job.MaxCopies is at least 2: that is the limit
// Check enforces, and Slurm jobs set it from their tag (copies=N). A host
// whose jobs carry no limit (the simulator) asks CopyLimit for the default
// and writes it into its snapshots.
type HadarE struct {
	// Hadar plans the first copy of every job.
	Hadar *Hadar
	// MaxCopies is the copy limit of a job that sets none (0: the number of
	// nodes).
	MaxCopies int
	// Efficiency is the combining efficiency of k copies (the zero value
	// means 1 for every k).
	Efficiency CopyEfficiency
	// Critical is the fraction of the fluid horizon above which a job's
	// shortest possible time (all its copies on the best nodes) makes it
	// critical.
	Critical float64
}

// CopyLimiter is implemented by policies that fork jobs into copies.
// CopyLimit is the number of copies job j may run on the snapshot's nodes
// when the job itself sets no limit; a host whose jobs carry no limit (the
// simulator) writes it into Job.MaxCopies so that Check enforces it.
type CopyLimiter interface {
	CopyLimit(s *Snapshot, j *Job) int
}

func init() {
	Register("hadare", "HadarE: Hadar's plan, then idle GPUs go to copies on distinct nodes (critical jobs longest first, then shortest time left); steps split by throughput", func(o Options) Policy {
		return NewHadarE(o)
	})
}

// NewHadarE returns HadarE on top of the registered Hadar policy, with the
// copy limit and efficiency of o.
func NewHadarE(o Options) *HadarE {
	h := NewHadar(o)
	return &HadarE{Hadar: h, MaxCopies: o.MaxCopies, Efficiency: o.CopyEfficiency, Critical: h.Critical}
}

// Name implements Policy.
func (p *HadarE) Name() string { return "hadare" }

// CopyLimit implements CopyLimiter: the job's own limit if it sets one, else
// the policy's, else the number of nodes.
func (p *HadarE) CopyLimit(s *Snapshot, j *Job) int {
	if j.MaxCopies > 0 {
		return j.MaxCopies
	}
	if p.MaxCopies > 0 {
		return p.MaxCopies
	}
	names := map[string]bool{}
	for _, n := range s.Nodes {
		names[n.Name] = true
	}
	return len(names)
}

// copyJob is a job's state while HadarE hands out copies.
type copyJob struct {
	*Job
	gang     []Task  // Hadar's placement; nil if Hadar did not place it
	gangRate float64 // its rate as a gang
	copies   []Task  // copy mode when non-empty
	rates    []float64
	raw      float64 // sum of rates
	nodes    map[string]bool
	area     float64 // remaining area, orders jobs Hadar did not place
	critical bool    // it would set the makespan: longest first
	left     float64 // seconds left at its current rate
	done     bool
}

// before orders the jobs that want a copy: jobs Hadar did not place first
// (smallest remaining area first), then critical jobs (longest time left
// first), then the others (shortest time left first).
func (j *copyJob) before(o *copyJob) bool {
	ji, oi := math.IsInf(j.left, 1), math.IsInf(o.left, 1)
	switch {
	case ji != oi:
		return ji
	case ji:
		return j.area < o.area
	case j.critical != o.critical:
		return j.critical
	case j.critical:
		return j.left > o.left
	default:
		return j.left < o.left
	}
}

func (j *copyJob) rate(eff CopyEfficiency) float64 {
	if len(j.copies) > 0 {
		return eff.At(len(j.copies)) * j.raw
	}
	return j.gangRate
}

func (j *copyJob) add(t Task, r float64) {
	j.copies = append(j.copies, t)
	j.rates = append(j.rates, r)
	j.raw += r
	j.nodes[t.Node] = true
}

// Plan implements Policy.
func (p *HadarE) Plan(s *Snapshot) (*Plan, error) {
	eff := p.Efficiency
	base, err := p.Hadar.Plan(s)
	if err != nil {
		return nil, err
	}
	pool := newFreePool(s.Nodes)
	for _, tasks := range base.Assignments {
		for _, t := range tasks {
			pool.use(t)
		}
	}
	if pool.Total() == 0 {
		return base, nil
	}

	var cands []*copyJob
	for _, j := range sortedJobs(s) {
		if j.MaxCopies < 2 || j.RemainingSteps <= 0 || j.Workers <= 0 {
			continue
		}
		cj := &copyJob{Job: j, gang: base.Assignments[j.ID], nodes: map[string]bool{}}
		if len(cj.gang) > 0 {
			cj.gangRate = s.Throughput.PlacementRate(j.Type, j.Workers, cj.gang)
		} else {
			best := 0.0
			for _, n := range s.Nodes {
				if j.Shape.AllowsNode(n) {
					best = math.Max(best, s.Throughput.Rate(j.Type, n.Type, j.Workers))
				}
			}
			if best <= 0 {
				continue
			}
			cj.area = float64(j.Workers) * j.RemainingSteps / best / j.Weight
		}
		cands = append(cands, cj)
	}

	p.classify(s, cands, eff)
	// Water filling: one copy at a time to the job first in line.
	round := s.Round.Seconds()
	for pool.Total() > 0 {
		var pick *copyJob
		for _, j := range cands {
			if j.done {
				continue
			}
			j.left = math.Inf(1)
			if r := j.rate(eff); r > 0 {
				j.left = j.RemainingSteps / r
			}
			if !j.critical && j.left <= round {
				j.done = true // it finishes this round anyway
				continue
			}
			if pick == nil || j.before(pick) {
				pick = j
			}
		}
		if pick == nil {
			break
		}
		if !p.grow(s, pool, pick, eff) {
			pick.done = true
		}
	}

	plan := NewPlan()
	for id, tasks := range base.Assignments {
		plan.Assign(id, tasks...)
	}
	for _, j := range cands {
		if len(j.copies) == 0 {
			continue
		}
		total := math.Min(j.RemainingSteps, eff.At(len(j.copies))*j.raw*round)
		tasks := make([]Task, len(j.copies))
		for i, t := range j.copies {
			t.Copy = i + 1
			t.Steps = total * j.rates[i] / j.raw
			tasks[i] = t
		}
		plan.Assignments[j.ID] = tasks
	}
	return plan, nil
}

// grow gives job j one more copy (a job Hadar runs as a gang first becomes
// copies, and only if that beats the gang). It reports false when the job
// can take no more, or when one more copy would not make it faster (the
// efficiency at one more copy outweighs the copy's rate).
func (p *HadarE) grow(s *Snapshot, pool *freePool, j *copyJob, eff CopyEfficiency) bool {
	if len(j.copies) >= j.MaxCopies {
		return false
	}
	if len(j.copies) > 0 || len(j.gang) == 0 {
		t, r := bestCopy(s, pool, j)
		if r <= 0 {
			return false
		}
		if k := len(j.copies); k > 0 && eff.At(k+1)*(j.raw+r) <= eff.At(k)*j.raw {
			return false
		}
		pool.use(t)
		j.add(t, r)
		return true
	}
	// Turn the gang into copies: its task on each node becomes a copy (the
	// fastest one if a node holds two GPU types), at most MaxCopies of them.
	var conv []Task
	var convRates []float64
	for _, t := range j.gang {
		r := s.Throughput.Rate(j.Type, t.Type, t.GPUs)
		dup := false
		for i, c := range conv {
			if c.Node == t.Node {
				dup = true
				if r > convRates[i] {
					conv[i], convRates[i] = t, r
				}
			}
		}
		if !dup {
			conv = append(conv, t)
			convRates = append(convRates, r)
		}
	}
	order := make([]int, len(conv))
	for i := range order {
		order[i] = i
	}
	stableSort(order, func(a, b int) bool { return convRates[a] > convRates[b] })
	trial := &copyJob{Job: j.Job, nodes: map[string]bool{}}
	for _, i := range order[:min(len(order), j.MaxCopies)] {
		trial.add(Task{Node: conv[i].Node, Type: conv[i].Type, GPUs: conv[i].GPUs}, convRates[i])
	}
	// Add new copies until the job runs faster than as a gang.
	var extra []Task
	for len(trial.copies) < j.MaxCopies && (len(extra) == 0 || trial.rate(eff) <= j.gangRate) {
		t, r := bestCopy(s, pool, trial)
		if r <= 0 {
			break
		}
		pool.use(t)
		extra = append(extra, t)
		trial.add(t, r)
	}
	if trial.rate(eff) <= j.gangRate {
		for _, t := range extra {
			pool.release(t)
		}
		return false
	}
	// The gang's tasks that did not become copies go back to the pool.
	for _, t := range j.gang {
		kept := false
		for _, c := range trial.copies {
			if c.Node == t.Node && c.Type == t.Type {
				kept = true
			}
		}
		if !kept {
			pool.release(t)
		}
	}
	j.copies, j.rates, j.raw, j.nodes = trial.copies, trial.rates, trial.raw, trial.nodes
	return true
}

// bestCopy returns the fastest copy job j can start on a free node that
// holds none of its copies: on each node the fewest GPUs (at most the job's
// Workers) that reach the best rate there; ties go to a node the job runs on
// now, then to the node with the fewest free GPUs, then to the first node.
// The rate is 0 if none can run.
func bestCopy(s *Snapshot, pool *freePool, j *copyJob) (Task, float64) {
	var best Task
	bestRate, bestFree, bestHeld := 0.0, 0, false
	for i, n := range pool.nodes {
		free := pool.free[pool.slot[i]]
		if free <= 0 || j.nodes[n.Name] || !j.Shape.AllowsNode(n) {
			continue
		}
		g, r := 0, 0.0
		for k := 1; k <= min(free, j.Workers); k++ {
			if rk := s.Throughput.Rate(j.Type, n.Type, k); rk > r {
				g, r = k, rk
			}
		}
		held := false
		for _, t := range j.Current {
			held = held || (t.Node == n.Name && t.Type == n.Type)
		}
		better := r > bestRate
		if r == bestRate && r > 0 {
			better = (held && !bestHeld) || (held == bestHeld && free < bestFree)
		}
		if better {
			best, bestRate, bestFree, bestHeld = Task{Node: n.Name, Type: n.Type, GPUs: g}, r, free, held
		}
	}
	return best, bestRate
}

// release returns a task's GPUs to the pool.
func (p *freePool) release(t Task) {
	p.add(t, t.GPUs)
}

// classify marks the critical jobs: those whose shortest possible time
// (the number of copies, up to its limit, that runs it fastest after the
// efficiency at that number, each on the node best for it, the whole
// cluster to themselves) is at least Critical times the fluid horizon (the
// time the whole cluster needs for all the remaining work, every job spread
// over every GPU at its best rate per GPU, with no combining loss: the
// bound the cluster's jobs reach when there are enough of them to fill it
// without copies). Such a job must run wide from now on, or it alone will
// set the makespan.
func (p *HadarE) classify(s *Snapshot, cands []*copyJob, eff CopyEfficiency) {
	type key struct {
		jobType        string
		workers, limit int
	}
	type speeds struct{ wide, fluid float64 }
	cache := map[key]speeds{}
	horizon := 0.0
	shortest := make([]float64, len(cands))
	for i, j := range cands {
		k := key{j.Type, j.Workers, j.MaxCopies}
		sp, ok := cache[k]
		if !j.Shape.Free() {
			ok = false // its own nodes: not shared with other jobs of its type
		}
		if !ok {
			byNode := map[string]float64{}
			for _, n := range s.Nodes {
				if !j.Shape.AllowsNode(n) {
					continue
				}
				copyRate, perGPU := 0.0, 0.0
				for g := 1; g <= j.Workers; g++ {
					r := s.Throughput.Rate(j.Type, n.Type, g)
					if g <= n.GPUs {
						copyRate = math.Max(copyRate, r)
					}
					perGPU = math.Max(perGPU, r/float64(g))
				}
				byNode[n.Name] = math.Max(byNode[n.Name], copyRate)
				sp.fluid += float64(n.GPUs) * perGPU
			}
			rates := make([]float64, 0, len(byNode))
			for _, r := range byNode {
				rates = append(rates, r)
			}
			sort.Sort(sort.Reverse(sort.Float64Slice(rates)))
			sum := 0.0
			for k, r := range rates[:min(len(rates), j.MaxCopies)] {
				sum += r
				sp.wide = math.Max(sp.wide, eff.At(k+1)*sum)
			}
			if j.Shape.Free() {
				cache[k] = sp
			}
		}
		if sp.wide > 0 && sp.fluid > 0 {
			shortest[i] = j.RemainingSteps / sp.wide
			horizon += j.RemainingSteps / sp.fluid
		}
	}
	for i, j := range cands {
		j.critical = shortest[i] > 0 && shortest[i] >= p.Critical*horizon
	}
}
