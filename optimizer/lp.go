package optimizer

// LP layer of Gavel's policies (see gavel_lp.go).
//
// Two solvers live here:
//
//   - lpBuilder: a small general-purpose builder over gonum's dense Simplex
//     (gonum.org/v1/gonum/optimize/convex/lp). It turns inequality rows into
//     standard form (one slack per row) and maps the "no constraints",
//     "infeasible" and "unbounded" outcomes to wrapped sentinel errors.
//   - solveMaxMin: a primal-dual interior-point method (Mehrotra
//     predictor-corrector) specialised to the one LP shape that all of
//     Gavel's policies reduce to: maximize z s.t. every job's utility >= z,
//     each job's time fractions sum to <= 1, per-type GPU capacity. With z
//     split into per-job copies (see maxMinIPM), its normal equations are
//     block tridiagonal (3x3 blocks, one per job) plus an n-row border (one
//     row per GPU type), so an iteration costs O(jobs * types^2) and a solve
//     takes 6-21 iterations on the benchmark instances.
//
// Measured on the 2-core development machine with go test -bench
// (gavel_lp_bench_test.go: n = 3 GPU types, 36:36:36 GPUs, Gavel-like jobs),
// time per max_min_fairness_perf solve:
//
//	jobs   gonum Simplex (dense)   solveMaxMin (structured IPM)
//	  10         1.1 ms                   0.07 ms
//	 100         0.77 s                   1.0 ms
//	 500         114 s                    6.2 ms
//	1000        > 15 min (stopped)        13 ms
//
// (min_total_duration_perf: 19 ms at 1000 jobs; finish_time_fairness_perf,
// which bisects over ~11 such LPs: 0.19 s at 1000 jobs.)
//
// gonum's Simplex solves dense (2m+n)x(2m+n) systems several times per pivot
// and needs O(m) pivots, so it is far beyond the ~2 s budget at 1000 jobs; it
// also failed (singular basis) on ~0.7% of random stress instances that the
// IPM solved. The IPM is pure Go, needs no cgo solver (GLPK, HiGHS), and is
// what the policies use; it is cross-checked against gonum's Simplex in the
// tests (same optimum to 1e-7, and 0 failures and a worst shortfall of 4e-8
// on 4000 adversarial random instances during development). The Simplex path
// remains as a fallback for problems of up to 100 jobs should the IPM ever
// fail to converge.
//
// A caveat that matters for reproducing Gavel: its LPs usually have many
// optimal solutions. Gavel solves them with cvxpy's default solver, ECOS,
// an interior-point method, which lands in the interior of the optimal face;
// a simplex method lands on a vertex instead (e.g. two identical jobs get
// different GPU types). The IPM here behaves like Gavel's: identical jobs
// get identical rows, and ties are split rather than given to one job. The
// exact point within the face still differs from ECOS's.

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Sentinel errors of the LP layer; returned errors wrap them.
var (
	errLPInfeasible = errors.New("lp: infeasible")
	errLPUnbounded  = errors.New("lp: unbounded")
	errLPNumerical  = errors.New("lp: numerical failure")
	errLPInput      = errors.New("lp: invalid input")
)

// lpBuilder accumulates a linear program
//
//	minimize  cost · x
//	s.t.      row_r · x <= rhs_r   (AddLE; AddGE rows are negated)
//	          x >= 0
//
// and solves it with gonum's dense Simplex. It is meant for small problems
// (a few hundred rows): the Simplex cost grows roughly with the cube of the
// row count. To maximize, negate the costs.
type lpBuilder struct {
	cost []float64
	rows []lpRow
}

type lpRow struct {
	idx  []int
	coef []float64
	rhs  float64
}

// AddVar adds a variable x >= 0 with the given objective coefficient and
// returns its index.
func (b *lpBuilder) AddVar(cost float64) int {
	b.cost = append(b.cost, cost)
	return len(b.cost) - 1
}

// AddLE adds the row sum_j coef[j]*x[idx[j]] <= rhs. Repeated indices are
// summed.
func (b *lpBuilder) AddLE(idx []int, coef []float64, rhs float64) {
	b.rows = append(b.rows, lpRow{
		idx:  append([]int(nil), idx...),
		coef: append([]float64(nil), coef...),
		rhs:  rhs,
	})
}

// AddGE adds the row sum_j coef[j]*x[idx[j]] >= rhs.
func (b *lpBuilder) AddGE(idx []int, coef []float64, rhs float64) {
	neg := make([]float64, len(coef))
	for j, c := range coef {
		neg[j] = -c
	}
	b.rows = append(b.rows, lpRow{idx: append([]int(nil), idx...), coef: neg, rhs: -rhs})
}

// Solve minimizes the objective and returns the optimal x and objective
// value. Errors wrap errLPInfeasible, errLPUnbounded, errLPInput (bad
// indices, NaN or infinite numbers) or errLPNumerical (gonum gave up).
//
// Variables that appear in no row are set to 0 (or make the problem
// unbounded if their cost is negative), rows with only zero coefficients
// are checked and dropped, so gonum never sees a zero row or column. When
// every right-hand side is >= 0 the slacks form a feasible starting basis
// and gonum's Phase I (which is very slow on large problems) is skipped.
func (b *lpBuilder) Solve() ([]float64, float64, error) {
	nv := len(b.cost)
	for j, c := range b.cost {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return nil, 0, fmt.Errorf("%w: cost of variable %d is %v", errLPInput, j, c)
		}
	}
	// Normalise rows: merge repeated indices, drop zeros.
	type dense struct {
		vals map[int]float64
		rhs  float64
	}
	used := make([]bool, nv)
	var rows []dense
	for r, row := range b.rows {
		if len(row.idx) != len(row.coef) {
			return nil, 0, fmt.Errorf("%w: row %d has %d indices and %d coefficients", errLPInput, r, len(row.idx), len(row.coef))
		}
		if math.IsNaN(row.rhs) || math.IsInf(row.rhs, 0) {
			return nil, 0, fmt.Errorf("%w: row %d has right-hand side %v", errLPInput, r, row.rhs)
		}
		vals := map[int]float64{}
		for j, v := range row.idx {
			if v < 0 || v >= nv {
				return nil, 0, fmt.Errorf("%w: row %d refers to variable %d of %d", errLPInput, r, v, nv)
			}
			c := row.coef[j]
			if math.IsNaN(c) || math.IsInf(c, 0) {
				return nil, 0, fmt.Errorf("%w: row %d has coefficient %v", errLPInput, r, c)
			}
			vals[v] += c
		}
		for v, c := range vals {
			if c == 0 {
				delete(vals, v)
			}
		}
		if len(vals) == 0 {
			if row.rhs < -1e-12 {
				return nil, 0, fmt.Errorf("%w: row %d reads 0 <= %g", errLPInfeasible, r, row.rhs)
			}
			continue
		}
		for v := range vals {
			used[v] = true
		}
		rows = append(rows, dense{vals: vals, rhs: row.rhs})
	}
	col := make([]int, nv) // variable -> column, -1 if unused
	ncols := 0
	for j := range b.cost {
		col[j] = -1
		if used[j] {
			col[j] = ncols
			ncols++
		} else if b.cost[j] < 0 {
			return nil, 0, fmt.Errorf("%w: variable %d has cost %g and no constraint", errLPUnbounded, j, b.cost[j])
		}
	}
	x := make([]float64, nv)
	if len(rows) == 0 {
		// No constraints: every variable is unused and has cost >= 0.
		return x, 0, nil
	}
	nr := len(rows)
	A := mat.NewDense(nr, ncols+nr, nil)
	rhs := make([]float64, nr)
	c := make([]float64, ncols+nr)
	feasibleSlacks := true
	for r, row := range rows {
		for v, a := range row.vals {
			A.Set(r, col[v], a)
		}
		A.Set(r, ncols+r, 1)
		rhs[r] = row.rhs
		if row.rhs < 0 {
			feasibleSlacks = false
		}
	}
	for j, cj := range b.cost {
		if col[j] >= 0 {
			c[col[j]] = cj
		}
	}
	var basic []int
	if feasibleSlacks {
		basic = make([]int, nr)
		for r := range basic {
			basic[r] = ncols + r
		}
	}
	_, sol, err := lp.Simplex(c, A, rhs, 1e-10, basic)
	switch {
	case errors.Is(err, lp.ErrInfeasible):
		return nil, 0, fmt.Errorf("%w (%v)", errLPInfeasible, err)
	case errors.Is(err, lp.ErrUnbounded):
		return nil, 0, fmt.Errorf("%w (%v)", errLPUnbounded, err)
	case err != nil:
		// gonum wraps Phase I failures in a plain error string.
		return nil, 0, fmt.Errorf("%w: %v", errLPNumerical, err)
	}
	obj := 0.0
	for j := range b.cost {
		if col[j] >= 0 {
			x[j] = math.Max(0, sol[col[j]])
			obj += b.cost[j] * x[j]
		}
	}
	return x, obj, nil
}

// solveMaxMin solves the LP shared by Gavel's policies:
//
//	maximize  z
//	s.t.      sum_k util[i][k] * X[i][k] >= z          for every job i
//	          sum_k X[i][k] <= 1                       for every job i
//	          sum_i size[i] * X[i][k] <= capacity[k]   for every type k
//	          X >= 0,  X[i][k] = 0 where util[i][k] == 0
//
// and returns X (m x n) and z = min_i sum_k util[i][k]*X[i][k] of the
// returned X. util must be >= 0, size > 0 and capacity >= 0; every job
// needs some k with util[i][k] > 0 and capacity[k] > 0 (callers drop jobs
// that cannot run anywhere), otherwise the error wraps errLPInput.
//
// It runs the structured interior-point method (maxMinIPM) and, if that
// does not converge, falls back to gonum's Simplex for problems of up to
// simplexFallbackJobs jobs. The returned X satisfies every constraint
// exactly (up to float rounding): the IPM's tiny residuals are removed by
// scaling rows and columns down, and noise entries below 1e-9 are zeroed.
func solveMaxMin(util [][]float64, size, capacity []float64) ([][]float64, float64, error) {
	p, err := newMaxMinIPM(util, size, capacity)
	if err != nil {
		return nil, 0, err
	}
	X := make([][]float64, len(util))
	for i := range X {
		X[i] = make([]float64, len(capacity))
	}
	if p.m == 0 {
		return X, 0, nil
	}
	xe, err := p.solve()
	if err != nil {
		if p.m > simplexFallbackJobs {
			return nil, 0, err
		}
		xe, err = p.solveSimplex()
		if err != nil {
			return nil, 0, err
		}
	}
	for i := 0; i < p.m; i++ {
		for e := p.start[i]; e < p.start[i+1]; e++ {
			X[i][p.typ[e]] = xe[e]
		}
	}
	z := repairAlloc(X, util, size, capacity)
	return X, z, nil
}

// simplexFallbackJobs bounds the problems that solveMaxMin hands to gonum's
// Simplex when the IPM fails (about a second at 100 jobs, see the table at
// the top of this file).
const simplexFallbackJobs = 100

// repairAlloc makes X exactly feasible: it clips entries to [0, 1], zeroes
// them where util is 0 and where they are solver noise (below 1e-9 and
// carrying less than 1e-9 of the row's utility), scales rows whose sum exceeds 1
// and columns whose load exceeds capacity, and returns the resulting
// min_i sum_k util[i][k]*X[i][k] (0 when there are no jobs).
func repairAlloc(X, util [][]float64, size, capacity []float64) float64 {
	for i, row := range X {
		u := 0.0
		for k, v := range row {
			if util[i][k] <= 0 || !(v > 0) {
				v = 0
			}
			row[k] = math.Min(v, 1)
			u += util[i][k] * row[k]
		}
		sum := 0.0
		for k, v := range row {
			if v < 1e-9 && util[i][k]*v <= 1e-9*u {
				row[k] = 0 // solver noise
			}
			sum += row[k]
		}
		if sum > 1 {
			for k := range row {
				row[k] /= sum
			}
		}
	}
	for k, c := range capacity {
		load := 0.0
		for i := range X {
			load += size[i] * X[i][k]
		}
		if load > c {
			f := c / load
			for i := range X {
				X[i][k] *= f
			}
		}
	}
	z := math.Inf(1)
	for i, row := range X {
		u := 0.0
		for k, v := range row {
			u += util[i][k] * v
		}
		z = math.Min(z, u)
	}
	if math.IsInf(z, 1) {
		return 0
	}
	return z
}

// maxMinIPM is solveMaxMin's problem in the standard form
//
//	minimize   -(1/m) sum_i zhat_i
//	s.t.  (U_i)  sum_e a_e x_e - g_i zhat_i - p_i = 0
//	      (G_i)  sum_e x_e + q_i = 1
//	      (L_i)  zhat_i - zhat_{i+1} = 0             for i < m-1
//	      (C_k)  sum_e sig_e x_e + r_k = 1
//	      all variables >= 0
//
// over the edges e = (i, k) with util[i][k] > 0 and capacity[k] > 0. Rows
// are scaled for conditioning: a_e = util[i][k]/alpha_i with alpha_i the
// job's largest utility, sig_e = size[i]/capacity[k], z = zscale*zhat with
// zscale the geometric mean of a lower and an upper bound on z (see
// newMaxMinIPM), g_i = zscale/alpha_i.
//
// z itself would be a dense column (it meets every U row), which makes
// A D Aᵀ dense; eliminating it by Sherman-Morrison or bordering is unstable
// near the optimum (a bottleneck job's U and G rows differ only through
// z). So z is split into one copy per job, chained by the L rows
// (Vanderbei's dense-column splitting). With rows ordered (U_i, G_i, L_i)
// per job and the n capacity rows last, A D Aᵀ is block tridiagonal
// (3x3 blocks, consecutive jobs coupled only through zhat_{i+1}) plus a
// dense n-row border, and a block Cholesky factorisation costs
// O(jobs * types^2).
//
// Variable layout: x_e at [0, ne), zhat_i at oz+i, p at op, q at oq, r at or.
// Row layout: U_i at 3i, G_i at 3i+1, L_i at 3i+2, C_k at oc+k = 3m-1+k.
type maxMinIPM struct {
	m, n, ne       int
	start          []int // job i owns edges start[i]..start[i+1]-1
	typ            []int // GPU type of each edge
	a, sig         []float64
	g              []float64
	zscale         float64
	nv, nr         int
	oz, op, oq, or int
	oc             int

	// Factorisation of A D Aᵀ, rebuilt by factor (see there).
	d   []float64    // the scaling D of the last factor call
	lf  [][6]float64 // per job: Cholesky factor of its pivot block (l00, l10, l11, l20, l21, l22)
	vb  []float64    // per job: V_i = W_i L_i⁻ᵀ, n x 3 row-major
	sc  []float64    // n x n Cholesky factor of the border's Schur complement
	hb  []float64    // scratch: L_i⁻¹ t_i, 3 per job
	tc  []float64    // scratch, len n
	pw  []float64    // scratch, len n
	ew  []float64    // scratch, n x 3
	res []float64    // scratch, len nr
	cor []float64    // scratch, len nr
	acc []float64    // scratch, len n
}

func newMaxMinIPM(util [][]float64, size, capacity []float64) (*maxMinIPM, error) {
	m, n := len(util), len(capacity)
	if len(size) != m {
		return nil, fmt.Errorf("%w: %d jobs but %d sizes", errLPInput, m, len(size))
	}
	for k, c := range capacity {
		if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return nil, fmt.Errorf("%w: capacity[%d] = %v", errLPInput, k, c)
		}
	}
	p := &maxMinIPM{m: m, n: n, start: make([]int, m+1), g: make([]float64, m)}
	alpha := make([]float64, m)
	for i, row := range util {
		if len(row) != n {
			return nil, fmt.Errorf("%w: job %d has %d utilities for %d types", errLPInput, i, len(row), n)
		}
		if !(size[i] > 0) || math.IsInf(size[i], 0) {
			return nil, fmt.Errorf("%w: size[%d] = %v", errLPInput, i, size[i])
		}
		for k, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("%w: util[%d][%d] = %v", errLPInput, i, k, v)
			}
			if v > 0 && capacity[k] > 0 {
				alpha[i] = math.Max(alpha[i], v)
			}
		}
		if alpha[i] == 0 {
			return nil, fmt.Errorf("%w: job %d can run on no GPU type with capacity", errLPInput, i)
		}
	}
	for i, row := range util {
		p.start[i] = len(p.typ)
		for k, v := range row {
			if v > 0 && capacity[k] > 0 {
				p.typ = append(p.typ, k)
				p.a = append(p.a, v/alpha[i])
				p.sig = append(p.sig, size[i]/capacity[k])
			}
		}
	}
	p.start[m] = len(p.typ)
	// Bracket z: zlo from a feasible allocation (every edge of type k gets
	// min(1/n, capacity_k / total size on k)), zhi from each job alone on
	// its best type; scale by their geometric mean so that zhat* is of
	// order 1 even when the bracket is wide.
	if m > 0 {
		load := make([]float64, n)
		for i := 0; i < m; i++ {
			for e := p.start[i]; e < p.start[i+1]; e++ {
				load[p.typ[e]] += size[i]
			}
		}
		zlo, zhi := math.Inf(1), math.Inf(1)
		for i := 0; i < m; i++ {
			lo, hi := 0.0, 0.0
			for e := p.start[i]; e < p.start[i+1]; e++ {
				k := p.typ[e]
				u := p.a[e] * alpha[i]
				lo += u * math.Min(1/float64(n), capacity[k]/load[k])
				hi = math.Max(hi, u*math.Min(1, capacity[k]/size[i]))
			}
			zlo, zhi = math.Min(zlo, lo), math.Min(zhi, hi)
		}
		p.zscale = math.Sqrt(zlo * zhi)
		if !(p.zscale > 0) || math.IsInf(p.zscale, 0) {
			p.zscale = zhi
		}
	}
	for i := range p.g {
		p.g[i] = p.zscale / alpha[i]
	}
	p.ne = len(p.typ)
	p.oz = p.ne
	p.op = p.oz + m
	p.oq = p.op + m
	p.or = p.oq + m
	p.nv = p.or + n
	if m > 0 {
		p.oc = 3*m - 1
	}
	p.nr = p.oc + n
	p.lf = make([][6]float64, m)
	p.vb = make([]float64, 3*n*m)
	p.sc = make([]float64, n*n)
	p.hb = make([]float64, 3*m)
	p.tc = make([]float64, n)
	p.pw = make([]float64, n)
	p.ew = make([]float64, 3*n)
	p.res = make([]float64, p.nr)
	p.cor = make([]float64, p.nr)
	p.acc = make([]float64, n)
	return p, nil
}

// rhsB returns b of the standard form.
func (p *maxMinIPM) rhsB() []float64 {
	b := make([]float64, p.nr)
	for i := 0; i < p.m; i++ {
		b[3*i+1] = 1
	}
	for k := 0; k < p.n; k++ {
		b[p.oc+k] = 1
	}
	return b
}

// mulA sets out = A v.
func (p *maxMinIPM) mulA(v, out []float64) {
	m := p.m
	for k := 0; k < p.n; k++ {
		out[p.oc+k] = v[p.or+k]
	}
	for i := 0; i < m; i++ {
		u := -p.g[i]*v[p.oz+i] - v[p.op+i]
		g := v[p.oq+i]
		for e := p.start[i]; e < p.start[i+1]; e++ {
			u += p.a[e] * v[e]
			g += v[e]
			out[p.oc+p.typ[e]] += p.sig[e] * v[e]
		}
		out[3*i], out[3*i+1] = u, g
		if i < m-1 {
			out[3*i+2] = v[p.oz+i] - v[p.oz+i+1]
		}
	}
}

// mulAT sets out = Aᵀ y.
func (p *maxMinIPM) mulAT(y, out []float64) {
	m := p.m
	for i := 0; i < m; i++ {
		yu, yg := y[3*i], y[3*i+1]
		for e := p.start[i]; e < p.start[i+1]; e++ {
			out[e] = p.a[e]*yu + yg + p.sig[e]*y[p.oc+p.typ[e]]
		}
		out[p.oz+i] = p.zRow(i, y)
		out[p.op+i] = -yu
		out[p.oq+i] = yg
	}
	for k := 0; k < p.n; k++ {
		out[p.or+k] = y[p.oc+k]
	}
}

// hugePivot replaces a vanishing Cholesky pivot: the corresponding
// component of the solution becomes 0, the standard safeguard of
// normal-equation interior-point codes (S. Wright, "Modified Cholesky
// factorizations in interior-point algorithms for linear programming", 1999).
const hugePivot = 1e64

// coupling returns o_i, the coupling of row L_{i-1} with the rows
// (U_i, G_i, L_i) of job i through zhat_i (only the U and L entries are
// nonzero; job m-1 has no L row).
func (p *maxMinIPM) coupling(i int) (oU, oL float64) {
	dz := p.d[p.oz+i]
	oU = p.g[i] * dz
	if i < p.m-1 {
		oL = -dz
	}
	return oU, oL
}

// factor computes a block Cholesky factorisation of A D Aᵀ:
//
//	P_0 = D_0,  P_i = D_i - o_i (P_{i-1}⁻¹)_LL o_iᵀ,   (pivot blocks, 3x3)
//	W_0 = E_0,  W_i = E_i - (W_{i-1} P_{i-1}⁻¹ e_L) o_iᵀ,   (border fill, n x 3)
//	S = F - sum_i W_i P_i⁻¹ W_iᵀ,   (border, n x n)
//
// where D_i is job i's diagonal block, o_i its coupling to the previous
// job (through zhat_i), E_i its border block and F the border's diagonal.
// With P_i = L_i L_iᵀ and V_i = W_i L_i⁻ᵀ, W_i P_i⁻¹ W_iᵀ = V_i V_iᵀ and
// (P_i⁻¹)_LL = 1/l22². The last job's missing L row is padded with an
// identity row that never receives a right-hand side.
func (p *maxMinIPM) factor(d []float64) error {
	m, n := p.m, p.n
	p.d = d
	S := p.sc
	for j := range S {
		S[j] = 0
	}
	for k := 0; k < n; k++ {
		S[k*n+k] = d[p.or+k]
	}
	prevInvLL := 0.0
	prevW := p.pw
	E := p.ew
	for i := 0; i < m; i++ {
		for j := range E {
			E[j] = 0
		}
		g, dz := p.g[i], d[p.oz+i]
		uu, ug, gg := d[p.op+i]+g*g*dz, 0.0, d[p.oq+i]
		for e := p.start[i]; e < p.start[i+1]; e++ {
			de, ae, se, k := d[e], p.a[e], p.sig[e], p.typ[e]
			uu += ae * ae * de
			ug += ae * de
			gg += de
			E[3*k] += ae * se * de
			E[3*k+1] += se * de
			S[k*n+k] += se * se * de
		}
		ul, ll := 0.0, 1.0
		if i < m-1 {
			ul, ll = -g*dz, dz+d[p.oz+i+1]
		}
		if i > 0 {
			oU, oL := p.coupling(i)
			uu -= prevInvLL * oU * oU
			ul -= prevInvLL * oU * oL
			ll -= prevInvLL * oL * oL
			for k := 0; k < n; k++ {
				E[3*k] -= prevW[k] * oU
				E[3*k+2] -= prevW[k] * oL
			}
		}
		// Cholesky of [[uu, ug, ul], [ug, gg, 0], [ul, 0, ll]].
		tiny := 1e-30 * max(uu, gg, ll)
		l00 := cholPivot(uu, tiny)
		l10 := ug / l00
		l11 := cholPivot(gg-l10*l10, tiny)
		l20 := ul / l00
		l21 := (0 - l20*l10) / l11
		l22 := cholPivot(ll-l20*l20-l21*l21, tiny)
		if math.IsNaN(l22) || math.IsNaN(l11) || math.IsNaN(l00) {
			return fmt.Errorf("%w: pivot block %d is not finite", errLPNumerical, i)
		}
		p.lf[i] = [6]float64{l00, l10, l11, l20, l21, l22}
		V := p.vb[3*n*i : 3*n*(i+1)]
		for k := 0; k < n; k++ {
			v0 := E[3*k] / l00
			v1 := (E[3*k+1] - l10*v0) / l11
			v2 := (E[3*k+2] - l20*v0 - l21*v1) / l22
			V[3*k], V[3*k+1], V[3*k+2] = v0, v1, v2
		}
		for k := 0; k < n; k++ {
			vk := V[3*k : 3*k+3]
			if vk[0] == 0 && vk[1] == 0 && vk[2] == 0 {
				continue
			}
			for l := 0; l <= k; l++ {
				vl := V[3*l : 3*l+3]
				S[k*n+l] -= vk[0]*vl[0] + vk[1]*vl[1] + vk[2]*vl[2]
			}
		}
		prevInvLL = 1 / (l22 * l22)
		for k := 0; k < n; k++ {
			prevW[k] = V[3*k+2] / l22
		}
	}
	// Cholesky of the border (lower triangle of S holds the data).
	maxDiag := 0.0
	for k := 0; k < n; k++ {
		maxDiag = math.Max(maxDiag, S[k*n+k])
	}
	tiny := 1e-30 * maxDiag
	for k := 0; k < n; k++ {
		for j := 0; j <= k; j++ {
			s := S[k*n+j]
			for l := 0; l < j; l++ {
				s -= S[k*n+l] * S[j*n+l]
			}
			if j < k {
				S[k*n+j] = s / S[j*n+j]
			} else {
				S[k*n+k] = cholPivot(s, tiny)
			}
		}
	}
	if hasNaN(S) {
		return fmt.Errorf("%w: border factor is not finite", errLPNumerical)
	}
	return nil
}

// cholPivot returns sqrt(s), or hugePivot when s is not safely positive.
func cholPivot(s, tiny float64) float64 {
	if !(s > tiny) || s <= 0 {
		return hugePivot
	}
	return math.Sqrt(s)
}

// solveOnce sets y ≈ (A D Aᵀ)⁻¹ r with the factors of the last factor call.
func (p *maxMinIPM) solveOnce(r, y []float64) {
	m, n := p.m, p.n
	tc := p.tc
	for k := 0; k < n; k++ {
		tc[k] = r[p.oc+k]
	}
	// Forward: t_i = r_i - o_i (P_{i-1}⁻¹ t_{i-1})_L, h_i = L_i⁻¹ t_i, and
	// the border's right-hand side loses V_i h_i.
	carry := 0.0
	for i := 0; i < m; i++ {
		t0, t1, t2 := r[3*i], r[3*i+1], 0.0
		if i < m-1 {
			t2 = r[3*i+2]
		}
		if i > 0 {
			oU, oL := p.coupling(i)
			t0 -= oU * carry
			t2 -= oL * carry
		}
		L := &p.lf[i]
		h0 := t0 / L[0]
		h1 := (t1 - L[1]*h0) / L[2]
		h2 := (t2 - L[3]*h0 - L[4]*h1) / L[5]
		p.hb[3*i], p.hb[3*i+1], p.hb[3*i+2] = h0, h1, h2
		V := p.vb[3*n*i : 3*n*(i+1)]
		for k := 0; k < n; k++ {
			tc[k] -= V[3*k]*h0 + V[3*k+1]*h1 + V[3*k+2]*h2
		}
		carry = h2 / L[5]
	}
	// Border: S y_C = t_C.
	S := p.sc
	for k := 0; k < n; k++ {
		s := tc[k]
		for l := 0; l < k; l++ {
			s -= S[k*n+l] * tc[l]
		}
		tc[k] = s / S[k*n+k]
	}
	for k := n - 1; k >= 0; k-- {
		s := tc[k]
		for l := k + 1; l < n; l++ {
			s -= S[l*n+k] * tc[l]
		}
		tc[k] = s / S[k*n+k]
	}
	// Backward: y_i = L_i⁻ᵀ (h_i - V_iᵀ y_C - e_L (o_{i+1}·y_{i+1})/l22).
	next := 0.0
	for i := m - 1; i >= 0; i-- {
		L := &p.lf[i]
		V := p.vb[3*n*i : 3*n*(i+1)]
		u0, u1, u2 := p.hb[3*i], p.hb[3*i+1], p.hb[3*i+2]
		for k := 0; k < n; k++ {
			u0 -= V[3*k] * tc[k]
			u1 -= V[3*k+1] * tc[k]
			u2 -= V[3*k+2] * tc[k]
		}
		if i < m-1 {
			u2 -= next / L[5]
		}
		y2 := u2 / L[5]
		y1 := (u1 - L[4]*y2) / L[2]
		y0 := (u0 - L[1]*y1 - L[3]*y2) / L[0]
		y[3*i], y[3*i+1] = y0, y1
		if i < m-1 {
			y[3*i+2] = y2
		} else {
			y2 = 0
		}
		if i > 0 {
			oU, oL := p.coupling(i)
			next = oU*y0 + oL*y2
		}
	}
	for k := 0; k < n; k++ {
		y[p.oc+k] = tc[k]
	}
}

// solveM sets y = (A D Aᵀ)⁻¹ r: one solve with the factors plus up to two
// steps of iterative refinement against the exact operator.
func (p *maxMinIPM) solveM(r, y []float64) {
	p.solveOnce(r, y)
	rnorm := 0.0
	for _, v := range r {
		rnorm = max(rnorm, math.Abs(v))
	}
	for step := 0; step < 2; step++ {
		if worst := p.normalResidual(r, y, p.res); worst <= 1e-15*rnorm {
			return
		}
		p.solveOnce(p.res, p.cor)
		for j := range y {
			y[j] += p.cor[j]
		}
	}
}

// normalResidual sets res = r - A D Aᵀ y and returns its largest magnitude.
// It is mulAT, the scaling by D and mulA in one pass over the jobs, with the
// same operations in the same order (so the same bits), but without writing
// and reading back D Aᵀ y, a vector of every variable: the refinement in
// solveM runs it about a hundred times per solve.
func (p *maxMinIPM) normalResidual(r, y, res []float64) float64 {
	m, n, d := p.m, p.n, p.d
	acc := p.acc
	for k := 0; k < n; k++ {
		acc[k] = y[p.oc+k] * d[p.or+k]
	}
	worst := 0.0
	note := func(j int, v float64) {
		res[j] = r[j] - v
		worst = max(worst, math.Abs(res[j]))
	}
	zNext := p.zRow(0, y) * d[p.oz]
	for i := 0; i < m; i++ {
		yu, yg := y[3*i], y[3*i+1]
		z := zNext
		u := -p.g[i]*z - (-yu)*d[p.op+i]
		g := yg * d[p.oq+i]
		for e := p.start[i]; e < p.start[i+1]; e++ {
			k := p.typ[e]
			te := (p.a[e]*yu + yg + p.sig[e]*y[p.oc+k]) * d[e]
			u += p.a[e] * te
			g += te
			acc[k] += p.sig[e] * te
		}
		note(3*i, u)
		note(3*i+1, g)
		if i < m-1 {
			zNext = p.zRow(i+1, y) * d[p.oz+i+1]
			note(3*i+2, z-zNext)
		}
	}
	for k := 0; k < n; k++ {
		note(p.oc+k, acc[k])
	}
	return worst
}

// zRow is (Aᵀ y) at zhat_i, as mulAT computes it.
func (p *maxMinIPM) zRow(i int, y []float64) float64 {
	zt := -p.g[i] * y[3*i]
	if i < p.m-1 {
		zt += y[3*i+2]
	}
	if i > 0 {
		zt -= y[3*i-1]
	}
	return zt
}

// IPM tolerances on the relative primal and dual residuals and duality gap
// (see solve).
const (
	ipmTol = 1e-9
	// ipmLooseTol is accepted if the method stalls before ipmTol: X is
	// repaired to exact feasibility afterwards (repairAlloc), and an
	// allocation within 1e-5 of the optimum schedules the same rounds.
	ipmLooseTol  = 1e-5
	ipmMaxIter   = 200
	ipmStepScale = 0.995
)

// solve runs Mehrotra's predictor-corrector method and returns x_e. It
// keeps the best iterate seen and, should the method stall (loss of
// accuracy very close to the optimum), returns it if it meets ipmLooseTol.
func (p *maxMinIPM) solve() ([]float64, error) {
	nv, nr := p.nv, p.nr
	b := p.rhsB()
	c := make([]float64, nv)
	for i := 0; i < p.m; i++ {
		c[p.oz+i] = -1 / float64(p.m)
	}

	v := make([]float64, nv)
	w := make([]float64, nv)
	y := make([]float64, nr)
	d := make([]float64, nv)
	rp := make([]float64, nr)
	rd := make([]float64, nv)
	rc := make([]float64, nv)
	dv := make([]float64, nv)
	dw := make([]float64, nv)
	dy := make([]float64, nr)
	dvA := make([]float64, nv)
	dwA := make([]float64, nv)
	tr := make([]float64, nr)
	tv := make([]float64, nv)
	best := make([]float64, p.ne)
	bestScore := math.Inf(1)

	// Mehrotra's starting point from the least-squares solutions with D = I.
	for j := range d {
		d[j] = 1
	}
	if err := p.factor(d); err != nil {
		return nil, err
	}
	p.solveM(b, tr)
	p.mulAT(tr, v)
	p.mulA(c, tr)
	p.solveM(tr, y)
	p.mulAT(y, tv)
	for j := range w {
		w[j] = c[j] - tv[j]
	}
	shiftPositive(v)
	shiftPositive(w)
	vw, sv, sw := 0.0, 0.0, 0.0
	for j := range v {
		vw += v[j] * w[j]
		sv += v[j]
		sw += w[j]
	}
	for j := range v {
		v[j] += 0.5 * vw / sw
		w[j] += 0.5 * vw / sv
	}

	// direction solves the Newton system for residuals (rp, rd, rc) into
	// (dv, dy, dw), with d = v/w already factored. rc/w is kept from the
	// first loop for the last (a division per variable is not cheap).
	rcw := make([]float64, nv)
	direction := func(dv, dw []float64) {
		for j := range tv {
			rcw[j] = rc[j] / w[j]
			tv[j] = d[j]*rd[j] - rcw[j]
		}
		p.mulA(tv, tr)
		for j := range tr {
			tr[j] += rp[j]
		}
		p.solveM(tr, dy)
		p.mulAT(dy, tv)
		for j := range dv {
			dv[j] = d[j]*(tv[j]-rd[j]) + rcw[j]
			dw[j] = rd[j] - tv[j]
		}
	}

	var pres, dres, gap float64
	for iter := 0; iter < ipmMaxIter; iter++ {
		p.mulA(v, tr)
		p.mulAT(y, tv)
		mu, pobj, dobj := 0.0, 0.0, 0.0
		for j := range rp {
			rp[j] = b[j] - tr[j]
			dobj += b[j] * y[j]
		}
		dres = 0
		for j := range rd {
			rd[j] = c[j] - tv[j] - w[j]
			dres = max(dres, math.Abs(rd[j]))
			mu += v[j] * w[j]
			pobj += c[j] * v[j]
		}
		mu /= float64(nv)
		// Everything is measured relative to the objective zhat (> 0 at
		// the optimum): U and L rows in units of zhat, the dual residual
		// by its effect on the dual bound (all primal values are <= ~1).
		zref := math.Max(math.Abs(pobj), 1e-300)
		pres = 0
		for j, r := range rp {
			r = math.Abs(r)
			switch {
			case j >= p.oc:
			case j%3 == 0:
				r /= p.g[j/3] * zref
			case j%3 == 2:
				r /= zref
			}
			pres = max(pres, r)
		}
		dres *= float64(p.m+p.n) / zref
		gap = math.Abs(pobj-dobj) / zref
		score := math.Max(pres, math.Max(dres, gap))
		if score < bestScore {
			bestScore = score
			copy(best, v[:p.ne])
		}
		if score <= ipmTol {
			break
		}
		for j := range d {
			d[j] = v[j] / w[j]
		}
		if err := p.factor(d); err != nil {
			break
		}
		// Predictor (affine scaling).
		for j := range rc {
			rc[j] = -v[j] * w[j]
		}
		direction(dvA, dwA)
		ap := math.Min(1, maxStep(v, dvA))
		ad := math.Min(1, maxStep(w, dwA))
		muAff := 0.0
		for j := range v {
			muAff += (v[j] + ap*dvA[j]) * (w[j] + ad*dwA[j])
		}
		muAff /= float64(nv)
		sigma := math.Pow(muAff/mu, 3)
		// Corrector with centring.
		for j := range rc {
			rc[j] = sigma*mu - v[j]*w[j] - dvA[j]*dwA[j]
		}
		direction(dv, dw)
		ap = math.Min(1, ipmStepScale*maxStep(v, dv))
		ad = math.Min(1, ipmStepScale*maxStep(w, dw))
		if hasNaN(dv) || hasNaN(dw) || hasNaN(dy) || (ap < 1e-12 && ad < 1e-12) {
			break
		}
		for j := range v {
			v[j] += ap * dv[j]
			w[j] += ad * dw[j]
		}
		for j := range y {
			y[j] += ad * dy[j]
		}
	}
	if bestScore <= ipmLooseTol {
		return best, nil
	}
	return nil, fmt.Errorf("%w: interior point did not converge (primal %.2g, dual %.2g, gap %.2g)", errLPNumerical, pres, dres, gap)
}

// solveSimplex solves the same scaled problem with gonum's Simplex.
func (p *maxMinIPM) solveSimplex() ([]float64, error) {
	var lb lpBuilder
	for e := 0; e < p.ne; e++ {
		lb.AddVar(0)
	}
	z := lb.AddVar(-1)
	caps := make([][]int, p.n)
	capc := make([][]float64, p.n)
	for i := 0; i < p.m; i++ {
		idx := []int{z}
		coef := []float64{p.g[i]}
		var ones []float64
		var gidx []int
		for e := p.start[i]; e < p.start[i+1]; e++ {
			idx = append(idx, e)
			coef = append(coef, -p.a[e])
			gidx = append(gidx, e)
			ones = append(ones, 1)
			caps[p.typ[e]] = append(caps[p.typ[e]], e)
			capc[p.typ[e]] = append(capc[p.typ[e]], p.sig[e])
		}
		lb.AddLE(idx, coef, 0)
		lb.AddLE(gidx, ones, 1)
	}
	for k := 0; k < p.n; k++ {
		lb.AddLE(caps[k], capc[k], 1)
	}
	x, _, err := lb.Solve()
	if err != nil {
		return nil, err
	}
	return x[:p.ne], nil
}

// maxStep returns the largest alpha such that v + alpha*dv >= 0
// (+Inf if dv >= 0 everywhere). Here and in the IPM's other loops over every
// variable or row, the builtin min and max are used: they are inlined, where
// math.Min and math.Max are calls, and they give the same result except for
// an infinity against a NaN, which the IPM never gets to (it stops on a NaN
// or an infinity in a direction, see hasNaN).
func maxStep(v, dv []float64) float64 {
	a := math.Inf(1)
	for j, dj := range dv {
		if dj < 0 {
			a = min(a, -v[j]/dj)
		}
	}
	return a
}

// shiftPositive is Mehrotra's first shift: v += max(-1.5 min v, 0), and a
// little more if v is all zero.
func shiftPositive(v []float64) {
	mn := math.Inf(1)
	for _, x := range v {
		mn = math.Min(mn, x)
	}
	shift := math.Max(-1.5*mn, 0)
	if shift == 0 && mn <= 0 {
		shift = 1
	}
	for j := range v {
		v[j] += shift
	}
}

// hasNaN reports a NaN or an infinity in v: x-x is 0 for every finite x and
// NaN for the others (one subtraction instead of two tests).
func hasNaN(v []float64) bool {
	for _, x := range v {
		if x-x != 0 {
			return true
		}
	}
	return false
}
