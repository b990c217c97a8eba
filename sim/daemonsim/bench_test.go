package daemonsim

import (
	"context"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// staticTrace is `hadar trace generate --jobs N --seed S --multi-gpu`.
func staticTrace(tb testing.TB, jobs int, seed int64) []sim.TraceJob {
	tb.Helper()
	thr, err := profiles.Matrix("gavel")
	if err != nil {
		tb.Fatal(err)
	}
	trace, err := sim.Generate(sim.GenerateOptions{Jobs: jobs, Seed: seed, MultiGPU: true, Throughputs: thr})
	if err != nil {
		tb.Fatal(err)
	}
	return trace
}

// BenchmarkDaemonStatic160 is one policy's daemon path on the static
// 160-job trace of docs/results.md (seed 0) on 12:12:12, nodes of 4 GPUs,
// the daemon's defaults: `hadar simulate --daemon --cluster
// v100=12,p100=12,k80=12 --trace static160-s0.trace --policies hadar`.
func BenchmarkDaemonStatic160(b *testing.B) {
	trace := staticTrace(b, 160, 0)
	opts := Options{Layout: slurmsim.GenerateLayout(map[string]int{"v100": 12, "p100": 12, "k80": 12}, 4),
		Config: config.Default(), Timing: slurmsim.Measured(2 * time.Second)}
	for b.Loop() {
		res, err := Daemon(context.Background(), opts, trace)
		if err != nil {
			b.Fatal(err)
		}
		m := sim.Summarize(res.Result)
		if m.Completed != len(trace) {
			b.Fatalf("%d of %d jobs completed", m.Completed, len(trace))
		}
		b.ReportMetric(float64(m.Rounds), "rounds")
		b.ReportMetric(m.MakespanS/3600, "makespan_h")
	}
}
