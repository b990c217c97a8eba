package slurmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/slurm"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const demoLayout = `# demo
node1 v100 4
node2 v100 4
node3 p100 4
node4 k80 4
node5 k80 4
`

func demo(t *testing.T, tm Timing) *Cluster {
	t.Helper()
	l, err := ParseLayout(strings.NewReader(demoLayout), "demo")
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]float64{"v100": 4, "p100": 2, "k80": 1}
	return New(Config{Layout: l, Start: t0, Timing: tm, Spool: t.TempDir(),
		Rate: func(model, gpuType string, workers int) float64 { return rates[gpuType] * float64(workers) }})
}

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// state is a job's state, reason and nodes as squeue shows them.
func state(t *testing.T, c *Cluster, id string) string {
	t.Helper()
	jobs, err := c.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.JobID == id {
			return j.State + " " + j.Reason + " " + j.NodeList
		}
	}
	if r := c.Job(id); r != nil {
		return r.State
	}
	return "gone"
}

func TestParseLayout(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Layout
		wantErr    string
	}{
		{name: "demo", text: demoLayout, want: Layout{
			{Name: "node1", GPUs: []GPUGroup{{"v100", 4}}}, {Name: "node2", GPUs: []GPUGroup{{"v100", 4}}},
			{Name: "node3", GPUs: []GPUGroup{{"p100", 4}}}, {Name: "node4", GPUs: []GPUGroup{{"k80", 4}}},
			{Name: "node5", GPUs: []GPUGroup{{"k80", 4}}}}},
		{name: "two types and a CPU-only node", text: "mix a100 2 v100 2 # two types\ncpu-01\n",
			want: Layout{{Name: "mix", GPUs: []GPUGroup{{"a100", 2}, {"v100", 2}}}, {Name: "cpu-01"}}},
		{name: "bad count", text: "node1 v100 four\n", wantErr: "x:1: GPU count"},
		{name: "odd fields", text: "node1 v100\n", wantErr: "x:1: want NODENAME"},
		{name: "twice", text: "n v100 1\nn v100 1\n", wantErr: "x:2: node n given twice"},
		{name: "empty", text: "# nothing\n", wantErr: "x: no nodes"},
	} {
		got, err := ParseLayout(strings.NewReader(tc.text), "x")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestGenerateLayout(t *testing.T) {
	got := GenerateLayout(map[string]int{"v100": 6, "k80": 4}, 4)
	want := "k80-01 k80 4\nv100-01 v100 4\nv100-02 v100 2\n"
	if got.String() != want {
		t.Errorf("GenerateLayout:\n%s\nwant\n%s", got, want)
	}
	if diff := cmp.Diff(map[string]int{"v100": 6, "k80": 4}, got.GPUs()); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
}

func TestHoldReleasePin(t *testing.T) {
	ctx := context.Background()
	c := demo(t, Timing{SchedDelay: 500 * time.Millisecond})
	tagged := c.Submit(JobSpec{Comment: "hadar model=m steps=100", GPUsPerNode: 1})
	plain := c.Submit(JobSpec{GPUsPerNode: 4})
	c.AdvanceTo(at(1))
	if diff := cmp.Diff([]string{"PENDING BeginTime ", "RUNNING None node1"},
		[]string{state(t, c, tagged), state(t, c, plain)}); diff != "" {
		t.Fatalf("after submission (-want +got):\n%s", diff)
	}
	if err := c.PlaceOnNodes(ctx, tagged, []string{"node4"}); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateJobs(ctx, []string{tagged}, "StartTime=now"); err != nil {
		t.Fatal(err)
	}
	c.AdvanceTo(at(1.4))
	if got := state(t, c, tagged); got != "PENDING Priority " {
		t.Errorf("0.4 s after StartTime=now: %s", got)
	}
	c.AdvanceTo(at(1.6))
	if got := state(t, c, tagged); got != "RUNNING None node4" {
		t.Errorf("0.6 s after StartTime=now: %s", got)
	}
	c.Finish(plain) // node1 is free again
	c.AdvanceTo(at(1.7))
	if got := state(t, c, plain); got != Completed {
		t.Errorf("after Finish: %s", got)
	}
	if err := c.Hold(ctx, tagged); !errors.Is(err, slurm.ErrJobNotPending) {
		t.Errorf("hold of a running job: %v", err)
	}
	if err := c.Release(ctx, "999"); !errors.Is(err, slurm.ErrInvalidJobID) {
		t.Errorf("release of an unknown job: %v", err)
	}
	// Pinned to a node with no room: waits for it.
	c.Submit(JobSpec{GPUsPerNode: 4, Duration: time.Minute})
	big := c.Submit(JobSpec{Comment: "hadar", GPUsPerNode: 2})
	if err := c.PlaceOnNodes(ctx, big, []string{"node1"}); err != nil {
		t.Fatal(err)
	}
	_ = c.UpdateJobs(ctx, []string{big}, "StartTime=now")
	c.AdvanceTo(at(10))
	if got := state(t, c, big); got != "PENDING Resources " {
		t.Errorf("pinned to a full node: %s", got)
	}
	c.AdvanceTo(at(63))
	if got := state(t, c, big); got != "RUNNING None node1" {
		t.Errorf("after node1 freed: %s", got)
	}
}

func TestRequeueHoldBeginTime(t *testing.T) {
	ctx := context.Background()
	c := demo(t, Timing{SchedDelay: 500 * time.Millisecond, RequeueDelay: time.Second, EligibleDelay: 120 * time.Second})
	id := c.Submit(JobSpec{GPUsPerNode: 4, Duration: time.Hour})
	c.AdvanceTo(at(1))
	if err := c.RequeueHold(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := state(t, c, id); got != "PENDING job requeued in held state " {
		t.Errorf("right after requeuehold: %s", got)
	}
	// The migration: pin elsewhere, StartTime=now, release, before the
	// requeue completes; the completion then sets a begin time.
	_ = c.PlaceOnNodes(ctx, id, []string{"node2"})
	_ = c.UpdateJobs(ctx, []string{id}, "StartTime=now")
	_ = c.Release(ctx, id)
	c.AdvanceTo(at(3))
	if got := state(t, c, id); got != "PENDING BeginTime " {
		t.Errorf("after the requeue completed: %s", got)
	}
	if r := c.Job(id); !r.Begin.Equal(at(122)) || r.Restarts != 1 {
		t.Errorf("begin %v restarts %d, want %v and 1", r.Begin, r.Restarts, at(122))
	}
	_ = c.UpdateJobs(ctx, []string{id}, "StartTime=now")
	c.AdvanceTo(at(4))
	if got := state(t, c, id); got != "RUNNING None node2" {
		t.Errorf("after StartTime=now: %s", got)
	}
}

// TestRestartOnItsNodeInTheSameSecond: a job requeued and started again on
// the node it ran on fails when the start comes in the second of the
// requeue (the slurmd revoked its credential), and runs when it comes
// later; on another node it runs at once.
func TestRestartOnItsNodeInTheSameSecond(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		node    string
		restart float64 // when the job is released again, s
		want    string
	}{
		{"same node, same second", "node1", 1.3, Failed},
		{"same node, next second", "node1", 2.05, "RUNNING None node1"},
		{"other node, same second", "node2", 1.3, "RUNNING None node2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := demo(t, Timing{SchedDelay: 100 * time.Millisecond, RequeueDelay: 50 * time.Millisecond})
			id := c.Submit(JobSpec{GPUsPerNode: 4, Duration: time.Hour})
			c.AdvanceTo(at(1.2))
			if got := state(t, c, id); got != "RUNNING None node1" {
				t.Fatalf("before the requeue: %s", got)
			}
			if err := c.RequeueHold(ctx, id); err != nil {
				t.Fatal(err)
			}
			_ = c.PlaceOnNodes(ctx, id, []string{tc.node})
			_ = c.UpdateJobs(ctx, []string{id}, "StartTime=now")
			c.AdvanceTo(at(tc.restart - 0.1))
			_ = c.Release(ctx, id)
			c.AdvanceTo(at(tc.restart + 0.5))
			if got := state(t, c, id); got != tc.want {
				t.Errorf("after the restart: %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTrainingReportsAndEnds(t *testing.T) {
	c := demo(t, Timing{StartupDelay: 300 * time.Millisecond, Tick: time.Second, TickOverhead: 20 * time.Millisecond})
	id := c.Submit(JobSpec{GPUsPerNode: 1, Model: "m", Steps: 10}) // node1, v100: 4 steps/s
	c.AdvanceTo(at(2.5))
	c.syncReports()
	b, err := os.ReadFile(filepath.Join(c.cfg.Spool, "progress", id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r reportFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	// Two ticks of 1.02 s at 4 steps/s: toyjob credits the time, its overhead included.
	if diff := cmp.Diff(reportFile{JobID: id, Steps: 8.16, At: at(2.34)}, r); diff != "" {
		t.Errorf("report after two ticks (-want +got):\n%s", diff)
	}
	for c.Step() {
	}
	rec := c.Job(id)
	if rec.State != Completed || !rec.End.Equal(at(0.3+3*1.02)) {
		t.Errorf("ended %s at %v, want COMPLETED at 3.36 s", rec.State, rec.End.Sub(t0))
	}
}

// Config.Startup gives each model its own start-up in place of
// StartupDelay: a job of a slow-starting model trains that much later.
func TestTrainingStartupByModel(t *testing.T) {
	c := demo(t, Timing{StartupDelay: time.Second, Tick: time.Second})
	c.cfg.Startup = func(model string) time.Duration {
		if model == "slow" {
			return 5 * time.Second
		}
		return 0
	}
	slow := c.Submit(JobSpec{GPUsPerNode: 1, Model: "slow", Steps: 8}) // node1, v100: 4 steps/s
	quick := c.Submit(JobSpec{GPUsPerNode: 1, Model: "quick", Steps: 8})
	for c.Step() {
	}
	for _, tc := range []struct {
		id   string
		want float64
	}{{slow, 5 + 2}, {quick, 0 + 2}} {
		if rec := c.Job(tc.id); rec.State != Completed || !rec.End.Equal(at(tc.want)) {
			t.Errorf("job %s ended %s at %v, want COMPLETED at %g s", tc.id, rec.State, rec.End.Sub(t0), tc.want)
		}
	}
}

func TestTrainingResumesAfterRequeue(t *testing.T) {
	ctx := context.Background()
	c := demo(t, Timing{Tick: time.Second})
	id := c.Submit(JobSpec{Comment: "hadar", GPUsPerNode: 1, Model: "m", Steps: 12})
	_ = c.PlaceOnNodes(ctx, id, []string{"node4"}) // k80: 1 step/s
	_ = c.UpdateJobs(ctx, []string{id}, "StartTime=now")
	c.AdvanceTo(at(4.5))
	_ = c.RequeueHold(ctx, id) // 4 steps done
	_ = c.PlaceOnNodes(ctx, id, []string{"node1"})
	_ = c.UpdateJobs(ctx, []string{id}, "StartTime=now")
	_ = c.Release(ctx, id)
	for c.Step() {
	}
	rec := c.Job(id)
	// 8 steps left at 4 steps/s on the v100: two ticks from 4.5 s.
	if rec.State != Completed || !rec.End.Equal(at(6.5)) || len(rec.Runs) != 2 || rec.Runs[1].Type != "v100" {
		t.Errorf("ended %s at %v after %d runs, want COMPLETED at 6.5 s after 2", rec.State, rec.End.Sub(t0), len(rec.Runs))
	}
}

func TestFIFOAndBackfill(t *testing.T) {
	c := demo(t, Timing{SchedDelay: 500 * time.Millisecond, BackfillInterval: 2 * time.Second})
	var ids []string
	for range 4 {
		ids = append(ids, c.Submit(JobSpec{GPUsPerNode: 4, Duration: time.Minute})) // node1..node4
	}
	c.AdvanceTo(at(1))
	head := c.Submit(JobSpec{GPUsPerNode: 4, NumNodes: 2, Duration: time.Minute})
	small := c.Submit(JobSpec{GPUsPerNode: 2, Duration: time.Minute})
	c.AdvanceTo(at(1.6))
	if diff := cmp.Diff([]string{"PENDING Resources ", "PENDING Priority "}, []string{state(t, c, head), state(t, c, small)}); diff != "" {
		t.Errorf("main scheduler (-want +got):\n%s", diff)
	}
	c.AdvanceTo(at(2.1))
	if got := state(t, c, small); got != "RUNNING None node5" {
		t.Errorf("after the backfill pass at 2 s: %s", got)
	}
	if len(ids) != 4 {
		t.Fatal(ids)
	}
}

func TestBestFit(t *testing.T) {
	// Best fit: the usable node with the fewest free CPUs, the first of equals.
	c := demo(t, Timing{})
	c.SetNodeState("node2", "DRAIN")
	id := c.Submit(JobSpec{GPUsPerNode: 1, Duration: time.Minute})
	c.AdvanceTo(at(0.1))
	if got := state(t, c, id); got != "RUNNING None node1" {
		t.Errorf("got %s", got)
	}
	// A partly used node before idle ones (as job 15 of the demo went to
	// node3, beside two jobs, with node1 idle).
	c.SetNodeState("node2", "")
	_ = c.PlaceOnNodes(context.Background(), c.Submit(JobSpec{Comment: "hadar", GPUsPerNode: 1}), []string{"node4"})
	c.AdvanceTo(at(0.15))
	for _, j := range c.Records() {
		if j.Spec.Comment == "hadar" {
			_ = c.UpdateJobs(context.Background(), []string{j.ID}, "StartTime=now")
		}
	}
	c.AdvanceTo(at(0.2))
	id = c.Submit(JobSpec{GPUsPerNode: 2, Duration: time.Minute})
	c.AdvanceTo(at(0.3))
	if got := state(t, c, id); got != "RUNNING None node1" {
		t.Errorf("2 GPUs, node1 with 3 free: got %s", got)
	}
	id = c.Submit(JobSpec{GPUsPerNode: 2, Duration: time.Minute})
	c.AdvanceTo(at(0.4))
	if got := state(t, c, id); got != "RUNNING None node4" {
		t.Errorf("2 GPUs, node1 with 1 free, node4 with 3: got %s", got)
	}
	c.SetNodeState("node2", "DRAIN")
	c.SetNodeState("node1", "DOWN")
	id = c.Submit(JobSpec{GPUsPerNode: 4, Duration: time.Minute})
	c.AdvanceTo(at(0.5))
	if got := state(t, c, id); got != "RUNNING None node3" {
		t.Errorf("got %s", got)
	}
	nodes, err := c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, n.Name+" "+n.RawState+" "+n.State+" "+fmt.Sprint(slurm.GPUsByType(n.GresUsed)))
	}
	want := []string{"node1 DOWN down map[v100:3]", "node2 IDLE+DRAIN drained map[v100:0]", "node3 MIXED mixed map[p100:4]",
		"node4 MIXED mixed map[k80:3]", "node5 IDLE idle map[k80:0]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}
