package bridge

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/slurm"
)

// timedCluster adds run times to the fake cluster's jobs, as squeue's %M
// gives them: the time since the job was first seen running.
type timedCluster struct {
	*fakeCluster
	clock   *manualClock
	mu      sync.Mutex
	started map[string]time.Time
}

func (c *timedCluster) Jobs(ctx context.Context) ([]slurm.Job, error) {
	jobs, err := c.fakeCluster.Jobs(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for i := range jobs {
		j := &jobs[i]
		if j.State != "RUNNING" {
			delete(c.started, j.ID())
			continue
		}
		s, ok := c.started[j.ID()]
		if !ok {
			s = now
			c.started[j.ID()] = s
		}
		j.TimeUsed = now.Sub(s).Truncate(time.Second)
	}
	return jobs, err
}

func (c *timedCluster) restart(id string) {
	c.mu.Lock()
	delete(c.started, id)
	c.mu.Unlock()
}

func TestRecordHistory(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.MoveWithoutProgress = true }) // its jobs report no progress
	tc := &timedCluster{fakeCluster: h.fc, clock: h.clock, started: map[string]time.Time{}}
	b, err := New(h.cfg, Deps{Cluster: tc, Store: h.store, Clock: h.clock,
		LookupUID: func(string) (int, error) { return os.Getuid(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	var tagged []string
	for i := range 3 {
		tagged = append(tagged, h.fc.submit(resnet, 1+i%2, 1, t0.Add(-time.Duration(10-i)*time.Minute)))
	}
	untagged := h.fc.submit("", 2, 1, t0.Add(-time.Hour))
	for range 3 {
		if _, err := b.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		h.clock.advance(time.Minute)
	}
	// The first tagged job is moved by hand (as a requeue would): a new span.
	moved := tagged[0]
	h.fc.mu.Lock()
	j := h.fc.jobs[moved]
	from := j.nodes[0]
	to := "node5"
	if from == to {
		to = "node4"
	}
	j.nodes, j.reqNodes = []string{to}, []string{to}
	h.fc.mu.Unlock()
	tc.restart(moved)
	h.fc.finish(tagged[1])
	if _, err := b.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Minute)
	if _, err := b.Cycle(ctx); err != nil {
		t.Fatal(err)
	}

	hist, err := statedb.OpenHistory(ctx, filepath.Join(h.dataDir, statedb.File))
	if err != nil {
		t.Fatal(err)
	}
	defer hist.Close()
	if !hist.HasHistory() {
		t.Fatal("no history tables")
	}
	rounds, err := hist.Rounds(ctx, time.Time{})
	if err != nil || len(rounds) != 5 {
		t.Fatalf("rounds: %d %v", len(rounds), err)
	}
	if r, _ := hist.Rounds(ctx, t0.Add(150*time.Second)); len(r) != 2 {
		t.Errorf("rounds since t0+150s: %d, want 2", len(r))
	}
	gpus, err := hist.GPUs(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string]int{}
	for _, g := range gpus {
		if g.At.Equal(t0) {
			totals[g.Type] = g.Total
		}
		if g.Used > g.Total || g.Hadar > g.Used {
			t.Errorf("sample %+v", g)
		}
	}
	if totals["v100"] != 8 || totals["p100"] != 4 || totals["k80"] != 8 || len(gpus) != 15 {
		t.Errorf("GPU totals at t0 %v, %d samples", totals, len(gpus))
	}
	used, hadar := 0, 0
	for _, g := range gpus[len(gpus)-3:] {
		used += g.Used
		hadar += g.Hadar
	}
	if used != 2+1+1 || hadar != 2 { // the untagged job (2 GPUs), tagged[0] and tagged[2] (1 each)
		t.Errorf("last GPU samples: %+v", gpus[len(gpus)-3:])
	}
	queue, err := hist.Queue(ctx, time.Time{})
	if err != nil || len(queue) != 5 {
		t.Fatalf("queue: %d %v", len(queue), err)
	}
	if q := queue[len(queue)-1]; q.RunningTagged != 2 || q.RunningOther != 1 || q.PendingTagged != 0 {
		t.Errorf("last queue sample %+v", q)
	}
	spans, err := hist.Spans(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[string][]statedb.JobSpan{}
	for _, s := range spans {
		byJob[s.JobID] = append(byJob[s.JobID], s)
	}
	if len(byJob[untagged]) != 1 || byJob[untagged][0].Tagged {
		t.Errorf("untagged job spans %+v", byJob[untagged])
	}
	// (The next round may move it back: the policy prefers its old node.)
	if s := byJob[moved]; len(s) < 2 || !s[0].First || s[1].First || s[0].Nodes[0] != from || s[1].Nodes[0] != to {
		t.Errorf("moved job %s spans %+v", moved, s)
	}
	if s := byJob[tagged[1]]; len(s) != 1 || !s[0].LastSeen.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("finished job spans %+v", s)
	}
	if s := byJob[tagged[2]]; len(s) != 1 || s[0].GPUType == "" || s[0].Model == "" || !s[0].Tagged ||
		!s[0].Submitted.Equal(t0.Add(-8*time.Minute)) || !s[0].LastSeen.Equal(t0.Add(4*time.Minute)) {
		t.Errorf("long job spans %+v", s)
	}
	if r, _ := hist.Spans(ctx, t0.Add(3*time.Minute)); len(r) != 4 {
		t.Errorf("spans seen since t0+3m: %d, want 4 (untagged, moved after the move, tagged[2]; the finished one ended at t0+2m)", len(r))
	}
	decisions, err := hist.Decisions(ctx, 1)
	if err != nil || len(decisions) == 0 || decisions[0].Kind != string(DecidePlace) {
		t.Errorf("decisions %v %v", decisions, err)
	}
	actions, err := hist.Actions(ctx, 1)
	if err != nil || len(actions) == 0 {
		t.Errorf("actions %v %v", actions, err)
	}
}

// TestHistorySamplesAfterPlacement: the GPU sample of a round counts what
// the round placed, not only what it observed before placing.
func TestHistorySamplesAfterPlacement(t *testing.T) {
	h := newHarness(t, nil)
	h.fc.submit(resnet, 4, 1, t0)
	b := h.bridge()
	h.cycle(b)
	ctx := context.Background()
	hist, err := statedb.OpenHistory(ctx, filepath.Join(h.dataDir, statedb.File))
	if err != nil {
		t.Fatal(err)
	}
	defer hist.Close()
	gpus, err := hist.GPUs(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	used, hadar := 0, 0
	for _, g := range gpus {
		used += g.Used
		hadar += g.Hadar
	}
	if used != 4 || hadar != 4 {
		t.Errorf("first round's sample: used %d, hadar %d; want the 4 GPUs it placed", used, hadar)
	}
}
