package sim

import (
	"context"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

// BenchmarkStatic160 is one fast-path simulation of each policy on the
// static 160-job trace of docs/results.md (seed 0) on 12:12:12: `hadar
// simulate --trace static160-s0.trace --cluster v100=12,p100=12,k80=12
// --policies P`. Target (issue 14): under 0.3 s for one policy, 5 s for
// all nine.
func BenchmarkStatic160(b *testing.B) {
	thr, err := profiles.Matrix("gavel")
	if err != nil {
		b.Fatal(err)
	}
	trace, err := Generate(GenerateOptions{Jobs: 160, Seed: 0, MultiGPU: true, Throughputs: thr})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range optimizer.Names() {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				policy, err := optimizer.New(name, optimizer.Options{})
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(context.Background(), Config{Cluster: Cluster{GPUs: map[string]int{"v100": 12, "p100": 12, "k80": 12}, GPUsPerNode: 4},
					Round: 360 * time.Second, Throughputs: thr, Policy: policy}, trace)
				if err != nil {
					b.Fatal(err)
				}
				if m := Summarize(res); m.Completed != len(trace) {
					b.Fatalf("%d of %d jobs completed", m.Completed, len(trace))
				}
			}
		})
	}
}
