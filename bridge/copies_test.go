package bridge

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// aTask is array task arr_idx in state st ("PD" on its lease, "R" running on node,
// "L" released by hadar and not started yet: launching, with Placed).
func aTask(arr string, idx int, comment, st string, gpus int, node string) slurm.Job {
	s := st
	if st == "L" {
		s = "PDR"
	}
	var nodes []string
	if st == "R" {
		nodes = []string{node}
	}
	j := sJob(arr, comment, s, gpus, 1, nodes...)
	j.ArrayTaskID = fmt.Sprint(idx)
	if idx != 0 {
		j.JobID = fmt.Sprint(1000 + idx) // split tasks get their own id
	}
	return j
}

const copiesTag = "hadar model=m steps=36000 copies=3"

func copiesNodes() []slurm.Node {
	return []slurm.Node{sNode("v1", "v100", 4, 0), sNode("v2", "v100", 4, 0), sNode("k1", "k80", 4, 0), sNode("k2", "k80", 4, 0)}
}

func deriveWith(t *testing.T, v *View, policy string, p DeriveParams, progress map[string]JobProgress) (Derivation, *optimizer.Snapshot) {
	t.Helper()
	snap := BuildSnapshot(v, testMatrix(), progress, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
	pol, err := optimizer.New(policy, optimizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pol.Plan(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := optimizer.Check(snap, plan); err != nil {
		t.Fatalf("policy plan: %v", err)
	}
	d, err := Derive(v, snap, plan, p)
	if err != nil {
		t.Fatalf("derive: %v", err)
	}
	return d, snap
}

func TestCopiesGrouping(t *testing.T) {
	jobs := []slurm.Job{
		aTask("40", 0, copiesTag, "PD", 1, ""), aTask("40", 1, copiesTag, "R", 1, "v1"), aTask("40", 2, copiesTag, "PD", 1, ""),
		aTask("41", 0, "hadar model=m steps=10", "PD", 1, ""), // an array without copies: ordinary jobs
		sJob("42", "hadar model=m copies=4", "PD", 1, 1),      // copies but no array: one job
	}
	multi := aTask("43", 0, copiesTag, "PD", 1, "")
	multi.NumNodes = 2
	jobs = append(jobs, multi)
	v := testView(jobs, copiesNodes(), nil)
	if len(v.Groups) != 1 || v.Groups[0].ID != "40" || len(v.Groups[0].Tasks) != 3 {
		t.Fatalf("groups %+v", v.Groups)
	}
	g := v.Groups[0]
	for i, task := range g.Tasks {
		if jobproto.TaskIndex(task.ID) != i || task.CopyOf != "40" {
			t.Errorf("task %d: %s of %q", i, task.ID, task.CopyOf)
		}
	}
	if g.Job.Class != ClassRunning || v.Job("40") != g.Job || g.Limit() != 3 {
		t.Errorf("group job %+v, limit %d", g.Job, g.Limit())
	}
	if j := v.Job("41_0"); j.CopyOf != "" || j.Class != ClassWaiting {
		t.Errorf("41_0: %+v", j)
	}
	if j := v.Job("42"); j.CopyOf != "" || j.Class != ClassWaiting {
		t.Errorf("42: %+v", j)
	}
	if j := v.Job("43_0"); j.Class != ClassPassThrough || !strings.Contains(j.Problem, "--nodes=1") {
		t.Errorf("43_0: %s %q", j.Class, j.Problem)
	}

	snap := BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
	var ids []string
	for _, j := range snap.Jobs {
		ids = append(ids, j.ID)
		if j.ID == "40" && (j.MaxCopies != 3 || len(j.Current) != 1 || j.Current[0].Copy != 1 || j.Current[0].Node != "v1") {
			t.Errorf("snapshot job 40: %+v", j)
		}
	}
	if strings.Join(ids, " ") != "40 41_0 42" {
		t.Errorf("snapshot jobs %v", ids)
	}
}

func TestCopiesPlacedOnDistinctNodes(t *testing.T) {
	jobs := []slurm.Job{aTask("40", 0, copiesTag, "PD", 1, ""), aTask("40", 1, copiesTag, "PD", 1, ""),
		aTask("40", 2, copiesTag, "PD", 1, ""), aTask("40", 3, copiesTag, "PD", 1, "")}
	v := testView(jobs, copiesNodes(), nil)
	d, _ := deriveWith(t, v, "hadare", DeriveParams{}, nil)
	got := actionStrings(d.Actions)
	want := []string{
		"scontrol update JobId=40_0 NodeList=v1",
		"scontrol update JobId=40_1 NodeList=v2",
		"scontrol update JobId=40_2 NodeList=k1",
		"scontrol update JobId=40_0,40_1,40_2 StartTime=now" + placedSuffix,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("actions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(d.Copies) != 1 {
		t.Fatalf("copies plans %+v", d.Copies)
	}
	cp := d.Copies[0]
	if cp.Job != "40" || len(cp.Copies) != 3 || cp.RoundSeconds != 60 {
		t.Fatalf("plan %+v", cp)
	}
	// Shares in proportion to rates (3, 3, 1), a round's worth: 7 steps/s x 60 s.
	for i, want := range []float64{180, 180, 60} {
		if c := cp.Copies[i]; c.Index != i || c.State != "placed" || c.Steps != want {
			t.Errorf("copy %d: %+v, want %g steps", i, c, want)
		}
	}
	if d.Plan.GPUs("40") != 3 {
		t.Errorf("plan %+v", d.Plan.Assignments["40"])
	}
}

func TestCopiesKeepStopAndLastCopy(t *testing.T) {
	// Job 40 runs three copies; three waiting jobs want a whole node each.
	nodes := copiesNodes()[:3]
	jobs := []slurm.Job{aTask("40", 0, copiesTag, "R", 1, "v1"), aTask("40", 1, copiesTag, "R", 1, "v2"),
		aTask("40", 2, copiesTag, "R", 1, "k1"),
		sJob("50", "hadar model=m steps=100", "PD", 4, 1), sJob("51", "hadar model=m steps=100", "PD", 4, 1)}
	v := testView(jobs, nodes, nil)
	// hadar (no copies) gives 40 one copy and the two big jobs a node each:
	// the two copies on their nodes stop.
	d, _ := deriveWith(t, v, "hadar", DeriveParams{}, nil)
	var stops []string
	for _, dec := range d.Decisions {
		if dec.Kind == DecideStopCopy {
			stops = append(stops, dec.JobID)
		}
	}
	if len(stops) != 2 || len(d.Plan.Assignments["40"]) != 1 || len(d.Copies[0].Copies) != 1 {
		t.Fatalf("stops %v, plan %v, copies %+v\n%+v", stops, d.Plan.Assignments, d.Copies, d.Decisions)
	}
	if d.Copies[0].Copies[0].State != "running" {
		t.Errorf("plan %+v", d.Copies[0])
	}

	snap := BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute})
	// No plan at all: every running copy goes on.
	d, err := Derive(v, snap, nil, DeriveParams{})
	if err != nil || len(d.Actions) != 0 || len(d.Copies[0].Copies) != 3 {
		t.Fatalf("no plan: %v %v %+v", err, actionStrings(d.Actions), d.Copies)
	}
	// A plan that drops the job but gives its GPUs to nobody: nothing stops.
	d, err = Derive(v, snap, optimizer.NewPlan(), DeriveParams{Preemption: true})
	if err != nil || len(d.Actions) != 0 {
		t.Fatalf("empty plan: %v %v", err, actionStrings(d.Actions))
	}
	// A plan that gives every node to others: the fastest copy goes on
	// unless preemption is on.
	v = testView(append(jobs, sJob("52", "hadar model=m steps=100", "PD", 4, 1)), nodes, nil)
	snap = BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute})
	plan := optimizer.NewPlan()
	plan.Assign("50", optimizer.Task{Node: "v1", Type: "v100", GPUs: 4})
	plan.Assign("51", optimizer.Task{Node: "v2", Type: "v100", GPUs: 4})
	plan.Assign("52", optimizer.Task{Node: "k1", Type: "k80", GPUs: 4})
	d, err = Derive(v, snap, plan, DeriveParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actionStrings(d.Actions); got[0] != "scontrol requeuehold 40_1,40_2" {
		t.Errorf("dropped, no preemption: %s", strings.Join(got, "\n"))
	}
	d, err = Derive(v, snap, plan, DeriveParams{Preemption: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := actionStrings(d.Actions); got[0] != "scontrol requeuehold 40_0,40_1,40_2" {
		t.Errorf("dropped, preemption: %s", strings.Join(got, "\n"))
	}
}

func TestCopiesRepairsWhatSlurmDid(t *testing.T) {
	// After a fail-open Slurm ran two copies on one node and more than
	// allowed: the round stops the extras and places nothing new.
	jobs := []slurm.Job{aTask("40", 0, copiesTag, "R", 1, "v1"), aTask("40", 1, copiesTag, "R", 1, "v1"),
		aTask("40", 2, copiesTag, "R", 1, "k1"), aTask("40", 3, copiesTag, "R", 1, "k2"), aTask("40", 4, copiesTag, "PD", 1, "")}
	v := testView(jobs, copiesNodes(), nil)
	for _, pol := range []string{"hadare", "hadar"} {
		d, _ := deriveWith(t, v, pol, DeriveParams{}, nil)
		if err := CheckCopies(v, d); err != nil {
			t.Fatalf("%s: %v", pol, err)
		}
		if got := finalCopies(v, d)["40"]; len(got) > 3 {
			t.Errorf("%s: copies %v", pol, got)
		}
	}
}

func TestCopiesLaunchingCountAndBlockNodes(t *testing.T) {
	jobs := []slurm.Job{aTask("40", 0, copiesTag, "L", 1, ""), aTask("40", 1, copiesTag, "R", 1, "k1"),
		aTask("40", 2, copiesTag, "PD", 1, ""), aTask("40", 3, copiesTag, "PD", 1, "")}
	v := testView(jobs, copiesNodes(), map[string]Placed{"40_0": {Nodes: []string{"v1"}, ReleasedAt: t0}})
	if g := v.Groups[0]; g.Limit() != 2 {
		t.Fatalf("limit %d", g.Limit())
	}
	d, _ := deriveWith(t, v, "hadare", DeriveParams{}, nil)
	fc := finalCopies(v, d)["40"]
	if len(fc) != 3 || slices.Contains(actionStrings(d.Actions), "scontrol update JobId=40_2 NodeList=v1") {
		t.Fatalf("copies %v, actions %v", fc, actionStrings(d.Actions))
	}
	if n := len(d.Copies[0].Copies); n != 3 {
		t.Errorf("plan lists %d copies: %+v", n, d.Copies[0].Copies)
	}
}

// finalCopies is where each copies job's copies will be after the round's
// actions, computed independently of CheckCopies: running tasks not
// requeued, launching and pinned tasks, and placed tasks.
func finalCopies(v *View, d Derivation) map[string][]string {
	stopped := map[string]bool{}
	placed := map[string]string{}
	for _, a := range d.Actions {
		if a.Kind == ActRequeueHold {
			for _, id := range a.JobIDs {
				stopped[id] = true
			}
		}
		if a.Kind == ActPlace {
			placed[a.JobIDs[0]] = strings.Join(a.Nodes, "+")
		}
	}
	out := map[string][]string{}
	for _, g := range v.Groups {
		for _, t := range g.Tasks {
			switch {
			case placed[t.ID] != "":
				out[g.ID] = append(out[g.ID], placed[t.ID])
			case (t.Class == ClassRunning && !stopped[t.ID]) || t.Class == ClassLaunching || t.Class == ClassPinned:
				out[g.ID] = append(out[g.ID], strings.Join(t.Nodes, "+"))
			}
		}
	}
	return out
}

// TestCopiesInvariantRandom: on random clusters and queues (copies jobs in
// every state beside ordinary jobs), whatever the policy and with or
// without preemption, every derived round passes optimizer.Check and
// leaves no two copies of a job on one node and no job with more copies
// than it allows (beyond what Slurm ran on its own before the round).
func TestCopiesInvariantRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	policies := []string{"hadare", "hadar", "gavel", "tiresias"}
	rounds := 400
	if testing.Short() {
		rounds = 80
	}
	counts := map[DecisionKind]int{}
	for r := range rounds {
		var nodes []slurm.Node
		nn := 2 + rng.IntN(5)
		for i := range nn {
			typ := []string{"v100", "k80"}[rng.IntN(2)]
			nodes = append(nodes, sNode(fmt.Sprintf("n%d", i), typ, 1+rng.IntN(4), 0))
		}
		used := map[string]int{}
		var jobs []slurm.Job
		placed := map[string]Placed{}
		taken := map[string]int{} // running (Slurm counts them) and launching (hadar reserves them)
		free := func(running bool) string {
			for range 10 {
				n := nodes[rng.IntN(len(nodes))]
				if taken[n.Name] < n.Gres[0].Count {
					taken[n.Name]++
					if running {
						used[n.Name]++
					}
					return n.Name
				}
			}
			return ""
		}
		for a := range 1 + rng.IntN(3) {
			arr := fmt.Sprint(100 + a)
			copies := 2 + rng.IntN(3)
			tag := fmt.Sprintf("hadar model=m steps=%d copies=%d", 1000+rng.IntN(100000), copies)
			holds := map[string]bool{}
			for i := range 1 + rng.IntN(5) {
				st := []string{"PD", "PD", "R", "L"}[rng.IntN(4)]
				node := ""
				if st != "PD" {
					node = free(st == "R")
					// Mostly distinct nodes, as hadar leaves them; sometimes
					// not (Slurm ran them itself).
					if node == "" || (holds[node] && rng.IntN(4) != 0) {
						st, node = "PD", ""
					}
				}
				holds[node] = true
				j := aTask(arr, i, tag, st, 1, node)
				if st == "L" {
					placed[j.ID()] = Placed{Nodes: []string{node}, ReleasedAt: t0}
				}
				jobs = append(jobs, j)
			}
		}
		for i := range rng.IntN(4) {
			st := []string{"PD", "R"}[rng.IntN(2)]
			node := ""
			if st == "R" {
				if node = free(true); node == "" {
					st = "PD"
				}
			}
			var nl []string
			if node != "" {
				nl = []string{node}
			}
			jobs = append(jobs, sJob(fmt.Sprint(500+i), "hadar model=m steps=5000", st, 1, 1, nl...))
		}
		for i := range nodes {
			nodes[i].GresUsed[0].Count = used[nodes[i].Name]
		}
		v := testView(jobs, nodes, placed)
		pol := policies[rng.IntN(len(policies))]
		p := DeriveParams{Preemption: rng.IntN(2) == 0, MigrationPenalty: time.Duration(rng.IntN(2)) * time.Minute}
		snap := BuildSnapshot(v, testMatrix(), nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
		po, _ := optimizer.New(pol, optimizer.Options{})
		plan, err := po.Plan(snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := optimizer.Check(snap, plan); err != nil {
			t.Fatalf("round %d %s: policy plan: %v", r, pol, err)
		}
		d, err := Derive(v, snap, plan, p)
		if err != nil {
			t.Fatalf("round %d %s: derive: %v\njobs: %+v", r, pol, err, jobs)
		}
		if err := optimizer.Check(snap, d.Plan); err != nil {
			t.Fatalf("round %d: derived plan: %v", r, err)
		}
		before := map[string]int{}
		for _, g := range v.Groups {
			for _, task := range g.Tasks {
				if task.Class == ClassLaunching || task.Class == ClassPinned || task.Class == ClassRunning {
					before[g.ID]++
				}
			}
		}
		final := finalCopies(v, d)
		for _, g := range v.Groups {
			on := final[g.ID]
			if len(on) > g.Tag.Copies && len(on) > before[g.ID] {
				t.Fatalf("round %d %s: job %s runs %d copies (%v), allowed %d", r, pol, g.ID, len(on), on, g.Tag.Copies)
			}
			sorted := append([]string(nil), on...)
			sort.Strings(sorted)
			for i := 1; i < len(sorted); i++ {
				if sorted[i] == sorted[i-1] && !preexistingPair(v, d, g, sorted[i]) {
					t.Fatalf("round %d %s: job %s has two copies on %s (%v)\nactions %v", r, pol, g.ID, sorted[i], on, actionStrings(d.Actions))
				}
			}
		}
		seen := map[string]bool{}
		for _, dec := range d.Decisions {
			if v.Job(dec.JobID).CopyOf != "" {
				counts[dec.Kind]++
				if seen[dec.JobID] {
					t.Fatalf("round %d: two decisions for %s: %+v", r, dec.JobID, d.Decisions)
				}
				seen[dec.JobID] = true
			}
			if dec.Kind == DecidePlace && v.Job(dec.JobID).CopyOf != "" && len(dec.ToNodes) != 1 {
				t.Fatalf("round %d: copy placed on %v", r, dec.ToNodes)
			}
		}
	}
	t.Logf("copies' decisions over %d rounds: %v", rounds, counts)
	for _, k := range []DecisionKind{DecidePlace, DecideKeep, DecideStopCopy, DecideWait} {
		if counts[k] == 0 {
			t.Errorf("no %s decision for a copy: the random cases miss it", k)
		}
	}
}

// preexistingPair: the two copies on node n were both there before the
// round and hadar could not move them (launching or pinned).
func preexistingPair(v *View, d Derivation, g *CopyGroup, n string) bool {
	for _, a := range d.Actions {
		if a.Kind == ActPlace && v.Job(a.JobIDs[0]).CopyOf == g.ID && slices.Contains(a.Nodes, n) {
			return false
		}
	}
	stopped := map[string]bool{}
	for _, a := range d.Actions {
		if a.Kind == ActRequeueHold {
			for _, id := range a.JobIDs {
				stopped[id] = true
			}
		}
	}
	for _, task := range g.Tasks {
		if task.Class == ClassRunning && !stopped[task.ID] && slices.Contains(task.Nodes, n) {
			return false
		}
	}
	return true
}

// TestCopiesLoop runs hadar-slurmd's rounds on the fake cluster with the
// hadare policy and a copies job of four tasks (copies=3): three copies
// run on three nodes, the copies' plan.json says so, a copy that ends is
// replaced by the spare task, and the job's progress comes from its own
// report (the copies' combiner writes it under the array id).
func TestCopiesLoop(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Policy = "hadare"; c.Round = config.Duration{Duration: 10 * time.Second} })
	const tag = "hadar model=lm-bs20 steps=20000 copies=3"
	h.fc.mu.Lock()
	for i := range 4 {
		id := fmt.Sprintf("700_%d", i)
		h.fc.jobs[id] = &fakeJob{id: id, user: "alice", comment: tag, state: "PENDING", reason: "BeginTime",
			gpus: 1, numNodes: 1, submit: t0, begin: t0.Add(fakeLease)}
		h.fc.order = append(h.fc.order, id)
	}
	h.fc.mu.Unlock()
	b := h.bridge()
	rep := h.cycle(b)
	running := func() map[string]string {
		h.fc.mu.Lock()
		defer h.fc.mu.Unlock()
		out := map[string]string{}
		for id, j := range h.fc.jobs {
			if strings.HasPrefix(id, "700_") && j.state == "RUNNING" {
				out[id] = strings.Join(j.nodes, ",")
			}
		}
		return out
	}
	checkDistinct := func(when string) map[string]string {
		r := running()
		seen := map[string]bool{}
		for _, n := range r {
			if seen[n] {
				t.Fatalf("%s: two copies on %s: %v", when, n, r)
			}
			seen[n] = true
		}
		if len(r) > 3 {
			t.Fatalf("%s: %d copies running: %v", when, len(r), r)
		}
		return r
	}
	if r := checkDistinct("round 1"); len(r) != 3 {
		t.Fatalf("round 1: running %v; decisions %+v", r, rep.Decisions)
	}
	cp, err := jobproto.ReadCopyPlan(h.cfg.SpoolDir, "700")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Generation != rep.Number || len(cp.Copies) != 3 || cp.Allowed != 3 || cp.RoundSeconds != 10 {
		t.Fatalf("plan.json %+v", cp)
	}
	total := 0.0
	for _, c := range cp.Copies {
		total += c.Steps
		if c.Rate <= 0 || c.Steps <= 0 || c.Node == "" || c.GPUType == "" {
			t.Errorf("copy %+v", c)
		}
	}
	if sum := cp.Copies[0].Rate + cp.Copies[1].Rate + cp.Copies[2].Rate; total < 0.99*sum*10 || total > 1.01*sum*10 {
		t.Errorf("shares sum to %g, want a round's worth (%g)", total, sum*10)
	}
	st, err := os.Stat(filepath.Join(h.cfg.SpoolDir, jobproto.CopiesSubdir))
	if err != nil || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("copies dir: %v %v", st.Mode(), err)
	}

	// The combiner reports the job's progress under the array id.
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, "700", 5000, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(10 * time.Second)
	h.cycle(b)
	stored, err := b.State().Progress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if pr := stored["700"]; !pr.Reported || pr.Done < 5000 || pr.Done > 5000+10*3*70 {
		t.Errorf("job 700 progress %+v", pr)
	}
	if _, ok := stored["700_0"]; ok {
		t.Errorf("a copy has its own progress: %+v", stored["700_0"])
	}

	// One copy ends (scancel): the spare task replaces it, on a node that
	// holds no other copy.
	before := checkDistinct("round 2")
	var gone string
	for id := range before {
		gone = id
		break
	}
	h.fc.mu.Lock()
	h.fc.jobs[gone].state = "CANCELLED"
	h.fc.jobs[gone].nodes = nil
	h.fc.mu.Unlock()
	h.clock.advance(10 * time.Second)
	h.cycle(b)
	after := checkDistinct("round 3")
	if len(after) != 3 || after[gone] != "" {
		t.Fatalf("after %s ended: running %v", gone, after)
	}
	cp, _ = jobproto.ReadCopyPlan(h.cfg.SpoolDir, "700")
	for _, c := range cp.Copies {
		if c.Task == gone {
			t.Errorf("plan.json still lists %s", gone)
		}
	}
}

func TestShareSteps(t *testing.T) {
	cs := []jobproto.CopyMember{{Rate: 3}, {Rate: 1}}
	shareSteps(cs, 100, 60) // 4 steps/s x 60 s = 240 > 100 remaining
	if cs[0].Steps != 75 || cs[1].Steps != 25 {
		t.Errorf("%+v", cs)
	}
	shareSteps(cs, 1e6, 10)
	if cs[0].Steps != 30 || cs[1].Steps != 10 {
		t.Errorf("%+v", cs)
	}
}

func TestFailOpenCopies(t *testing.T) {
	jobs := []slurm.Job{
		aTask("40", 0, copiesTag, "PD", 1, ""), aTask("40", 1, copiesTag, "PD", 1, ""), // none runs: one goes
		aTask("41", 0, copiesTag, "R", 1, "v1"), aTask("41", 1, copiesTag, "PD", 1, ""), // one runs: none goes
		aTask("42", 0, "hadar model=m", "PD", 1, ""), aTask("42", 1, "hadar model=m", "PD", 1, ""), // no copies: all
		sJob("43", "hadar model=m copies=3", "PD", 1, 1), // not an array: goes
	}
	var ids []string
	for _, j := range jobs {
		if j.State == "PENDING" {
			ids = append(ids, j.ID())
		}
	}
	got := hadarE.failOpen(jobs, ids)
	if strings.Join(got, " ") != "40_0 42_0 42_1 43" {
		t.Errorf("released %v", got)
	}
}

// TestCopiesJobPastItsEstimate: a copies job that has done more than its
// steps= is taken to need as much again as it has overrun, as an ordinary
// job is (optimizer.RemainingEstimate), not 5% of its steps round after
// round.
func TestCopiesJobPastItsEstimate(t *testing.T) {
	jobs := []slurm.Job{aTask("40", 0, copiesTag, "PD", 1, ""), aTask("40", 1, copiesTag, "R", 1, "v1")}
	v := testView(jobs, copiesNodes(), nil)
	for _, tc := range []struct {
		done, want float64
	}{{9000, 27000}, {36000 * 1.5, 18000}, {36000 * 1.01, 1800}} {
		snap := BuildSnapshot(v, testMatrix(), map[string]JobProgress{"40": {Done: tc.done}}, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
		if len(snap.Jobs) != 1 || snap.Jobs[0].ID != "40" {
			t.Fatalf("snapshot jobs %+v", snap.Jobs)
		}
		if got := snap.Jobs[0].RemainingSteps; math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("done %v of 36000: remaining %v, want %v", tc.done, got, tc.want)
		}
	}
}

// TestCopiesJobPlannedByTime: a copies job's work comes from the same rule
// as an ordinary job's: without steps= its copies' --time (not only
// default_duration), and for a model no matrix knows its --time even with
// steps= (the prior's steps/s are another model's), until it is learned.
func TestCopiesJobPlannedByTime(t *testing.T) {
	tp := testMatrix()
	prior := map[string]map[int]float64{"v100": {1: 30}, "k80": {1: 10}}
	jobs := []slurm.Job{
		aTask("50", 0, "hadar model=m copies=2", "PD", 1, ""), aTask("50", 1, "hadar model=m copies=2", "PD", 1, ""),
		aTask("60", 0, "hadar model=new-llm steps=700 copies=2", "PD", 1, ""), aTask("60", 1, "hadar model=new-llm steps=700 copies=2", "PD", 1, ""),
		aTask("70", 0, "hadar model=m steps=700 copies=2", "PD", 1, ""), aTask("70", 1, "hadar model=m steps=700 copies=2", "PD", 1, ""),
	}
	details := map[string]slurm.JobDetail{}
	for _, j := range jobs {
		details[j.ID()] = slurm.JobDetail{JobID: j.ID(), TimeLimit: 2 * time.Hour}
	}
	v := BuildView(ViewInput{Now: t0, Jobs: jobs, Nodes: copiesNodes(), Details: details,
		ResolveGPU: func(s string) (string, error) { return s, nil },
		Models:     jobproto.NewModelResolver(tp.JobTypes(), nil), Throughput: tp,
		PriorFor: func(string) map[string]map[int]float64 { return prior }})
	if len(v.Groups) != 3 {
		t.Fatalf("groups %+v, want 3 copies jobs", v.Groups)
	}
	snap := BuildSnapshot(v, tp, map[string]JobProgress{"60": {Done: 175}}, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
	got := map[string][2]float64{}
	for _, j := range snap.Jobs {
		got[j.ID] = [2]float64{j.TotalSteps, j.RemainingSteps}
	}
	want := map[string][2]float64{
		"50": {3 * 7200, 3 * 7200},               // 2 h at m's 3 steps/s on v100
		"60": {30 * 7200, 30 * 7200 * 525 / 700}, // 2 h at the prior's 30 steps/s, a quarter done
		"70": {700, 700},                         // a known model: its steps=
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("total and remaining steps (-want +got):\n%s", diff)
	}
}
