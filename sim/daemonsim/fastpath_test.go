package daemonsim

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// fastPathTolerance is how far the fast path under FastPathRules may be
// from the daemon path, in makespan and in average JCT. The daemon path
// moves by 3% (median) and up to 35% itself when its poll interval moves
// by a second (docs/fidelity.md, "The fast path with the daemon's rules");
// without the rules the fast path is 13% (makespan) and 35% (average JCT)
// off on the run below.
const fastPathTolerance = 0.10

// TestFastPathAgreesWithDaemon runs two traces through the fast path with
// the daemon's rules and through the daemon's own loop, for hadar and
// gavel, with the daemon's defaults (no preemption) and with preemption
// on, and checks that both paths give the same makespan and average JCT
// within fastPathTolerance: a contended static trace (60 jobs, 1-8 GPUs,
// on 8:8:8 in nodes of 4) and one of docs/results.md's, Gavel's public
// max_min_fairness trace on 12:12:12. docs/fidelity.md has the comparison
// on all nine traces of docs/results.md's daemon-path section.
func TestFastPathAgreesWithDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon's loop over two traces (about a minute)")
	}
	thr, err := profiles.Matrix("gavel")
	if err != nil {
		t.Fatal(err)
	}
	static, err := sim.Generate(sim.GenerateOptions{Jobs: 60, Seed: 0, MultiGPU: true, Throughputs: thr, ReferenceType: "v100"})
	if err != nil {
		t.Fatal(err)
	}
	public, err := sim.LoadTrace("gavel:max_min_fairness")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		trace []sim.TraceJob
		gpus  map[string]int
	}{
		{"static60", static, map[string]int{"v100": 8, "p100": 8, "k80": 8}},
		{"max_min_fairness", public, map[string]int{"v100": 12, "p100": 12, "k80": 12}},
	} {
		fastPathAgrees(t, tc.name, tc.trace, tc.gpus, thr)
	}
}

func fastPathAgrees(t *testing.T, name string, trace []sim.TraceJob, gpus map[string]int, thr optimizer.Throughputs) {
	for _, preemption := range []bool{false, true} {
		for _, policy := range []string{"hadar", "gavel"} {
			t.Run(fmt.Sprintf("%s/%s/preemption=%v", name, policy, preemption), func(t *testing.T) {
				t.Parallel()
				cfg := config.Default()
				cfg.Preemption = preemption
				cfg.Policy = policy

				opts := cfg.PolicyOptions()
				rules := FastPathRules(cfg, slurmsim.Measured(0), sim.EveryJob(slurmsim.Measured(0).StartupDelay), &opts)
				p, err := optimizer.New(policy, opts)
				if err != nil {
					t.Fatal(err)
				}
				fast, err := sim.Run(context.Background(), sim.Config{Cluster: sim.Cluster{GPUs: gpus, GPUsPerNode: 4},
					Round: cfg.Round.Duration, Throughputs: thr, Policy: p, Rules: rules}, trace)
				if err != nil {
					t.Fatal(err)
				}
				daemon, err := Daemon(context.Background(), Options{Layout: slurmsim.GenerateLayout(gpus, 4), Config: cfg,
					Planning: thr, Timing: slurmsim.Measured(2 * time.Second)}, trace)
				if err != nil {
					t.Fatal(err)
				}
				f, d := sim.Summarize(fast), sim.Summarize(daemon.Result)
				if d.Completed != len(trace) {
					t.Fatalf("the daemon path completed %d of %d jobs", d.Completed, len(trace))
				}
				for _, m := range []struct {
					name         string
					fast, daemon float64
				}{
					{"makespan", f.MakespanS, d.MakespanS},
					{"average JCT", f.AvgJCTS, d.AvgJCTS},
				} {
					t.Logf("%s: fast path %.2f h, daemon path %.2f h (%+.1f%%)", m.name, m.fast/3600, m.daemon/3600, 100*(m.fast/m.daemon-1))
					if math.Abs(m.fast/m.daemon-1) > fastPathTolerance {
						t.Errorf("%s: fast path %.2f h, daemon path %.2f h: more than %.0f%% apart", m.name, m.fast/3600, m.daemon/3600, 100*fastPathTolerance)
					}
				}
			})
		}
	}
}
