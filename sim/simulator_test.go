package sim

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

func tinyMatrix() optimizer.Throughputs {
	thr := optimizer.Throughputs{}
	thr.Set("fast-on-v100", "v100", 1, 10)
	thr.Set("fast-on-v100", "k80", 1, 2)
	thr.Set("fast-on-v100", "v100", 2, 18)
	thr.Set("fast-on-v100", "k80", 2, 3)
	return thr
}

func runOne(t *testing.T, policy string, cluster map[string]int, trace []TraceJob) *Result {
	t.Helper()
	p, err := optimizer.New(policy, optimizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{
		Cluster: Cluster{GPUs: cluster, GPUsPerNode: 4}, Round: 360 * time.Second,
		Throughputs: tinyMatrix(), Policy: p,
	}, trace)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func job(steps float64, workers int, arrival float64) TraceJob {
	return TraceJob{JobType: "fast-on-v100", TotalSteps: steps, ScaleFactor: workers, PriorityWeight: 1, SLO: -1, Arrival: arrival}
}

func TestRunHandChecked(t *testing.T) {
	tests := []struct {
		name    string
		cluster map[string]int
		trace   []TraceJob
		// want are completion times in seconds, by job.
		want []float64
	}{
		{
			name: "one job on its fastest GPU", cluster: map[string]int{"v100": 1, "k80": 1},
			trace: []TraceJob{job(36000, 1, 0)}, want: []float64{3600},
		},
		{
			// The second job finds the v100 taken and runs on the k80.
			name: "second job on the slower type", cluster: map[string]int{"v100": 1, "k80": 1},
			trace: []TraceJob{job(3600, 1, 0), job(720, 1, 0)}, want: []float64{360, 360},
		},
		{
			// A job arriving mid-round waits for the next round (and then
			// for the 1 h job, which sets the makespan).
			name: "arrival waits for the round", cluster: map[string]int{"v100": 1},
			trace: []TraceJob{job(36000, 1, 0), job(3600, 1, 100)}, want: []float64{3600, 3600 + 360},
		},
		{
			name: "idle cluster jumps to the next arrival", cluster: map[string]int{"v100": 1},
			trace: []TraceJob{job(3600, 1, 0), job(3600, 1, 10000)}, want: []float64{360, 10360},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runOne(t, "hadar", tc.cluster, tc.trace)
			var got []float64
			for _, j := range res.Jobs {
				got = append(got, j.Completion)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
				t.Errorf("completion times (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	r := &Result{
		TotalGPUs: 2, BusyGPUSecs: 300, IdealGPUSecs: 150, Rounds: 3,
		SchedTimes: []time.Duration{time.Millisecond, 3 * time.Millisecond},
		Jobs: []JobResult{
			{Arrival: 0, FirstStart: 0, Completion: 100, IsolatedJCT: 50},
			{Arrival: 50, FirstStart: 100, Completion: 250, IsolatedJCT: 100},
		},
	}
	got := Summarize(r)
	want := Metrics{
		Jobs: 2, Completed: 2, MakespanS: 250, AvgJCTS: 150, P50JCTS: 150, P99JCTS: 199,
		AvgQueueS: 25, FTFMean: 2, FTFMax: 2, Utilization: 0.6, GPUHours: 300.0 / 3600, TypeEfficiency: 0.5,
		Rounds: 3, InvariantChecks: 3,
		SchedTimeMeanS: 0.002, SchedTimeP99S: 0.00298, SchedTimeMaxS: 0.003,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
}

// TestTypeEfficiency: the ideal GPU time is every job's work on its fastest
// type (here 3600 steps at 10 steps/s, twice), whatever the policy did; the
// busy time exceeds it exactly when some work ran on the slower K80.
func TestTypeEfficiency(t *testing.T) {
	trace := []TraceJob{job(3600, 1, 0), job(3600, 1, 0)}
	tests := []struct {
		name    string
		cluster map[string]int
		slower  bool
	}{
		{"fastest type only", map[string]int{"v100": 1}, false},
		{"a job sent to the K80", map[string]int{"v100": 1, "k80": 1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runOne(t, "hadar", tc.cluster, trace)
			if math.Abs(res.IdealGPUSecs-720) > 1e-6 {
				t.Errorf("IdealGPUSecs = %v, want 720", res.IdealGPUSecs)
			}
			m := Summarize(res)
			if got := m.TypeEfficiency < 1-1e-9; got != tc.slower || m.TypeEfficiency > 1+1e-9 {
				t.Errorf("TypeEfficiency = %v (busy %v GPU-s), want below 1: %v", m.TypeEfficiency, res.BusyGPUSecs, tc.slower)
			}
			if math.Abs(m.GPUHours-res.BusyGPUSecs/3600) > 1e-9 {
				t.Errorf("GPUHours = %v, want %v", m.GPUHours, res.BusyGPUSecs/3600)
			}
		})
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	p, _ := optimizer.New("hadar", optimizer.Options{})
	base := Config{Cluster: Cluster{GPUs: map[string]int{"v100": 1}}, Round: time.Minute, Throughputs: tinyMatrix(), Policy: p}
	tests := []struct {
		name   string
		mutate func(*Config)
		trace  []TraceJob
		want   string
	}{
		{"unknown job type", func(*Config) {}, []TraceJob{{JobType: "nope", TotalSteps: 1, ScaleFactor: 1}}, "not in the throughput matrix"},
		{"gang larger than any type", func(*Config) {}, []TraceJob{job(10, 2, 0)}, "no GPU type"},
		{"no GPUs", func(c *Config) { c.Cluster.GPUs = map[string]int{} }, []TraceJob{job(10, 1, 0)}, "no GPUs"},
		{"zero round", func(c *Config) { c.Round = 0 }, []TraceJob{job(10, 1, 0)}, "round must be positive"},
		{"no policy", func(c *Config) { c.Policy = nil }, []TraceJob{job(10, 1, 0)}, "no policy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mutate(&cfg)
			_, err := Run(context.Background(), cfg, tc.trace)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// arrivalsTrace is a 40-job trace with arrivals on the embedded matrix, for
// tests that run every policy over it.
func arrivalsTrace(t *testing.T) ([]TraceJob, optimizer.Throughputs) {
	t.Helper()
	thr := profiles.Default()
	trace, err := Generate(GenerateOptions{Jobs: 40, Seed: 3, MultiGPU: true, ArrivalRate: 6, Throughputs: thr, ReferenceType: "v100"})
	if err != nil {
		t.Fatal(err)
	}
	return trace, thr
}

// TestRunIsDeterministic runs every policy twice over a generated trace on
// the embedded matrix: the outcomes (all but the timing) must match, and the
// simulator checks every plan's invariants on the way.
func TestRunIsDeterministic(t *testing.T) {
	trace, thr := arrivalsTrace(t)
	for _, name := range optimizer.Names() {
		t.Run(name, func(t *testing.T) {
			var outs [2][]JobResult
			for i := range outs {
				p, _ := optimizer.New(name, optimizer.Options{Seed: 1})
				res, err := Run(context.Background(), Config{
					Cluster: Cluster{GPUs: map[string]int{"v100": 8, "p100": 8, "k80": 8}, GPUsPerNode: 4},
					Round:   360 * time.Second, Throughputs: thr, Policy: p,
				}, trace)
				if err != nil {
					t.Fatal(err)
				}
				outs[i] = res.Jobs
				for _, j := range res.Jobs {
					if j.Completion < j.Arrival {
						t.Fatalf("job %s did not complete", j.ID)
					}
				}
			}
			if diff := cmp.Diff(outs[0], outs[1]); diff != "" {
				t.Errorf("two runs differ (-first +second):\n%s", diff)
			}
		})
	}
}
