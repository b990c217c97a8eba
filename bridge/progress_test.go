package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hadar-sched/hadar/jobproto"
)

// TestArrayTaskProgress: an array task reports under its own SLURM_JOB_ID
// (the raw id), and hadar reads it for the task it addresses as ARRAY_TASK.
func TestArrayTaskProgress(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit("hadar model=resnet50-bs64 steps=100000", 1, 1, t0)
	h.fc.mu.Lock()
	h.fc.jobs[id].arrayJob, h.fc.jobs[id].arrayTask = "28", "0"
	h.fc.mu.Unlock()
	b := h.bridge()
	h.cycle(b) // placed and started
	if j := h.fc.job(id); j.state != "RUNNING" {
		t.Fatalf("array task %s: %s %s", id, j.state, j.reason)
	}
	h.clock.advance(time.Minute)
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, id, 1150, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Second)
	h.cycle(b)
	prog, err := b.state.Progress(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, ok := prog["28_0"]
	if !ok || !p.Reported || p.ReportedSteps != 1150 {
		t.Fatalf("progress of 28_0 = %+v (found %v), want the task's report of 1150 steps", p, ok)
	}
}

// TestLearnedSampleNeedsOneRun: a throughput sample is the steps between two
// reports of one run on one placement. A job requeued and started again on
// the same nodes keeps its placement string, so only the run's start
// (TimeUsed) tells that the earlier report came from the run before; a
// sample across the restart counted its time off as slow training
// (TestModernSite, CI of 2026-12-03: 1.02 steps/s learned against a true
// 1.80).
func TestLearnedSampleNeedsOneRun(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	earlier := JobProgress{Reported: true, ReportedSteps: 100, ReportedAt: now.Add(-20 * time.Second),
		ReportedPlacement: "node1:2", EstimatedAt: now.Add(-20 * time.Second), Done: 100}
	report := &jobproto.Progress{Steps: 140, At: now.Add(-time.Second)}
	for _, tc := range []struct {
		name     string
		timeUsed time.Duration
		nodes    []string
		want     *sample
	}{
		{"same run", time.Minute, []string{"node1"}, &sample{steps: 40, seconds: 19}},
		{"restarted on the same nodes since", 10 * time.Second, []string{"node1"}, nil},
		{"run time unknown", 0, []string{"node1"}, nil},
		{"moved", time.Minute, []string{"node2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jv := &JobView{ID: "7", Class: ClassRunning, State: "RUNNING", Nodes: tc.nodes, GPUsPerNode: 2, Workers: 2, TimeUsed: tc.timeUsed}
			_, got := advanceProgress(earlier, jv, "v100", 2, report, now)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sample{})); diff != "" {
				t.Errorf("sample (-want +got):\n%s", diff)
			}
		})
	}
}
