package sim

import (
	"context"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

// simulatePolicies runs the named policies over one generated trace.
func simulatePolicies(t *testing.T, gen GenerateOptions, cluster map[string]int, names ...string) map[string]Metrics {
	t.Helper()
	thr := profiles.Default()
	gen.Throughputs = thr
	gen.ReferenceType = "v100"
	trace, err := Generate(gen)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Metrics{}
	for _, name := range names {
		p, err := optimizer.New(name, optimizer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Config{
			Cluster: Cluster{GPUs: cluster, GPUsPerNode: 4}, Round: 360 * time.Second,
			Throughputs: thr, Policy: p,
		}, trace)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = Summarize(res)
	}
	return out
}

// TestHadarBeatsGavelWhenContended checks the headline claim on contended
// static multi-GPU traces (160 jobs on 12:12:12, several seeds): Hadar's
// makespan is at least 1.15x shorter than Gavel's, and its average JCT stays
// within 10% of Gavel's (it is better on most seeds; docs/results.md has the
// full table and the gap to gavel-makespan, which is not asserted here).
func TestHadarBeatsGavelWhenContended(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates several traces")
	}
	for seed := int64(0); seed < 3; seed++ {
		m := simulatePolicies(t, GenerateOptions{Jobs: 160, Seed: seed, MultiGPU: true},
			map[string]int{"v100": 12, "p100": 12, "k80": 12}, "hadar", "gavel")
		h, g := m["hadar"], m["gavel"]
		t.Logf("seed %d: makespan hadar %.1f h gavel %.1f h (%.2fx); avg JCT hadar %.1f h gavel %.1f h",
			seed, h.MakespanS/3600, g.MakespanS/3600, g.MakespanS/h.MakespanS, h.AvgJCTS/3600, g.AvgJCTS/3600)
		if g.MakespanS < 1.15*h.MakespanS {
			t.Errorf("seed %d: gavel's makespan is only %.3fx hadar's, want >= 1.15x", seed, g.MakespanS/h.MakespanS)
		}
		if h.AvgJCTS > 1.10*g.AvgJCTS {
			t.Errorf("seed %d: hadar's avg JCT %.1f h is more than 10%% above gavel's %.1f h", seed, h.AvgJCTS/3600, g.AvgJCTS/3600)
		}
	}
}

// TestHadarOnGavelsClusterWithArrivals checks the claim on 36:36:36 with
// Poisson arrivals: Hadar's average JCT is no worse than Gavel's and its
// makespan within 5% of gavel-makespan's.
func TestHadarOnGavelsClusterWithArrivals(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates several traces")
	}
	for seed := int64(0); seed < 2; seed++ {
		m := simulatePolicies(t, GenerateOptions{Jobs: 300, Seed: seed, MultiGPU: true, ArrivalRate: 4},
			map[string]int{"v100": 36, "p100": 36, "k80": 36}, "hadar", "gavel", "gavel-makespan")
		h, g, gm := m["hadar"], m["gavel"], m["gavel-makespan"]
		t.Logf("seed %d: avg JCT hadar %.2f h gavel %.2f h; makespan hadar %.1f h gavel-makespan %.1f h",
			seed, h.AvgJCTS/3600, g.AvgJCTS/3600, h.MakespanS/3600, gm.MakespanS/3600)
		if h.AvgJCTS > g.AvgJCTS {
			t.Errorf("seed %d: hadar's avg JCT %.2f h is worse than gavel's %.2f h", seed, h.AvgJCTS/3600, g.AvgJCTS/3600)
		}
		if h.MakespanS > 1.05*gm.MakespanS {
			t.Errorf("seed %d: hadar's makespan %.1f h is more than 5%% above gavel-makespan's %.1f h", seed, h.MakespanS/3600, gm.MakespanS/3600)
		}
	}
}

// TestHadarFluidPlanShortensMakespan guards the fluid LP's place in Hadar
// (docs/policies.md): on contended static traces Hadar with the LP finishes
// sooner than Hadar by prices alone (FluidEvery 0), over five traces in all,
// and never more than 1% later on one (seeds 2 and 3 end 0.4% later since
// the incumbency rule). docs/results.md has the measured gains (e.g. 173.0 h ->
// 167.1 h on seed 0).
func TestHadarFluidPlanShortensMakespan(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates several traces")
	}
	thr := profiles.Default()
	sumWith, sumWithout := 0.0, 0.0
	defer func() {
		t.Logf("five traces: makespans with the fluid LP %.1f h in all, prices alone %.1f h", sumWith/3600, sumWithout/3600)
		if sumWith >= sumWithout {
			t.Errorf("the fluid LP did not shorten the makespans: %.1f h vs %.1f h in all", sumWith/3600, sumWithout/3600)
		}
	}()
	for seed := int64(0); seed < 5; seed++ {
		trace, err := Generate(GenerateOptions{Jobs: 160, Seed: seed, MultiGPU: true, Throughputs: thr, ReferenceType: "v100"})
		if err != nil {
			t.Fatal(err)
		}
		makespan := func(every int) float64 {
			res, err := Run(context.Background(), Config{
				Cluster: Cluster{GPUs: map[string]int{"v100": 12, "p100": 12, "k80": 12}, GPUsPerNode: 4},
				Round:   360 * time.Second, Throughputs: thr,
				Policy: optimizer.NewHadar(optimizer.Options{Hadar: optimizer.HadarOptions{FluidEvery: every}}),
			}, trace)
			if err != nil {
				t.Fatal(err)
			}
			return Summarize(res).MakespanS
		}
		with, without := makespan(10), makespan(-1)
		sumWith, sumWithout = sumWith+with, sumWithout+without
		t.Logf("seed %d: makespan with the fluid LP %.1f h, prices alone %.1f h", seed, with/3600, without/3600)
		if with > 1.01*without {
			t.Errorf("seed %d: the fluid LP made the makespan more than 1%% longer: %.1f h vs %.1f h", seed, with/3600, without/3600)
		}
	}
}
