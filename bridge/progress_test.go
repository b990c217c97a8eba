package bridge

import (
	"context"
	"testing"
	"time"

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
