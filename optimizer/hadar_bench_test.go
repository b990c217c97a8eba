package optimizer

import (
	"fmt"
	"testing"
)

// BenchmarkHadarPlan sweeps jobs x GPUs x GPU types for one Hadar planning
// round. Targets (issue 2): 1,000 jobs on 1,024 GPUs under 50 ms, 10,000 jobs
// on 8,192 GPUs with 4 types under 1 s.
func BenchmarkHadarPlan(b *testing.B) {
	for _, c := range []struct{ jobs, gpus, types int }{
		{100, 108, 3}, {1000, 1024, 3}, {1000, 1024, 4}, {10000, 8192, 4},
	} {
		b.Run(fmt.Sprintf("jobs=%d/gpus=%d/types=%d", c.jobs, c.gpus, c.types), func(b *testing.B) {
			s := SyntheticSnapshot(c.jobs, c.gpus, c.types, 1)
			p, _ := New("hadar", Options{})
			plan, err := p.Plan(s)
			if err != nil {
				b.Fatal(err)
			}
			if err := Check(s, plan); err != nil {
				b.Fatal(err)
			}
			if used := usedGPUs(plan); used < c.gpus*9/10 {
				b.Fatalf("plan uses %d of %d GPUs with %d jobs waiting", used, c.gpus, c.jobs)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Plan(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func usedGPUs(p *Plan) int {
	n := 0
	for _, tasks := range p.Assignments {
		n += TaskGPUs(tasks)
	}
	return n
}

// BenchmarkHadarFreshRound is one round of a fresh hadar instance, as `hadar
// bench --policy hadar --jobs 10000 --gpus 8192 --types 4` times it: with no
// earlier round, the fluid LP and the prices are solved from scratch.
// Target (issue 14, build point 6): under 0.3 s of CPU.
func BenchmarkHadarFreshRound(b *testing.B) {
	s := SyntheticSnapshot(10000, 8192, 4, 1)
	for b.Loop() {
		p, _ := New("hadar", Options{Seed: 1})
		if _, err := p.Plan(s); err != nil {
			b.Fatal(err)
		}
	}
}
