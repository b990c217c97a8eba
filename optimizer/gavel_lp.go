package optimizer

// The allocation LPs of Gavel's policies (Narayanan et al., OSDI 2020, and
// its public scheduler/policies/*.py), as pure functions on dense matrices.
//
// Common inputs, for m jobs and n GPU types:
//
//	thr[i][k]    steps/s of job i running its whole gang on type k (0: cannot run there)
//	scale[i]     job i's gang size in GPUs (Gavel's scale factor), > 0
//	capacity[k]  GPUs of type k, >= 0
//
// Every function returns X (m x n), X[i][k] = fraction of time job i should
// spend on type k, with 0 <= X <= 1, sum_k X[i][k] <= 1,
// sum_i X[i][k]*scale[i] <= capacity[k] and X[i][k] = 0 where thr[i][k] == 0
// (Gavel's own LPs leave the last one implicit). Rows of jobs that cannot
// run on any type with capacity are 0, and so are rows of jobs that the
// policy ignores (see each function). Solver noise (entries below 1e-9 that
// carry a negligible share of the job's throughput) is zeroed.
//
// All three LPs reduce to solveMaxMin (lp.go): maximize z subject to
// util_i(X) >= z for every job, with a per-policy utility. Like Gavel, no
// water-filling is done: it is one LP (or, for finish-time fairness, one LP
// per bisection step), and where the LP has several optima the interior-point
// solver returns one near the centre of the optimal face, as Gavel's cvxpy
// (ECOS) solve does.
//
// Like Gavel, the LPs let a job hold a fraction of a type whose pool is
// smaller than its gang (the capacity row only bounds X[i][k] by
// capacity[k]/scale[i]); a caller that wants such pairs excluded sets
// thr[i][k] = 0 there.

import (
	"fmt"
	"math"
)

// checkGavelInputs validates the common inputs (shapes, finiteness, signs)
// and optional per-job vectors, which must be nil or of length m.
func checkGavelInputs(thr [][]float64, scale, capacity []float64, perJob map[string][]float64) error {
	m, n := len(thr), len(capacity)
	if len(scale) != m {
		return fmt.Errorf("%w: %d jobs but %d scale factors", errLPInput, m, len(scale))
	}
	for k, c := range capacity {
		if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return fmt.Errorf("%w: capacity[%d] = %v", errLPInput, k, c)
		}
	}
	for i, row := range thr {
		if len(row) != n {
			return fmt.Errorf("%w: job %d has %d throughputs for %d GPU types", errLPInput, i, len(row), n)
		}
		for k, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("%w: thr[%d][%d] = %v", errLPInput, i, k, v)
			}
		}
		if !(scale[i] > 0) || math.IsInf(scale[i], 0) {
			return fmt.Errorf("%w: scale[%d] = %v", errLPInput, i, scale[i])
		}
	}
	for name, v := range perJob {
		if v == nil {
			continue
		}
		if len(v) != m {
			return fmt.Errorf("%w: %d jobs but %d %s", errLPInput, m, len(v), name)
		}
		for i, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: %s[%d] = %v", errLPInput, name, i, x)
			}
		}
	}
	return nil
}

// zeroAlloc returns an m x n zero matrix.
func zeroAlloc(m, n int) [][]float64 {
	X := make([][]float64, m)
	for i := range X {
		X[i] = make([]float64, n)
	}
	return X
}

// runnable reports whether job i can run on some type with capacity.
func runnable(thrRow, capacity []float64) bool {
	for k, v := range thrRow {
		if v > 0 && capacity[k] > 0 {
			return true
		}
	}
	return false
}

// solveSubset runs solveMaxMin on the jobs listed in idx (util rows
// already built for them) and scatters the result into an m x n matrix.
func solveSubset(m int, idx []int, util [][]float64, scale, capacity []float64) ([][]float64, float64, error) {
	X := zeroAlloc(m, len(capacity))
	if len(idx) == 0 {
		return X, 0, nil
	}
	size := make([]float64, len(idx))
	for j, i := range idx {
		size[j] = scale[i]
	}
	sub, z, err := solveMaxMin(util, size, capacity)
	if err != nil {
		return nil, 0, err
	}
	for j, i := range idx {
		X[i] = sub[j]
	}
	return X, z, nil
}

// proportionalThroughputs returns Gavel's ProportionalPolicy throughputs:
// every job gets the same slice of every type, x_prop[i][k] =
// capacity[k]/sum(capacity), and p_i = sum_k thr[i][k]*x_prop[i][k]. All 0
// if the cluster is empty.
func proportionalThroughputs(thr [][]float64, capacity []float64) []float64 {
	total := 0.0
	for _, c := range capacity {
		total += c
	}
	p := make([]float64, len(thr))
	if total <= 0 {
		return p
	}
	for i, row := range thr {
		for k, v := range row {
			p[i] += v * capacity[k] / total
		}
	}
	return p
}

// isolatedThroughputs returns Gavel's IsolatedPolicy throughputs, the
// yardstick of finish-time fairness: job i gets 1/numJobs of every type,
// counted in gang slots, x_iso[i][k] = capacity[k]/(numJobs*scale[i]),
// scaled down so the row sums to at most 1, and iso_i = sum_k
// thr[i][k]*x_iso[i][k]. numJobs <= 0 means len(thr).
func isolatedThroughputs(thr [][]float64, scale []float64, numJobs int, capacity []float64) []float64 {
	if numJobs <= 0 {
		numJobs = len(thr)
	}
	iso := make([]float64, len(thr))
	for i, row := range thr {
		sum := 0.0
		for _, c := range capacity {
			sum += c / (float64(numJobs) * scale[i])
		}
		norm := math.Max(sum, 1)
		for k, v := range row {
			iso[i] += v * capacity[k] / (float64(numJobs) * scale[i]) / norm
		}
	}
	return iso
}

// maxMinFairnessAlloc is Gavel's max_min_fairness_perf
// (MaxMinFairnessPolicyWithPerf, the heterogeneity-aware LAS policy):
//
//	maximize  t
//	s.t.      t <= scale[i] * sum_k thr[i][k]*X[i][k] / (weights[i] * p_i)   for every job i
//	          plus the common constraints,
//
// where p_i = proportionalThroughputs(thr, capacity)[i] is the job's
// throughput under an equal share of every type. Jobs with p_i = 0 (no
// throughput on any type with capacity) are left out and get a zero row.
// weights nil means all 1; weights must otherwise be > 0.
//
// The heterogeneity-agnostic max_min_fairness is the same LP with thr[i][k]
// replaced by 1 wherever job i can run; the caller does that substitution.
//
// It is a single LP, as in Gavel (no water-filling), so only the minimum is
// maximised: jobs above the bottleneck get some optimal share, the one an
// interior-point solve gives (near the centre of the optimal face: equal jobs
// get equal rows), not a lexicographic max-min. With ample capacity every
// job gets a row summing to 1.
func maxMinFairnessAlloc(thr [][]float64, scale, weights, capacity []float64) ([][]float64, error) {
	if err := checkGavelInputs(thr, scale, capacity, map[string][]float64{"weights": weights}); err != nil {
		return nil, err
	}
	m := len(thr)
	p := proportionalThroughputs(thr, capacity)
	var idx []int
	var util [][]float64
	for i, row := range thr {
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		if !(w > 0) {
			return nil, fmt.Errorf("%w: weights[%d] = %v", errLPInput, i, w)
		}
		if p[i] <= 0 || !runnable(row, capacity) {
			continue
		}
		u := make([]float64, len(row))
		for k, v := range row {
			u[k] = scale[i] * v / (w * p[i])
		}
		idx = append(idx, i)
		util = append(util, u)
	}
	X, _, err := solveSubset(m, idx, util, scale, capacity)
	if err != nil {
		return nil, fmt.Errorf("max_min_fairness_perf: %w", err)
	}
	return X, nil
}

// minTotalDurationAlloc is Gavel's min_total_duration_perf (the makespan
// policy): the smallest T such that some X lets every job finish within T,
// thr_i(X)*T >= remainingSteps[i] with thr_i(X) = sum_k thr[i][k]*X[i][k].
// It returns that X and T in seconds.
//
// Gavel bisects T (from [100 s, 1e6 s], growing 10x as needed, stopping at a
// 5% bracket) with a feasibility LP per step. Substituting z = 1/T makes it
// one exact LP instead, maximize z s.t. thr_i(X) >= remainingSteps[i]*z,
// which is what is solved here: T is the optimum (within solver tolerance,
// ~1e-9 relative) rather than up to 5% above it, and it takes one solve
// instead of ~20. T is recomputed from the returned X, as
// max_i remainingSteps[i]/thr_i(X).
//
// Jobs with remainingSteps <= 0 impose nothing and get a zero row; so do jobs
// that cannot run on any type with capacity (for them no T exists; Gavel's
// search would never end). With no job left, T = 0.
func minTotalDurationAlloc(thr [][]float64, scale, remainingSteps, capacity []float64) ([][]float64, float64, error) {
	if err := checkGavelInputs(thr, scale, capacity, map[string][]float64{"remainingSteps": remainingSteps}); err != nil {
		return nil, 0, err
	}
	if remainingSteps == nil && len(thr) > 0 {
		return nil, 0, fmt.Errorf("%w: remainingSteps is nil", errLPInput)
	}
	m := len(thr)
	var idx []int
	var util [][]float64
	for i, row := range thr {
		if remainingSteps[i] <= 0 || !runnable(row, capacity) {
			continue
		}
		u := make([]float64, len(row))
		for k, v := range row {
			u[k] = v / remainingSteps[i]
		}
		idx = append(idx, i)
		util = append(util, u)
	}
	X, z, err := solveSubset(m, idx, util, scale, capacity)
	if err != nil {
		return nil, 0, fmt.Errorf("min_total_duration_perf: %w", err)
	}
	if len(idx) == 0 {
		return X, 0, nil
	}
	if !(z > 0) {
		return nil, 0, fmt.Errorf("min_total_duration_perf: %w: zero throughput at the optimum", errLPNumerical)
	}
	return X, 1 / z, nil
}

// Finish-time fairness bisection: relative tolerance on rho and cap on the
// number of LP solves.
const (
	ftfRelTol   = 1e-3
	ftfMaxSolve = 64
)

// finishTimeFairnessAlloc is Gavel's finish_time_fairness_perf
// (FinishTimeFairnessPolicyWithPerf): minimize max_i weights[i]*rho_i(X) with
//
//	rho_i(X) = (elapsed_i + remaining_i/thr_i(X)) / (isolatedElapsed_i + remaining_i/iso_i)
//
// where elapsed_i = elapsedSinceArrival[i] (s), thr_i(X) = sum_k
// thr[i][k]*X[i][k], iso_i = isolatedThroughputs(thr, scale,
// numJobsForIsolated, capacity)[i] (1/numJobsForIsolated of every type), and
// isolatedElapsed_i is the time job i would have needed in isolation for
// the work it has done so far. Gavel keeps the latter as state, adding
// (steps done since the previous solve)/iso_i(previous solve) at every
// recomputation; the caller does that bookkeeping and passes the total (nil
// means all 0, Gavel's value at a job's first solve). It returns X and the
// achieved max_i weights[i]*rho_i(X).
//
// weights nil means all 1. Gavel reads but ignores its priority weights here
// (a TODO in its code), so pass nil to match it; with weights, w_i*rho_i is
// equalised, so a heavier job gets a smaller rho.
//
// Gavel minimises the convex objective directly with cvxpy (inv_pos). Here it
// is solved by bisection on the target R: rho_i(X) <= R/w_i is the linear
// constraint thr_i(X) >= remaining_i / (R*D_i/w_i - elapsed_i) (D_i the
// denominator; infeasible when R*D_i/w_i <= elapsed_i), so each step is the
// max-min LP "maximize z s.t. thr_i(X) >= z * need_i(R)", feasible iff z >= 1.
// R is bracketed from below by each job's best possible rho and from above by
// doubling, then bisected (geometric midpoints) until the bracket is within a
// relative 1e-3, with at most 64 LP solves. The returned X is the allocation
// of the smallest feasible R found; as the LP maximises z, jobs get their
// required throughput scaled up by a common factor, not the bare minimum.
//
// Jobs with remainingSteps <= 0 or that cannot run on any type with capacity
// are left out with a zero row. With no job left, rho = 0.
func finishTimeFairnessAlloc(thr [][]float64, scale, weights, remainingSteps, elapsedSinceArrival, isolatedElapsed []float64, numJobsForIsolated int, capacity []float64) ([][]float64, float64, error) {
	err := checkGavelInputs(thr, scale, capacity, map[string][]float64{
		"weights": weights, "remainingSteps": remainingSteps,
		"elapsedSinceArrival": elapsedSinceArrival, "isolatedElapsed": isolatedElapsed,
	})
	if err != nil {
		return nil, 0, err
	}
	m, n := len(thr), len(capacity)
	if m > 0 && (remainingSteps == nil || elapsedSinceArrival == nil) {
		return nil, 0, fmt.Errorf("%w: remainingSteps and elapsedSinceArrival are required", errLPInput)
	}
	iso := isolatedThroughputs(thr, scale, numJobsForIsolated, capacity)

	type ftfJob struct {
		i            int
		w, e, r, den float64
	}
	var jobs []ftfJob
	lo := 0.0
	for i, row := range thr {
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		if !(w > 0) {
			return nil, 0, fmt.Errorf("%w: weights[%d] = %v", errLPInput, i, w)
		}
		if remainingSteps[i] <= 0 || !runnable(row, capacity) || iso[i] <= 0 {
			continue
		}
		j := ftfJob{i: i, w: w, e: math.Max(0, elapsedSinceArrival[i]), r: remainingSteps[i]}
		isoE := 0.0
		if isolatedElapsed != nil {
			isoE = math.Max(0, isolatedElapsed[i])
		}
		j.den = isoE + j.r/iso[i]
		// Best throughput job i could possibly get: all its time on one
		// type, at most capacity/scale of it.
		best, sum := 0.0, 0.0
		for k, v := range row {
			if capacity[k] > 0 {
				best = math.Max(best, v)
				sum += v * math.Min(1, capacity[k]/scale[i])
			}
		}
		lo = math.Max(lo, w*(j.e+j.r/math.Min(best, sum))/j.den)
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return zeroAlloc(m, n), 0, nil
	}
	idx := make([]int, len(jobs))
	for j, jb := range jobs {
		idx[j] = jb.i
	}
	// maxRho returns max_j w_j*rho_j(X).
	maxRho := func(X [][]float64) float64 {
		worst := 0.0
		for _, jb := range jobs {
			u := 0.0
			for k, v := range thr[jb.i] {
				u += v * X[jb.i][k]
			}
			if u <= 0 {
				return math.Inf(1)
			}
			worst = math.Max(worst, jb.w*(jb.e+jb.r/u)/jb.den)
		}
		return worst
	}
	util := make([][]float64, len(jobs))
	for j := range util {
		util[j] = make([]float64, n)
	}
	solves := 0
	// try solves the LP for target R and returns its X and achieved max
	// rho, or nil if R is infeasible.
	try := func(R float64) ([][]float64, float64, error) {
		solves++
		for j, jb := range jobs {
			slack := R*jb.den/jb.w - jb.e
			if slack <= 0 {
				return nil, 0, nil
			}
			need := jb.r / slack // required steps/s
			for k, v := range thr[jb.i] {
				util[j][k] = v / need
			}
		}
		X, z, err := solveSubset(m, idx, util, scale, capacity)
		if err != nil {
			return nil, 0, err
		}
		if z < 1-1e-9 {
			return nil, 0, nil
		}
		return X, maxRho(X), nil
	}

	var best [][]float64
	bestRho, hi := math.Inf(1), math.Inf(1)
	// record keeps the best allocation; a feasible R and the achieved rho
	// both bound the optimum from above.
	record := func(X [][]float64, rho, R float64) {
		if rho < bestRho {
			best, bestRho = X, rho
		}
		hi = math.Min(hi, math.Min(R, rho))
	}
	// probe solves at R: an infeasible R raises the lower bound, a feasible
	// one is recorded.
	probe := func(R float64) error {
		X, rho, err := try(R)
		if err != nil {
			return fmt.Errorf("finish_time_fairness_perf: %w", err)
		}
		if X == nil {
			lo = R
			return nil
		}
		record(X, rho, R)
		return nil
	}
	for R := lo; best == nil && solves < ftfMaxSolve; R *= 2 {
		if err := probe(R); err != nil {
			return nil, 0, err
		}
	}
	if best == nil {
		return nil, 0, fmt.Errorf("finish_time_fairness_perf: %w: no feasible rho found up to %g", errLPNumerical, lo)
	}
	for hi-lo > ftfRelTol*hi && solves < ftfMaxSolve {
		R := math.Sqrt(lo * hi)
		if !(R > lo && R < hi) {
			R = (lo + hi) / 2
		}
		if err := probe(R); err != nil {
			return nil, 0, err
		}
	}
	return best, bestRho, nil
}
