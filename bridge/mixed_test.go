package bridge

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/optimizer"
)

// mixedHarness is the harness on a cluster of its own: the 24.11 fake
// (fake2411) when slurm2411, else the 22.05 one.
func mixedHarness(t *testing.T, slurm2411 bool, nodes ...string) *harness {
	t.Helper()
	h := newHarness(t, func(c *config.Config) {
		c.MigrationPenalty = config.Duration{Duration: time.Second}
		c.MoveWithoutProgress = true // these jobs report no progress
	})
	h.fc = newFakeCluster(nodes...)
	h.fc.retypeReplaces = slurm2411
	return h
}

// submitTyped submits a job asking for GPUs of site type typed
// (--gres=gpu:TYPE:N).
func (f *fakeCluster) submitTyped(comment, typed string, gpus int, at time.Time) string {
	f.mu.Lock()
	held := f.noAutoStart
	f.noAutoStart = true // no start before the type is set
	f.mu.Unlock()
	id := f.submit(comment, gpus, 1, at)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noAutoStart = held
	f.jobs[id].typed = typed
	f.schedule(f.jobs[id])
	return id
}

// gresCalls are the Gres updates the bridge sent.
func gresCalls(calls []string) []string {
	var out []string
	for _, c := range calls {
		if strings.HasPrefix(c, "UpdateJobs ") && strings.Contains(c, " Gres=") {
			out = append(out, c)
		}
	}
	return out
}

// runningTypes counts the running jobs of ids by the GPU type they got.
func (f *fakeCluster) runningTypes(ids []string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, id := range ids {
		if j := f.jobs[id]; j.state == "RUNNING" {
			out[j.nodes[0]+":"+j.got]++
		}
	}
	return out
}

// A node with two GPU types: on 22.05 it is shown but not used (Slurm
// would choose the type); on 24.11 each of its types is a pool of its own
// in the snapshot, with what GresUsed says of that type taken out.
func TestMixedNodeSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slurm2411 bool
		wantNodes []optimizer.Node
		wantWhy   string
		wantPools []GPUPool
	}{
		{name: "22.05", wantNodes: []optimizer.Node{{Name: "node1", Type: "v100", GPUs: 4}},
			wantWhy: "several GPU types (Slurm would choose the type)"},
		{name: "24.11", slurm2411: true,
			wantNodes: []optimizer.Node{{Name: "mix1", Type: "k80", GPUs: 1}, {Name: "mix1", Type: "v100", GPUs: 2}, {Name: "node1", Type: "v100", GPUs: 4}},
			wantPools: []GPUPool{{Site: "k80", Type: "k80", Total: 2, Used: 1}, {Site: "tesla_v100-sxm2-32gb", Type: "v100", Total: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mixedHarness(t, tc.slurm2411, "mix1:tesla_v100-sxm2-32gb:2:k80:2", "node1:v100:4")
			// Someone else's job holds one k80 of mix1.
			h.fc.submitTyped("", "k80", 1, t0)
			h.fc.submit(resnet, 1, 1, t0)
			h.cfg.DryRun = true
			rep := h.cycle(h.bridge())
			if diff := cmp.Diff(tc.wantNodes, rep.Snapshot.Nodes); diff != "" {
				t.Errorf("snapshot nodes (-want +got):\n%s", diff)
			}
			mix := rep.View.Node("mix1")
			if mix.Why != tc.wantWhy || mix.Usable != (tc.wantWhy == "") {
				t.Errorf("mix1: usable %v, why %q; want why %q", mix.Usable, mix.Why, tc.wantWhy)
			}
			if diff := cmp.Diff(tc.wantPools, mix.Pools); diff != "" {
				t.Errorf("mix1 pools (-want +got):\n%s", diff)
			}
		})
	}
}

// Tagged jobs on a cluster of one v100 node and a node with two GPU types:
// on 24.11 they run on both types of the mixed node, each retyped (in the
// node's spelling) before its NodeList pin, the one on the single-type
// node untouched, and the next round reads each job's own untyped
// request, not the type hadar set; on 22.05 only the v100 node is used and
// no Gres is sent.
func TestMixedNodePlacement(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slurm2411 bool
		wantTypes map[string]int
		wantGres  []string
		wantPlace int
		// wantHadarGPUs are the metrics' GPUs of hadar's jobs by type.
		wantHadarGPUs map[string]float64
	}{
		{name: "22.05", wantPlace: 1, wantTypes: map[string]int{"node1:v100": 1}, wantHadarGPUs: map[string]float64{"v100": 1}},
		{name: "24.11", slurm2411: true, wantPlace: 5,
			wantTypes:     map[string]int{"mix1:k80": 2, "mix1:tesla_v100-sxm2-32gb": 2, "node1:v100": 1},
			wantGres:      []string{"Gres=gpu:k80:1", "Gres=gpu:tesla_v100-sxm2-32gb:1"},
			wantHadarGPUs: map[string]float64{"k80": 2, "v100": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mixedHarness(t, tc.slurm2411, "mix1:tesla_v100-sxm2-32gb:2:k80:2", "node1:v100:1")
			var ids []string
			for i := range 5 {
				ids = append(ids, h.fc.submit(resnet, 1, 1, t0.Add(time.Duration(i)*time.Second)))
			}
			b := h.bridge()
			rep := h.cycle(b)
			if rep.Count(DecidePlace) != tc.wantPlace || rep.Failed() != 0 {
				t.Fatalf("placed %d (want %d), failed %d: %v", rep.Count(DecidePlace), tc.wantPlace, rep.Failed(), actionStrings(rep.Actions))
			}
			if diff := cmp.Diff(tc.wantTypes, h.fc.runningTypes(ids)); diff != "" {
				t.Errorf("running jobs by node:type (-want +got):\n%s", diff)
			}
			var gres []string
			for _, c := range gresCalls(h.fc.Calls()) {
				gres = append(gres, strings.Fields(c)[2])
			}
			slices.Sort(gres)
			if diff := cmp.Diff(tc.wantGres, gres); diff != "" {
				t.Errorf("Gres updates (-want +got):\n%s", diff)
			}
			// Every retype precedes the placements, in one call per type.
			if tc.slurm2411 {
				calls := h.fc.Calls()
				lastGres, firstPlace := -1, len(calls)
				for i, c := range calls {
					if strings.Contains(c, " Gres=") {
						lastGres = i
					}
					if strings.HasPrefix(c, "PlaceOnNodes ") && i < firstPlace {
						firstPlace = i
					}
				}
				if lastGres > firstPlace {
					t.Errorf("a Gres update after a placement: %v", calls)
				}
			}
			// Next round: the jobs run typed, yet each one's request is
			// still its user's untyped gpu:1, and nothing is sent.
			h.fc.resetCalls()
			h.clock.advance(time.Minute)
			rep = h.cycle(b)
			for _, id := range ids {
				jv := rep.View.Job(id)
				if got := (Request{Types: jv.Request.Types, Gres: jv.Request.Gres, Form: jv.Request.Form}); !cmp.Equal(got, Request{Gres: "gpu:1", Form: "--gres=gpu:1"}) {
					t.Errorf("job %s: request read as %+v; want the user's untyped gpu:1", id, got)
				}
			}
			if len(rep.Actions) != 0 || rep.Count(DecideKeep) != tc.wantPlace {
				t.Errorf("second round: kept %d, actions %v", rep.Count(DecideKeep), actionStrings(rep.Actions))
			}
			// The metrics count a node used per type under each type.
			m := NewMetrics()
			m.observeRound(rep, nil)
			samples, _, _ := scrape(t, m)
			hadarGPUs := map[string]float64{}
			for k, v := range samples {
				if typ, ok := strings.CutPrefix(k, `hadar_gpus{state="hadar",type="`); ok && v > 0 {
					hadarGPUs[strings.TrimSuffix(typ, `"}`)] = v
				}
			}
			if diff := cmp.Diff(tc.wantHadarGPUs, hadarGPUs); diff != "" {
				t.Errorf("hadar_gpus{state=hadar} by type (-want +got):\n%s", diff)
			}
			if !tc.slurm2411 && len(gresCalls(h.fc.Calls())) != 0 {
				t.Errorf("22.05: Gres sent: %v", h.fc.Calls())
			}
		})
	}
}

// A job hadar retyped to a mixed node's k80 moves, once a v100 node is
// free, to that single-type node: its Gres goes back to the user's untyped
// request before the NodeList pin, and the record of that request stays.
func TestMixedNodeMigrationRestoresRequest(t *testing.T) {
	h := mixedHarness(t, true, "node1:v100:1", "mix1:p100:1:k80:1")
	blocker := h.fc.submit("", 1, 1, t0) // untagged: takes node1's v100
	h.fc.submitTyped("", "p100", 1, t0)  // untagged: takes mix1's p100
	id := h.fc.submit("hadar model=resnet50-bs64 steps=50000000", 1, 1, t0.Add(time.Second))
	b := h.bridge()
	h.cycle(b)
	j := h.fc.job(id)
	if j.state != "RUNNING" || j.nodes[0] != "mix1" || j.typed != j.got || j.typed == "" {
		t.Fatalf("first round: %s on %v, typed %q, got %q", j.state, j.nodes, j.typed, j.got)
	}
	placedType := j.typed
	h.fc.finish(blocker)
	h.fc.resetCalls()
	h.clock.advance(time.Minute)
	rep := h.cycle(b)
	if rep.Count(DecideMigrate) != 1 {
		t.Fatalf("want one migration: %+v", rep.Decisions)
	}
	want := []string{"RequeueHold " + id, "UpdateJobs " + id + " Gres=gpu:1", "PlaceOnNodes " + id + " node1",
		"UpdateJobs " + id + " StartTime=now AdminComment=" + PlacedComment, "Release " + id}
	if diff := cmp.Diff(want, h.fc.Calls()); diff != "" {
		t.Errorf("migration calls (-want +got):\n%s", diff)
	}
	j = h.fc.job(id)
	if j.state != "RUNNING" || j.nodes[0] != "node1" || j.typed != "" {
		t.Errorf("after the move: %s on %v, typed %q (was %q)", j.state, j.nodes, j.typed, placedType)
	}
	req, err := b.State().GresRequests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{id: "gpu:1"}, req); diff != "" {
		t.Errorf("recorded requests (-want +got):\n%s", diff)
	}
	// Gone from the queue: the record goes too.
	h.fc.finish(id)
	h.clock.advance(time.Minute)
	h.cycle(b)
	if req, _ = b.State().GresRequests(context.Background()); len(req) != 0 {
		t.Errorf("records after the job left: %v", req)
	}
}

// TestMixedNodeMoveWithinTheNode: a job moved to the other type of the node
// it runs on is released RequeueSettle after its requeue, not in the same
// second (where the node's slurmd refuses its launch credential and the
// job fails: slurmsim's TestRestartOnItsNodeInTheSameSecond); a move to
// another node (TestMixedNodeMigrationRestoresRequest) has no wait.
func TestMixedNodeMoveWithinTheNode(t *testing.T) {
	h := mixedHarness(t, true, "mix1:v100:1:k80:1")
	blocker := h.fc.submitTyped("", "v100", 1, t0) // untagged: takes mix1's v100
	id := h.fc.submit("hadar model=resnet50-bs64 steps=50000000", 1, 1, t0.Add(time.Second))
	b := h.bridge()
	h.cycle(b)
	if j := h.fc.job(id); j.state != "RUNNING" || j.nodes[0] != "mix1" {
		t.Fatalf("first round: %s on %v", j.state, j.nodes)
	}
	h.fc.finish(blocker)
	h.clock.advance(time.Minute)
	rep := h.cycle(b)
	if rep.Count(DecideMigrate) != 1 {
		t.Fatalf("want one migration: %+v", rep.Decisions)
	}
	var kinds []ActionKind
	var settled time.Duration
	for _, r := range rep.Results {
		kinds = append(kinds, r.Action.Kind)
		if r.Action.Kind == ActSettle {
			settled = r.Duration
		}
	}
	want := []ActionKind{ActRequeueHold, ActRetype, ActPlace, ActStartNow, ActSettle, ActRelease}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if settled < RequeueSettle {
		t.Errorf("settle took %s, want at least %s", settled, RequeueSettle)
	}
	if j := h.fc.job(id); j.state != "RUNNING" || j.nodes[0] != "mix1" {
		t.Errorf("after the move: %s on %v", j.state, j.nodes)
	}
}

// A user's own typed request stays a constraint on a mixed node: the job
// goes to that type's pool with no Gres update; on 22.05, where the only
// node with the type is unused, it is passed through (and Slurm runs it).
func TestMixedNodeUserTypedRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slurm2411 bool
		wantClass JobClass
		wantOn    map[string]int
	}{
		{name: "22.05", wantClass: ClassPassThrough, wantOn: map[string]int{"mix1:k80": 1}},
		{name: "24.11", slurm2411: true, wantClass: ClassWaiting, wantOn: map[string]int{"mix1:k80": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mixedHarness(t, tc.slurm2411, "mix1:v100:2:k80:2", "node1:v100:4")
			id := h.fc.submitTyped(resnet, "k80", 1, t0)
			b := h.bridge()
			rep := h.cycle(b)
			jv := rep.View.Job(id)
			if jv.Class != tc.wantClass || !cmp.Equal(jv.Request.Types, []string{"k80"}) {
				t.Errorf("class %s (want %s), types %v, problem %q", jv.Class, tc.wantClass, jv.Request.Types, jv.Problem)
			}
			if diff := cmp.Diff(tc.wantOn, h.fc.runningTypes([]string{id})); diff != "" {
				t.Errorf("running (-want +got):\n%s", diff)
			}
			if g := gresCalls(h.fc.Calls()); len(g) != 0 {
				t.Errorf("Gres updates for a job already of its type: %v", g)
			}
		})
	}
}

// Jobs hadar may not retype (here --gpus=1: its request is not a Gres)
// never go to a node used per type, where Slurm would choose the type.
func TestMixedNodeNotRetypable(t *testing.T) {
	h := mixedHarness(t, true, "mix1:v100:2:k80:2", "node2:k80:1")
	id := h.fc.submit(resnet, 0, 1, t0)
	h.fc.mu.Lock()
	h.fc.jobs[id].gpusPerJob = 1
	h.fc.mu.Unlock()
	b := h.bridge()
	rep := h.cycle(b)
	jv := rep.View.Job(id)
	if jv.Request.Retypable || jv.Request.Eligible["mix1"] || !jv.Request.Eligible["node2"] {
		t.Errorf("request %+v: want not retypable, node2 only", jv.Request)
	}
	got := map[string]bool{}
	for _, d := range rep.Decisions {
		if d.JobID == id && d.Kind == DecidePlace {
			for _, n := range d.ToNodes {
				got[n] = true
			}
		}
	}
	if diff := cmp.Diff([]string{"node2"}, slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("placed on (-want +got):\n%s", diff)
	}
}

// If the users' requests cannot be recorded, no job is retyped or placed
// on a node used per type: a type hadar set must never be left to look
// like the user's.
func TestWithoutRetyped(t *testing.T) {
	actions := []Action{
		{Kind: ActRequeueHold, JobIDs: []string{"1"}},
		{Kind: ActRetype, JobIDs: []string{"1", "2"}, Gres: "gpu:k80:1"},
		{Kind: ActPlace, JobIDs: []string{"1"}, Nodes: []string{"mix1"}},
		{Kind: ActPlace, JobIDs: []string{"3"}, Nodes: []string{"node1"}},
		{Kind: ActStartNow, JobIDs: []string{"1", "3"}, Text: PlacedComment},
		{Kind: ActRelease, JobIDs: []string{"1", "2", "3"}},
	}
	want := []Action{
		{Kind: ActRequeueHold, JobIDs: []string{"1"}},
		{Kind: ActPlace, JobIDs: []string{"3"}, Nodes: []string{"node1"}},
		{Kind: ActStartNow, JobIDs: []string{"3"}, Text: PlacedComment},
		{Kind: ActRelease, JobIDs: []string{"3"}},
	}
	if diff := cmp.Diff(want, withoutRetyped(actions, map[string]string{"1": "gpu:1", "2": "gpu:1"})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
