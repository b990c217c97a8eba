package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// testMatrix: model "m" runs 3x faster on v100 than on k80; "p" has no rates.
// placedSuffix is what the start-now update of placed jobs adds: their
// admin comment, set in the same command.
var placedSuffix = " AdminComment=" + strconv.Quote(PlacedComment)

func testMatrix() optimizer.Throughputs {
	tp := optimizer.Throughputs{}
	tp.Set("m", "v100", 1, 3)
	tp.Set("m", "k80", 1, 1)
	tp.Set("p", "zz", 1, 1)
	return tp
}

// sNode builds a node with used of its gpus allocated (to jobs holding one
// CPU per GPU, whether or not the test's queue lists them).
func sNode(name, typ string, gpus, used int) slurm.Node {
	return slurm.Node{Name: name, State: "mixed", RawState: "MIXED", CPUAlloc: used,
		Gres:     []slurm.GRES{{Name: "gpu", Type: typ, Count: gpus}},
		GresUsed: []slurm.GRES{{Name: "gpu", Type: typ, Count: used}}}
}

// sJob builds a queue entry: state "PD" (on a fresh lease if tagged),
// "PDR" (pending, no lease), "R" (running on nodes).
func sJob(id, comment, state string, gpusPerNode, numNodes int, nodes ...string) slurm.Job {
	j := slurm.Job{JobID: id, ArrayJobID: id, User: "alice", NumNodes: numNodes, Comment: comment,
		SubmitTime: t0.Add(-time.Hour), Nodes: nodes}
	if gpusPerNode > 0 {
		j.Gres = []slurm.GRES{{Name: "gpu", Count: gpusPerNode}}
	}
	switch state {
	case "PD":
		j.State, j.Reason = "PENDING", "Priority"
		if jobproto.IsTagged(comment) {
			j.Reason, j.StartTime = "BeginTime", t0.Add(fakeLease)
		}
	case "PDR":
		j.State, j.Reason = "PENDING", "Resources"
	case "R":
		j.State, j.Reason = "RUNNING", "None"
		j.TimeUsed = 10 * time.Minute
	}
	return j
}

func testView(jobs []slurm.Job, nodes []slurm.Node, placed map[string]Placed) *View {
	tp := testMatrix()
	return BuildView(ViewInput{Now: t0, Jobs: jobs, Nodes: nodes,
		ResolveGPU: func(s string) (string, error) { return s, nil },
		Models:     jobproto.NewModelResolver(tp.JobTypes(), nil), Throughput: tp, Placed: placed, Lease: fakeLease})
}

func actionStrings(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func TestDerive(t *testing.T) {
	nodes := []slurm.Node{sNode("v1", "v100", 4, 0), sNode("v2", "v100", 4, 0), sNode("k1", "k80", 4, 0)}
	tag := "hadar model=m steps=36000"
	type plan map[string][]optimizer.Task
	task := func(node, typ string, g int) optimizer.Task { return optimizer.Task{Node: node, Type: typ, GPUs: g} }
	tests := []struct {
		name    string
		jobs    []slurm.Job
		nodes   []slurm.Node
		placed  map[string]Placed
		ranOn   map[string][]string // where the daemon last saw jobs run
		plan    plan                // nil: no plan
		params  DeriveParams
		want    []string
		kinds   map[string]DecisionKind
		wantErr bool
	}{
		{
			name: "pending placed: place and start now, which ends the lease (no release)",
			jobs: []slurm.Job{sJob("1", tag, "PD", 2, 1), sJob("2", tag, "PD", 1, 1), sJob("3", tag, "PD", 1, 1)},
			plan: plan{"1": {task("v1", "v100", 2)}, "2": {task("k1", "k80", 1)}},
			want: []string{
				"scontrol update JobId=1 NodeList=v1",
				"scontrol update JobId=2 NodeList=k1",
				"scontrol update JobId=1,2 StartTime=now" + placedSuffix,
			},
			kinds: map[string]DecisionKind{"1": DecidePlace, "2": DecidePlace, "3": DecideWait},
		},
		{
			name:  "running in the same place: nothing",
			jobs:  []slurm.Job{sJob("1", tag, "R", 2, 1, "k1")},
			nodes: []slurm.Node{sNode("v1", "v100", 4, 0), sNode("k1", "k80", 4, 2)},
			plan:  plan{"1": {task("k1", "k80", 2)}},
			kinds: map[string]DecisionKind{"1": DecideKeep},
		},
		{
			// 36000 steps: 10 h on k80, 3.3 h on v100: saves 6.7 h > 1 h.
			name:   "move above the migration penalty: requeuehold, place, start now, release",
			jobs:   []slurm.Job{sJob("1", tag, "R", 1, 1, "k1")},
			nodes:  []slurm.Node{sNode("v1", "v100", 4, 0), sNode("k1", "k80", 4, 1)},
			plan:   plan{"1": {task("v1", "v100", 1)}},
			params: DeriveParams{MigrationPenalty: time.Hour},
			want: []string{
				"scontrol requeuehold 1",
				"scontrol update JobId=1 NodeList=v1",
				"scontrol update JobId=1 StartTime=now" + placedSuffix,
				"scontrol release 1",
			},
			kinds: map[string]DecisionKind{"1": DecideMigrate},
		},
		{
			// With preemption the policy's move is made as planned, even one
			// to a slower type: the plan gives v1 to job 2.
			name:   "preemption on: a move to a slower type is made, and its GPUs go to the job planned there",
			jobs:   []slurm.Job{sJob("1", tag, "R", 4, 1, "v1"), sJob("2", tag, "PD", 4, 1)},
			nodes:  []slurm.Node{sNode("v1", "v100", 4, 4), sNode("k1", "k80", 4, 0)},
			plan:   plan{"1": {task("k1", "k80", 4)}, "2": {task("v1", "v100", 4)}},
			params: DeriveParams{MigrationPenalty: 10 * time.Hour, Preemption: true},
			want: []string{
				"scontrol requeuehold 1",
				"scontrol update JobId=1 NodeList=k1",
				"scontrol update JobId=2 NodeList=v1",
				"scontrol update JobId=1,2 StartTime=now" + placedSuffix,
				"scontrol release 1",
			},
			kinds: map[string]DecisionKind{"1": DecideMigrate, "2": DecidePlace},
		},
		{
			name:  "running job the plan drops, preemption off: keeps running",
			jobs:  []slurm.Job{sJob("1", tag, "R", 4, 1, "v1"), sJob("2", tag, "PD", 4, 1)},
			nodes: []slurm.Node{sNode("v1", "v100", 4, 4)},
			plan:  plan{"2": {task("v1", "v100", 4)}},
			// Job 2 cannot have v1 while job 1 keeps it; no other v100 node.
			kinds: map[string]DecisionKind{"1": DecideKeep, "2": DecideDefer},
		},
		{
			// The type is the policy's decision: the job waits for it rather
			// than take the idle k80s the plan did not give it.
			name:  "planned type kept busy by a running job: deferred, not sent to another type",
			jobs:  []slurm.Job{sJob("1", tag, "R", 4, 1, "v1"), sJob("2", tag, "PD", 4, 1)},
			nodes: []slurm.Node{sNode("v1", "v100", 4, 4), sNode("k1", "k80", 4, 0)},
			plan:  plan{"2": {task("v1", "v100", 4)}},
			kinds: map[string]DecisionKind{"1": DecideKeep, "2": DecideDefer},
		},
		{
			name:   "running job the plan drops, preemption on: requeuehold, its GPUs go to the next",
			jobs:   []slurm.Job{sJob("1", tag, "R", 4, 1, "v1"), sJob("2", tag, "PD", 4, 1)},
			nodes:  []slurm.Node{sNode("v1", "v100", 4, 4)},
			plan:   plan{"2": {task("v1", "v100", 4)}},
			params: DeriveParams{Preemption: true},
			want: []string{
				"scontrol requeuehold 1",
				"scontrol update JobId=2 NodeList=v1",
				"scontrol update JobId=2 StartTime=now" + placedSuffix,
			},
			kinds: map[string]DecisionKind{"1": DecidePreempt, "2": DecidePlace},
		},
		{
			name:  "untagged jobs are never touched; their GPUs are not offered",
			jobs:  []slurm.Job{sJob("1", "", "PD", 1, 1), sJob("2", "hadarx", "R", 4, 1, "v1"), sJob("3", "", "PD", 0, 1)},
			plan:  plan{},
			kinds: map[string]DecisionKind{},
		},
		{
			name: "bad tags are passed through once (those still on a lease), grouped by message",
			jobs: []slurm.Job{
				sJob("1", "hadar steps=-5", "PD", 1, 1), sJob("2", "hadar steps=-5", "PD", 1, 1),
				sJob("3", "hadar model=nope", "PD", 1, 1), sJob("4", "hadar model=m", "PD", 0, 1),
				sJob("5", "hadar copies=999", "PDR", 1, 1), sJob("6", "hadar model=p", "PD", 1, 1),
				sJob("7", "hadar model=m", "PD", 9, 1),
			},
			plan: plan{},
			want: []string{
				`scontrol update JobId=1,2 AdminComment="hadar: bad hadar tag: steps: \"-5\": want a number > 0; released to Slurm's scheduler"`,
				`scontrol update JobId=3 AdminComment="hadar: unknown model \"nope\"; released to Slurm's scheduler"`,
				`scontrol update JobId=4 AdminComment="hadar: the job asks for no GPUs (submit with --gres=gpu:N, --gpus=N, --gpus-per-node=N or --gpus-per-task=N); released to Slurm's scheduler"`,
				`scontrol update JobId=6 AdminComment="hadar: no throughput known for \"p\" with 1 GPUs on this cluster's live GPU types; released to Slurm's scheduler"`,
				`scontrol update JobId=7 AdminComment="hadar: no live node hadar uses can hold 1 node(s) x 9 GPUs among the nodes it may use (rated types: k80, v100); released to Slurm's scheduler"`,
				"scontrol update JobId=1,2,3,4,6,7 StartTime=now",
			},
			kinds: map[string]DecisionKind{"1": DecidePassThrough, "2": DecidePassThrough, "3": DecidePassThrough,
				"4": DecidePassThrough, "6": DecidePassThrough, "7": DecidePassThrough},
		},
		{
			name: "split gang of a one-node job is re-shaped onto one node",
			jobs: []slurm.Job{sJob("1", tag, "PD", 4, 1)},
			plan: plan{"1": {task("v1", "v100", 2), task("v2", "v100", 2)}},
			want: []string{
				"scontrol update JobId=1 NodeList=v1",
				"scontrol update JobId=1 StartTime=now" + placedSuffix,
			},
			kinds: map[string]DecisionKind{"1": DecidePlace},
		},
		{
			// The round requeues both before it places either.
			name:   "two running jobs swap nodes",
			jobs:   []slurm.Job{sJob("1", tag, "R", 4, 1, "v1"), sJob("2", tag, "R", 4, 1, "k1")},
			nodes:  []slurm.Node{sNode("v1", "v100", 4, 4), sNode("k1", "k80", 4, 4)},
			plan:   plan{"1": {task("k1", "k80", 4)}, "2": {task("v1", "v100", 4)}},
			params: DeriveParams{MigrationPenalty: time.Minute, Preemption: true},
			want: []string{
				"scontrol requeuehold 2,1",
				"scontrol update JobId=1 NodeList=k1",
				"scontrol update JobId=2 NodeList=v1",
				"scontrol update JobId=1,2 StartTime=now" + placedSuffix,
				"scontrol release 1,2",
			},
			kinds: map[string]DecisionKind{"1": DecideMigrate, "2": DecideMigrate},
		},
		{
			// Job 2's target is held by job 3, which stays: job 2 stays, so
			// job 1 cannot have its GPUs either.
			name:   "a chain of moves broken by a job that stays: none of it is made",
			jobs:   []slurm.Job{sJob("1", tag, "R", 4, 1, "v1"), sJob("2", tag, "R", 4, 1, "k1"), sJob("3", tag, "R", 4, 1, "v2")},
			nodes:  []slurm.Node{sNode("v1", "v100", 4, 4), sNode("v2", "v100", 4, 4), sNode("k1", "k80", 4, 4)},
			plan:   plan{"1": {task("k1", "k80", 4)}, "2": {task("v2", "v100", 4)}, "3": {task("v2", "v100", 4)}},
			params: DeriveParams{MigrationPenalty: time.Minute, Preemption: true},
			kinds:  map[string]DecisionKind{"1": DecideKeep, "2": DecideKeep, "3": DecideKeep},
		},
		{
			name:  "split gang that fits no single node is deferred",
			jobs:  []slurm.Job{sJob("1", tag, "PD", 4, 1)},
			nodes: []slurm.Node{sNode("v1", "v100", 4, 2), sNode("v2", "v100", 4, 2)},
			plan:  plan{"1": {task("v1", "v100", 2), task("v2", "v100", 2)}},
			kinds: map[string]DecisionKind{"1": DecideDefer},
		},
		{
			name: "multi-node job on its --nodes nodes",
			jobs: []slurm.Job{sJob("1", tag, "PD", 2, 2)},
			plan: plan{"1": {task("v1", "v100", 2), task("v2", "v100", 2)}},
			want: []string{
				"scontrol update JobId=1 NodeList=v1,v2",
				"scontrol update JobId=1 StartTime=now" + placedSuffix,
			},
			kinds: map[string]DecisionKind{"1": DecidePlace},
		},
		{
			name:   "released job that did not start gets a lease again after launch_timeout",
			jobs:   []slurm.Job{sJob("1", tag, "PDR", 1, 1), sJob("2", tag, "PDR", 1, 1)},
			placed: map[string]Placed{"1": {Nodes: []string{"v1"}, ReleasedAt: t0.Add(-time.Hour)}, "2": {Nodes: []string{"v2"}, ReleasedAt: t0.Add(-time.Minute)}},
			plan:   plan{},
			params: DeriveParams{LaunchTimeout: 5 * time.Minute},
			want:   []string{"scontrol update JobId=1 StartTime=now+120"},
			kinds:  map[string]DecisionKind{"1": DecideRehold},
		},
		{
			name: "released job held back by a begin time: start now (again)",
			jobs: func() []slurm.Job {
				// The begin time 22.05 sets when a requeue completes.
				j := sJob("1", tag, "PDR", 1, 1)
				j.Reason, j.StartTime = "BeginTime", t0.Add(2*time.Minute)
				return []slurm.Job{j, sJob("2", tag, "PDR", 1, 1)}
			}(),
			placed: map[string]Placed{"1": {Nodes: []string{"v1"}, ReleasedAt: t0}, "2": {Nodes: []string{"v2"}, ReleasedAt: t0}},
			ranOn:  map[string][]string{"1": {"k1"}}, // migrated from k1 to v1
			plan:   plan{},
			want:   []string{"scontrol update JobId=1 StartTime=now" + placedSuffix},
			kinds:  map[string]DecisionKind{"1": DecideStartNow},
		},
		{
			// Requeued by someone after it started where hadar put it (or
			// never seen running): starting it again on that node at once
			// would race the node's credential revocation.
			name: "job requeued from the node it was placed on: given a lease, not started now",
			jobs: func() []slurm.Job {
				j := sJob("1", tag, "PDR", 1, 1)
				j.Reason, j.StartTime = "BeginTime", t0.Add(2*time.Minute)
				k := sJob("3", tag, "PDR", 1, 1)
				k.Reason, k.StartTime = "BeginTime", t0.Add(2*time.Minute)
				return []slurm.Job{j, k}
			}(),
			placed: map[string]Placed{"1": {Nodes: []string{"v1"}, ReleasedAt: t0}, "3": {Nodes: []string{"v2"}, ReleasedAt: t0}},
			ranOn:  map[string][]string{"1": {"v1"}},
			plan:   plan{},
			want:   []string{"scontrol update JobId=1,3 StartTime=now+120"},
			kinds:  map[string]DecisionKind{"1": DecideRehold, "3": DecideRehold},
		},
		{
			name:  "no plan: only pass-through",
			jobs:  []slurm.Job{sJob("1", tag, "PD", 1, 1), sJob("2", "hadar bad", "PD", 1, 1)},
			plan:  nil,
			want:  []string{`scontrol update JobId=2 AdminComment="hadar: bad hadar tag: \"bad\" is not key=value; released to Slurm's scheduler"`, "scontrol update JobId=2 StartTime=now"},
			kinds: map[string]DecisionKind{"1": DecideWait, "2": DecidePassThrough},
		},
		{
			name:    "jobs the plan invents are ignored",
			jobs:    []slurm.Job{sJob("1", tag, "R", 4, 1, "v1")},
			nodes:   []slurm.Node{sNode("v1", "v100", 4, 4)},
			plan:    plan{"1": {task("v1", "v100", 4)}, "ghost": {task("v1", "v100", 1)}},
			wantErr: false, // Check of the policy's plan catches them before (see Cycle)
			kinds:   map[string]DecisionKind{"1": DecideKeep},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.nodes
			if ns == nil {
				ns = nodes
			}
			v := testView(tt.jobs, ns, tt.placed)
			for id, n := range tt.ranOn {
				v.Job(id).RanOn = n
			}
			snap := BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour, Preemption: tt.params.Preemption, MoveWithoutProgress: true})
			var p *optimizer.Plan
			if tt.plan != nil {
				p = &optimizer.Plan{Assignments: tt.plan}
			}
			if tt.params.Lease == 0 {
				tt.params.Lease = fakeLease
			}
			d, err := Derive(v, snap, p, tt.params)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Derive error = %v", err)
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
			// Whatever was decided must be a valid plan, and every id acted
			// on must be tagged.
			if err := optimizer.Check(snap, d.Plan); err != nil {
				t.Errorf("enforced plan: %v", err)
			}
			tagged := v.TaggedIDs()
			for _, a := range d.Actions {
				for _, id := range a.JobIDs {
					if !tagged[id] {
						t.Errorf("action %s touches untagged job %s", a, id)
					}
				}
			}
		})
	}
}

func TestDeriveIsDeterministic(t *testing.T) {
	var jobs []slurm.Job
	for i := range 30 {
		jobs = append(jobs, sJob(fmt.Sprint(i+1), "hadar model=m", "PD", 1+i%3, 1))
	}
	nodes := []slurm.Node{sNode("v1", "v100", 4, 0), sNode("v2", "v100", 4, 1), sNode("k1", "k80", 4, 0), sNode("k2", "k80", 4, 2)}
	var first []string
	for range 5 {
		v := testView(jobs, nodes, nil)
		snap := BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
		pol, _ := optimizer.New("hadar", optimizer.Options{})
		plan, err := pol.Plan(snap)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Derive(v, snap, plan, DeriveParams{})
		if err != nil {
			t.Fatal(err)
		}
		got := actionStrings(d.Actions)
		if first == nil {
			first = got
			if len(got) == 0 {
				t.Fatal("nothing placed")
			}
			continue
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Fatalf("same input, different actions:\n%s", diff)
		}
	}
}

func TestExecutorRefusesUntaggedJobs(t *testing.T) {
	fc := newFakeCluster("v1:v100:4")
	tagged := fc.submit("hadar model=m", 1, 1, t0)
	untagged := fc.submit("", 1, 1, t0)
	ex := &Executor{Cluster: fc, Allowed: map[string]bool{tagged: true}}
	res := ex.Execute(context.Background(), []Action{
		{Kind: ActPlace, JobIDs: []string{untagged}, Nodes: []string{"v1"}},
		{Kind: ActRequeueHold, JobIDs: []string{untagged}},
		{Kind: ActRelease, JobIDs: []string{tagged, untagged}},
	})
	if diff := cmp.Diff([]string{"Release " + tagged}, fc.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	for i, r := range res {
		if len(r.Refused) != 1 || r.Refused[0] != untagged || r.OK() {
			t.Errorf("result %d = %+v, want %s refused", i, r, untagged)
		}
	}
	// A nil allow-list allows nothing.
	fc.resetCalls()
	(&Executor{Cluster: fc}).Execute(context.Background(), []Action{{Kind: ActRelease, JobIDs: []string{tagged}}})
	if len(fc.Calls()) != 0 {
		t.Errorf("nil Allowed ran %v", fc.Calls())
	}
}

func TestExecutorFailureDoesNotStopOthers(t *testing.T) {
	for _, parallel := range []int{0, 4} {
		t.Run(fmt.Sprintf("parallel=%d", parallel), func(t *testing.T) { testExecutorFailureDoesNotStopOthers(t, parallel) })
	}
}

func testExecutorFailureDoesNotStopOthers(t *testing.T, parallel int) {
	fc := newFakeCluster("v1:v100:4", "v2:v100:4")
	a := fc.submit("hadar model=m", 1, 1, t0)
	b := fc.submit("hadar model=m", 1, 1, t0)
	c := fc.submit("hadar model=m", 1, 1, t0)
	fc.failJob["PlaceOnNodes"] = map[string]error{b: slurm.ErrInvalidNodeName}
	ex := &Executor{Cluster: fc, Allowed: map[string]bool{a: true, b: true, c: true}, Parallel: parallel}
	res := ex.Execute(context.Background(), []Action{
		{Kind: ActPlace, JobIDs: []string{a}, Nodes: []string{"v1"}},
		{Kind: ActPlace, JobIDs: []string{b}, Nodes: []string{"v1"}},
		{Kind: ActPlace, JobIDs: []string{c}, Nodes: []string{"v2"}},
		{Kind: ActStartNow, JobIDs: []string{a, b, c}},
		{Kind: ActRelease, JobIDs: []string{a, b, c}},
	})
	if !errors.Is(res[1].Err, slurm.ErrInvalidNodeName) {
		t.Errorf("place of %s: %v", b, res[1].Err)
	}
	last := res[len(res)-1]
	if diff := cmp.Diff([]string{a, c}, last.Sent); diff != "" {
		t.Errorf("release sent (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{b}, last.Skipped); diff != "" {
		t.Errorf("release skipped (-want +got):\n%s", diff)
	}
	if fc.job(a).state != "RUNNING" || fc.job(c).state != "RUNNING" || fc.job(b).state != "PENDING" {
		t.Errorf("states: %s %s %s", fc.job(a).state, fc.job(b).state, fc.job(c).state)
	}
	if !strings.Contains(fc.Calls()[3], "StartTime=now") || strings.Contains(fc.Calls()[3], b) {
		t.Errorf("start-now call = %q", fc.Calls()[3])
	}
}

// inflightCluster counts the placements in flight at once.
type inflightCluster struct {
	*fakeCluster
	mu            sync.Mutex
	now, most     int
	second        chan struct{}
	secondStarted sync.Once
}

func (c *inflightCluster) PlaceOnNodes(ctx context.Context, id string, nodes []string) error {
	c.overlap()
	return c.fakeCluster.PlaceOnNodes(ctx, id, nodes)
}

func (c *inflightCluster) SetAdminComment(ctx context.Context, ids []string, text string) error {
	c.overlap()
	return c.fakeCluster.SetAdminComment(ctx, ids, text)
}

// overlap counts one call in flight while it waits (bounded) for a second
// call to overlap with it: one after the other, none ever does.
func (c *inflightCluster) overlap() {
	c.mu.Lock()
	c.now++
	c.most = max(c.most, c.now)
	if c.now >= 2 {
		c.secondStarted.Do(func() { close(c.second) })
	}
	c.mu.Unlock()
	select {
	case <-c.second:
	case <-time.After(2 * time.Second):
	}
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

func TestExecutorPlacesInParallel(t *testing.T) {
	fc := newFakeCluster("v1:v100:4", "v2:v100:4")
	ic := &inflightCluster{fakeCluster: fc, second: make(chan struct{})}
	allowed := map[string]bool{}
	var actions []Action
	var ids []string
	for i := range 8 {
		id := fc.submit("hadar model=m", 1, 1, t0)
		ids = append(ids, id)
		allowed[id] = true
		actions = append(actions, Action{Kind: ActPlace, JobIDs: []string{id}, Nodes: []string{fmt.Sprintf("v%d", 1+i%2)}})
	}
	actions = append(actions, Action{Kind: ActRelease, JobIDs: ids})
	res := (&Executor{Cluster: ic, Allowed: allowed, Parallel: 4}).Execute(context.Background(), actions)
	if ic.most < 2 || ic.most > 4 {
		t.Errorf("at most %d placements ran at once, want 2-4", ic.most)
	}
	for i, r := range res {
		if !r.OK() {
			t.Errorf("result %d: %+v", i, r)
		}
		if i < len(ids) && r.Sent[0] != ids[i] {
			t.Errorf("result %d is of job %s, want %s (results in the order of the actions)", i, r.Sent[0], ids[i])
		}
	}
	if calls := fc.Calls(); calls[len(calls)-1] != "Release "+strings.Join(ids, ",") {
		t.Errorf("last call %q, want the release after every placement", calls[len(calls)-1])
	}
}

// The status comments of a round (one update per distinct text, at its
// end) go out in parallel too; each job gets its text.
func TestExecutorCommentsInParallel(t *testing.T) {
	fc := newFakeCluster("v1:v100:4")
	ic := &inflightCluster{fakeCluster: fc, second: make(chan struct{})}
	allowed := map[string]bool{}
	var actions []Action
	want := map[string]string{}
	for i := range 6 {
		id := fc.submit("hadar model=m", 1, 1, t0)
		allowed[id] = true
		text := fmt.Sprintf("hadar: waiting (%d)", i)
		want[id] = text
		actions = append(actions, Action{Kind: ActComment, JobIDs: []string{id}, Text: text})
	}
	res := (&Executor{Cluster: ic, Allowed: allowed, Parallel: 4}).Execute(context.Background(), actions)
	if ic.most < 2 || ic.most > 4 {
		t.Errorf("at most %d comments ran at once, want 2-4", ic.most)
	}
	got := map[string]string{}
	for i, r := range res {
		if !r.OK() || r.Action.Text != actions[i].Text {
			t.Errorf("result %d: %+v (results in the order of the actions)", i, r)
		}
	}
	for id := range want {
		got[id] = fc.job(id).admin
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admin comments (-want +got):\n%s", diff)
	}
}

// A job that ends between the round's look and its requeuehold is left
// alone: Slurm would requeue the completed job and run it again.
func TestExecutorDoesNotRequeueEndedJobs(t *testing.T) {
	fc := newFakeCluster("v1:v100:4", "v2:v100:4")
	a := fc.submit("hadar model=m", 1, 1, t0)
	b := fc.submit("hadar model=m", 1, 1, t0)
	allowed := map[string]bool{a: true, b: true}
	(&Executor{Cluster: fc, Allowed: allowed}).Execute(context.Background(), []Action{
		{Kind: ActPlace, JobIDs: []string{a}, Nodes: []string{"v1"}},
		{Kind: ActPlace, JobIDs: []string{b}, Nodes: []string{"v1"}},
		{Kind: ActStartNow, JobIDs: []string{a, b}},
	})
	fc.finish(b)
	move := []Action{
		{Kind: ActRequeueHold, JobIDs: []string{a, b}},
		{Kind: ActPlace, JobIDs: []string{a}, Nodes: []string{"v2"}},
		{Kind: ActPlace, JobIDs: []string{b}, Nodes: []string{"v2"}},
		{Kind: ActRelease, JobIDs: []string{a, b}},
	}
	res := (&Executor{Cluster: fc, Allowed: allowed}).Execute(context.Background(), move)
	type got struct{ Sent, Ended, Skipped []string }
	var sum []got
	for _, r := range res {
		sum = append(sum, got{r.Sent, r.Ended, r.Skipped})
	}
	want := []got{{Sent: []string{a}, Ended: []string{b}}, {Sent: []string{a}}, {Skipped: []string{b}}, {Sent: []string{a}, Skipped: []string{b}}}
	if d := cmp.Diff(want, sum); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
	if fc.job(b).state == "PENDING" || fc.job(b).restarts != 0 {
		t.Errorf("ended job %s requeued: state %s, restarts %d", b, fc.job(b).state, fc.job(b).restarts)
	}

	// The queue cannot be read: nothing is requeued this round.
	c := fc.submit("hadar model=m", 1, 1, t0)
	allowed[c] = true
	(&Executor{Cluster: fc, Allowed: allowed}).Execute(context.Background(), []Action{
		{Kind: ActPlace, JobIDs: []string{c}, Nodes: []string{"v1"}}, {Kind: ActStartNow, JobIDs: []string{c}}})
	fc.fail["Jobs"] = slurm.ErrControllerDown
	res = (&Executor{Cluster: fc, Allowed: allowed}).Execute(context.Background(), move[:1:1])
	if !errors.Is(res[0].Err, slurm.ErrControllerDown) || fc.job(a).state != "RUNNING" {
		t.Errorf("requeuehold with an unreadable queue: err %v, job %s %s", res[0].Err, a, fc.job(a).state)
	}
}
