package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// manualClock is a Clock whose Now the test moves; After is real time.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *manualClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// countingStore wraps the profiles store and counts learned samples.
type countingStore struct {
	*profiles.Store
	mu      sync.Mutex
	samples []profiles.Observation
}

func (s *countingStore) RecordObservations(ctx context.Context, obs []profiles.Observation) []error {
	s.mu.Lock()
	s.samples = append(s.samples, obs...)
	s.mu.Unlock()
	return s.Store.RecordObservations(ctx, obs)
}

type harness struct {
	t       testing.TB
	fc      *fakeCluster
	store   *countingStore
	clock   *manualClock
	cfg     config.Config
	dataDir string
}

// The test cluster's layout: two v100 nodes, one p100, two k80.
func newHarness(t testing.TB, mod func(*config.Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, fc: newFakeCluster("node1:v100:4", "node2:v100:4", "node3:p100:4", "node4:k80:4", "node5:k80:4"),
		store: &countingStore{Store: openStore(t)}, clock: &manualClock{now: t0}, dataDir: filepath.Join(dir, "data")}
	h.fc.now = h.clock.Now
	h.cfg = config.Default()
	h.cfg.DataDir = h.dataDir
	h.cfg.SpoolDir = filepath.Join(dir, "spool")
	h.cfg.Metrics.Listen = ""
	if mod != nil {
		mod(&h.cfg)
	}
	return h
}

func (h *harness) bridge() *Bridge {
	h.t.Helper()
	var c Cluster = h.fc
	if h.fc.retypeReplaces {
		c = fake2411{h.fc}
	}
	b, err := New(h.cfg, Deps{Cluster: c, Store: h.store, Clock: h.clock, Metrics: NewMetrics(),
		LookupUID: func(string) (int, error) { return os.Getuid(), nil }})
	if err != nil {
		h.t.Fatal(err)
	}
	b.awaitInterval = time.Millisecond // the fake starts released jobs at once
	h.t.Cleanup(func() { b.Close() })
	return b
}

func (h *harness) cycle(b *Bridge) RoundReport {
	h.t.Helper()
	rep, err := b.Cycle(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

const resnet = "hadar model=resnet50-bs64 steps=100000"

func TestCyclePlacesAndStarts(t *testing.T) {
	h := newHarness(t, nil)
	var tagged []string
	for i := range 4 {
		tagged = append(tagged, h.fc.submit(resnet, 1+i%2, 1, t0.Add(time.Duration(i)*time.Second)))
	}
	untagged := h.fc.submit("", 2, 1, t0) // Slurm starts it itself
	userHeld := h.fc.submit("", 1, 1, t0)
	h.fc.mu.Lock()
	h.fc.jobs[userHeld].state, h.fc.jobs[userHeld].reason, h.fc.jobs[userHeld].held = "PENDING", "JobHeldUser", true
	h.fc.jobs[userHeld].nodes = nil
	h.fc.mu.Unlock()
	b := h.bridge()
	rep := h.cycle(b)
	if rep.Count(DecidePlace) != 4 || rep.Failed() != 0 {
		t.Fatalf("placed %d, failed %d: %v", rep.Count(DecidePlace), rep.Failed(), actionStrings(rep.Actions))
	}
	for _, id := range tagged {
		j := h.fc.job(id)
		if j.state != "RUNNING" || !sameNodes(j.nodes, j.reqNodes) || j.releases != 0 || h.fc.updates(id, "StartTime=now") != 1 {
			t.Errorf("job %s: %s on %v (asked %v), released %d times, started %d times", id, j.state, j.nodes, j.reqNodes, j.releases, h.fc.updates(id, "StartTime=now"))
		}
	}
	// One StartTime=now for all, no release (a lease is not a hold); one
	// NodeList per job; nothing for untagged jobs.
	releases := 0
	for _, c := range h.fc.Calls() {
		if strings.HasPrefix(c, "Release ") {
			releases++
		}
		for _, id := range []string{untagged, userHeld} {
			if strings.Contains(" "+strings.ReplaceAll(strings.Fields(c)[1], ",", " ")+" ", " "+id+" ") {
				t.Errorf("call %q touches untagged job %s", c, id)
			}
		}
	}
	if releases != 0 {
		t.Errorf("%d release calls, want none: %v", releases, h.fc.Calls())
	}
	// Bounded reads: one squeue and one node query per round.
	if h.fc.jobsCalls != 1 || h.fc.nodesCalls != 1 {
		t.Errorf("reads: %d squeue, %d node queries", h.fc.jobsCalls, h.fc.nodesCalls)
	}
	// Next round: everything runs where it should, nothing to do.
	h.fc.resetCalls()
	h.clock.advance(time.Minute)
	rep = h.cycle(b)
	if len(rep.Actions) != 0 || len(h.fc.Calls()) != 0 {
		t.Errorf("second round acted: %v", h.fc.Calls())
	}
	if rep.Count(DecideKeep) != 4 {
		t.Errorf("kept %d, want 4", rep.Count(DecideKeep))
	}
}

func TestCycleDryRunChangesNothing(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.DryRun = true })
	h.fc.submit(resnet, 1, 1, t0)
	h.fc.submit("hadar steps=-5", 1, 1, t0)
	b := h.bridge()
	rep := h.cycle(b)
	if len(rep.Actions) == 0 {
		t.Fatal("dry run derived no actions")
	}
	if calls := h.fc.Calls(); len(calls) != 0 {
		t.Errorf("dry run ran %v", calls)
	}
	rows, _ := b.State().Actions(context.Background(), 0)
	for _, r := range rows {
		if r.Result != "dry-run" {
			t.Errorf("stored action %+v", r)
		}
	}
}

func TestPassThroughOnce(t *testing.T) {
	h := newHarness(t, nil)
	bad := h.fc.submit("hadar copies=999", 1, 1, t0)
	b := h.bridge()
	h.cycle(b)
	j := h.fc.job(bad)
	if h.fc.leased(bad) || h.fc.updates(bad, "StartTime=now") != 1 || !strings.Contains(j.admin, "copies") || !strings.HasSuffix(j.admin, "released to Slurm's scheduler") {
		t.Fatalf("bad-tag job: leased %v, lease ended %d times, admin comment %q", h.fc.leased(bad), h.fc.updates(bad, "StartTime=now"), j.admin)
	}
	for range 3 {
		h.clock.advance(time.Minute)
		h.cycle(b)
	}
	if n := h.fc.updates(bad, "StartTime=now"); n != 1 || j.releases != 0 {
		t.Errorf("bad-tag job's lease ended %d times, released %d times", n, j.releases)
	}
}

func TestRestartSafety(t *testing.T) {
	for _, tc := range []struct {
		name      string
		autoStart bool
		dropDB    bool
	}{
		{"jobs started", true, false},
		{"jobs released, not started yet", false, false},
		{"jobs released, database lost", false, true},
	} {
		// Without the database a job hadar started that Slurm has not
		// started yet reads as one whose lease ran out: hadar places it
		// again (once), which is harmless.
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *config.Config) { c.LaunchTimeout = config.Duration{Duration: time.Hour} })
			h.fc.noAutoStart = !tc.autoStart
			var ids []string
			for range 3 {
				ids = append(ids, h.fc.submit(resnet, 2, 1, t0))
			}
			a := h.bridge()
			h.cycle(a)
			a.Close()
			if tc.dropDB {
				if err := os.Remove(filepath.Join(h.dataDir, statedb.File)); err != nil {
					t.Fatal(err)
				}
			}
			h.fc.resetCalls()
			b := h.bridge() // a restart over the same database and cluster
			h.clock.advance(time.Minute)
			h.cycle(b)
			h.clock.advance(time.Minute)
			h.cycle(b)
			wantStarts := 1
			if tc.dropDB {
				wantStarts = 2
			} else if calls := h.fc.Calls(); len(calls) != 0 {
				t.Errorf("after restart: %v", calls)
			}
			for _, id := range ids {
				if n := h.fc.job(id).starts; n != wantStarts {
					t.Errorf("job %s started %d times, want %d", id, n, wantStarts)
				}
			}
			if a.round >= b.round {
				t.Errorf("round numbers restarted: %d then %d", a.round, b.round)
			}
		})
	}
}

func TestCorruptStateDatabase(t *testing.T) {
	h := newHarness(t, nil)
	if err := os.MkdirAll(h.dataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.dataDir, statedb.File)
	if err := os.WriteFile(path, []byte("this is not an SQLite database, it is garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	h.cycle(b)
	if h.fc.job(id).state != "RUNNING" {
		t.Errorf("job not placed after recovery")
	}
	matches, _ := filepath.Glob(path + ".corrupt-*")
	if len(matches) != 1 {
		t.Fatalf("moved-aside files: %v", matches)
	}
	if b, _ := os.ReadFile(matches[0]); !strings.Contains(string(b), "garbage") {
		t.Error("the corrupt file was not kept")
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("new state.db: %v %v", st.Mode(), err)
	}
}

func TestReleaseAll(t *testing.T) {
	h := newHarness(t, nil)
	h.fc.noAutoStart = true
	var leased []string
	for range 3 {
		leased = append(leased, h.fc.submit(resnet, 1, 1, t0))
	}
	running := h.fc.submit(resnet, 1, 1, t0)
	untagged := h.fc.submit("", 1, 1, t0)
	ownerHeld := h.fc.submit(resnet, 1, 1, t0)
	migrating := h.fc.submit(resnet, 1, 1, t0)
	later := h.fc.submit(resnet, 1, 1, t0)
	userBegin := t0.Add(time.Hour)
	h.fc.mu.Lock()
	r := h.fc.jobs[running]
	r.begin, r.state, r.reason, r.nodes = time.Time{}, "RUNNING", "None", []string{"node1"}
	u := h.fc.jobs[untagged]
	u.held, u.reason = true, "JobHeldUser"
	o := h.fc.jobs[ownerHeld]
	o.held, o.reason = true, "JobHeldAdmin"
	m := h.fc.jobs[migrating]
	m.held, m.reason, m.begin = true, "job requeued in held state", time.Time{}
	h.fc.jobs[later].begin = userBegin.Add(fakeLease) // sbatch --begin=+1h
	h.fc.mu.Unlock()
	b := h.bridge()
	got, err := b.ReleaseAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The job whose --begin is ahead keeps its begin time (TestUserBeginSurvivesStopAndRestart).
	want := append(slices.Clone(leased), ownerHeld, migrating)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handed over (-want +got):\n%s", diff)
	}
	// The leases end (the admin's hold stays), hadar's own hold is
	// released.
	ended := append(slices.Clone(leased), ownerHeld)
	sort.Strings(ended)
	wantCalls := []string{
		"UpdateJobs " + strings.Join(ended, ",") + " StartTime=now",
		"Release " + migrating,
	}
	if diff := cmp.Diff(wantCalls, h.fc.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if j := h.fc.job(ownerHeld); !j.held {
		t.Errorf("the admin's hold was released")
	}
	// A failing update is reported, not swallowed.
	h.fc.fail["UpdateJobs"] = fmt.Errorf("scontrol: %w", slurm.ErrControllerDown)
	h.fc.mu.Lock()
	h.fc.jobs[leased[0]].begin = t0.Add(fakeLease)
	h.fc.mu.Unlock()
	if _, err := b.ReleaseAll(context.Background()); !errors.Is(err, slurm.ErrControllerDown) {
		t.Errorf("ReleaseAll with slurmctld down: %v", err)
	}
}

func TestFailedActionIsRetriedNextRound(t *testing.T) {
	h := newHarness(t, nil)
	var ids []string
	for range 3 {
		ids = append(ids, h.fc.submit(resnet, 4, 1, t0))
	}
	h.fc.failJob["PlaceOnNodes"] = map[string]error{ids[1]: fmt.Errorf("scontrol: %w", slurm.ErrInvalidNodeName)}
	b := h.bridge()
	rep := h.cycle(b)
	if rep.Failed() == 0 {
		t.Fatal("no failure reported")
	}
	if h.fc.job(ids[0]).state != "RUNNING" || h.fc.job(ids[2]).state != "RUNNING" {
		t.Fatalf("the other jobs were not placed: %v", h.fc.Calls())
	}
	if j := h.fc.job(ids[1]); j.state != "PENDING" || !h.fc.leased(ids[1]) || j.starts != 0 {
		t.Fatalf("failed job: %+v", j)
	}
	delete(h.fc.failJob, "PlaceOnNodes")
	h.clock.advance(time.Minute)
	h.cycle(b)
	if j := h.fc.job(ids[1]); j.state != "RUNNING" || j.starts != 1 {
		t.Errorf("failed job not retried: %s, started %d times", j.state, j.starts)
	}
}

func TestControllerDownBackoff(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Round = config.Duration{Duration: time.Hour}
		c.PollInterval = config.Duration{Duration: 10 * time.Millisecond}
		c.MinRoundGap = config.Duration{Duration: 0}
	})
	h.clock = nil
	down := fmt.Errorf("squeue: %w", slurm.ErrControllerDown)
	h.fc.fail["Jobs"] = down
	id := h.fc.submit(resnet, 1, 1, t0)
	b, err := New(h.cfg, Deps{Cluster: h.fc, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.backoffBase, b.backoffMax = 10*time.Millisecond, 40*time.Millisecond
	if _, err := b.Cycle(context.Background()); !errors.Is(err, slurm.ErrControllerDown) {
		t.Fatalf("Cycle with slurmctld down: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var starts []time.Time
	var results []error
	b.OnCycle = func(rep RoundReport, err error) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, rep.Started)
		results = append(results, err)
		if len(results) == 5 {
			h.fc.mu.Lock()
			delete(h.fc.fail, "Jobs")
			h.fc.mu.Unlock()
		}
		if err == nil {
			cancel()
		}
	}
	done := make(chan error)
	go func() { done <- b.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Run did not recover")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 6 || results[5] != nil {
		t.Fatalf("results: %v", results)
	}
	// Waits grow: 10, 20, 40, 40 ms (capped), from a round's start to the
	// next's (so a slow round on a loaded machine does not shorten one).
	for i, want := range []time.Duration{10, 20, 40, 40} {
		got := starts[i+1].Sub(starts[i])
		if got < want*time.Millisecond-5*time.Millisecond || got > want*time.Millisecond+time.Second {
			t.Errorf("wait %d = %v, want about %v ms", i, got, want)
		}
	}
	if b.backoff(10) != 40*time.Millisecond {
		t.Errorf("backoff not capped: %v", b.backoff(10))
	}
	if j := h.fc.job(id); j.state != "RUNNING" || j.starts != 1 {
		t.Errorf("job after recovery: %s, started %d times", j.state, j.starts)
	}
}

func TestRunStartsEarlyRoundOnNewJob(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Round = config.Duration{Duration: time.Hour}
		c.PollInterval = config.Duration{Duration: 10 * time.Millisecond}
		c.MinRoundGap = config.Duration{Duration: 50 * time.Millisecond}
	})
	b, err := New(h.cfg, Deps{Cluster: h.fc, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := make(chan RoundReport, 10)
	b.OnCycle = func(r RoundReport, err error) { rounds <- r }
	go b.Run(ctx)
	first := <-rounds
	if first.Tagged != 0 {
		t.Fatalf("first round saw %d tagged jobs", first.Tagged)
	}
	id := h.fc.submit(resnet, 1, 1, time.Now())
	select {
	case r := <-rounds:
		if r.Count(DecidePlace) != 1 || r.Started.Sub(first.Started) < 50*time.Millisecond {
			t.Errorf("early round: placed %d, %v after the first", r.Count(DecidePlace), r.Started.Sub(first.Started))
		}
		// Within the hour's round: the policy is told (Snapshot.MidRound),
		// so a round-based one is not rotated by the early look.
		if first.MidRound || !r.MidRound || !r.Snapshot.MidRound {
			t.Errorf("mid-round: first %v, early %v (snapshot %v), want false, true, true", first.MidRound, r.MidRound, r.Snapshot.MidRound)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no early round after a new tagged job")
	}
	if h.fc.job(id).state != "RUNNING" {
		t.Error("job not started")
	}
}

func TestMigrationAndProgress(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.MigrationPenalty = config.Duration{Duration: time.Minute} })
	// A long job already runs on a k80 (placed by someone earlier); the
	// v100s are free: hadar moves it.
	id := h.fc.submit("hadar model=resnet50-bs64 steps=5000000", 1, 1, t0)
	h.fc.mu.Lock()
	j := h.fc.jobs[id]
	j.held, j.state, j.reason, j.nodes, j.started = false, "RUNNING", "None", []string{"node4"}, t0.Add(-time.Hour)
	h.fc.mu.Unlock()
	b := h.bridge()
	// It reports progress twice while on node4: one learned sample.
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, id, 100, t0.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	h.cfg.MigrationPenalty = config.Duration{Duration: 5000 * time.Hour} // first: no move
	if _, err := b.Reload(h.cfg); err != nil {
		t.Fatal(err)
	}
	rep := h.cycle(b)
	if rep.Count(DecideKeep) != 1 {
		t.Fatalf("decisions: %+v", rep.Decisions)
	}
	h.clock.advance(2 * time.Minute)
	if err := jobproto.WriteProgress(h.cfg.SpoolDir, id, 400, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	h.cfg.MigrationPenalty = config.Duration{Duration: time.Minute}
	changes, err := b.Reload(h.cfg)
	if err != nil || len(changes) != 1 || !strings.HasPrefix(changes[0], "migration_penalty:") {
		t.Fatalf("reload: %v %v", changes, err)
	}
	h.fc.resetCalls()
	rep = h.cycle(b)
	if len(h.store.samples) != 1 || h.store.samples[0].Steps != 300 || h.store.samples[0].Seconds != 120 || h.store.samples[0].GPUType != "k80" {
		t.Errorf("learned samples: %+v", h.store.samples)
	}
	if rep.Count(DecideMigrate) != 1 {
		t.Fatalf("decisions: %+v", rep.Decisions)
	}
	calls := h.fc.Calls()
	want := []string{"RequeueHold " + id, "PlaceOnNodes " + id + " node", "UpdateJobs " + id + " StartTime=now AdminComment=hadar: placed", "Release " + id}
	if len(calls) != len(want) {
		t.Fatalf("calls: %v", calls)
	}
	for i := range want {
		if !strings.HasPrefix(calls[i], want[i]) {
			t.Errorf("call %d = %q, want %q...", i, calls[i], want[i])
		}
	}
	j = h.fc.job(id)
	if j.state != "RUNNING" || j.restarts != 1 || (j.nodes[0] != "node1" && j.nodes[0] != "node2") {
		t.Errorf("after migration: %s on %v, %d restarts", j.state, j.nodes, j.restarts)
	}
	// The job's progress survives the move (the database keeps it).
	pr, _ := b.State().Progress(context.Background())
	if pr[id].Done < 400 {
		t.Errorf("progress after move: %+v", pr[id])
	}
}

func TestSnapshotPolicyCheckFailureStillPassesThrough(t *testing.T) {
	h := newHarness(t, nil)
	bad := h.fc.submit("hadar model=nope steps=0", 1, 1, t0)
	good := h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	b.policy = brokenPolicy{}
	rep := h.cycle(b)
	if !errors.Is(rep.PlanError, optimizer.ErrInvariant) {
		t.Fatalf("plan error: %v", rep.PlanError)
	}
	if h.fc.job(bad).starts != 1 || h.fc.job(good).starts != 0 {
		t.Errorf("handed to Slurm: bad %d, good %d", h.fc.job(bad).starts, h.fc.job(good).starts)
	}
}

// brokenPolicy puts every job on node1 with too many GPUs.
type brokenPolicy struct{}

func (brokenPolicy) Name() string { return "broken" }
func (brokenPolicy) Plan(s *optimizer.Snapshot) (*optimizer.Plan, error) {
	p := optimizer.NewPlan()
	for _, j := range s.Jobs {
		p.Assign(j.ID, optimizer.Task{Node: "node1", Type: "v100", GPUs: 99})
	}
	return p, nil
}

func BenchmarkCycle(b *testing.B) {
	for _, n := range []int{100, 500, 2000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			h := newHarness(b, func(c *config.Config) { c.DryRun = true })
			var specs []string
			for i := range 16 {
				specs = append(specs, fmt.Sprintf("n%02d:%s:4", i, []string{"v100", "p100", "k80"}[i%3]))
			}
			h.fc = newFakeCluster(specs...)
			models := []string{"resnet50-bs64", "resnet18-bs32", "lm-bs20", "transformer-bs64", "a3c", "cyclegan"}
			for i := range n {
				h.fc.submit(fmt.Sprintf("hadar model=%s steps=%d", models[i%len(models)], 1000+i), 1<<(i%3), 1, t0.Add(time.Duration(i)*time.Second))
			}
			br := h.bridge()
			rep := h.cycle(br)
			if rep.Tagged != n || rep.Count(DecidePlace) == 0 {
				b.Fatalf("tagged %d, placed %d", rep.Tagged, rep.Count(DecidePlace))
			}
			b.ResetTimer()
			for range b.N {
				if _, err := br.Cycle(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestExploreUnconfirmedCells: with explore set, every cell whose value in
// use is not this cluster's own (imported from Gavel's matrix) is planned at
// (1 + explore) times its value, until the learned value takes over.
func TestExploreUnconfirmedCells(t *testing.T) {
	const model = "ResNet-50 (batch size 64)"
	h := newHarness(t, func(c *config.Config) { c.Explore = 0.5 })
	h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	ctx := context.Background()
	stored, err := h.store.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	planned := func(rep RoundReport) map[string]float64 {
		out := map[string]float64{}
		for _, typ := range []string{"v100", "p100", "k80"} {
			out[typ] = rep.Snapshot.Throughput.Rate(model, typ, 1)
		}
		return out
	}
	want := map[string]float64{}
	for _, typ := range []string{"v100", "p100", "k80"} {
		want[typ] = 1.5 * stored.Rate(model, typ, 1)
	}
	if diff := cmp.Diff(want, planned(h.cycle(b))); diff != "" {
		t.Errorf("nothing confirmed, planned rates (-want +got):\n%s", diff)
	}
	// Below three samples the imported value stays in use, and with it the
	// bonus; from the third (of two users) the learned value is in use,
	// without one.
	for n := 1; n <= 3; n++ {
		if err := h.store.RecordObservation(ctx, profiles.Observation{JobType: model, GPUType: "k80", Workers: 1, Steps: 100, Seconds: 100,
			JobID: fmt.Sprint(n), User: fmt.Sprint("user", n%2)}); err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			want["k80"] = 1
		}
		h.clock.advance(time.Hour)
		if diff := cmp.Diff(want, planned(h.cycle(b))); diff != "" {
			t.Errorf("after %d k80 samples, planned rates (-want +got):\n%s", n, diff)
		}
	}
}
