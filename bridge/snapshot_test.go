package bridge

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

var reFormatArg = regexp.MustCompile(`-o '([^']*)'`)

// fixtureClient serves an squeue fixture and a node fixture from
// slurm/testdata through a FakeRunner under the argv the Client really
// runs (slurm.JobQueryArgs, slurm.NodeQueryArgs). Squeue fixtures captured
// with another -o format are parsed with it and re-printed in
// slurm.JobFormat (checked by a round trip).
func fixtureClient(t testing.TB, squeueFixture, nodeFixture string) *slurm.Client {
	t.Helper()
	fx, err := slurm.LoadFixture(filepath.Join("..", "slurm", "testdata", squeueFixture))
	if err != nil {
		t.Fatal(err)
	}
	m := reFormatArg.FindStringSubmatch(fx.Command)
	if m == nil {
		t.Fatalf("%s: no -o format on line 1: %s", squeueFixture, fx.Command)
	}
	out := fx.Output
	if m[1] != slurm.JobFormat {
		jobs, errs := slurm.ParseJobsFormat(bytes.NewReader(fx.Output), m[1])
		if len(errs) > 0 {
			t.Fatalf("%s: %v", squeueFixture, errs)
		}
		out = renderSqueue(jobs)
		back, errs := slurm.ParseJobs(bytes.NewReader(out))
		if len(errs) > 0 {
			t.Fatalf("re-printed %s: %v", squeueFixture, errs)
		}
		if diff := cmp.Diff(jobs, back); diff != "" {
			t.Fatalf("re-printing %s in JobFormat changed it (-orig +reparsed):\n%s", squeueFixture, diff)
		}
	}
	r := slurm.NewFakeRunner()
	r.Set(slurm.JobQueryArgs, out, nil)
	if err := r.SetFixture(slurm.NodeQueryArgs, filepath.Join("..", "slurm", "testdata", nodeFixture)); err != nil {
		t.Fatal(err)
	}
	return slurm.NewClient(r, nil)
}

func openStore(t testing.TB) *profiles.Store {
	t.Helper()
	st, err := profiles.Open(context.Background(), filepath.Join(t.TempDir(), "hadar.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func viewFromFixtures(t *testing.T, c *slurm.Client, st *profiles.Store, defaultModel string, aliases map[string]string) (*View, optimizer.Throughputs) {
	t.Helper()
	ctx := context.Background()
	jobs, err := c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := st.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 15, 0, 0, 0, time.Local)
	// These queues were captured when job_submit.lua held tagged jobs
	// with priority 0 (JobHeldUser); today the same jobs wait on its lease.
	for i := range jobs {
		if j := &jobs[i]; jobproto.IsTagged(j.Comment) && j.Reason == "JobHeldUser" {
			j.Reason, j.StartTime, j.Priority = "BeginTime", now.Add(fakeLease), 1000
		}
	}
	v := BuildView(ViewInput{
		Now: now, Jobs: jobs, Nodes: nodes, Lease: fakeLease,
		ResolveGPU:   func(s string) (string, error) { return st.ResolveGPUType(ctx, s) },
		Models:       jobproto.NewModelResolver(tp.JobTypes(), aliases),
		DefaultModel: defaultModel, Throughput: tp,
	})
	return v, tp
}

type jobSummary struct {
	Class   JobClass
	Model   string
	Workers int
	Held    bool
	Problem bool
}

func summarize(v *View) map[string]jobSummary {
	out := map[string]jobSummary{}
	for _, j := range v.Jobs {
		out[j.ID] = jobSummary{j.Class, j.Model, j.Workers, j.Held, j.Problem != ""}
	}
	return out
}

func TestSnapshotFromFixtures(t *testing.T) {
	st := openStore(t)
	aliases := map[string]string{"resnet50": "ResNet-50 (batch size 64)"}
	submit := time.Date(2026, 11, 29, 14, 47, 7, 0, time.Local)

	t.Run("22.05-mixed", func(t *testing.T) {
		c := fixtureClient(t, "squeue/22.05-mixed.txt", "scontrol-show-node/22.05-alloc.txt")
		v, tp := viewFromFixtures(t, c, st, "", aliases)
		u := jobSummary{Class: ClassUntagged}
		wantJobs := map[string]jobSummary{
			"1": u, "2": u, "3": u, "5": u, "6": u, "12": u, "13": u, "14": u, "15": u, "17": u,
			// An untagged job's hold is not hadar's.
			"16": u,
			// vae and bert are not in the matrix; "hadar" names no model.
			"10":   {Class: ClassPassThrough, Workers: 1, Held: true, Problem: true},
			"7":    {Class: ClassPassThrough, Workers: 1, Held: true, Problem: true},
			"9":    {Class: ClassPassThrough, Workers: 4, Problem: true},
			"10_1": {Class: ClassPassThrough, Workers: 1, Problem: true},
			// "resnet50" resolves through the configured alias.
			"8": {Class: ClassWaiting, Model: "ResNet-50 (batch size 64)", Workers: 2, Held: true},
		}
		if diff := cmp.Diff(wantJobs, summarize(v)); diff != "" {
			t.Errorf("jobs (-want +got):\n%s", diff)
		}
		snap := BuildSnapshot(v, tp, nil, SnapshotParams{Round: 6 * time.Minute, DefaultDuration: time.Hour})
		want := &optimizer.Snapshot{
			Now: v.Now, Round: 6 * time.Minute, Throughput: tp, NoPreemption: true,
			// GPUs used by other people's jobs (GresUsed, including the
			// --gpus job 13 that squeue shows as N/A) are not offered.
			// CPUs and memory are what Slurm's CPUAlloc and AllocMem leave.
			Nodes: []optimizer.Node{{Name: "node2", Type: "v100", GPUs: 1, CPUs: 5, MemMB: 4000}, {Name: "node5", Type: "k80", GPUs: 4, CPUs: 8, MemMB: 4000}},
			Jobs: []optimizer.Job{{ID: "8", Type: "ResNet-50 (batch size 64)", Workers: 2, Arrival: submit,
				TotalSteps: 1000, RemainingSteps: 1000, Weight: 1, Shape: optimizer.Shape{Nodes: 1, GPUsPerNode: 2}, Priority: 1000}},
		}
		if diff := cmp.Diff(want, snap, cmpopts.IgnoreFields(optimizer.Snapshot{}, "Throughput")); diff != "" {
			t.Errorf("snapshot (-want +got):\n%s", diff)
		}
		if n := v.Node("node3"); n.Available() != 0 || n.Type != "p100" {
			t.Errorf("node3 = %+v", n)
		}
		// Whatever the policy picks, the round places job 8 and starts
		// it; the leases of the two jobs passed through end after it, in
		// their own update, once job 8 is seen started.
		pol, _ := optimizer.New("hadar", optimizer.Options{})
		plan, err := pol.Plan(snap)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Derive(v, snap, plan, DeriveParams{Lease: fakeLease})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[ActionKind][]string{}
		for _, a := range d.Actions {
			kinds[a.Kind] = append(kinds[a.Kind], a.JobIDs...)
		}
		wantKinds := map[ActionKind][]string{
			ActComment: {"10", "7"}, ActPlace: {"8"}, ActStartNow: {"10", "7", "8"}, ActAwaitStart: {"8"},
		}
		if diff := cmp.Diff(wantKinds, kinds, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("actions (-want +got):\n%s", diff)
		}
	})

	t.Run("22.05-mixed with default_model", func(t *testing.T) {
		c := fixtureClient(t, "squeue/22.05-mixed.txt", "scontrol-show-node/22.05-alloc.txt")
		v, tp := viewFromFixtures(t, c, st, "ResNet-18 (batch size 32)", aliases)
		got := summarize(v)
		for id, want := range map[string]jobSummary{
			"7":    {Class: ClassWaiting, Model: "ResNet-18 (batch size 32)", Workers: 1, Held: true},
			"10":   {Class: ClassWaiting, Model: "ResNet-18 (batch size 32)", Workers: 1, Held: true},
			"9":    {Class: ClassRunning, Model: "ResNet-18 (batch size 32)", Workers: 4},
			"10_1": {Class: ClassRunning, Model: "ResNet-18 (batch size 32)", Workers: 1},
		} {
			if diff := cmp.Diff(want, got[id]); diff != "" {
				t.Errorf("job %s (-want +got):\n%s", id, diff)
			}
		}
		snap := BuildSnapshot(v, tp, nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
		// Running hadar jobs' GPUs are the plan's to hand out again.
		// Without scontrol's records (none here) a running job's CPUs are
		// not known, so they stay counted as used (node3's job 9).
		wantNodes := []optimizer.Node{{Name: "node2", Type: "v100", GPUs: 1, CPUs: 5, MemMB: 4000}, {Name: "node3", Type: "p100", GPUs: 4, CPUs: 7, MemMB: 4000},
			{Name: "node4", Type: "k80", GPUs: 1, CPUs: 5, MemMB: 4000}, {Name: "node5", Type: "k80", GPUs: 4, CPUs: 8, MemMB: 4000}}
		if diff := cmp.Diff(wantNodes, snap.Nodes); diff != "" {
			t.Errorf("nodes (-want +got):\n%s", diff)
		}
		for _, j := range snap.Jobs {
			if j.ID == "9" && (len(j.Current) != 1 || j.Current[0] != (optimizer.Task{Node: "node3", Type: "p100", GPUs: 4})) {
				t.Errorf("job 9 current = %+v", j.Current)
			}
		}
	})

	t.Run("22.05-site", func(t *testing.T) {
		c := fixtureClient(t, "squeue/22.05-site.txt", "scontrol-show-node/22.05-site-alloc.txt")
		v, tp := viewFromFixtures(t, c, st, "ResNet-18 (batch size 64)", nil)
		why := map[string]string{}
		for _, n := range v.Nodes {
			why[n.Name] = n.Type + "|" + n.Why
		}
		wantWhy := map[string]string{
			"cpu-01":      "|no GPUs",
			"gpu-a100-01": "a100-40gb|not schedulable (IDLE+DRAIN)",
			"gpu-mix-01":  "|several GPU types (Slurm would choose the type)",
			"gpu-v100-01": "v100|",
			"gpu-v100-02": "v100|",
		}
		if diff := cmp.Diff(wantWhy, why); diff != "" {
			t.Errorf("nodes (-want +got):\n%s", diff)
		}
		snap := BuildSnapshot(v, tp, nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
		if diff := cmp.Diff([]optimizer.Node{{Name: "gpu-v100-02", Type: "v100", GPUs: 4, CPUs: 8, MemMB: 4000}}, snap.Nodes); diff != "" {
			t.Errorf("snapshot nodes (-want +got):\n%s", diff)
		}
		if len(snap.Jobs) != 1 || snap.Jobs[0].ID != "6" || snap.Jobs[0].Workers != 2 {
			t.Fatalf("snapshot jobs = %+v", snap.Jobs)
		}
		// No steps= : the default duration on the fastest type sets the work.
		if want := tp.Rate("ResNet-18 (batch size 64)", "v100", 2) * 3600; snap.Jobs[0].TotalSteps != want {
			t.Errorf("total steps = %v, want %v", snap.Jobs[0].TotalSteps, want)
		}
	})
}

// TestRunningJobsNodeStaysInTheRound: a launching job that started between
// squeue and scontrol show node is counted in the node's Used and in its
// Reserved; the node, where a hadar job runs, must stay in the snapshot (a
// round once failed "placed on unknown node" on it).
func TestRunningJobsNodeStaysInTheRound(t *testing.T) {
	n := NodeView{Name: "node1", Type: "v100", Usable: true, Total: 4, Used: 4, Hadar: 2, Reserved: 2, CPUTot: 8, CPUAlloc: 8, HadarCPUs: 1, ReservedCPUs: 1}
	if a := n.Available(); a != 2 {
		t.Errorf("Available = %d, want the running hadar job's 2", a)
	}
	if _, ok := n.AvailableCPUs(); !ok {
		t.Error("AvailableCPUs says none left on a node with a running hadar job")
	}
}

// TestPriorOnlyModelPlannedByTime: a model no matrix knows runs on the
// cross-model prior, whose steps/s are another model's; its steps= then
// says nothing of its length, so its --time (else default_duration) on its
// fastest type sets the work, with the share of its steps it has done
// carried over. A model the matrix knows keeps its steps.
func TestPriorOnlyModelPlannedByTime(t *testing.T) {
	tp := testMatrix()
	prior := map[string]map[int]float64{"v100": {1: 30}, "k80": {1: 10}}
	view := func(jobs ...slurm.Job) *View {
		return BuildView(ViewInput{Now: t0, Jobs: jobs, Nodes: []slurm.Node{sNode("v1", "v100", 4, 0), sNode("k1", "k80", 4, 0)},
			ResolveGPU: func(s string) (string, error) { return s, nil },
			Models:     jobproto.NewModelResolver(tp.JobTypes(), nil), Throughput: tp,
			PriorFor: func(string) map[string]map[int]float64 { return prior }})
	}
	withLimit := sJob("1", "hadar model=new-llm steps=700", "PD", 1, 1)
	noLimit := sJob("2", "hadar model=new-llm steps=700", "R", 1, 1, "v1")
	known := sJob("3", "hadar model=m steps=700", "PD", 1, 1)
	v := view(withLimit, noLimit, known)
	for _, id := range []string{"1", "2"} {
		if jv := v.Job(id); jv == nil || !jv.PriorOnly || jv.Model != jobproto.UnknownModelType("new-llm") {
			t.Fatalf("job %s: %+v, want planned with the prior as a job type of new-llm's own", id, jv)
		}
	}
	if v.Job("3").PriorOnly {
		t.Fatal("job 3 (a model of the matrix) marked prior-only")
	}
	// A job's --time comes from scontrol's record, not read here.
	v.Job("1").TimeLimit = 2 * time.Hour
	// Job 2 ran long enough for its report (a quarter done) to be believed.
	v.Job("2").TimeUsed = 20 * time.Minute
	progress := map[string]JobProgress{"2": {Done: 175}}
	snap := BuildSnapshot(v, tp, progress, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
	got := map[string][2]float64{}
	for _, j := range snap.Jobs {
		got[j.ID] = [2]float64{j.TotalSteps, j.RemainingSteps}
	}
	want := map[string][2]float64{
		"1": {30 * 7200, 30 * 7200},             // 2 h at the prior's 30 steps/s on v100
		"2": {30 * 3600, 30 * 3600 * 525 / 700}, // default_duration, a quarter done
		"3": {700, 700},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("total and remaining steps (-want +got):\n%s", diff)
	}
}
