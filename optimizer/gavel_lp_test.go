package optimizer

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// maxMinValue is max_min_fairness_perf's objective for X: min over the jobs
// with p_i > 0 of scale_i * thr_i·X_i / (w_i * p_i).
func maxMinValue(X, thr [][]float64, scale, weights, capacity []float64) float64 {
	p := proportionalThroughputs(thr, capacity)
	t := math.Inf(1)
	for i, row := range thr {
		if p[i] <= 0 {
			continue
		}
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		u := 0.0
		for k, v := range row {
			u += v * X[i][k]
		}
		t = math.Min(t, scale[i]*u/(w*p[i]))
	}
	return t
}

// ones returns n ones.
func ones(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func TestMaxMinFairnessLP(t *testing.T) {
	tests := []struct {
		name     string
		thr      [][]float64
		scale    []float64
		weights  []float64
		capacity []float64
		// wantX is checked when the optimum is unique; wantT always.
		wantX [][]float64
		wantT float64
		// check runs extra assertions for non-unique optima.
		check func(t *testing.T, X [][]float64)
	}{
		{
			// p = (2*4+1*4)/8 = 1.5 for all; three jobs fit on the 4 fast GPUs.
			name:     "equal jobs, ample fast GPUs",
			thr:      [][]float64{{2, 1}, {2, 1}, {2, 1}},
			scale:    []float64{1, 1, 1},
			capacity: []float64{4, 4},
			wantX:    [][]float64{{1, 0}, {1, 0}, {1, 0}},
			wantT:    2 / 1.5,
		},
		{
			// A is 3x faster on type 1, B 1.2x; with one GPU of each type the
			// normalised trade is zero-sum, so the equal split is the unique
			// optimum (both rows and type 1 tight; u_A = (1+2a)/2 = 1 forces a = 1/2).
			name:     "3x vs 1.2x on equal pools: equal split",
			thr:      [][]float64{{1, 3}, {1, 1.2}},
			scale:    []float64{1, 1},
			capacity: []float64{1, 1},
			wantX:    [][]float64{{0.5, 0.5}, {0.5, 0.5}},
			wantT:    1,
		},
		{
			// A prefers type 1 (3x), B prefers type 0 (1.2x): each gets its
			// favourite type. B is the bottleneck at 1.2/1.1; A needs only
			// 3a/2 >= 12/11, a >= 8/11, of type 1.
			name:     "opposite preferences: each gets its fast type",
			thr:      [][]float64{{1, 3}, {1.2, 1}},
			scale:    []float64{1, 1},
			capacity: []float64{1, 1},
			wantT:    1.2 / 1.1,
			check: func(t *testing.T, X [][]float64) {
				approx := cmpopts.EquateApprox(0, 1e-6)
				if diff := cmp.Diff([]float64{1, 0}, X[1], approx); diff != "" {
					t.Errorf("job B row (-want +got):\n%s", diff)
				}
				if X[0][0] > 1e-6 || X[0][1] < 8.0/11-1e-6 {
					t.Errorf("job A row = %v, want [0, >= 8/11]", X[0])
				}
			},
		},
		{
			// t <= x0/1 and t <= x1/3 on one GPU: x = (1/4, 3/4).
			name:     "weights",
			thr:      [][]float64{{5}, {5}},
			scale:    []float64{1, 1},
			weights:  []float64{1, 3},
			capacity: []float64{1},
			wantX:    [][]float64{{0.25}, {0.75}},
			wantT:    0.25,
		},
		{
			// t <= x0 and t <= 2*x1, x0 + 2*x1 <= 2: the 1-GPU job gets twice
			// the time of the 2-GPU job.
			name:     "scale factors",
			thr:      [][]float64{{1}, {1}},
			scale:    []float64{1, 2},
			capacity: []float64{2},
			wantX:    [][]float64{{1}, {0.5}},
			wantT:    1,
		},
		{
			name:     "job that cannot run gets a zero row",
			thr:      [][]float64{{0, 0}, {1, 1}, {0, 4}},
			scale:    []float64{1, 1, 1},
			capacity: []float64{2, 0},
			// Job 2 only runs on type 1, which has no GPU: p = 0.
			wantX: [][]float64{{0, 0}, {1, 0}, {0, 0}},
			wantT: 1,
		},
		{
			// Job 0 only runs on type 1; X[0][0] must stay 0 although
			// the LP would not care.
			name:     "zero throughput entry stays zero",
			thr:      [][]float64{{0, 2}, {1, 1}},
			scale:    []float64{1, 1},
			capacity: []float64{1, 1},
			wantT:    1,
			check: func(t *testing.T, X [][]float64) {
				if X[0][0] != 0 {
					t.Errorf("X[0][0] = %v, want exactly 0", X[0][0])
				}
				if s := X[1][0] + X[1][1]; math.Abs(s-1) > 1e-6 {
					t.Errorf("job 1 row sums to %v, want 1", s)
				}
			},
		},
		{
			name:     "no jobs",
			thr:      [][]float64{},
			scale:    []float64{},
			capacity: []float64{3},
			wantX:    [][]float64{},
			wantT:    math.Inf(1),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			X, err := maxMinFairnessAlloc(tc.thr, tc.scale, tc.weights, tc.capacity)
			if err != nil {
				t.Fatalf("maxMinFairnessAlloc: %v", err)
			}
			checkAlloc(t, X, tc.thr, tc.scale, tc.capacity)
			approx := cmpopts.EquateApprox(0, 1e-6)
			if tc.wantX != nil {
				if diff := cmp.Diff(tc.wantX, X, approx, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("X mismatch (-want +got):\n%s", diff)
				}
			}
			got := maxMinValue(X, tc.thr, tc.scale, tc.weights, tc.capacity)
			if diff := cmp.Diff(tc.wantT, got, approx); diff != "" {
				t.Errorf("objective t mismatch (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, X)
			}
		})
	}
}

// TestMaxMinFairnessLPAmpleCapacity: equal jobs with room for all get rows
// summing to 1, and identical rows (the agnostic policy's all-ones
// throughputs, whose optimum is a whole face).
func TestMaxMinFairnessLPAmpleCapacity(t *testing.T) {
	thr := [][]float64{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}
	X, err := maxMinFairnessAlloc(thr, ones(4), nil, []float64{2, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	checkAlloc(t, X, thr, ones(4), []float64{2, 2, 2})
	approx := cmpopts.EquateApprox(0, 1e-6)
	for i, row := range X {
		if diff := cmp.Diff(1.0, row[0]+row[1]+row[2], approx); diff != "" {
			t.Errorf("row %d sum (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(X[0], row, approx); diff != "" {
			t.Errorf("row %d differs from row 0 (-want +got):\n%s", i, diff)
		}
	}
}

func TestMinTotalDurationLP(t *testing.T) {
	tests := []struct {
		name      string
		thr       [][]float64
		scale     []float64
		remaining []float64
		capacity  []float64
		wantX     [][]float64
		wantT     float64
	}{
		{
			// A can do at most 3 steps/s (all of type 1): T >= 3600/3 =
			// 1200, and B then gets type 0 at 1 step/s: 1200 s too.
			name:      "A 3x faster on type 1",
			thr:       [][]float64{{1, 3}, {1, 1.2}},
			scale:     []float64{1, 1},
			remaining: []float64{3600, 1200},
			capacity:  []float64{1, 1},
			wantX:     [][]float64{{0, 1}, {1, 0}},
			wantT:     1200,
		},
		{
			// One GPU, 400 steps of work at 1 step/s: shares 1/4, 3/4.
			name:      "one GPU shared by work",
			thr:       [][]float64{{1}, {1}},
			scale:     []float64{1, 1},
			remaining: []float64{100, 300},
			capacity:  []float64{1},
			wantX:     [][]float64{{0.25}, {0.75}},
			wantT:     400,
		},
		{
			// 2*x0 >= 100/T, 2*x1 >= 100/T, x0 + 2*x1 <= 2: x = 2/3, T = 75.
			name:      "gang job takes two GPUs",
			thr:       [][]float64{{2}, {2}},
			scale:     []float64{1, 2},
			remaining: []float64{100, 100},
			capacity:  []float64{2},
			wantX:     [][]float64{{2.0 / 3}, {2.0 / 3}},
			wantT:     75,
		},
		{
			name:      "finished and unrunnable jobs get zero rows",
			thr:       [][]float64{{1}, {0}, {1}},
			scale:     []float64{1, 1, 1},
			remaining: []float64{100, 50, 0},
			capacity:  []float64{1},
			wantX:     [][]float64{{1}, {0}, {0}},
			wantT:     100,
		},
		{
			name:      "nothing left to run",
			thr:       [][]float64{{1}},
			scale:     []float64{1},
			remaining: []float64{0},
			capacity:  []float64{1},
			wantX:     [][]float64{{0}},
			wantT:     0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			X, T, err := minTotalDurationAlloc(tc.thr, tc.scale, tc.remaining, tc.capacity)
			if err != nil {
				t.Fatalf("minTotalDurationAlloc: %v", err)
			}
			checkAlloc(t, X, tc.thr, tc.scale, tc.capacity)
			approx := cmpopts.EquateApprox(0, 1e-6)
			if diff := cmp.Diff(tc.wantX, X, approx); diff != "" {
				t.Errorf("X mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantT, T, approx); diff != "" {
				t.Errorf("T mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFinishTimeFairnessLP(t *testing.T) {
	tests := []struct {
		name      string
		thr       [][]float64
		scale     []float64
		weights   []float64
		remaining []float64
		elapsed   []float64
		isoDone   []float64
		numJobs   int
		capacity  []float64
		wantX     [][]float64 // nil: not unique
		wantRho   float64
		check     func(t *testing.T, X [][]float64)
	}{
		{
			// iso = 1/2 step/s each, rho_i = (100/x_i)/200.
			name:      "two equal new jobs",
			thr:       [][]float64{{1}, {1}},
			scale:     []float64{1, 1},
			remaining: []float64{100, 100},
			elapsed:   []float64{0, 0},
			capacity:  []float64{1},
			wantX:     [][]float64{{0.5}, {0.5}},
			wantRho:   1,
		},
		{
			// rho_A = (100 + 100/x)/(50 + 200), rho_B = (100/(1-x))/200:
			// equal at 0.4x² + 0.5x - 0.4 = 0, x = 0.554248, rho = 1.121714.
			name:      "older job gets more",
			thr:       [][]float64{{1}, {1}},
			scale:     []float64{1, 1},
			remaining: []float64{100, 100},
			elapsed:   []float64{100, 0},
			isoDone:   []float64{50, 0},
			capacity:  []float64{1},
			wantX:     [][]float64{{0.554248}, {1 - 0.554248}},
			wantRho:   1.121714,
		},
		{
			// w*rho: 0.5/x0 and 2*0.5/x1 equal at x = (1/3, 2/3).
			name:      "weights",
			thr:       [][]float64{{1}, {1}},
			scale:     []float64{1, 1},
			weights:   []float64{1, 2},
			remaining: []float64{100, 100},
			elapsed:   []float64{0, 0},
			capacity:  []float64{1},
			wantX:     [][]float64{{1.0 / 3}, {2.0 / 3}},
			wantRho:   1.5,
		},
		{
			// Alone on 1/4 of the GPU the job would take 400 s; it gets the
			// whole GPU: rho = 100/400.
			name:      "numJobsForIsolated",
			thr:       [][]float64{{1}},
			scale:     []float64{1},
			remaining: []float64{100},
			elapsed:   []float64{0},
			numJobs:   4,
			capacity:  []float64{1},
			wantX:     [][]float64{{1}},
			wantRho:   0.25,
		},
		{
			// A runs only on type 1 (iso_A = 2*1/2 = 1), B on both (iso_B =
			// 1). B can reach at most 1 step/s: rho = 1, A needs x_A1 >= 1/2.
			name:      "heterogeneous",
			thr:       [][]float64{{0, 2}, {1, 1}},
			scale:     []float64{1, 1},
			remaining: []float64{100, 100},
			elapsed:   []float64{0, 0},
			capacity:  []float64{1, 1},
			wantRho:   1,
			check: func(t *testing.T, X [][]float64) {
				if X[0][0] != 0 || X[0][1] < 0.5*(1-2e-3) {
					t.Errorf("job A row = %v, want [0, >= 1/2]", X[0])
				}
			},
		},
		{
			name:      "finished and unrunnable jobs get zero rows",
			thr:       [][]float64{{1}, {0}, {1}},
			scale:     []float64{1, 1, 1},
			remaining: []float64{100, 100, 0},
			elapsed:   []float64{0, 0, 0},
			numJobs:   1,
			capacity:  []float64{1},
			wantX:     [][]float64{{1}, {0}, {0}},
			wantRho:   1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			X, rho, err := finishTimeFairnessAlloc(tc.thr, tc.scale, tc.weights, tc.remaining, tc.elapsed, tc.isoDone, tc.numJobs, tc.capacity)
			if err != nil {
				t.Fatalf("finishTimeFairnessAlloc: %v", err)
			}
			checkAlloc(t, X, tc.thr, tc.scale, tc.capacity)
			// Bisection to 1e-3 relative: allow a little more.
			approx := cmpopts.EquateApprox(2e-3, 1e-6)
			if tc.wantX != nil {
				if diff := cmp.Diff(tc.wantX, X, approx); diff != "" {
					t.Errorf("X mismatch (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantRho, rho, approx); diff != "" {
				t.Errorf("rho mismatch (-want +got):\n%s", diff)
			}
			if rho < tc.wantRho*(1-1e-9) {
				t.Errorf("rho = %v below the optimum %v", rho, tc.wantRho)
			}
			if tc.check != nil {
				tc.check(t, X)
			}
		})
	}
}

func TestGavelLPBadInput(t *testing.T) {
	thr := [][]float64{{1, 2}}
	tests := []struct {
		name string
		call func() error
	}{
		{"scale length", func() error { _, err := maxMinFairnessAlloc(thr, nil, nil, []float64{1, 1}); return err }},
		{"ragged thr", func() error { _, err := maxMinFairnessAlloc(thr, []float64{1}, nil, []float64{1}); return err }},
		{"negative capacity", func() error { _, err := maxMinFairnessAlloc(thr, []float64{1}, nil, []float64{1, -1}); return err }},
		{"NaN throughput", func() error {
			_, err := maxMinFairnessAlloc([][]float64{{math.NaN(), 1}}, []float64{1}, nil, []float64{1, 1})
			return err
		}},
		{"zero weight", func() error {
			_, err := maxMinFairnessAlloc(thr, []float64{1}, []float64{0}, []float64{1, 1})
			return err
		}},
		{"zero scale", func() error {
			_, _, err := minTotalDurationAlloc(thr, []float64{0}, []float64{1}, []float64{1, 1})
			return err
		}},
		{"remaining missing", func() error { _, _, err := minTotalDurationAlloc(thr, []float64{1}, nil, []float64{1, 1}); return err }},
		{"elapsed length", func() error {
			_, _, err := finishTimeFairnessAlloc(thr, []float64{1}, nil, []float64{1}, []float64{1, 2}, nil, 0, []float64{1, 1})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, errLPInput) {
				t.Errorf("error = %v, want %v", err, errLPInput)
			}
		})
	}
}

// randomGavelInstance draws m jobs on n types with zeros in throughput and
// capacity, some jobs unable to run, remaining work and ages.
func randomGavelInstance(r *rand.Rand) (thr [][]float64, scale, remaining, elapsed, capacity []float64) {
	m, n := 1+r.IntN(20), 1+r.IntN(4)
	capacity = make([]float64, n)
	for k := range capacity {
		if r.IntN(5) > 0 {
			capacity[k] = float64(r.IntN(12))
		}
	}
	scales := []float64{1, 1, 1, 1, 2, 4, 8}
	for i := 0; i < m; i++ {
		row := make([]float64, n)
		for k := range row {
			if r.IntN(4) > 0 {
				row[k] = math.Exp(3 * (r.Float64() - 0.3))
			}
		}
		thr = append(thr, row)
		scale = append(scale, scales[r.IntN(len(scales))])
		rem := 0.0
		if r.IntN(8) > 0 {
			rem = 100 * math.Exp(4*r.Float64())
		}
		remaining = append(remaining, rem)
		elapsed = append(elapsed, 1000*r.Float64())
	}
	return thr, scale, remaining, elapsed, capacity
}

// referenceMaxMin solves max_min_fairness_perf as written in Gavel (no
// rescaling, no reduction) with gonum's Simplex and returns t.
func referenceMaxMin(t *testing.T, thr [][]float64, scale, capacity []float64) float64 {
	t.Helper()
	p := proportionalThroughputs(thr, capacity)
	var b lpBuilder
	tv := b.AddVar(-1)
	vars := make([][]int, len(thr))
	colIdx := make([][]int, len(capacity))
	colCoef := make([][]float64, len(capacity))
	any := false
	for i, row := range thr {
		vars[i] = make([]int, len(row))
		var idx []int
		var coef, one []float64
		for k, v := range row {
			vars[i][k] = -1
			if v == 0 {
				continue
			}
			vars[i][k] = b.AddVar(0)
			idx = append(idx, vars[i][k])
			coef = append(coef, scale[i]*v/p[i])
			one = append(one, 1)
			colIdx[k] = append(colIdx[k], vars[i][k])
			colCoef[k] = append(colCoef[k], scale[i])
		}
		if p[i] <= 0 {
			continue
		}
		any = true
		b.AddLE(idx, one, 1)
		// t - util·x <= 0
		neg := make([]float64, len(coef))
		for j, c := range coef {
			neg[j] = -c
		}
		b.AddLE(append([]int{tv}, idx...), append([]float64{1}, neg...), 0)
	}
	if !any {
		return math.Inf(1)
	}
	for k := range capacity {
		if len(colIdx[k]) > 0 {
			b.AddLE(colIdx[k], colCoef[k], capacity[k])
		}
	}
	x, _, err := b.Solve()
	if err != nil {
		t.Fatalf("reference LP: %v", err)
	}
	return x[tv]
}

// TestGavelLPRandomInstances is a property test over seeded random
// instances: every constraint holds for all three policies, ignored jobs get
// zero rows, the reported T and rho match the returned X, and max-min
// fairness and min-total-duration reach the optimum of Gavel's LP as
// written (solved independently with gonum's Simplex).
func TestGavelLPRandomInstances(t *testing.T) {
	r := rand.New(rand.NewPCG(2024, 5))
	for trial := 0; trial < 150; trial++ {
		thr, scale, remaining, elapsed, capacity := randomGavelInstance(r)
		canRun := make([]bool, len(thr))
		for i, row := range thr {
			canRun[i] = runnable(row, capacity)
		}

		X, err := maxMinFairnessAlloc(thr, scale, nil, capacity)
		if err != nil {
			t.Fatalf("trial %d: maxMinFairnessAlloc: %v", trial, err)
		}
		checkAlloc(t, X, thr, scale, capacity)
		got := maxMinValue(X, thr, scale, nil, capacity)
		if want := referenceMaxMin(t, thr, scale, capacity); math.Abs(got-want) > 1e-6*math.Max(1, want) && !(math.IsInf(got, 1) && math.IsInf(want, 1)) {
			t.Errorf("trial %d: max-min t = %.10g, Gavel's LP optimum %.10g", trial, got, want)
		}

		X, T, err := minTotalDurationAlloc(thr, scale, remaining, capacity)
		if err != nil {
			t.Fatalf("trial %d: minTotalDurationAlloc: %v", trial, err)
		}
		checkAlloc(t, X, thr, scale, capacity)
		worst := 0.0
		for i, row := range X {
			u := 0.0
			for k, v := range row {
				u += thr[i][k] * v
			}
			if !canRun[i] || remaining[i] <= 0 {
				if u != 0 {
					t.Errorf("trial %d: ignored job %d got throughput %v", trial, i, u)
				}
				continue
			}
			worst = math.Max(worst, remaining[i]/u)
		}
		if math.Abs(worst-T) > 1e-9*T {
			t.Errorf("trial %d: T = %v but X finishes at %v", trial, T, worst)
		}
		// Makespan optimum cross-check: T*z = 1 in the LP with util = thr/rem.
		var util [][]float64
		var size []float64
		for i, row := range thr {
			if canRun[i] && remaining[i] > 0 {
				u := make([]float64, len(row))
				for k, v := range row {
					u[k] = v / remaining[i]
				}
				util = append(util, u)
				size = append(size, scale[i])
			}
		}
		if len(util) > 0 {
			p, err := newMaxMinIPM(util, size, capacity)
			if err != nil {
				t.Fatal(err)
			}
			xe, err := p.solveSimplex()
			if err != nil {
				t.Fatalf("trial %d: simplex: %v", trial, err)
			}
			Xs := zeroAlloc(len(util), len(capacity))
			for i := 0; i < p.m; i++ {
				for e := p.start[i]; e < p.start[i+1]; e++ {
					Xs[i][p.typ[e]] = xe[e]
				}
			}
			if zs := repairAlloc(Xs, util, size, capacity); math.Abs(T*zs-1) > 1e-6 {
				t.Errorf("trial %d: T = %v, simplex optimum %v", trial, T, 1/zs)
			}
		}

		X, rho, err := finishTimeFairnessAlloc(thr, scale, nil, remaining, elapsed, nil, 0, capacity)
		if err != nil {
			t.Fatalf("trial %d: finishTimeFairnessAlloc: %v", trial, err)
		}
		checkAlloc(t, X, thr, scale, capacity)
		iso := isolatedThroughputs(thr, scale, 0, capacity)
		worst = 0
		for i, row := range X {
			u := 0.0
			for k, v := range row {
				u += thr[i][k] * v
			}
			if !canRun[i] || remaining[i] <= 0 {
				if u != 0 {
					t.Errorf("trial %d: ignored job %d got throughput %v", trial, i, u)
				}
				continue
			}
			worst = math.Max(worst, (elapsed[i]+remaining[i]/u)/(remaining[i]/iso[i]))
		}
		if math.Abs(worst-rho) > 1e-9*rho {
			t.Errorf("trial %d: rho = %v but X gives %v", trial, rho, worst)
		}
	}
}
