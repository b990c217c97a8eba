package bridge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/slurm"
)

// requeueOnNodeFailure does to a running job what Slurm 22.05 does when
// its node goes DOWN with JobRequeue=1: the job is PENDING again, not
// held, still pinned to its node (ReqNodeList), with reason BeginTime
// (eligible again 120 s later).
func (f *fakeCluster) requeueOnNodeFailure(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	j.reqNodes = append([]string(nil), j.nodes...)
	j.state, j.reason, j.nodes, j.held = "PENDING", "BeginTime", nil, false
	j.begin = f.clock().Add(120 * time.Second)
	j.restarts++
}

func (f *fakeCluster) setNodeState(name, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node(name).state = state
}

// A node fails under a running hadar job: Slurm requeues the job, still
// pinned to the dead node, with a begin time 120 s on. hadar reads that as
// a lease: the job is waiting, and the round places it on a live node.
func TestNodeFailureRequeuedJobIsReplaced(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit(resnet, 4, 1, t0)
	b := h.bridge()
	h.cycle(b)
	j := h.fc.job(id)
	if j.state != "RUNNING" || len(j.nodes) != 1 {
		t.Fatalf("not running: %+v", j)
	}
	dead := j.nodes[0]
	h.clock.advance(time.Minute)
	h.cycle(b) // the job is seen running: its placement record is dropped

	h.fc.setNodeState(dead, "DOWN+DRAIN")
	h.fc.requeueOnNodeFailure(id)
	h.clock.advance(10 * time.Second)
	rep := h.cycle(b)
	j = h.fc.job(id)
	if rep.Count(DecidePlace) != 1 || j.state != "RUNNING" || len(j.nodes) != 1 || j.nodes[0] == dead {
		t.Fatalf("not re-placed on a live node: %+v, decisions %+v", j, rep.Decisions)
	}
}

// A job hadar released that Slurm has not started yet, whose node is then
// drained, gets a lease again at once instead of after launch_timeout.
func TestLaunchingJobOnDrainedNodeIsReheld(t *testing.T) {
	h := newHarness(t, nil)
	h.fc.noAutoStart = true
	id := h.fc.submit(resnet, 4, 1, t0)
	b := h.bridge()
	h.cycle(b)
	j := h.fc.job(id)
	if j.held || len(j.reqNodes) != 1 {
		t.Fatalf("not released: %+v", j)
	}
	h.fc.setNodeState(j.reqNodes[0], "IDLE+DRAIN")
	h.clock.advance(5 * time.Second)
	rep := h.cycle(b)
	if rep.Count(DecideRehold) != 1 || !h.fc.leased(id) {
		t.Fatalf("no lease again: %+v", rep.Decisions)
	}
	for _, d := range rep.Decisions {
		if d.Kind == DecideRehold && !strings.Contains(d.Reason, "not usable") {
			t.Errorf("reason: %q", d.Reason)
		}
	}
}

// A tagged job whose lease ran out while hadar was away (fail-open, a dead
// daemon) and that Slurm has not started (it waits for resources) is
// hadar's again.
func TestLapsedLeaseIsTakenBack(t *testing.T) {
	h := newHarness(t, nil)
	h.fc.noAutoStart = true
	id := h.fc.submit(resnet, 4, 1, t0)
	j := h.fc.job(id)
	j.begin, j.reason = t0.Add(-time.Second), "Resources"
	b := h.bridge()
	rep := h.cycle(b)
	if c := rep.View.Job(id).Class; c != ClassWaiting || rep.Count(DecidePlace) != 1 {
		t.Fatalf("class %s, decisions %+v; want waiting, placed", c, rep.Decisions)
	}
}

// poll starts a round early when a tagged job goes from running back to
// pending (Slurm requeued it).
func TestPollSeesRequeue(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit(resnet, 4, 1, t0)
	b := h.bridge()
	h.cycle(b)
	if changed, err := b.poll(context.Background()); err != nil || changed {
		t.Fatalf("nothing changed yet: %v %v", changed, err)
	}
	h.fc.requeueOnNodeFailure(id)
	if changed, err := b.poll(context.Background()); err != nil || !changed {
		t.Fatalf("requeue not seen: %v %v", changed, err)
	}
}

// scriptedRunner serves canned squeue / scontrol show node output and
// accepts every update, recording it.
type scriptedRunner struct {
	mu      sync.Mutex
	squeue  []byte
	nodes   []byte
	updates [][]string
}

func (r *scriptedRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	key := strings.Join(argv, " ")
	switch key {
	case strings.Join(slurm.JobQueryArgs, " "):
		return r.squeue, nil
	case strings.Join(slurm.NodeQueryArgs, " "):
		return r.nodes, nil
	}
	r.mu.Lock()
	r.updates = append(r.updates, argv)
	r.mu.Unlock()
	return nil, nil
}

// Output the parsers cannot read (garbage lines, a record with an unknown
// state word, a node line without a name) among good records is skipped
// with a warning; the round goes on and schedules the good jobs.
func TestGarbageAmongGoodRecordsDoesNotBreakTheRound(t *testing.T) {
	good := []slurm.Job{
		{JobID: "11", ArrayJobID: "11", User: "alice", State: "PENDING", NumNodes: 1, SubmitTime: t0,
			GresRaw: "gres:gpu:1", Reason: "BeginTime", StartTime: t0.Add(fakeLease), Name: "a", Comment: resnet},
		{JobID: "12", ArrayJobID: "12", User: "bob", State: "PENDING", NumNodes: 1, SubmitTime: t0,
			GresRaw: "gres:gpu:2", Reason: "BeginTime", StartTime: t0.Add(fakeLease), Name: "b", Comment: resnet},
	}
	bad := slurm.Job{JobID: "13", ArrayJobID: "13", User: "eve", State: "PENDING", NumNodes: 1, SubmitTime: t0,
		GresRaw: "gres:gpu:1", Reason: "BeginTime", StartTime: t0.Add(fakeLease), Name: "c", Comment: resnet}
	first := renderSqueue(good[:1])
	second := renderSqueue(good[1:])
	broken := bytes.Replace(renderSqueue([]slurm.Job{bad}), []byte("|PENDING|"), []byte("|pending?|"), 1)
	var squeue []byte
	squeue = append(squeue, first...)
	squeue = append(squeue, "this is not squeue output\n"...)
	squeue = append(squeue, broken...)
	squeue = append(squeue, second...)
	squeue = append(squeue, "42|42|N/A|mallory|RUNNING|1|2026-01-01T00:00:00\n"...) // truncated

	fx, err := slurm.LoadFixture(filepath.Join("..", "slurm", "testdata", "scontrol-show-node", "22.05-idle.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := append([]byte("Arch=x86_64 CPUTot=8 Gres=gpu:v100:4 (a node line without NodeName=)\n\x00\xff garbage\n"), fx.Output...)

	runner := &scriptedRunner{squeue: squeue, nodes: nodes}
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logBuf, &logMu}, nil))
	h := newHarness(t, nil)
	b, err := New(h.cfg, Deps{Cluster: slurm.NewClient(runner, logger), Store: h.store, Clock: h.clock, Logger: logger,
		LookupUID: func(string) (int, error) { return os.Getuid(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Cycle(context.Background())
	if err != nil {
		t.Fatalf("round failed: %v", err)
	}
	if rep.Tagged != 2 || rep.Count(DecidePlace) != 2 {
		t.Fatalf("tagged %d placed %d: %+v", rep.Tagged, rep.Count(DecidePlace), rep.Decisions)
	}
	if len(rep.View.Nodes) != 5 {
		t.Errorf("nodes: %d", len(rep.View.Nodes))
	}
	var released bool
	for _, u := range runner.updates {
		if u[1] == "update" && u[2] == "JobId=11,12" && u[3] == "StartTime=now" {
			released = true
		}
		for _, a := range u {
			if strings.Contains(a, "13") || strings.Contains(a, "42") {
				t.Errorf("acted on an unparsable job: %q", u)
			}
		}
	}
	if !released {
		t.Errorf("good jobs not started: %q", runner.updates)
	}
	logMu.Lock()
	out := logBuf.String()
	logMu.Unlock()
	if n := strings.Count(out, "skipping unparsable record"); n < 4 {
		t.Errorf("want a warning per unparsable record (>= 4), got %d:\n%s", n, out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("log line not one record (raw input leaked?): %q", line)
		}
		if strings.ContainsAny(line, "\x00\r") || !isValidUTF8(line) {
			t.Errorf("log line holds raw control or invalid bytes: %q", line)
		}
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "") == s }

// A migration cut short after its requeuehold (the NodeList update fails,
// or the daemon is killed before the release) leaves the job pending with
// Slurm's reason "job requeued in held state". It must read as held: the
// next round places and releases it, and fail-open releases it. Before the
// fix it was taken for a job released to Slurm and stayed held forever.
func TestMigrationCutShortIsResumed(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MigrationPenalty = config.Duration{Duration: time.Second}
		c.MoveWithoutProgress = true // the job reports no progress
	})
	id := h.fc.submit("hadar model=resnet50-bs64 steps=5000000", 1, 1, t0)
	h.fc.mu.Lock()
	j := h.fc.jobs[id]
	j.held, j.state, j.reason, j.nodes = false, "RUNNING", "None", []string{"node4"}
	h.fc.failJob["PlaceOnNodes"] = map[string]error{id: slurm.ErrInvalidNodeName}
	h.fc.mu.Unlock()
	b := h.bridge()
	rep := h.cycle(b)
	if rep.Count(DecideMigrate) != 1 {
		t.Fatalf("no migration: %+v", rep.Decisions)
	}
	if j := h.fc.job(id); j.state != "PENDING" || j.reason != "job requeued in held state" {
		t.Fatalf("after the cut-short migration: %+v", j)
	}
	if got, err := b.ReleaseAll(context.Background()); err == nil && len(got) == 1 {
		// fail-open sees it; put it back for the next round.
		h.fc.mu.Lock()
		h.fc.jobs[id].held, h.fc.jobs[id].reason, h.fc.jobs[id].state, h.fc.jobs[id].nodes = true, "job requeued in held state", "PENDING", nil
		h.fc.mu.Unlock()
	} else {
		t.Errorf("ReleaseAll did not release the requeue-held job: %v %v", got, err)
	}
	h.fc.mu.Lock()
	delete(h.fc.failJob, "PlaceOnNodes")
	h.fc.mu.Unlock()
	h.clock.advance(5 * time.Second)
	rep = h.cycle(b)
	if j := h.fc.job(id); rep.Count(DecidePlace) != 1 || j.state != "RUNNING" {
		t.Fatalf("not resumed: %+v, decisions %+v", j, rep.Decisions)
	}
}

// A launch that fails on the node hadar chose (a node just back from a
// network cut, in the container cluster's TestNodeCutOff on 24.11) makes
// Slurm drain the node and hold the job with "launch failed requeued held".
// Hadar takes it back: the next round places it on another node and
// releases it, and fail-open would release it too. Before the fix it was
// taken for a job Slurm schedules and stayed held forever.
func TestLaunchFailedHeldIsReplaced(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	h.cycle(b)
	j := h.fc.job(id)
	if j.state != "RUNNING" || len(j.nodes) != 1 {
		t.Fatalf("not started: %+v", j)
	}
	failed := j.nodes[0]
	h.fc.mu.Lock()
	j.held, j.state, j.reason, j.nodes = true, "PENDING", "launch failed requeued held", nil
	h.fc.mu.Unlock()
	h.fc.setNodeState(failed, "IDLE+DRAIN")
	if got, err := b.ReleaseAll(context.Background()); err != nil || len(got) != 1 {
		t.Errorf("ReleaseAll did not release the launch-failed job: %v %v", got, err)
	}
	h.fc.mu.Lock()
	j.held, j.state, j.reason, j.nodes = true, "PENDING", "launch failed requeued held", nil
	h.fc.mu.Unlock()
	h.clock.advance(5 * time.Second)
	rep := h.cycle(b)
	if j := h.fc.job(id); rep.Count(DecidePlace) != 1 || j.state != "RUNNING" || len(j.nodes) != 1 || j.nodes[0] == failed {
		t.Fatalf("not re-placed away from %s: %+v, decisions %+v", failed, j, rep.Decisions)
	}
}

// Just after slurmctld restarts every node answers late (IDLE*, not
// schedulable) for a few seconds; a drained or down node is out for a
// while. Held jobs then wait: they are not handed to Slurm's scheduler for
// good as "no throughput known" or "no node can hold it" (what happened
// before the fix, on the first round after a slurmctld restart).
func TestUnschedulableNodesDoNotPassJobsThrough(t *testing.T) {
	h := newHarness(t, nil)
	for _, n := range []string{"node1", "node2", "node3", "node4", "node5"} {
		h.fc.setNodeState(n, "IDLE*")
	}
	a := h.fc.submit(resnet, 4, 1, t0)
	b2 := h.fc.submit("hadar model=resnet50-bs64 steps=1000", 4, 2, t0) // needs two nodes of one type
	br := h.bridge()
	rep := h.cycle(br)
	var acts []Action
	for _, a := range rep.Actions {
		if a.Kind != ActComment || !strings.HasPrefix(a.Text, "hadar: waiting for") {
			acts = append(acts, a)
		}
	}
	if n := rep.Count(DecidePassThrough); n != 0 || len(acts) != 0 {
		t.Fatalf("with every node answering late: %d pass-throughs, actions %v", n, rep.Actions)
	}
	for _, id := range []string{a, b2} {
		if c := rep.View.Job(id).Class; c != ClassWaiting {
			t.Errorf("job %s: class %s, want waiting", id, c)
		}
	}
	for _, n := range []string{"node1", "node2", "node3", "node4", "node5"} {
		h.fc.setNodeState(n, "IDLE")
	}
	h.clock.advance(5 * time.Second)
	rep = h.cycle(br)
	if rep.Count(DecidePlace) != 2 {
		t.Fatalf("after the nodes came back: %+v", rep.Decisions)
	}
}

// A command that times out (slurmctld hung or stopped: 22.05's clients
// retry ~9 s before failing) ends the round's enforcement: the remaining
// actions are skipped, not each run into the same wait.
func TestExecutorStopsAfterTimeout(t *testing.T) {
	fc := newFakeCluster("node1:v100:4")
	ids := []string{fc.submit(resnet, 1, 1, t0), fc.submit(resnet, 1, 1, t0), fc.submit(resnet, 1, 1, t0)}
	fc.failJob["PlaceOnNodes"] = map[string]error{ids[0]: fmt.Errorf("scontrol: %w", slurm.ErrTimeout)}
	allowed := map[string]bool{}
	var actions []Action
	for _, id := range ids {
		allowed[id] = true
		actions = append(actions, Action{Kind: ActPlace, JobIDs: []string{id}, Nodes: []string{"node1"}})
	}
	actions = append(actions, Action{Kind: ActRelease, JobIDs: ids})
	res := (&Executor{Cluster: fc, Allowed: allowed}).Execute(context.Background(), actions)
	if calls := fc.Calls(); len(calls) != 1 {
		t.Fatalf("after a timeout the round went on: %v", calls)
	}
	if len(res) != 4 || len(res[1].Skipped) != 1 || len(res[3].Skipped) != 3 {
		t.Errorf("results: %+v", res)
	}
}

// The history of a round in which one job's NodeList update failed: the
// batched StartTime=now went out without that job, and the state database
// says so.
func TestPartlySkippedActionIsRecordedAsPartial(t *testing.T) {
	h := newHarness(t, nil)
	var ids []string
	for range 3 {
		ids = append(ids, h.fc.submit(resnet, 1, 1, t0))
	}
	h.fc.failJob["PlaceOnNodes"] = map[string]error{ids[1]: fmt.Errorf("scontrol: %w", slurm.ErrInvalidNodeName)}
	b := h.bridge()
	h.cycle(b)
	rows, err := b.State().Actions(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var rel *statedb.Action
	for i := range rows {
		if rows[i].Kind == string(ActStartNow) {
			rel = &rows[i]
		}
	}
	if rel == nil || rel.Result != "partial" || !strings.Contains(rel.Error, ids[1]) {
		t.Fatalf("start-now row: %+v", rel)
	}
}

// A job hadar placed starts and is requeued by someone (its user, an
// admin) before any round saw it run: Slurm gives it a begin time. hadar
// must not start it again at once (StartTime=now) on the node it was just
// requeued from: on the real cluster that raced the node's revocation of
// the old run's credential and the job FAILED ("Job credential revoked").
// It gets a lease, and is placed again a round later.
func TestRequeuedBeforeSeenRunningIsNotKicked(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	h.cycle(b) // placed and released; the fake starts it at once
	h.fc.requeueOnNodeFailure(id)
	h.fc.resetCalls()
	h.clock.advance(2 * time.Second)
	rep := h.cycle(b)
	if h.fc.updates(id, "StartTime=now") != 0 {
		t.Fatalf("started again at once: %v", h.fc.Calls())
	}
	if rep.Count(DecideRehold) != 1 || !h.fc.leased(id) {
		t.Fatalf("no lease: %+v", rep.Decisions)
	}
	h.clock.advance(5 * time.Second)
	rep = h.cycle(b)
	if rep.Count(DecidePlace) != 1 || h.fc.job(id).state != "RUNNING" {
		t.Fatalf("not placed again: %+v", rep.Decisions)
	}
}

// A running job that never reported progress may keep no checkpoint: hadar
// does not move it, whatever the move would save; once it reports, it may
// be moved (move_without_progress = false, the default).
func TestJobWithoutProgressIsNotMoved(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.MigrationPenalty = config.Duration{Duration: time.Second} })
	id := h.fc.submit("hadar model=resnet50-bs64 steps=5000000", 1, 1, t0)
	h.fc.mu.Lock()
	j := h.fc.jobs[id]
	j.begin, j.state, j.reason, j.nodes, j.started = time.Time{}, "RUNNING", "None", []string{"node4"}, t0
	h.fc.mu.Unlock()
	b := h.bridge()
	rep := h.cycle(b)
	if rep.Count(DecideMigrate) != 0 || rep.Count(DecideKeep) != 1 || h.fc.job(id).restarts != 0 {
		t.Fatalf("a job that never reported progress was moved: %+v", rep.Decisions)
	}
	h.clock.advance(time.Minute)
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, id, 1000, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	rep = h.cycle(b)
	if rep.Count(DecideMigrate) != 1 {
		t.Fatalf("a job that reports progress was not moved to the faster type: %+v", rep.Decisions)
	}
}
