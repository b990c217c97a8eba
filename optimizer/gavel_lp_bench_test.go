package optimizer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// gavelBenchInstance draws m jobs shaped like Gavel's simulations on its
// 36 k80 + 36 p100 + 36 v100 cluster (types in that order): 38 job types
// with v100 > p100 > k80 throughputs (a tenth of them unable to use k80),
// Gavel's scale factors 1/2/4/8 with p = .70/.10/.15/.05, and its duration
// distribution (60*10^U(1.5,3) s w.p. 0.8, else 60*10^U(3,4) s) for the
// remaining steps; jobs arrived up to an hour ago. Seeded: the same m gives
// the same instance.
func gavelBenchInstance(m int) (thr [][]float64, scale, remaining, elapsed, capacity []float64) {
	r := rand.New(rand.NewPCG(uint64(m), 36))
	capacity = []float64{36, 36, 36}
	type jobType struct{ k80, p100, v100 float64 }
	types := make([]jobType, 38)
	for j := range types {
		v := 2 + 28*r.Float64()
		p := v * (0.4 + 0.4*r.Float64())
		k := p * (0.2 + 0.4*r.Float64())
		if j%10 == 9 {
			k = 0
		}
		types[j] = jobType{k, p, v}
	}
	for i := 0; i < m; i++ {
		jt := types[r.IntN(len(types))]
		s := 1.0
		switch u := r.Float64(); {
		case u < 0.70:
		case u < 0.80:
			s = 2
		case u < 0.95:
			s = 4
		default:
			s = 8
		}
		eff := s * (0.6 + 0.4*r.Float64()) // imperfect data-parallel scaling
		thr = append(thr, []float64{jt.k80 * eff, jt.p100 * eff, jt.v100 * eff})
		scale = append(scale, s)
		dur := 60 * math.Pow(10, 1.5+1.5*r.Float64())
		if r.Float64() >= 0.8 {
			dur = 60 * math.Pow(10, 3+r.Float64())
		}
		remaining = append(remaining, dur*jt.v100*eff)
		elapsed = append(elapsed, 3600*r.Float64())
	}
	return thr, scale, remaining, elapsed, capacity
}

var benchJobs = []int{10, 100, 500, 1000}

func BenchmarkMaxMinFairnessLP(b *testing.B) {
	for _, m := range benchJobs {
		b.Run(fmt.Sprintf("jobs=%d", m), func(b *testing.B) {
			thr, scale, _, _, capacity := gavelBenchInstance(m)
			X, err := maxMinFairnessAlloc(thr, scale, nil, capacity)
			if err != nil {
				b.Fatal(err)
			}
			checkAlloc(b, X, thr, scale, capacity)
			b.ResetTimer()
			for b.Loop() {
				if _, err := maxMinFairnessAlloc(thr, scale, nil, capacity); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMinTotalDurationLP(b *testing.B) {
	for _, m := range benchJobs {
		b.Run(fmt.Sprintf("jobs=%d", m), func(b *testing.B) {
			thr, scale, remaining, _, capacity := gavelBenchInstance(m)
			X, T, err := minTotalDurationAlloc(thr, scale, remaining, capacity)
			if err != nil {
				b.Fatal(err)
			}
			checkAlloc(b, X, thr, scale, capacity)
			if !(T > 0) {
				b.Fatalf("T = %v", T)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := minTotalDurationAlloc(thr, scale, remaining, capacity); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFinishTimeFairnessLP(b *testing.B) {
	for _, m := range benchJobs {
		b.Run(fmt.Sprintf("jobs=%d", m), func(b *testing.B) {
			thr, scale, remaining, elapsed, capacity := gavelBenchInstance(m)
			X, rho, err := finishTimeFairnessAlloc(thr, scale, nil, remaining, elapsed, nil, 0, capacity)
			if err != nil {
				b.Fatal(err)
			}
			checkAlloc(b, X, thr, scale, capacity)
			if !(rho > 0) {
				b.Fatalf("rho = %v", rho)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := finishTimeFairnessAlloc(thr, scale, nil, remaining, elapsed, nil, 0, capacity); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMaxMinFairnessSimplex measures gonum's dense Simplex on the same
// max-min LP (the reference behind the choice in lp.go). Above 100 jobs a
// single solve takes minutes, so those sizes run only with
// HADAR_BENCH_SIMPLEX_LARGE=1.
func BenchmarkMaxMinFairnessSimplex(b *testing.B) {
	for _, m := range benchJobs {
		b.Run(fmt.Sprintf("jobs=%d", m), func(b *testing.B) {
			if m > 100 && os.Getenv("HADAR_BENCH_SIMPLEX_LARGE") == "" {
				b.Skip("minutes per solve; set HADAR_BENCH_SIMPLEX_LARGE=1")
			}
			thr, scale, _, _, capacity := gavelBenchInstance(m)
			p := proportionalThroughputs(thr, capacity)
			util := make([][]float64, m)
			for i, row := range thr {
				util[i] = make([]float64, len(row))
				for k, v := range row {
					util[i][k] = scale[i] * v / p[i]
				}
			}
			prob, err := newMaxMinIPM(util, scale, capacity)
			if err != nil {
				b.Fatal(err)
			}
			xe, err := prob.solveSimplex()
			if err != nil {
				b.Fatal(err)
			}
			X := zeroAlloc(m, len(capacity))
			for i := 0; i < m; i++ {
				for e := prob.start[i]; e < prob.start[i+1]; e++ {
					X[i][prob.typ[e]] = xe[e]
				}
			}
			z := repairAlloc(X, util, scale, capacity)
			checkAlloc(b, X, thr, scale, capacity)
			Xi, zi, err := solveMaxMin(util, scale, capacity)
			if err != nil {
				b.Fatal(err)
			}
			checkAlloc(b, Xi, thr, scale, capacity)
			if math.Abs(z-zi) > 1e-6*zi {
				b.Fatalf("simplex optimum %v, IPM %v", z, zi)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := prob.solveSimplex(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
