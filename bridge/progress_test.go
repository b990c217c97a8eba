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
//
// The interval is bounded by the daemon's clock: a report's timestamp is
// the user's and is believed only between the daemon's previous look at
// the job and this one (security review H1: one report 1 ns after another
// made a rate of 1.7e308), and it is at least minInterval.
func TestLearnedSampleNeedsOneRun(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	lastLook := now.Add(-20 * time.Second)
	earlier := JobProgress{Reported: true, ReportedSteps: 100, ReportedAt: now.Add(-25 * time.Second),
		ReportedPlacement: "node1:2", EstimatedAt: lastLook, Done: 100}
	base := sampleBase{steps: 100, at: now.Add(-time.Minute), placement: "node1:2"}
	report := &jobproto.Progress{Steps: 140, At: now.Add(-time.Second)}
	forged := &jobproto.Progress{Steps: 140, At: earlier.ReportedAt.Add(time.Nanosecond)}
	future := &jobproto.Progress{Steps: 140, At: now.Add(59 * time.Second)}
	for _, tc := range []struct {
		name     string
		base     sampleBase
		report   *jobproto.Progress
		timeUsed time.Duration
		nodes    []string
		want     *sample
		wantBase sampleBase
	}{
		{"same run", base, report, 2 * time.Minute, []string{"node1"}, &sample{steps: 40, seconds: 59}, sampleBase{140, now.Add(-time.Second), "node1:2"}},
		{"a timestamp before the daemon's last look", base, forged, 2 * time.Minute, []string{"node1"}, &sample{steps: 40, seconds: 40}, sampleBase{140, lastLook, "node1:2"}},
		{"a timestamp in the future", base, future, 2 * time.Minute, []string{"node1"}, &sample{steps: 40, seconds: 60}, sampleBase{140, now, "node1:2"}},
		{"too soon: the base stays", sampleBase{100, now.Add(-10 * time.Second), "node1:2"}, report, 2 * time.Minute, []string{"node1"}, nil,
			sampleBase{100, now.Add(-10 * time.Second), "node1:2"}},
		{"no base (first report, or after a restart)", sampleBase{}, report, 2 * time.Minute, []string{"node1"}, nil, sampleBase{140, now.Add(-time.Second), "node1:2"}},
		{"restarted on the same nodes since", base, report, 10 * time.Second, []string{"node1"}, nil, sampleBase{140, now.Add(-time.Second), "node1:2"}},
		{"run time unknown", base, report, 0, []string{"node1"}, nil, sampleBase{140, now.Add(-time.Second), "node1:2"}},
		{"moved", base, report, 2 * time.Minute, []string{"node2"}, nil, sampleBase{140, now.Add(-time.Second), "node2:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jv := &JobView{ID: "7", Class: ClassRunning, State: "RUNNING", Nodes: tc.nodes, GPUsPerNode: 2, Workers: 2, TimeUsed: tc.timeUsed}
			_, gotBase, got := advanceProgress(earlier, tc.base, jv, "v100", 2, tc.report, now, 30*time.Second)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sample{})); diff != "" {
				t.Errorf("sample (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBase, gotBase, cmp.AllowUnexported(sampleBase{})); diff != "" {
				t.Errorf("base (-want +got):\n%s", diff)
			}
		})
	}
}
