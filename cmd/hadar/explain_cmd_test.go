package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/bridge"
)

func explainJSON(t *testing.T, nodes []byte, id string, jobs ...qjob) explainOutput {
	t.Helper()
	r := fakeSlurm(nodes, jobs...)
	out, stderr, err := runCLI(t, r, "explain", "--json", id)
	if err != nil {
		t.Fatalf("explain %s: %v\n%s", id, err, stderr)
	}
	onlyReads(t, r)
	var e explainOutput
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return e
}

// TestExplainWaits: a 2-node x 4-GPU job when only one node's worth of
// GPUs of the types it can use is free says how many it asked for and how
// many are free.
func TestExplainWaits(t *testing.T) {
	isolate(t)
	nodes := demoNodes(t, map[string]int{"node1": 4, "node2": 4, "node4": 4, "node5": 4})
	jobs := []qjob{
		{id: "1", state: "RUNNING", gres: "gres:gpu:4", nodes: "node1"},
		{id: "2", state: "RUNNING", gres: "gres:gpu:4", nodes: "node2"},
		{id: "3", state: "RUNNING", gres: "gres:gpu:4", nodes: "node4"},
		{id: "4", state: "RUNNING", gres: "gres:gpu:4", nodes: "node5"},
		{id: "9", comment: "hadar model=resnet18-bs128 steps=5000", gres: "gres:gpu:4", numNodes: 2},
	}
	e := explainJSON(t, nodes, "9", jobs...)
	if want := "waits: 8 GPUs requested (2 nodes x 4), 4 free of types it can use"; !strings.HasPrefix(e.Summary, want) {
		t.Errorf("summary %q, want it to start with %q", e.Summary, want)
	}
	if e.Class != "waiting" || !e.Tagged || e.GPUs != 8 || e.Nodes != 2 || e.GPUsPerNode != 4 {
		t.Errorf("job = %+v", e)
	}
	if e.Model != "ResNet-18 (batch size 128)" || e.ModelAsked != "resnet18-bs128" {
		t.Errorf("model %q asked %q", e.Model, e.ModelAsked)
	}
	if e.Decision == nil || e.Decision.Decision != "wait" {
		t.Errorf("decision %+v, want wait", e.Decision)
	}
	if len(e.Types) != 3 || e.Types[0].Type != "v100" || e.Types[0].Rate <= e.Types[2].Rate || e.Types[0].Relative != 1 {
		t.Errorf("types (fastest first): %+v", e.Types)
	}
	for _, ty := range e.Types {
		if ty.Type == "v100" && (ty.Others != 8 || ty.FreeNow != 0) {
			t.Errorf("v100: %+v, want 8 held by others, 0 free", ty)
		}
		if ty.Type == "p100" && ty.FreeAfterPlan != 4 {
			t.Errorf("p100: %+v, want 4 free", ty)
		}
	}
	if !strings.Contains(strings.Join(e.Details, "\n"), "8 busy with work hadar does not manage") {
		t.Errorf("details do not say who holds the v100s: %q", e.Details)
	}
	if e.Progress == nil || e.Progress.TotalSteps != 5000 {
		t.Errorf("progress %+v", e.Progress)
	}

	// Same in text.
	r := fakeSlurm(nodes, jobs...)
	text, _, err := runCLI(t, r, "explain", "9")
	if err != nil {
		t.Fatal(err)
	}
	// docs/user-guide.md shows these lines: keep them in step.
	for _, want := range []string{
		"job 9: waits: 8 GPUs requested (2 nodes x 4), 4 free of types it can use (p100 4); the rest are busy with other jobs or given to other tagged jobs this round\n",
		"  - v100 (100% of its best rate): 8 GPUs: 8 busy with work hadar does not manage\n",
		"  - p100 (52% of its best rate): 4 GPUs: 4 left free (at most 4 on one node)\n",
		"  - k80 (8% of its best rate): 8 GPUs: 8 busy with work hadar does not manage\n",
		"resnet18-bs128 -> ResNet-18 (batch size 128)", "GPU TYPE", "yes, class waiting"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain text lacks %q:\n%s", want, text)
		}
	}
}

func TestExplainPlacedRunningAndUntagged(t *testing.T) {
	isolate(t)
	nodes := demoNodes(t, map[string]int{"node1": 4, "node3": 1})
	jobs := []qjob{
		{id: "1", state: "RUNNING", gres: "gres:gpu:4", nodes: "node1", comment: "just a comment"},
		{id: "2", comment: `hadar model="ResNet-50 (batch size 64)" steps=1000`, gres: "gres:gpu:1"},
		{id: "3", state: "RUNNING", comment: "hadar model=a3c steps=100", gres: "gres:gpu:1", nodes: "node3", used: 20 * time.Second},
	}

	e := explainJSON(t, nodes, "1", jobs...)
	if !strings.HasPrefix(e.Summary, "not managed by hadar") || e.Tagged || e.Class != "untagged" || e.Decision != nil || len(e.Actions) != 0 {
		t.Errorf("untagged job: %+v", e)
	}

	e = explainJSON(t, nodes, "2", jobs...)
	if e.Decision == nil || e.Decision.Decision != "place" || !strings.Contains(e.Summary, "placed now on") {
		t.Errorf("job 2: %+v", e)
	}
	if e.Model != "ResNet-50 (batch size 64)" {
		t.Errorf("quoted model resolved to %q", e.Model)
	}
	if len(e.Actions) == 0 || !strings.Contains(strings.Join(e.Actions, "\n"), "scontrol update JobId=2 NodeList=") {
		t.Errorf("actions %q", e.Actions)
	}

	e = explainJSON(t, nodes, "3", jobs...)
	if e.Class != "running" || !strings.HasPrefix(e.Summary, "runs on node3:1 (p100)") || strings.Join(e.Placement, ",") != "node3" {
		t.Errorf("running job 3: %+v", e)
	}
}

func TestExplainPassThroughAndMissing(t *testing.T) {
	isolate(t)
	nodes := demoNodes(t, nil)
	jobs := []qjob{
		{id: "5", comment: "hadar model=a3c steps=-10", gres: "gres:gpu:1"},
		{id: "6", comment: "hadar model=a3c", gres: "gres:gpu:v100:1"},
		{id: "7", reason: "Resources", comment: "hadar model=a3c steps=-10", gres: "gres:gpu:1"},
		{id: "9", comment: "hadar model=nosuchmodel steps=10", gres: "gres:gpu:1"},
		{id: "8", comment: "hadar model=resnet50 steps=10", gres: "gres:gpu:1"},
	}
	e := explainJSON(t, nodes, "5", jobs...)
	if e.Class != "pass-through" || !strings.Contains(e.Summary, `passed through to Slurm's scheduler: bad hadar tag: steps`) {
		t.Errorf("job 5: %+v", e)
	}
	if !strings.Contains(strings.Join(e.Details, "\n"), `AdminComment "hadar: bad hadar tag: steps: \"-10\": want a number > 0; released to Slurm's scheduler"`) {
		t.Errorf("job 5 details: %q", e.Details)
	}
	// A model no matrix knows is scheduled, on the cross-model prior.
	e = explainJSON(t, nodes, "9", jobs...)
	if e.Class != "waiting" || e.Problem != "" || !strings.Contains(strings.Join(e.Details, "\n"), "planned with the cross-model prior") {
		t.Errorf("unknown model: %+v", e)
	}
	e = explainJSON(t, nodes, "6", jobs...)
	// A typed request is scheduled, on its type only.
	if e.Problem != "" || e.Class != "waiting" {
		t.Errorf("typed request: %+v", e)
	}
	// Already released (not held): Slurm has it.
	e = explainJSON(t, nodes, "7", jobs...)
	if !strings.HasPrefix(e.Summary, "Slurm's scheduler has it: hadar cannot schedule it") {
		t.Errorf("released pass-through: %q", e.Summary)
	}
	// A name several job types start with is ambiguous, not unknown.
	e = explainJSON(t, nodes, "8", jobs...)
	if !strings.Contains(e.Problem, "is ambiguous: 4 job types start with it") {
		t.Errorf("ambiguous model: %q", e.Problem)
	}

	r := fakeSlurm(nodes, jobs...)
	if _, _, err := runCLI(t, r, "explain", "99"); err == nil || !strings.Contains(err.Error(), "not in the queue") {
		t.Errorf("missing job: %v", err)
	}
	if _, _, err := runCLI(t, r, "explain"); err == nil {
		t.Error("explain with no JOBID must fail")
	}
	// --json after the job id works too.
	out, _, err := runCLI(t, r, "explain", "5", "--json")
	if err != nil || !strings.HasPrefix(out, "{") {
		t.Errorf("explain 5 --json: %v %q", err, out)
	}
}

// TestExplainSiteNames: site GRES names are shown beside the canonical
// types hadar plans with.
func TestExplainSiteNames(t *testing.T) {
	isolate(t)
	e := explainJSON(t, siteNodes(t), "6",
		qjob{id: "1", state: "RUNNING", gres: "gres:gpu:tesla_v100-sxm2-32gb:4", nodes: "gpu-v100-01"},
		qjob{id: "6", comment: "hadar model=resnet50-bs64 steps=100", gres: "gres:gpu:2"},
	)
	if len(e.Types) != 1 || e.Types[0].Type != "v100" || strings.Join(e.Types[0].SiteNames, ",") != "tesla_v100-sxm2-32gb" {
		t.Errorf("types %+v: want only v100 (tesla_v100-sxm2-32gb): the a100 node is drained, the mixed node has two types", e.Types)
	}
	if e.Decision == nil || strings.Join(e.Decision.Nodes, ",") != "gpu-v100-02" {
		t.Errorf("decision %+v", e.Decision)
	}
}

// TestExplainSaysDaemonStopped: with hadar-slurmd stopped (its status file
// says so), explain says that first, as any user (the file is all it reads
// of the daemon), instead of presenting a dry round's plan as what happens.
func TestExplainSaysDaemonStopped(t *testing.T) {
	isolate(t)
	spool := configDefaults().SpoolDir
	nodes := demoNodes(t, map[string]int{})
	jobs := []qjob{{id: "5", comment: "hadar model=a3c steps=100", gres: "gres:gpu:1"}}
	now := time.Now()
	for _, tc := range []struct {
		name   string
		status bridge.DaemonStatus
		alive  bool
		says   string
	}{
		{"stopped", bridge.DaemonStatus{PID: 1, LastRound: now.Add(-time.Minute), RoundSeconds: 60, Stopped: now.Add(-30 * time.Second)}, false, "hadar-slurmd is stopped"},
		{"killed long ago", bridge.DaemonStatus{PID: 1, LastRound: now.Add(-time.Hour), RoundSeconds: 60}, false, "hadar-slurmd is not running"},
		{"running", bridge.DaemonStatus{PID: os.Getpid(), Host: hostname(t), LastRound: now, RoundSeconds: 60,
			Jobs: map[string]bridge.JobStatus{"5": {Class: bridge.ClassWaiting, Decision: bridge.DecideWait, Reason: "3 ahead"}}}, true, "hadar-slurmd runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := bridge.WriteStatus(spool, tc.status); err != nil {
				t.Fatal(err)
			}
			e := explainJSON(t, nodes, "5", jobs...)
			if e.DaemonAlive != tc.alive || !strings.Contains(e.Daemon, tc.says) {
				t.Errorf("daemon = %v %q, want %v %q", e.DaemonAlive, e.Daemon, tc.alive, tc.says)
			}
			if !tc.alive && !strings.HasPrefix(e.Summary, tc.says) {
				t.Errorf("summary %q does not start with the daemon's state", e.Summary)
			}
			if tc.alive && !strings.Contains(strings.Join(e.Details, "\n"), "hadar-slurmd's own last round") {
				t.Errorf("details %q lack the daemon's own decision", e.Details)
			}
		})
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
