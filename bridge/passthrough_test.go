package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// Pass-through jobs must never compete with the jobs hadar places: Slurm's
// scheduler could start one on the GPUs hadar chose, and the placed job
// would wait until launch_timeout.

func TestDerivePassThroughAfterPlacements(t *testing.T) {
	nodes := []slurm.Node{sNode("v1", "v100", 4, 0), sNode("v2", "v100", 4, 0), sNode("k1", "k80", 4, 0)}
	tag := "hadar model=m steps=36000"
	fresh := func(j slurm.Job) slurm.Job { j.SubmitTime = t0.Add(-time.Minute); return j }
	bad := `scontrol update JobId=2 AdminComment="hadar: bad hadar tag: \"bad\" is not key=value; released to Slurm's scheduler"`
	task := func(node, typ string, g int) optimizer.Task { return optimizer.Task{Node: node, Type: typ, GPUs: g} }
	timeout := DeriveParams{LaunchTimeout: 5 * time.Minute}
	tests := []struct {
		name     string
		jobs     []slurm.Job
		placed   map[string]Placed
		plan     map[string][]optimizer.Task
		params   DeriveParams
		want     []string
		kinds    map[string]DecisionKind
		heldBack bool
	}{
		{
			name: "placements: placed jobs released first; pass-through after they started, in its own release",
			jobs: []slurm.Job{sJob("1", tag, "PD", 4, 1), sJob("2", "hadar bad", "PD", 4, 1), sJob("3", tag, "PD", 1, 1)},
			plan: map[string][]optimizer.Task{"1": {task("v1", "v100", 4)}, "3": {task("k1", "k80", 1)}},
			want: []string{
				"scontrol update JobId=1 NodeList=v1",
				"scontrol update JobId=3 NodeList=k1",
				"scontrol update JobId=1,3 StartTime=now" + placedSuffix,
				"squeue until jobs 1,3 are not pending (started, held or gone)",
				bad,
				"scontrol update JobId=2 StartTime=now",
			},
			kinds: map[string]DecisionKind{"1": DecidePlace, "2": DecidePassThrough, "3": DecidePlace},
		},
		{
			name:   "fresh pass-through: placements go ahead (not held back)",
			jobs:   []slurm.Job{sJob("1", tag, "PD", 4, 1), fresh(sJob("2", "hadar bad", "PD", 4, 1))},
			plan:   map[string][]optimizer.Task{"1": {task("v1", "v100", 4)}},
			params: timeout,
			want: []string{
				"scontrol update JobId=1 NodeList=v1",
				"scontrol update JobId=1 StartTime=now" + placedSuffix,
				"squeue until jobs 1 are not pending (started, held or gone)",
				bad,
				"scontrol update JobId=2 StartTime=now",
			},
			kinds: map[string]DecisionKind{"1": DecidePlace, "2": DecidePassThrough},
		},
		{
			name:   "a job hadar released earlier is still pending: awaited too",
			jobs:   []slurm.Job{fresh(sJob("2", "hadar bad", "PD", 4, 1)), sJob("4", tag, "PDR", 1, 1)},
			placed: map[string]Placed{"4": {Nodes: []string{"v2"}, ReleasedAt: t0.Add(-time.Minute)}},
			plan:   map[string][]optimizer.Task{},
			params: timeout,
			want: []string{
				"squeue until jobs 4 are not pending (started, held or gone)",
				bad,
				"scontrol update JobId=2 StartTime=now",
			},
			kinds: map[string]DecisionKind{"2": DecidePassThrough},
		},
		{
			name:   "a released job held again for launch_timeout is awaited as held",
			jobs:   []slurm.Job{fresh(sJob("2", "hadar bad", "PD", 4, 1)), sJob("4", tag, "PDR", 1, 1)},
			placed: map[string]Placed{"4": {Nodes: []string{"v2"}, ReleasedAt: t0.Add(-time.Hour)}},
			plan:   map[string][]optimizer.Task{},
			params: timeout,
			want: []string{
				"scontrol update JobId=4 StartTime=now+120",
				"squeue until jobs 4 are not pending (started, held or gone)",
				bad,
				"scontrol update JobId=2 StartTime=now",
			},
			kinds: map[string]DecisionKind{"2": DecidePassThrough, "4": DecideRehold},
		},
		{
			name:     "pass-through waiting launch_timeout: the plan is held back, nothing else is released",
			jobs:     []slurm.Job{sJob("1", tag, "PD", 4, 1), sJob("2", "hadar bad", "PD", 4, 1), sJob("5", tag, "R", 1, 1, "k1")},
			plan:     map[string][]optimizer.Task{"1": {task("v1", "v100", 4)}, "5": {task("v2", "v100", 1)}},
			params:   DeriveParams{LaunchTimeout: 5 * time.Minute, Preemption: true},
			want:     []string{bad, "scontrol update JobId=2 StartTime=now"},
			kinds:    map[string]DecisionKind{"1": DecideWait, "2": DecidePassThrough, "5": DecideKeep},
			heldBack: true,
		},
		{
			name:   "held back with a launching job: await it, place nothing",
			jobs:   []slurm.Job{sJob("1", tag, "PD", 4, 1), sJob("2", "hadar bad", "PD", 4, 1), sJob("4", tag, "PDR", 1, 1)},
			placed: map[string]Placed{"4": {Nodes: []string{"v2"}, ReleasedAt: t0.Add(-time.Minute)}},
			plan:   map[string][]optimizer.Task{"1": {task("v1", "v100", 4)}},
			params: timeout,
			want: []string{
				"squeue until jobs 4 are not pending (started, held or gone)",
				bad,
				"scontrol update JobId=2 StartTime=now",
			},
			kinds:    map[string]DecisionKind{"1": DecideWait, "2": DecidePassThrough},
			heldBack: true,
		},
		{
			name:  "no pass-through: no await",
			jobs:  []slurm.Job{sJob("1", tag, "PD", 4, 1)},
			plan:  map[string][]optimizer.Task{"1": {task("v1", "v100", 4)}},
			want:  []string{"scontrol update JobId=1 NodeList=v1", "scontrol update JobId=1 StartTime=now" + placedSuffix},
			kinds: map[string]DecisionKind{"1": DecidePlace},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := testView(tt.jobs, nodes, tt.placed)
			snap := BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
			tt.params.Lease = fakeLease
			d, err := Derive(v, snap, &optimizer.Plan{Assignments: tt.plan}, tt.params)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, actionStrings(d.Actions), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			kinds := map[string]DecisionKind{}
			for _, dec := range d.Decisions {
				kinds[dec.JobID] = dec.Kind
			}
			if diff := cmp.Diff(tt.kinds, kinds); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			if d.HeldBack != tt.heldBack {
				t.Errorf("HeldBack = %v, want %v", d.HeldBack, tt.heldBack)
			}
			// Whatever else: no pass-through job shares a release with
			// another job, and nothing is released after it.
			pt := map[string]bool{}
			for id, k := range kinds {
				pt[id] = k == DecidePassThrough
			}
			for i, a := range d.Actions {
				if a.Kind != ActRelease {
					continue
				}
				if pt[a.JobIDs[0]] && i != len(d.Actions)-1 {
					t.Errorf("actions after the pass-through release: %v", actionStrings(d.Actions[i+1:]))
				}
				for _, id := range a.JobIDs {
					if pt[id] != pt[a.JobIDs[0]] {
						t.Errorf("release %v mixes pass-through and placed jobs", a.JobIDs)
					}
				}
			}
		})
	}
}

// The Executor runs the pass-through jobs' comment and release only after
// the await-start has seen every awaited job started, held or gone.
func TestExecutorAwaitStartGatesPassThrough(t *testing.T) {
	tests := []struct {
		name string
		// stuck: released jobs stay pending (Slurm gave their GPUs away).
		stuck     bool
		failJobs  bool
		wantCalls []string
		wantOK    []bool
		wantErr   error
		wantHeld  bool
	}{
		{
			name: "placed job started: pass-through commented and handed over after it",
			wantCalls: []string{"PlaceOnNodes 101 node1", "UpdateJobs 101 StartTime=now", "SetAdminComment 102 \"hadar: x; released to Slurm's scheduler\"",
				"UpdateJobs 102 StartTime=now"},
			wantOK: []bool{true, true, true, true, true},
		},
		{
			name:      "placed job still pending: the pass-through job keeps its lease",
			stuck:     true,
			wantCalls: []string{"PlaceOnNodes 101 node1", "UpdateJobs 101 StartTime=now"},
			wantOK:    []bool{true, true, false, false, false},
			wantErr:   ErrStillPending,
			wantHeld:  true,
		},
		{
			name:      "slurmctld gone during the await: the pass-through job keeps its lease",
			failJobs:  true,
			wantCalls: []string{"PlaceOnNodes 101 node1", "UpdateJobs 101 StartTime=now"},
			wantOK:    []bool{true, true, false, false, false},
			wantErr:   slurm.ErrControllerDown,
			wantHeld:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCluster("node1:v100:4")
			fc.noAutoStart = tt.stuck
			placed := fc.submit(resnet, 4, 1, t0)
			pass := fc.submit("hadar model=nope steps=0", 4, 1, t0)
			if tt.failJobs {
				fc.fail["Jobs"] = slurm.ErrControllerDown
			}
			actions := []Action{
				{Kind: ActPlace, JobIDs: []string{placed}, Nodes: []string{"node1"}},
				{Kind: ActStartNow, JobIDs: []string{placed}},
				{Kind: ActAwaitStart, JobIDs: []string{placed}},
				{Kind: ActComment, JobIDs: []string{pass}, Text: PassThroughComment("x")},
				{Kind: ActStartNow, JobIDs: []string{pass}},
			}
			ex := &Executor{Cluster: fc, Allowed: map[string]bool{placed: true, pass: true}, AwaitInterval: time.Millisecond, AwaitTries: 3}
			res := ex.Execute(context.Background(), actions)
			var ok []bool
			for _, r := range res {
				ok = append(ok, r.OK())
			}
			if diff := cmp.Diff(tt.wantOK, ok); diff != "" {
				t.Errorf("results OK (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, fc.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if !errors.Is(res[2].Err, tt.wantErr) {
				t.Errorf("await error = %v, want %v", res[2].Err, tt.wantErr)
			}
			if leased := fc.leased(pass); leased != tt.wantHeld {
				t.Errorf("pass-through job on its lease = %v, want %v", leased, tt.wantHeld)
			}
			if !tt.failJobs && !tt.stuck {
				if n := fc.jobsCalls; n != 1 {
					t.Errorf("await looked %d times, want 1", n)
				}
			}
			if tt.stuck {
				if n := fc.jobsCalls; n != 3 {
					t.Errorf("await looked %d times, want AwaitTries = 3", n)
				}
			}
		})
	}
}

func TestStillPending(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	jobs := []slurm.Job{
		{JobID: "1", State: "RUNNING"},
		{JobID: "2", State: "PENDING", Reason: "Resources"},
		{JobID: "3", State: "PENDING", Reason: "JobHeldAdmin"},
		{JobID: "4", State: "PENDING", Reason: "BeginTime"},
		{JobID: "8", State: "PENDING", Reason: "BeginTime", StartTime: now.Add(time.Minute)},
		{JobID: "9", ArrayJobID: "5", ArrayTaskID: "1", State: "PENDING", Reason: "Priority"},
		{JobID: "6", State: "COMPLETING"},
	}
	// 8 is on a lease again: Slurm cannot start it.
	got := stillPending(jobs, []string{"1", "2", "3", "4", "5_1", "6", "7", "8"}, now)
	if diff := cmp.Diff([]string{"2", "4", "5_1"}, got); diff != "" {
		t.Errorf("still pending (-want +got):\n%s", diff)
	}
}

// The bug, in the loop: a pass-through job released in the same scontrol
// release as a placed job took the placed job's node (the fake, like
// Slurm, starts what a release frees in the order it gets it).
func TestPassThroughDoesNotTakePlacedJobsNode(t *testing.T) {
	h := newHarness(t, nil)
	h.fc = newFakeCluster("node1:v100:4")
	pass := h.fc.submit("hadar model=nope steps=0", 4, 1, t0) // lower id: Slurm would look at it first
	placed := h.fc.submit(resnet, 4, 1, t0)
	b := h.bridge()
	rep := h.cycle(b)
	type state struct {
		State string
		Held  bool
		Nodes []string
	}
	got := map[string]state{}
	for _, id := range []string{pass, placed} {
		j := h.fc.job(id)
		got[id] = state{j.state, j.held, j.nodes}
	}
	want := map[string]state{
		placed: {"RUNNING", false, []string{"node1"}},
		pass:   {"PENDING", false, nil}, // released, Slurm's; no room left
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs after one round (-want +got):\n%s", diff)
	}
	var starts []string
	for _, c := range h.fc.Calls() {
		if strings.HasPrefix(c, "UpdateJobs ") && strings.Contains(c, "StartTime=now") {
			starts = append(starts, strings.Fields(c)[1])
		}
	}
	if diff := cmp.Diff([]string{placed, pass}, starts); diff != "" {
		t.Errorf("StartTime=now updates (-want +got):\n%s", diff)
	}
	if n := rep.PassedThrough(); n != 1 {
		t.Errorf("PassedThrough = %d, want 1", n)
	}
}

// The promised bound: a pass-through job is Slurm's at the latest when its
// lease runs out, even if every job hadar starts stays pending (so hadar
// never hands it over itself) and new jobs keep arriving.
func TestPassThroughReleasedWithinBound(t *testing.T) {
	const launchTimeout = 5 * time.Minute
	tests := []struct {
		name  string
		stuck bool // released jobs never start
		// wantRound is the round (from 1, one a minute) after which the
		// pass-through job is Slurm's; byHadar whether hadar handed it
		// over (else its lease ran out).
		wantRound int
		byHadar   bool
	}{
		{name: "hadar's jobs start: the first round", wantRound: 1, byHadar: true},
		// Rounds at t0+0..: hadar waits for the jobs it started, which
		// never start; the lease of t0+2m runs out before round 3.
		{name: "hadar's jobs never start: within a lease", stuck: true, wantRound: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *config.Config) { c.LaunchTimeout = config.Duration{Duration: launchTimeout} })
			h.fc.noAutoStart = tt.stuck
			pass := h.fc.submit("hadar model=nope steps=0", 1, 1, t0)
			b := h.bridge()
			released, heldBack, placedAfter := 0, 0, 0
			for round := 1; round <= 15 && released == 0; round++ {
				h.fc.submit(resnet, 1, 1, h.clock.Now()) // a new job every round
				rep := h.cycle(b)
				if rep.HeldBack {
					heldBack++
				}
				if heldBack > 0 && rep.Count(DecidePlace) > 0 {
					placedAfter++
				}
				if !h.fc.leased(pass) {
					released = round
					if tt.byHadar && rep.PassedThrough() != 1 {
						t.Errorf("round %d: PassedThrough = %d", round, rep.PassedThrough())
					}
				}
				h.clock.advance(time.Minute)
			}
			if released != tt.wantRound {
				t.Errorf("pass-through job released in round %d, want %d", released, tt.wantRound)
			}
			if placedAfter > 0 {
				t.Errorf("%d held-back rounds still placed jobs", placedAfter)
			}
			wantStarts := 0
			if tt.byHadar {
				wantStarts = 1
			}
			if j := h.fc.job(pass); j.starts != wantStarts || (tt.byHadar && !strings.HasPrefix(j.admin, "hadar: bad hadar tag")) {
				t.Errorf("pass-through job: handed over %d times, admin comment %q", j.starts, j.admin)
			}
		})
	}
}

// Fail-open hands every held tagged job to Slurm at once: waiting jobs and
// pass-through jobs alike, in one release, with nothing awaited.
func TestReleaseAllIncludesPassThrough(t *testing.T) {
	h := newHarness(t, nil)
	h.fc.noAutoStart = true
	w1 := h.fc.submit(resnet, 1, 1, t0)
	pass := h.fc.submit("hadar model=nope steps=0", 1, 1, t0)
	w2 := h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	got, err := b.ReleaseAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{w1, pass, w2}, got); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"UpdateJobs " + strings.Join([]string{w1, pass, w2}, ",") + " StartTime=now"}, h.fc.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
