package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
)

func TestRequestShape(t *testing.T) {
	tests := []struct {
		workers, perNode   int
		nodes, gpusPerNode int
	}{
		{1, 4, 1, 1},
		{4, 4, 1, 4},
		{8, 4, 2, 4},
		{6, 4, 2, 3},
		{12, 8, 2, 6},
		{7, 4, 7, 1}, // a prime wider than a node: one GPU on each of 7 nodes
		{16, 4, 4, 4},
		{3, 0, 1, 3}, // no node size: one node
	}
	for _, tc := range tests {
		n, g := RequestShape(tc.workers, tc.perNode)
		if n != tc.nodes || g != tc.gpusPerNode {
			t.Errorf("RequestShape(%d, %d) = %d x %d, want %d x %d", tc.workers, tc.perNode, n, g, tc.nodes, tc.gpusPerNode)
		}
	}
}

// recorder keeps every plan a policy made, so a test can look at them.
type recorder struct {
	optimizer.Policy
	plans []map[string][]optimizer.Task
}

func (r *recorder) Plan(s *optimizer.Snapshot) (*optimizer.Plan, error) {
	p, err := r.Policy.Plan(s)
	if err == nil {
		r.plans = append(r.plans, p.Assignments)
	}
	return p, err
}

func runRules(t *testing.T, policy string, cfg Config, trace []TraceJob) (*Result, *recorder) {
	t.Helper()
	p, err := optimizer.New(policy, optimizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Policy: p}
	cfg.Policy = rec
	if cfg.Round == 0 {
		cfg.Round = 360 * time.Second
	}
	if cfg.Throughputs == nil {
		cfg.Throughputs = tinyMatrix()
	}
	res, err := Run(context.Background(), cfg, trace)
	if err != nil {
		t.Fatal(err)
	}
	return res, rec
}

func completions(res *Result) []float64 {
	var got []float64
	for _, j := range res.Jobs {
		got = append(got, j.Completion)
	}
	return got
}

// Two-GPU jobs on nodes of 2 v100s and 2 k80s. Unshaped, the policy may
// split a gang over nodes; shaped, each 2-GPU job is one node's.
func TestShapedGangsStayOnOneNode(t *testing.T) {
	trace := []TraceJob{job(36000, 2, 0), job(36000, 2, 0), job(3600, 1, 0)}
	cluster := Cluster{GPUs: map[string]int{"v100": 4, "k80": 4}, GPUsPerNode: 2}
	_, rec := runRules(t, "hadar", Config{Cluster: cluster, Rules: Rules{Shaped: true}}, trace)
	if len(rec.plans) == 0 {
		t.Fatal("no plans")
	}
	for i, plan := range rec.plans {
		for id, tasks := range plan {
			if id == "2" {
				continue
			}
			if len(tasks) != 1 || tasks[0].GPUs != 2 {
				t.Fatalf("round %d: job %s is placed as %+v, want one node with 2 GPUs", i, id, tasks)
			}
		}
	}
}

// LAS gives the GPU to the job with the least service, so two equal jobs
// on one GPU take turns and end together. With NoStop (the daemon without
// preemption) the first one runs to its end.
func TestNoStopKeepsRunningJobs(t *testing.T) {
	trace := []TraceJob{job(7200, 1, 0), job(7200, 1, 0)}
	cluster := Cluster{GPUs: map[string]int{"v100": 1}, GPUsPerNode: 1}
	free, _ := runRules(t, "las", Config{Cluster: cluster}, trace)
	kept, _ := runRules(t, "las", Config{Cluster: cluster, Rules: Rules{NoStop: true}}, trace)
	if got := completions(free); got[0] <= 720 && got[1] <= 720 {
		t.Fatalf("with preemption the jobs should take turns, and neither end at 720 s, got %v", got)
	}
	if diff := cmp.Diff([]float64{720, 1440}, completions(kept), cmpopts.SortSlices(func(a, b float64) bool { return a < b }), cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("NoStop completions (-want +got):\n%s", diff)
	}
}

// A job ending mid-round frees its GPU for a waiting job Events.Delay later;
// without Events the waiting job starts at the next round. (A policy of
// Gavel's round mechanism keeps its round's choices in the early round.)
func TestEventsStartRoundsEarly(t *testing.T) {
	// v100 at 10 steps/s: tiresias runs the first two jobs first; job 0 ends at
	// 100 s, job 1 at 500 s; job 2 (2000 s of work) waits for a GPU.
	trace := []TraceJob{job(1000, 1, 0), job(5000, 1, 0), job(20000, 1, 0)}
	cluster := Cluster{GPUs: map[string]int{"v100": 2}, GPUsPerNode: 2}
	tests := []struct {
		name   string
		events *Events
		want   float64 // job 2's start
	}{
		{"rounds only", nil, 360},
		{"events, 5 s delay", &Events{Delay: 5 * time.Second}, 105},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := runRules(t, "tiresias", Config{Cluster: cluster, Rules: Rules{Events: tc.events}}, trace)
			if got := res.Jobs[2].FirstStart; got != tc.want {
				t.Errorf("job 2 started at %g s, want %g", got, tc.want)
			}
			if got, want := res.Jobs[2].Completion, tc.want+2000; got != want {
				t.Errorf("job 2 completed at %g s, want %g", got, want)
			}
		})
	}
}

// Every start costs StartCost of the job's time, with its GPUs held, also
// when it is longer than the round (--startup: a real job's start-up can
// be): the rest is paid in the rounds that follow.
func TestStartCost(t *testing.T) {
	trace := []TraceJob{job(36000, 1, 0)}
	cluster := Cluster{GPUs: map[string]int{"v100": 1}, GPUsPerNode: 1}
	for _, start := range []time.Duration{2 * time.Second, 1000 * time.Second} {
		res, _ := runRules(t, "yarn-cs", Config{Cluster: cluster, Rules: Rules{StartCost: EveryJob(start), Events: &Events{}}}, trace)
		want := 3600 + start.Seconds()
		if got := res.Jobs[0].Completion; math.Abs(got-want) > 1e-6 {
			t.Errorf("start %s: completion %g s, want %g (3600 s of work and the start)", start, got, want)
		}
		if got := res.BusyGPUSecs; math.Abs(got-want) > 1e-6 {
			t.Errorf("start %s: busy GPU time %g s, want %g (the start holds the GPU)", start, got, want)
		}
	}
}
