package optimizer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// SyntheticSnapshot builds a reproducible planning problem for benchmarks:
// gpus GPUs split evenly over types GPU types (nodes of 8 GPUs), and jobs
// jobs of 26 job types whose speed-ups across GPU types differ as in Gavel's
// measurements (1.2x to 10x between the slowest and fastest type), with
// gang sizes 1/2/4/8 drawn with Gavel's probabilities .70/.10/.15/.05.
func SyntheticSnapshot(jobs, gpus, types int, seed int64) *Snapshot {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x853c49e6748fea9b))
	now := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Snapshot{Now: now, Round: 360 * time.Second, Throughput: Throughputs{}}
	typeNames := make([]string, types)
	for k := range typeNames {
		typeNames[k] = fmt.Sprintf("gpu%d", k)
	}
	for k, h := range typeNames {
		share := gpus / types
		if k < gpus%types {
			share++
		}
		for n := 0; share > 0; n++ {
			g := min(8, share)
			s.Nodes = append(s.Nodes, Node{Name: fmt.Sprintf("%s-n%d", h, n), Type: h, GPUs: g})
			share -= g
		}
	}
	const jobTypes = 26
	for jt := 0; jt < jobTypes; jt++ {
		name := fmt.Sprintf("model-%02d", jt)
		base := 1 + 20*rng.Float64()
		spread := 1.2 + 8.8*rng.Float64() // fastest / slowest type
		for k, h := range typeNames {
			speed := base
			if types > 1 {
				speed = base * math.Pow(spread, float64(types-1-k)/float64(types-1))
			}
			for _, w := range []int{1, 2, 4, 8} {
				s.Throughput.Set(name, h, w, speed*float64(w)*math.Pow(0.9, math.Log2(float64(w))))
			}
		}
	}
	for i := 0; i < jobs; i++ {
		w := 1
		switch p := rng.Float64(); {
		case p < 0.70:
			w = 1
		case p < 0.80:
			w = 2
		case p < 0.95:
			w = 4
		default:
			w = 8
		}
		jt := fmt.Sprintf("model-%02d", rng.IntN(jobTypes))
		dur := 60 * math.Pow(10, 1.5+1.5*rng.Float64())
		steps := dur * s.Throughput.Rate(jt, typeNames[0], w)
		s.Jobs = append(s.Jobs, Job{
			ID: fmt.Sprint(i), Type: jt, Workers: w,
			Arrival:    now.Add(-time.Duration(rng.IntN(86400)) * time.Second),
			TotalSteps: steps, RemainingSteps: steps * (0.2 + 0.8*rng.Float64()), Weight: 1,
		})
	}
	return s
}
