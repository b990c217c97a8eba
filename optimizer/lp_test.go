package optimizer

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLPBuilder(t *testing.T) {
	type row struct {
		ge   bool
		idx  []int
		coef []float64
		rhs  float64
	}
	tests := []struct {
		name    string
		cost    []float64
		rows    []row
		wantX   []float64
		wantObj float64
		wantErr error
	}{
		{
			// max x+y s.t. x+2y <= 4, 3x+y <= 6: vertex (1.6, 1.2).
			name: "two-var max",
			cost: []float64{-1, -1},
			rows: []row{
				{idx: []int{0, 1}, coef: []float64{1, 2}, rhs: 4},
				{idx: []int{0, 1}, coef: []float64{3, 1}, rhs: 6},
			},
			wantX: []float64{1.6, 1.2}, wantObj: -2.8,
		},
		{
			// min x+y s.t. x+y >= 2, x <= 0.5 (GE row: gonum's Phase I).
			name: "GE row",
			cost: []float64{1, 2},
			rows: []row{
				{ge: true, idx: []int{0, 1}, coef: []float64{1, 1}, rhs: 2},
				{idx: []int{0}, coef: []float64{1}, rhs: 0.5},
			},
			wantX: []float64{0.5, 1.5}, wantObj: 3.5,
		},
		{
			name: "repeated index is summed",
			cost: []float64{-1},
			rows: []row{{idx: []int{0, 0}, coef: []float64{1, 1}, rhs: 3}},
			// 2x <= 3.
			wantX: []float64{1.5}, wantObj: -1.5,
		},
		{
			name: "unused variable with cost >= 0 is 0",
			cost: []float64{-1, 5},
			rows: []row{{idx: []int{0}, coef: []float64{1}, rhs: 2}},
			// x1 appears nowhere.
			wantX: []float64{2, 0}, wantObj: -2,
		},
		{
			name:  "no constraints",
			cost:  []float64{1, 0},
			wantX: []float64{0, 0},
		},
		{
			name:    "no constraints, negative cost",
			cost:    []float64{-1},
			wantErr: errLPUnbounded,
		},
		{
			name:    "unbounded",
			cost:    []float64{-1, 0},
			rows:    []row{{idx: []int{0, 1}, coef: []float64{-1, 1}, rhs: 1}},
			wantErr: errLPUnbounded,
		},
		{
			name: "infeasible",
			cost: []float64{1},
			rows: []row{
				{ge: true, idx: []int{0}, coef: []float64{1}, rhs: 2},
				{idx: []int{0}, coef: []float64{1}, rhs: 1},
			},
			wantErr: errLPInfeasible,
		},
		{
			name:    "zero row with negative rhs",
			cost:    []float64{1},
			rows:    []row{{idx: []int{0}, coef: []float64{0}, rhs: -1}},
			wantErr: errLPInfeasible,
		},
		{
			name:    "index out of range",
			cost:    []float64{1},
			rows:    []row{{idx: []int{3}, coef: []float64{1}, rhs: 1}},
			wantErr: errLPInput,
		},
		{
			name:    "NaN coefficient",
			cost:    []float64{1},
			rows:    []row{{idx: []int{0}, coef: []float64{math.NaN()}, rhs: 1}},
			wantErr: errLPInput,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b lpBuilder
			for _, c := range tc.cost {
				b.AddVar(c)
			}
			for _, r := range tc.rows {
				if r.ge {
					b.AddGE(r.idx, r.coef, r.rhs)
				} else {
					b.AddLE(r.idx, r.coef, r.rhs)
				}
			}
			x, obj, err := b.Solve()
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Solve() error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Solve(): %v", err)
			}
			approx := cmpopts.EquateApprox(0, 1e-9)
			if diff := cmp.Diff(tc.wantX, x, approx); diff != "" {
				t.Errorf("x mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantObj, obj, approx); diff != "" {
				t.Errorf("objective mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// randomMaxMin draws a random solveMaxMin instance with zeros in util and
// capacity, every job able to run somewhere.
func randomMaxMin(r *rand.Rand) (util [][]float64, size, capacity []float64) {
	m, n := 1+r.IntN(25), 1+r.IntN(4)
	capacity = make([]float64, n)
	for k := range capacity {
		if r.IntN(5) > 0 {
			capacity[k] = float64(1 + r.IntN(10))
		}
	}
	capacity[r.IntN(n)] = float64(1 + r.IntN(10))
	sizes := []float64{1, 1, 1, 2, 4, 8}
	for i := 0; i < m; i++ {
		row := make([]float64, n)
		for !runnable(row, capacity) {
			for k := range row {
				row[k] = 0
				if r.IntN(4) > 0 {
					row[k] = math.Exp(4 * (r.Float64() - 0.5))
				}
			}
		}
		util = append(util, row)
		size = append(size, sizes[r.IntN(len(sizes))])
	}
	return util, size, capacity
}

// checkAlloc reports every broken constraint of X: bounds, row sums,
// capacity and zeros where util (or thr) is 0.
func checkAlloc(t testing.TB, X, util [][]float64, size, capacity []float64) {
	t.Helper()
	const tol = 1e-9
	if len(X) != len(util) {
		t.Fatalf("X has %d rows, want %d", len(X), len(util))
	}
	load := make([]float64, len(capacity))
	for i, row := range X {
		if len(row) != len(capacity) {
			t.Fatalf("X[%d] has %d entries, want %d", i, len(row), len(capacity))
		}
		sum := 0.0
		for k, v := range row {
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Errorf("X[%d][%d] = %v out of [0, 1]", i, k, v)
			}
			if util[i][k] == 0 && v != 0 {
				t.Errorf("X[%d][%d] = %v where throughput is 0", i, k, v)
			}
			sum += v
			load[k] += v * size[i]
		}
		if sum > 1+tol {
			t.Errorf("row %d sums to %v > 1", i, sum)
		}
	}
	for k, l := range load {
		if l > capacity[k]*(1+tol)+tol {
			t.Errorf("type %d loaded with %v GPUs > capacity %v", k, l, capacity[k])
		}
	}
}

// minUtil returns min_i util_i·X_i.
func minUtil(X, util [][]float64) float64 {
	z := math.Inf(1)
	for i, row := range X {
		u := 0.0
		for k, v := range row {
			u += util[i][k] * v
		}
		z = math.Min(z, u)
	}
	return z
}

// TestSolveMaxMinLPMatchesSimplex cross-checks the structured interior-point
// method against gonum's Simplex on random instances: same optimum, all
// constraints hold.
func TestSolveMaxMinLPMatchesSimplex(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 300; trial++ {
		util, size, capacity := randomMaxMin(r)
		X, z, err := solveMaxMin(util, size, capacity)
		if err != nil {
			t.Fatalf("trial %d: solveMaxMin: %v", trial, err)
		}
		checkAlloc(t, X, util, size, capacity)
		if got := minUtil(X, util); math.Abs(got-z) > 1e-12*(1+z) {
			t.Errorf("trial %d: returned z = %v, X achieves %v", trial, z, got)
		}
		p, err := newMaxMinIPM(util, size, capacity)
		if err != nil {
			t.Fatal(err)
		}
		// The IPM itself must converge (solveMaxMin would hide a failure
		// behind the Simplex fallback).
		if _, err := p.solve(); err != nil {
			t.Errorf("trial %d (m=%d n=%d): IPM: %v", trial, len(util), len(capacity), err)
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
		zs := repairAlloc(Xs, util, size, capacity)
		if math.Abs(z-zs) > 1e-7*math.Max(1, zs) {
			t.Errorf("trial %d (m=%d n=%d): IPM z = %.12g, simplex z = %.12g", trial, len(util), len(capacity), z, zs)
		}
	}
}

// TestSolveMaxMinLPSymmetric: identical jobs get identical rows, as with
// Gavel's interior-point solver (a simplex would give them different
// vertices).
func TestSolveMaxMinLPSymmetric(t *testing.T) {
	util := [][]float64{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {2, 2, 1}, {2, 2, 1}}
	size := []float64{1, 1, 1, 2, 2}
	capacity := []float64{2, 2, 1}
	X, _, err := solveMaxMin(util, size, capacity)
	if err != nil {
		t.Fatal(err)
	}
	checkAlloc(t, X, util, size, capacity)
	approx := cmpopts.EquateApprox(0, 1e-6)
	for _, pair := range [][2]int{{0, 1}, {0, 2}, {3, 4}} {
		if diff := cmp.Diff(X[pair[0]], X[pair[1]], approx); diff != "" {
			t.Errorf("identical jobs %d and %d got different rows (-%d +%d):\n%s", pair[0], pair[1], pair[0], pair[1], diff)
		}
	}
}

func TestSolveMaxMinLPBadInput(t *testing.T) {
	tests := []struct {
		name     string
		util     [][]float64
		size     []float64
		capacity []float64
	}{
		{"job cannot run", [][]float64{{0, 1}}, []float64{1}, []float64{1, 0}},
		{"negative util", [][]float64{{-1}}, []float64{1}, []float64{1}},
		{"zero size", [][]float64{{1}}, []float64{0}, []float64{1}},
		{"ragged", [][]float64{{1, 2}}, []float64{1}, []float64{1}},
		{"NaN capacity", [][]float64{{1}}, []float64{1}, []float64{math.NaN()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := solveMaxMin(tc.util, tc.size, tc.capacity); !errors.Is(err, errLPInput) {
				t.Errorf("solveMaxMin error = %v, want %v", err, errLPInput)
			}
		})
	}
}
