package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

// runWith runs one policy with the given options (and their copy efficiency).
func runWith(t *testing.T, name string, opts optimizer.Options, cluster Cluster, thr optimizer.Throughputs, trace []TraceJob) *Result {
	t.Helper()
	p, err := optimizer.New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	eff := opts.CopyEfficiency
	res, err := Run(context.Background(), Config{
		Cluster: cluster, Round: 360 * time.Second, Throughputs: thr, Policy: p, CopyEfficiency: eff,
	}, trace)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestHadarEHandChecked: 1-worker jobs at 10 steps/s on three v100 nodes of
// one GPU each, 360 s rounds.
func TestHadarEHandChecked(t *testing.T) {
	three := Cluster{GPUs: map[string]int{"v100": 3}, GPUsPerNode: 1}
	tests := []struct {
		name   string
		policy string
		opts   optimizer.Options
		trace  []TraceJob
		want   []float64 // completion times
		mean   float64   // copies_mean
		max    int       // copies_max
		util   float64
	}{
		{
			// One copy per node: 30 steps/s, 36000 steps in 1200 s.
			name: "three copies", policy: "hadare", trace: []TraceJob{job(36000, 1, 0)},
			want: []float64{1200}, mean: 3, max: 3, util: 1,
		},
		{
			name: "efficiency 0.9", policy: "hadare", opts: optimizer.Options{CopyEfficiency: optimizer.CopyEfficiency{Constant: 0.9}},
			trace: []TraceJob{job(36000, 1, 0)}, want: []float64{36000 / 27.0}, mean: 3, max: 3, util: 1,
		},
		{
			// The measured curve: 3 equal copies move the job at speed-up
			// 1.31 (interpolated between 2's 1.26 and 4's 1.36), 13.1
			// steps/s: 36000 steps in 2748 s.
			name: "measured curve", policy: "hadare", opts: optimizer.Options{CopyEfficiency: optimizer.MeasuredCopyEfficiency()},
			trace: []TraceJob{job(36000, 1, 0)}, want: []float64{36000 / 13.1}, mean: 3, max: 3, util: 1,
		},
		{
			// --max-copies 2: 20 steps/s.
			name: "policy limit", policy: "hadare", opts: optimizer.Options{MaxCopies: 2},
			trace: []TraceJob{job(36000, 1, 0)}, want: []float64{1800}, mean: 2, max: 2, util: 2.0 / 3,
		},
		{
			name: "hadar runs no copies", policy: "hadar", trace: []TraceJob{job(36000, 1, 0)},
			want: []float64{3600}, util: 1.0 / 3,
		},
		{
			// Round 1: the short job runs alone (it ends with the round);
			// the long one is critical and runs 2 copies (7200 steps).
			// Then it runs 3 copies for 6 rounds (64800 steps): 2520 s,
			// every GPU busy all along. Copies per round: 2 once, then 3
			// six times: mean 20/7.
			name: "copies mean over the rounds with copies", policy: "hadare",
			trace: []TraceJob{job(72000, 1, 0), job(3600, 1, 0)},
			want:  []float64{2520, 360}, mean: 20.0 / 7, max: 3, util: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runWith(t, tc.policy, tc.opts, three, tinyMatrix(), tc.trace)
			for i, j := range res.Jobs {
				if math.Abs(j.Completion-tc.want[i]) > 1e-6 {
					t.Errorf("job %d completes at %g s, want %g", i, j.Completion, tc.want[i])
				}
			}
			m := Summarize(res)
			if math.Abs(m.CopiesMean-tc.mean) > 1e-9 || m.CopiesMax != tc.max {
				t.Errorf("copies mean %g max %d, want %g and %d", m.CopiesMean, m.CopiesMax, tc.mean, tc.max)
			}
			if math.Abs(m.Utilization-tc.util) > 1e-9 {
				t.Errorf("utilization %g, want %g", m.Utilization, tc.util)
			}
		})
	}
}

// TestHadarEAcceptance checks HadarE's claims (docs/hadare.md has the full
// table and the commands):
//
//   - on static multi-GPU traces on Gavel's 36:36:36 cluster (4 GPUs per
//     node), where every other policy's makespan is bound by the longest
//     jobs, HadarE's makespan is at most 0.7x Gavel's and its utilization at
//     least 1.3x Hadar's, at copy efficiency 1 and 0.9. (With 250 or more
//     jobs some seeds load the cluster so that Hadar already keeps it over
//     77% busy; 1.3x that is above 100% and cannot be met by any policy:
//     docs/hadare.md lists them.)
//     At the measured curve (optimizer.MeasuredCopyEfficiency) neither holds
//     (docs/hadare.md), but HadarE is no worse than Hadar in makespan and
//     average JCT.
//   - on a contended cluster (12:12:12, 160 jobs) HadarE is no worse than
//     Hadar in makespan and average JCT, at efficiency 1 and at the measured
//     curve.
func TestHadarEAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates several traces")
	}
	thr := profiles.Default()
	gen := func(jobs int, seed int64) []TraceJob {
		trace, err := Generate(GenerateOptions{Jobs: jobs, Seed: seed, MultiGPU: true, Throughputs: thr, ReferenceType: "v100"})
		if err != nil {
			t.Fatal(err)
		}
		return trace
	}
	gavels := Cluster{GPUs: map[string]int{"v100": 36, "p100": 36, "k80": 36}, GPUsPerNode: 4}
	for seed := int64(0); seed < 3; seed++ {
		trace := gen(200, seed)
		h := Summarize(runWith(t, "hadar", optimizer.Options{}, gavels, thr, trace))
		g := Summarize(runWith(t, "gavel", optimizer.Options{}, gavels, thr, trace))
		for _, eff := range []float64{1, 0.9} {
			e := Summarize(runWith(t, "hadare", optimizer.Options{CopyEfficiency: optimizer.CopyEfficiency{Constant: eff}}, gavels, thr, trace))
			t.Logf("36:36:36 seed %d eff %g: makespan hadare %.1f h gavel %.1f h (%.2fx); util hadare %.3f hadar %.3f (%.2fx); copies mean %.1f max %d",
				seed, eff, e.MakespanS/3600, g.MakespanS/3600, e.MakespanS/g.MakespanS, e.Utilization, h.Utilization, e.Utilization/h.Utilization, e.CopiesMean, e.CopiesMax)
			if e.MakespanS > 0.7*g.MakespanS {
				t.Errorf("seed %d eff %g: hadare's makespan is %.3fx gavel's, want <= 0.7x", seed, eff, e.MakespanS/g.MakespanS)
			}
			if e.Utilization < 1.3*h.Utilization {
				t.Errorf("seed %d eff %g: hadare's utilization is %.3fx hadar's, want >= 1.3x", seed, eff, e.Utilization/h.Utilization)
			}
		}
		// At the measured curve copies pay far less (1.44x at 8 copies),
		// but a job forks only where that is faster: never worse than Hadar.
		e := Summarize(runWith(t, "hadare", optimizer.Options{CopyEfficiency: optimizer.MeasuredCopyEfficiency()}, gavels, thr, trace))
		t.Logf("36:36:36 seed %d measured curve: makespan hadare %.1f h hadar %.1f h gavel %.1f h; avg JCT hadare %.2f h hadar %.2f h; copies mean %.1f max %d",
			seed, e.MakespanS/3600, h.MakespanS/3600, g.MakespanS/3600, e.AvgJCTS/3600, h.AvgJCTS/3600, e.CopiesMean, e.CopiesMax)
		if e.MakespanS > h.MakespanS || e.AvgJCTS > h.AvgJCTS {
			t.Errorf("seed %d measured curve: hadare's makespan %.1f h, avg JCT %.2f h; hadar's %.1f h, %.2f h: want no worse", seed, e.MakespanS/3600, e.AvgJCTS/3600, h.MakespanS/3600, h.AvgJCTS/3600)
		}
	}
	contended := Cluster{GPUs: map[string]int{"v100": 12, "p100": 12, "k80": 12}, GPUsPerNode: 4}
	for seed := int64(0); seed < 3; seed++ {
		trace := gen(160, seed)
		h := Summarize(runWith(t, "hadar", optimizer.Options{}, contended, thr, trace))
		for _, eff := range []optimizer.CopyEfficiency{{}, optimizer.MeasuredCopyEfficiency()} {
			e := Summarize(runWith(t, "hadare", optimizer.Options{CopyEfficiency: eff}, contended, thr, trace))
			t.Logf("12:12:12 seed %d eff %v: makespan hadare %.1f h hadar %.1f h; avg JCT hadare %.2f h hadar %.2f h",
				seed, eff, e.MakespanS/3600, h.MakespanS/3600, e.AvgJCTS/3600, h.AvgJCTS/3600)
			if e.MakespanS > h.MakespanS {
				t.Errorf("seed %d eff %v: hadare's makespan %.1f h is worse than hadar's %.1f h", seed, eff, e.MakespanS/3600, h.MakespanS/3600)
			}
			if e.AvgJCTS > h.AvgJCTS {
				t.Errorf("seed %d eff %v: hadare's avg JCT %.2f h is worse than hadar's %.2f h", seed, eff, e.AvgJCTS/3600, h.AvgJCTS/3600)
			}
		}
	}
}
