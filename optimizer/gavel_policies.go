package optimizer

// Gavel's LP policies, each driven by the round mechanism of gavel.go. The
// LPs themselves are the pure functions of gavel_lp.go; the allocators here
// turn a gavelInput into their dense inputs and their X back into an
// allocation, and keep the little state a policy carries between solves.

func init() {
	Register("gavel", "Gavel max_min_fairness_perf: heterogeneity-aware LAS (Gavel's default), Gavel's round mechanism", func(o Options) Policy {
		return newGavelRounds("gavel", maxMinAllocator{}, false, false, o.Seed)
	})
	Register("las", "Gavel max_min_fairness: heterogeneity-agnostic LAS (throughputs taken as 1, GPU types shuffled every round)", func(o Options) Policy {
		split := newPyRandom(o.Seed + 7) // a stream of its own, beside Gavel's
		return newGavelRounds("las", maxMinAllocator{split: split}, true, false, o.Seed)
	})
	Register("gavel-makespan", "Gavel min_total_duration_perf: the allocation that finishes all current jobs soonest, Gavel's round mechanism", func(o Options) Policy {
		return newGavelRounds("gavel-makespan", minTotalDurationAllocator{}, false, false, o.Seed)
	})
	Register("gavel-ftf", "Gavel finish_time_fairness_perf: minimise the worst finish-time fairness ratio, Gavel's round mechanism", func(o Options) Policy {
		return newGavelRounds("gavel-ftf", newFTFAllocator(), false, false, o.Seed)
	})
}

// toAllocation maps a dense X (rows in.Jobs, columns in.Types) to an
// allocation with a row for every job, as Gavel's unflatten does.
func toAllocation(in *gavelInput, X [][]float64) allocation {
	out := make(allocation, len(in.Jobs))
	for i, j := range in.Jobs {
		row := make(map[string]float64, len(in.Types))
		for k, h := range in.Types {
			row[h] = X[i][k]
		}
		out[j.ID] = row
	}
	return out
}

// maxMinAllocator is max_min_fairness_perf, or with split set Gavel's
// heterogeneity-agnostic max_min_fairness, which replaces every throughput by
// 1 before solving (also on types where the job cannot run: the mechanism
// then never runs it there, as in Gavel).
//
// The agnostic LP fixes only each job's total share: with every throughput
// 1, any division of that share among GPU types that fits their capacity is
// optimal. The interior-point solve returns the centre of that face, the
// same fraction of every type for every job, so every job would run a third
// of its time on each type and average their speeds. Gavel's solver returns
// some other optimal point, in which a job's share sits on one or two types
// (docs/fidelity.md: the centre makes LAS 13% faster than Gavel's on two
// published runs; optimal vertices land within 3.5% on all four). So the
// agnostic allocator keeps the LP's totals and divides them at a vertex of
// the optimal face: jobs in a random order each fill the types, in a random
// order, that still have room. split draws those orders.
type maxMinAllocator struct{ split *pyRandom }

func (a maxMinAllocator) allocate(in *gavelInput) (allocation, error) {
	thr := in.Thr
	if a.split != nil {
		thr = make([][]float64, len(in.Thr))
		for i := range thr {
			thr[i] = make([]float64, len(in.Types))
			for k := range thr[i] {
				thr[i][k] = 1
			}
		}
	}
	X, err := maxMinFairnessAlloc(thr, in.Scale, in.Weight, in.Capacity)
	if err != nil {
		return nil, err
	}
	if a.split != nil {
		vertexSplit(X, in.Scale, in.Capacity, a.split)
	}
	return toAllocation(in, X), nil
}

// vertexSplit redistributes each row's total share of X among the types,
// keeping the totals and the per-type capacity: rows in a random order take,
// from types in a random order, as much of each type's remaining capacity
// (in GPUs, share x scale) as they still need. The result is an extreme
// point of the set of allocations with X's row totals, every row on one
// type except where a type fills up.
func vertexSplit(X [][]float64, scale, capacity []float64, rng *pyRandom) {
	left := append([]float64(nil), capacity...)
	rows := make([]int, len(X))
	for i := range rows {
		rows[i] = i
	}
	rng.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a] })
	types := make([]int, len(capacity))
	for _, i := range rows {
		need := 0.0
		for k := range X[i] {
			need += X[i][k] * scale[i]
			X[i][k] = 0
		}
		for k := range types {
			types[k] = k
		}
		rng.Shuffle(len(types), func(a, b int) { types[a], types[b] = types[b], types[a] })
		for _, k := range types {
			if need <= 0 {
				break
			}
			g := min(need, left[k])
			if g <= 0 {
				continue
			}
			X[i][k] += g / scale[i]
			left[k] -= g
			need -= g
		}
	}
}

// minTotalDurationAllocator is min_total_duration_perf (Gavel's makespan
// policy), fed each job's remaining steps.
type minTotalDurationAllocator struct{}

func (minTotalDurationAllocator) allocate(in *gavelInput) (allocation, error) {
	X, _, err := minTotalDurationAlloc(in.Thr, in.Scale, in.Remaining, in.Capacity)
	if err != nil {
		return nil, err
	}
	return toAllocation(in, X), nil
}

// ftfAllocator is finish_time_fairness_perf. Like Gavel's policy it keeps,
// per job, the time the job would have needed in isolation for the steps it
// has done, charged at every solve with the isolated throughput of the
// previous solve; Gavel reads but ignores priority weights here, and so does
// this allocator.
type ftfAllocator struct {
	isolatedElapsed map[string]float64
	prevRemaining   map[string]float64
	prevIso         map[string]float64
}

func newFTFAllocator() *ftfAllocator {
	return &ftfAllocator{
		isolatedElapsed: map[string]float64{},
		prevRemaining:   map[string]float64{},
		prevIso:         map[string]float64{},
	}
}

func (f *ftfAllocator) allocate(in *gavelInput) (allocation, error) {
	iso := isolatedThroughputs(in.Thr, in.Scale, len(in.Jobs), in.Capacity)
	isoElapsed := make([]float64, len(in.Jobs))
	for i, j := range in.Jobs {
		if r, ok := f.prevRemaining[j.ID]; ok && f.prevIso[j.ID] > 0 {
			f.isolatedElapsed[j.ID] += (r - in.Remaining[i]) / f.prevIso[j.ID]
		}
		isoElapsed[i] = f.isolatedElapsed[j.ID]
	}
	active := make(map[string]bool, len(in.Jobs))
	f.prevRemaining = make(map[string]float64, len(in.Jobs))
	f.prevIso = make(map[string]float64, len(in.Jobs))
	for i, j := range in.Jobs {
		active[j.ID] = true
		f.prevRemaining[j.ID] = in.Remaining[i]
		f.prevIso[j.ID] = iso[i]
	}
	for id := range f.isolatedElapsed {
		if !active[id] {
			delete(f.isolatedElapsed, id)
		}
	}
	X, _, err := finishTimeFairnessAlloc(in.Thr, in.Scale, nil, in.Remaining, in.Elapsed, isoElapsed, len(in.Jobs), in.Capacity)
	if err != nil {
		// Gavel falls back to the isolated allocation when its solver
		// returns no solution.
		X = isolatedAlloc(in)
	}
	return toAllocation(in, X), nil
}

// isolatedAlloc is Gavel's IsolatedPolicy allocation: every job gets an equal
// 1/n share of every type, counted in gang slots, scaled so a row sums to at
// most 1.
func isolatedAlloc(in *gavelInput) [][]float64 {
	n := float64(len(in.Jobs))
	X := zeroAlloc(len(in.Jobs), len(in.Types))
	for i := range in.Jobs {
		sum := 0.0
		for _, c := range in.Capacity {
			sum += c / (n * in.Scale[i])
		}
		norm := max(sum, 1)
		for k, c := range in.Capacity {
			X[i][k] = c / (n * in.Scale[i]) / norm
		}
	}
	return X
}
