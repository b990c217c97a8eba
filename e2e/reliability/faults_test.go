package reliability

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // TestStateDatabaseLost checkpoints the database itself

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// checkNoDoubleActions checks the daemon's own record: no successful
// start (StartTime=now) or release of a job twice without a successful
// lease or requeuehold of it in between (the state database may miss
// actions of a killed daemon; Slurm's log, checked by assertNoDoubleRelease
// and the jobcomp log's one run per job, has them all).
func checkNoDoubleActions(t *testing.T, d *daemon, ids []string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	// The round of a job's last start; a migration's start-now and
	// release are one start.
	armed := map[string]int64{}
	for _, a := range d.actions() {
		if !a.Done() {
			continue
		}
		for _, id := range a.Jobs() {
			if !want[id] {
				continue
			}
			switch a.Kind {
			case "start-now", "release":
				if r, ok := armed[id]; ok && r != a.Round {
					// allowed only if Slurm started (and requeued) it in
					// between, or the begin time Slurm gives a requeued
					// job outlived a migration's StartTime=now; Slurm's
					// log decides (assertNoDoubleRelease, one run each).
					t.Logf("state db: job %s started again (%s) in round %d (and in round %d) without a recorded lease or requeuehold", id, a.Kind, a.Round, r)
				}
				armed[id] = a.Round
			case "lease", "requeuehold":
				delete(armed, id)
			}
		}
	}
}

// 1. kill -9 of hadar-slurmd at seeded random moments of a 30-job
// workload, 10 times, restarted each time. Three of the kills are at
// chosen crash points (by the scontrol shim): just after a migration's
// requeuehold, between a job's NodeList update and its start (StartTime=now),
// and just after a start before the round is recorded.
func TestKill9Restarts(t *testing.T) {
	tc := need(t)
	rng := mrand.New(mrand.NewPCG(seed(), 0x6b696c6c))
	cfg := defaultDaemonConfig()
	d := tc.newDaemon("d", cfg)
	work := randomWorkload(t, rng, d, 30, 6, 14)
	var ids []string
	for _, j := range work[:20] {
		ids = append(ids, tc.submit(j))
	}
	// Crash points: the first daemon dies just before its first start
	// (its NodeList updates done), the second just after its first start;
	// the first migration's requeuehold kills whichever daemon runs then.
	// A start is "StartTime=now AdminComment=..." (a lease renewal is
	// StartTime=now+N).
	d.rule("kill-after.scontrol.requeuehold", " requeuehold ")
	d.rule("kill-before.scontrol.start", startPattern)
	armed := true
	start := time.Now()
	d.start()
	watch := watchStalls(t, d)
	kinds := map[string]int{}
	for k := range 10 {
		dead := func() bool { ok, _ := d.alive(); return !ok }
		if armed {
			if !e2eutil.WaitFor(12*time.Second, dead) {
				os.Remove(filepath.Join(d.shims, "rules", "kill-before.scontrol.start"))
				os.Remove(filepath.Join(d.shims, "rules", "kill-after.scontrol.start"))
			}
		} else {
			e2eutil.WaitFor(time.Duration(1000+rng.IntN(3000))*time.Millisecond, dead)
		}
		kind := "random"
		if !dead() {
			d.kill9()
		} else {
			d.wait(5 * time.Second)
		}
		marker := filepath.Join(d.shims, "rules", "killed")
		if b, err := os.ReadFile(marker); err == nil {
			f := strings.Fields(string(b))
			switch {
			case len(f) >= 2 && f[1] == "requeuehold":
				kind = f[0] + "-requeuehold"
			case len(f) >= 2 && strings.Contains(string(b), startPattern):
				kind = f[0] + "-start" // before-start, after-start
			case len(f) >= 2:
				kind = f[0] + "-" + f[1]
			}
			os.Remove(marker)
		}
		kinds[kind]++
		waiting := 0
		for _, j := range queue(t) {
			if waitsForHadar(j) {
				waiting++
			}
		}
		t.Logf("kill %d (%s) at %s: %d jobs waiting for hadar", k+1, kind, time.Since(start).Round(100*time.Millisecond), waiting)
		if len(ids) < 30 {
			ids = append(ids, tc.submit(work[len(ids)]))
		}
		armed = k == 0
		if armed {
			d.rule("kill-after.scontrol.start", startPattern)
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		d.start()
	}
	for _, r := range []string{"kill-after.scontrol.requeuehold", "kill-before.scontrol.start", "kill-after.scontrol.start"} {
		os.Remove(filepath.Join(d.shims, "rules", r))
	}
	for len(ids) < 30 {
		ids = append(ids, tc.submit(work[len(ids)]))
	}
	waitDone(t, ids, 240*time.Second)
	makespan := time.Since(start)
	worst, who, samples := watch.stop()
	d.term()

	assertAllCompleted(t, ids)
	comp := jobcompRecords(t)
	ctld := ctldEvents(t)
	var raced []string
	runs := 0
	for _, id := range ids {
		recs := comp[id]
		runs += len(recs)
		completed := 0
		for _, s := range recs {
			switch s {
			case "COMPLETED":
				completed++
			case "PENDING", "REQUEUED":
			default:
				t.Errorf("job %s has a run that ended %s: %v", id, s, recs)
			}
		}
		if completed == 1 {
			continue
		}
		// A job that ends as hadar migrates it is requeued by Slurm and
		// runs again: the executor looks at the queue just before each
		// requeuehold, which narrows that race to a command's latency but
		// cannot close it (docs/reliability.md, bug 8). Acting on a stale
		// view (a requeue long after the run ended) is a bug.
		late := false
		gaps := requeuesOfEndedRuns(ctld[id])
		for _, g := range gaps {
			late = late || g > endRace
		}
		if completed == 0 || late || len(gaps) != completed-1 {
			t.Errorf("job %s completed %d times: %v; Slurm requeued its ended runs %v after their end (the race allows up to %s): %v",
				id, completed, recs, gaps, endRace, ctld[id])
			continue
		}
		raced = append(raced, fmt.Sprintf("job %s requeued %v after it ended", id, gaps))
	}
	rel := assertNoDoubleRelease(t, ids)
	checkNoDoubleActions(t, d, ids)
	d.assertHealthyLog()
	// Every restart's first round ran at once and worked.
	var firstRound []time.Duration
	rounds := d.rounds()
	for _, s := range d.starts[1:] {
		for _, r := range rounds {
			if r.time().After(s) {
				firstRound = append(firstRound, r.time().Sub(s))
				break
			}
		}
	}
	var fr []float64
	for _, x := range firstRound {
		fr = append(fr, x.Seconds())
	}
	limit := 4*time.Second + 3*time.Second // one round + slack
	if worst > limit {
		t.Errorf("job %s waited for hadar %s while a node had room for it (limit: one round + 3 s = %s)", who, worst.Round(100*time.Millisecond), limit)
	}
	migr := 0
	for _, a := range d.actions() {
		if a.Kind == "requeuehold" && a.Done() {
			migr += len(a.Jobs())
		}
	}
	totalRel := 0
	for _, n := range rel {
		totalRel += n
	}
	record(t, "30 jobs, 10 kill -9 (%v), seed %d: all COMPLETED in %s; %d runs, %d migrations, %d releases in Slurm's log, no double release; restart to first round max %.2fs; longest wait with room %.1fs (job %s, %d samples); runs again because a migration's requeue met the job's end: %d %v",
		kinds, seed(), makespan.Round(time.Second), runs, migr, totalRel, maxOf(fr), worst.Seconds(), who, samples, len(raced), raced)
}

// endRace bounds how long after a job's end a migration's requeue may reach
// slurmctld as the race of docs/reliability.md (bug 8): the executor's look
// at the queue and the requeuehold, a few commands' latency across the
// container network, with room for a loaded machine.
const endRace = 2 * time.Second

// startPattern is what the scontrol shim matches in hadar's start of a
// job: "update JobId=a,b StartTime=now AdminComment=hadar: placed ..."
// (not a lease renewal, StartTime=now+N).
const startPattern = "StartTime=now AdminComment="

// 2. slurmctld stopped in the middle of a round (the shim stops it just
// before a NodeList update), kept down 30 s, then restarted the way the
// test cluster's up does: the daemon backs off, logs it, resumes, and no
// job is lost.
func TestControllerOutage(t *testing.T) {
	tc := need(t)
	tc.onCleanup(func() { ensureCtld(t) })
	cfg := defaultDaemonConfig()
	// 22.05's clients retry ~9 s before giving up on a stopped slurmctld;
	// a 5 s bound shows several backoff steps within the 30 s outage.
	cfg.CommandTimeout = "5s"
	d := tc.newDaemon("d", cfg)
	var ids []string
	for i := range 16 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i%len(sleepModels)], 1+i%2, 10)))
	}
	d.start()
	if !d.waitRounds(1, 20*time.Second) {
		t.Fatal("no first round")
	}
	d.rule("stop-ctld.scontrol", "NodeList=")
	for i := range 4 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i], 1, 10)))
	}
	if !e2eutil.WaitFor(60*time.Second, func() bool { return d.ruleGone("stop-ctld.scontrol") }) {
		t.Fatal("the daemon placed no job within 60 s")
	}
	stopped := time.Now()
	t.Logf("slurmctld stopped by the shim in the middle of a round")
	time.Sleep(30*time.Second - time.Since(stopped))
	restartCtld(t)
	back := time.Now()
	waitDone(t, ids, 180*time.Second)
	d.term()

	assertAllCompleted(t, ids)
	assertNoDoubleRelease(t, ids)
	d.assertHealthyLog()
	var fails []logEntry
	var recovered time.Time
	for _, e := range d.log() {
		switch e.str("msg") {
		case "round failed; nothing was changed; retrying":
			fails = append(fails, e)
		case "rounds work again":
			if recovered.IsZero() && e.time().After(stopped) {
				recovered = e.time()
			}
		}
	}
	if len(fails) < 3 {
		t.Fatalf("want the outage logged as failed rounds with backoff, got %d", len(fails))
	}
	var retries []string
	for _, e := range fails {
		retries = append(retries, e.str("retry_in"))
	}
	// The waits grow: 1 s, 2 s, 4 s, ...
	prev := 0.0
	for _, e := range fails {
		r := e.num("retry_in")
		if r < prev {
			t.Errorf("backoff shrank during the outage: %v", retries)
			break
		}
		prev = r
	}
	if recovered.IsZero() {
		t.Fatal("no \"rounds work again\" after the outage")
	}
	var failedAction bool
	for _, a := range d.actions() {
		if a.Kind == "place" && a.Result == "error" {
			failedAction = true
		}
	}
	if !failedAction {
		t.Error("the NodeList update cut by the outage is not recorded as failed")
	}
	stale := map[string]bool{}
	for _, e := range d.log() {
		if strings.HasPrefix(e.str("msg"), "Slurm counts GPUs as used on a node that runs no job") {
			stale[e.str("node")] = true
		}
	}
	record(t, "slurmctld down %.0fs mid-round: %d failed rounds logged (retry_in %s), rounds work again %.1fs after slurmctld came back; %d jobs all COMPLETED; nodes with GPUs Slurm still counted used after the restart (hadar counted them free): %v",
		back.Sub(stopped).Seconds(), len(fails), strings.Join(retries, ","), recovered.Sub(back).Seconds(), len(ids), slices.Sorted(maps.Keys(stale)))
}

// setupWait bounds the wait for a test's workload to be running before its
// fault is injected: not a measured bound, only long enough for a loaded
// machine (both setups below took over 30 s in a CI run that shared the
// machine with a simulation).
const setupWait = 90 * time.Second

// 3. A node goes DOWN (then stays drained) while it runs hadar jobs:
// Slurm requeues them (JobRequeue=1) and hadar re-places them on other
// nodes. Another node is only drained: its jobs finish there and hadar
// puts nothing new on it.
func TestNodeDownAndDrain(t *testing.T) {
	tc := need(t)
	d := tc.newDaemon("d", defaultDaemonConfig())
	var ids []string
	for i := range 12 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i%len(sleepModels)], 2, 20)))
	}
	d.start()
	var onNode map[string][]string
	if !e2eutil.WaitFor(setupWait, func() bool {
		onNode = map[string][]string{}
		running := 0
		for _, j := range queue(t) {
			if j.State == "RUNNING" && len(j.Nodes) == 1 {
				onNode[j.Nodes[0]] = append(onNode[j.Nodes[0]], j.ID())
				running++
			}
		}
		return running >= 8
	}) {
		t.Fatal("workload not running")
	}
	var down, drain string
	for _, n := range []string{"node4", "node5", "node3", "node1", "node2"} {
		if len(onNode[n]) == 0 {
			continue
		}
		if down == "" {
			down = n
		} else if drain == "" {
			drain = n
		}
	}
	if down == "" || drain == "" {
		t.Fatalf("need two nodes with hadar jobs: %v", onNode)
	}
	tc.onCleanup(func() { resumeNodes(t, down, drain) })
	victims := onNode[down]
	failAt := time.Now()
	mustRun(t, "scontrol", "update", "NodeName="+down, "State=DOWN", "Reason=hadar-reliability-test")
	mustRun(t, "scontrol", "update", "NodeName="+down, "State=DRAIN", "Reason=hadar-reliability-test")
	mustRun(t, "scontrol", "update", "NodeName="+drain, "State=DRAIN", "Reason=hadar-reliability-test")
	t.Logf("node %s DOWN+DRAIN with jobs %v; node %s DRAIN with jobs %v", down, victims, drain, onNode[drain])

	// The victims run again elsewhere.
	var replaced time.Duration
	if !e2eutil.WaitFor(90*time.Second, func() bool {
		q := byID(queue(t))
		for _, id := range victims {
			j, ok := q[id]
			if ok && (j.State != "RUNNING" || len(j.Nodes) == 0 || j.Nodes[0] == down) {
				return false
			}
		}
		replaced = time.Since(failAt)
		return true
	}) {
		t.Fatalf("jobs of the failed node %s not re-placed elsewhere within 90 s: %v", down, queue(t))
	}
	waitDone(t, ids, 180*time.Second)
	d.term()
	assertAllCompleted(t, ids)
	assertNoDoubleRelease(t, ids)
	d.assertHealthyLog()
	comp := jobcompRecords(t)
	for _, id := range victims {
		if recs := comp[id]; len(recs) < 2 || recs[0] != "NODE_FAIL" {
			t.Errorf("job %s of the failed node: runs %v, want NODE_FAIL then COMPLETED", id, recs)
		}
	}
	for _, id := range onNode[drain] {
		if recs := comp[id]; len(recs) != 1 {
			t.Errorf("job %s of the drained node should finish there in one run: %v", id, recs)
		}
	}
	dec := d.dbDecisions()
	reheld := 0
	for _, id := range victims {
		for _, k := range dec[id] {
			if strings.HasPrefix(k, "re-hold") {
				reheld++
				break
			}
		}
	}
	if reheld != len(victims) {
		t.Errorf("%d of %d requeued jobs were taken back (re-hold) by hadar: %v", reheld, len(victims), dec)
	}
	// Nothing new on the drained or failed node after the failure.
	for _, e := range ctldEventsAfter(t, failAt) {
		if e.node == down || e.node == drain {
			t.Errorf("job %s started on %s after it was taken out of service", e.id, e.node)
		}
	}
	var reheldAfter time.Duration
	for _, e := range d.log() {
		if e.str("msg") == "decision" && e.str("decision") == "re-hold" && e.time().After(failAt) {
			reheldAfter = e.time().Sub(failAt)
			break
		}
	}
	record(t, "node %s DOWN+DRAIN under %d hadar jobs: requeued by Slurm, taken back (re-hold) by hadar %.1fs after the failure, running elsewhere after %.1fs (when GPUs freed up); node %s DRAIN: its %d jobs finished in place, nothing new placed there; all %d COMPLETED",
		down, len(victims), reheldAfter.Seconds(), replaced.Seconds(), drain, len(onNode[drain]), len(ids))
}

type startEvent struct{ id, node string }

// ctldEventsAfter lists the job starts slurmctld logged after t0.
func ctldEventsAfter(t *testing.T, t0 time.Time) []startEvent {
	b, err := os.ReadFile(filepath.Join(clusterDir, "log", "slurmctld.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []startEvent
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) < 25 || line[0] != '[' {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02T15:04:05.000", line[1:24], time.Local)
		if err != nil || !at.After(t0) {
			continue
		}
		var id, node string
		if i := strings.Index(line, "sched: Allocate JobId="); i >= 0 {
			f := strings.Fields(line[i+len("sched: Allocate "):])
			if len(f) >= 2 {
				id, node = strings.TrimPrefix(f[0], "JobId="), strings.TrimPrefix(f[1], "NodeList=")
			}
		} else if i := strings.Index(line, "_start_job: Started JobId="); i >= 0 {
			f := strings.Fields(line[i+len("_start_job: Started "):])
			if len(f) >= 4 {
				id, node = strings.TrimPrefix(f[0], "JobId="), f[len(f)-1]
			}
		}
		if id != "" {
			out = append(out, startEvent{id, node})
		}
	}
	return out
}

// 4. scontrol fails for one job of a batch, once: first its NodeList
// update, then its part of a batched start (StartTime=now). The other
// jobs' actions still happen in that round; the failed job is placed the
// next round.
func TestScontrolFailsForOneJob(t *testing.T) {
	tc := need(t)
	cfg := defaultDaemonConfig()
	cfg.Round = "3s"
	d := tc.newDaemon("d", cfg)
	runOne := func(pattern string) (victim string, ids []string) {
		for i := range 6 {
			ids = append(ids, tc.submit(tagged(t, sleepModels[i], 1, 6)))
		}
		victim = ids[2]
		d.rule("fail-once.scontrol", victim+" "+pattern)
		return victim, ids
	}
	check := func(pattern, victim string, ids []string) {
		if !e2eutil.WaitFor(30*time.Second, func() bool { return d.ruleGone("fail-once.scontrol") }) {
			t.Fatalf("%s: the fault was never triggered", pattern)
		}
		waitDone(t, ids, 90*time.Second)
		// Round of the failure vs round where the others and the victim
		// were started.
		relRound := map[string]int64{}
		failRound := int64(-1)
		for _, a := range d.actions() {
			for _, id := range a.Jobs() {
				if id == victim && a.Result == "error" && failRound < 0 {
					failRound = a.Round
				}
				if a.Kind == "start-now" && a.Done() {
					if _, ok := relRound[id]; !ok {
						relRound[id] = a.Round
					}
				}
			}
		}
		if failRound < 0 {
			t.Fatalf("%s: no failed action recorded for job %s: %+v", pattern, victim, d.actions())
		}
		for _, id := range ids {
			if id == victim {
				continue
			}
			// A batched start that failed for one id is recorded as a
			// failed action for the whole batch; Slurm's log shows that
			// the others were started in that same round.
			if r, ok := relRound[id]; ok && r > failRound {
				t.Errorf("%s: job %s started in round %d, after the failure round %d", pattern, id, r, failRound)
			}
		}
		if r, ok := relRound[victim]; !ok || r <= failRound {
			t.Errorf("%s: victim %s started in round %v, want after the failure round %d", pattern, victim, r, failRound)
		}
		assertAllCompleted(t, ids)
		assertNoDoubleRelease(t, ids)
		comp := jobcompRecords(t)
		for _, id := range ids {
			if len(comp[id]) != 1 {
				t.Errorf("%s: job %s ran %d times by the jobcomp log: %v", pattern, id, len(comp[id]), comp[id])
			}
		}
		record(t, "scontrol %s failing once for job %s among 6: the 5 others started in round %d, the job itself retried and started in round %d; all COMPLETED, one run each",
			pattern, victim, failRound, relRound[victim])
	}
	v1, ids1 := runOne("NodeList=")
	d.start()
	check("NodeList=", v1, ids1)
	// The daemon stops while the second batch is submitted: a running
	// daemon could poll in the middle of the submissions and see the last
	// jobs only a round later, which is not what this test is about.
	if code := d.term(); code != 0 {
		t.Fatalf("daemon exited %d on SIGTERM between the two faults", code)
	}
	v2, ids2 := runOne(startPattern)
	d.start()
	check(startPattern, v2, ids2)
	d.term()
	d.assertHealthyLog()
}

// 5. The state database deleted, overwritten with garbage, or cut short
// while the daemon is stopped (kill -9): it starts, rebuilds from Slurm,
// and no job is lost.
func TestStateDatabaseLost(t *testing.T) {
	tc := need(t)
	d := tc.newDaemon("d", defaultDaemonConfig())
	var ids []string
	for i := range 24 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i%len(sleepModels)], 1+i%3, 8)))
	}
	db := filepath.Join(d.dir, "data", "state.db")
	d.start()
	var notes []string
	for _, how := range []string{"deleted", "garbage", "truncated"} {
		if !d.waitRounds(2, 30*time.Second) {
			t.Fatal("rounds stopped")
		}
		d.kill9()
		switch how {
		case "deleted":
			for _, sfx := range []string{"", "-wal", "-shm"} {
				os.Remove(db + sfx)
			}
		case "garbage":
			// The whole database: with its WAL left in place SQLite would
			// read the recent pages from the WAL and heal the file.
			junk := make([]byte, 64<<10)
			rand.Read(junk)
			if err := os.WriteFile(db, junk, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(db + "-wal")
			os.Remove(db + "-shm")
		case "truncated":
			// Move everything into the main file, then cut it in the
			// middle of a page (a disk that lost the file's tail).
			if sdb, err := sql.Open("sqlite3", "file:"+db); err == nil {
				if _, err := sdb.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
					t.Logf("checkpoint: %v", err)
				}
				sdb.Close()
			}
			st, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(db, st.Size()/2+100); err != nil {
				t.Fatal(err)
			}
			os.Remove(db + "-wal")
			os.Remove(db + "-shm")
		}
		for range 2 { // one more submission while it is down
			ids = append(ids, tc.submit(tagged(t, "a3c", 1, 6)))
		}
		d.start()
		if !d.waitRounds(1, 30*time.Second) {
			t.Fatalf("after the database was %s: no round", how)
		}
		aside, _ := filepath.Glob(db + ".corrupt-*")
		notes = append(notes, fmt.Sprintf("%s: started, %d file(s) moved aside", how, len(aside)))
	}
	waitDone(t, ids, 150*time.Second)
	d.term()
	assertAllCompleted(t, ids)
	assertNoDoubleRelease(t, ids)
	d.assertHealthyLog()
	corrupt := 0
	for _, e := range d.log() {
		if strings.HasPrefix(e.str("msg"), "STATE DATABASE WAS CORRUPT") {
			corrupt++
		}
	}
	if corrupt < 2 {
		t.Errorf("the garbage and the truncated state database should both be logged as corrupt, got %d", corrupt)
	}
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("recreated state.db: %v %v", fi.Mode(), err)
	}
	record(t, "%s; corruption logged %d time(s); all %d jobs COMPLETED, no double release", strings.Join(notes, "; "), corrupt, len(ids))
}

// 6. hadar-slurmd stopped for good (SIGTERM): within one poll interval
// the lease of every job waiting for hadar ends (StartTime=now), and they
// run under Slurm. Jobs submitted after it stopped get job_submit.lua's
// lease; `hadar-slurmd --release-all` ends it at once.
func TestFailOpenOnStop(t *testing.T) {
	tc := need(t)
	d := tc.newDaemon("d", defaultDaemonConfig())
	var ids []string
	for i := range 30 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i%len(sleepModels)], 1, 8)))
	}
	d.start()
	var waiting int
	if !e2eutil.WaitFor(setupWait, func() bool {
		waiting = 0
		running := 0
		for _, j := range queue(t) {
			if waitsForHadar(j) {
				waiting++
			}
			if j.State == "RUNNING" {
				running++
			}
		}
		return running >= 15 && waiting > 0
	}) {
		t.Fatal("no mix of running jobs and jobs on hadar's lease")
	}
	sent := time.Now()
	d.signal(15)
	var allEnded time.Duration
	e2eutil.WaitFor(10*time.Second, func() bool {
		for _, j := range queue(t) {
			if waitsForHadar(j) {
				return false
			}
		}
		allEnded = time.Since(sent)
		return true
	})
	err, ok := d.wait(30 * time.Second)
	if !ok || err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v (exited: %v)", err, ok)
	}
	if allEnded == 0 {
		t.Fatalf("jobs still on hadar's lease 10s after SIGTERM")
	}
	// When the jobs were handed back is when the daemon's last scontrol
	// update returned, which its log records; the queue above saw it one
	// squeue later (on a loaded 2-core machine squeue alone takes up to
	// ~0.5 s) and after Slurm's next look at the job's reason.
	var handed time.Time
	jobs := 0
	for _, e := range d.log() {
		if e.str("msg") == "handed every tagged job hadar held to Slurm's scheduler" {
			handed, jobs = e.time(), int(e.num("jobs"))
		}
	}
	// A round between the count above and the signal may start some.
	if handed.IsZero() || jobs == 0 || jobs > waiting {
		t.Fatalf("no log of handing the %d waiting jobs to Slurm (logged %d)", waiting, jobs)
	}
	if took := handed.Sub(sent); took > time.Second {
		t.Fatalf("leases ended %s after SIGTERM (the daemon's log; the queue showed it after %s), want within one poll interval (1s)",
			took, allEnded)
	}
	// Jobs submitted while hadar is off wait on job_submit.lua's lease
	// until `hadar-slurmd --release-all` (the documented way to turn hadar
	// off) ends it, or it runs out.
	var late []string
	for range 3 {
		late = append(late, tc.submit(tagged(t, "a3c", 1, 4)))
	}
	time.Sleep(3 * time.Second)
	for _, j := range queue(t) {
		for _, id := range late {
			if j.ID() == id && !waitsForHadar(j) {
				t.Errorf("job %s submitted with hadar off is not on its lease: %s %s", id, j.State, j.Reason)
			}
		}
	}
	releaseAll := time.Now()
	if r := e2eutil.Run(0, nil, filepath.Join(binDir, "hadar-slurmd"), "--config", d.cfgPath, "--release-all"); r.Err != nil {
		t.Fatalf("--release-all: %v %s", r.Err, r.Stdout)
	}
	var lateEnded time.Duration
	if !e2eutil.WaitFor(15*time.Second, func() bool {
		for _, j := range queue(t) {
			if slices.Contains(late, j.ID()) && waitsForHadar(j) {
				return false
			}
		}
		lateEnded = time.Since(releaseAll)
		return true
	}) {
		t.Errorf("jobs submitted after the stop still on their lease 15s after --release-all")
	}
	ids = append(ids, late...)
	waitDone(t, ids, 120*time.Second)
	assertAllCompleted(t, ids)
	assertNoDoubleRelease(t, ids)
	d.assertHealthyLog()
	record(t, "SIGTERM with %d jobs on hadar's lease: all leases ended %dms after the signal (poll interval 1s; the queue showed it after %dms), exit 0; 3 jobs submitted after the stop waited on job_submit.lua's lease until --release-all ended it (%dms); all %d COMPLETED under Slurm alone",
		waiting, handed.Sub(sent).Milliseconds(), allEnded.Milliseconds(), lateEnded.Milliseconds(), len(ids))
}
