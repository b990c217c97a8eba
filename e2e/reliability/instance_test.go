package reliability

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// startThirtyJobs submits 30 short tagged jobs and starts a daemon.
func startThirtyJobs(t *testing.T, tc *tcase) (*daemon, []string) {
	d := tc.newDaemon("d", defaultDaemonConfig())
	var ids []string
	for i := range 30 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i%len(sleepModels)], 1, 8)))
	}
	d.start()
	return d, ids
}

// waitingIDs are the jobs of the queue that wait for hadar (on its lease).
func waitingIDs(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for _, j := range queue(t) {
		if waitsForHadar(j) {
			out[j.ID()] = true
		}
	}
	return out
}

// 13.3. A second hadar-slurmd with the same config exits at once, non-zero,
// naming the first; it touches nothing: the first one's jobs stay on its
// lease (and no round or fail-open of its own reaches Slurm or the state
// database).
func TestSecondDaemonRefused(t *testing.T) {
	tc := need(t)
	d, ids := startThirtyJobs(t, tc)
	var before map[string]bool
	if !e2eutil.WaitFor(30*time.Second, func() bool {
		if !d.waitRounds(1, time.Second) {
			return false
		}
		before = waitingIDs(t)
		return len(before) > 0
	}) {
		t.Fatal("no jobs on the lease of the first daemon")
	}
	roundsBefore := len(d.rounds())
	start := time.Now()
	second := exec.Command(filepath.Join(binDir, "hadar-slurmd"), "--config", d.cfgPath)
	second.Env = append(os.Environ(), "SLURM_CONF="+slurmConf, "HADAR_CONFIG=")
	out, err := second.CombinedOutput()
	took := time.Since(start)
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("second daemon: err %v, want a non-zero exit; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "another hadar-slurmd is running") {
		t.Errorf("second daemon's message does not say why:\n%s", out)
	}
	if took > 5*time.Second {
		t.Errorf("second daemon took %s to give up, want at once", took)
	}
	// It stopped before its first Slurm command: no round, no fail-open.
	if n := len(d.rounds()); n < roundsBefore {
		t.Errorf("rounds went from %d to %d", roundsBefore, n)
	}
	if strings.Contains(string(out), "to Slurm's scheduler") || strings.Contains(string(out), `"msg":"round"`) {
		t.Errorf("the second daemon ran a round or handed jobs to Slurm:\n%s", out)
	}
	ok, _ := d.alive()
	if !ok {
		t.Fatal("the first daemon died")
	}
	// The first daemon may have started some meanwhile (its start sets
	// the AdminComment too); the second ended no lease: the others still
	// pending are still on it.
	for id, j := range byID(queue(t)) {
		if before[id] && j.State == "PENDING" && !waitsForHadar(j) &&
			!strings.Contains(mustRun(t, "scontrol", "show", "job", id), "AdminComment=hadar: placed by hadar-slurmd") {
			t.Errorf("job %s, on the first daemon's lease, is %s %s after the second daemon exited, not started by the first", id, j.State, j.Reason)
		}
	}
	waitDone(t, ids, 180*time.Second)
	d.term()
	assertAllCompleted(t, ids)
	assertNoDoubleRelease(t, ids)
	record(t, "second daemon exited %d in %dms (\"%s\"); %d jobs on the first one's lease stayed its own; all %d COMPLETED, no double release",
		ee.ExitCode(), took.Milliseconds(), firstLine(string(out), "another hadar-slurmd"), len(before), len(ids))
}

// 13.6. SIGKILL of the daemon: its fail-open guardian ends the lease of
// every job waiting for hadar within a bound, with no restart, and all of
// them run.
func TestKill9FailsOpen(t *testing.T) {
	tc := need(t)
	d, ids := startThirtyJobs(t, tc)
	waitMix(t)
	waiting := len(waitingIDs(t))
	killed := time.Now()
	d.kill9()
	var ended time.Duration
	if !e2eutil.WaitFor(failOpenBound, func() bool {
		if len(waitingIDs(t)) > 0 {
			return false
		}
		ended = time.Since(killed)
		return true
	}) {
		t.Fatalf("%d jobs still on hadar's lease %s after SIGKILL, want none after %s", len(waitingIDs(t)), failOpenBound, failOpenBound)
	}
	waitDone(t, ids, 180*time.Second)
	assertAllCompleted(t, ids)
	assertNoDoubleRelease(t, ids)
	record(t, "SIGKILL with %d jobs waiting on hadar's lease: the guardian ended all their leases %dms after the kill (bound %s), no restart; all %d COMPLETED",
		waiting, ended.Milliseconds(), failOpenBound, len(ids))
}

// waitMix waits until some jobs run and others wait on hadar's lease.
func waitMix(t *testing.T) {
	t.Helper()
	if !e2eutil.WaitFor(30*time.Second, func() bool {
		waiting, running := 0, 0
		for _, j := range queue(t) {
			if waitsForHadar(j) {
				waiting++
			}
			if j.State == "RUNNING" {
				running++
			}
		}
		return waiting > 0 && running > 0
	}) {
		t.Fatal("no mix of running jobs and jobs on hadar's lease")
	}
}

// SIGKILL of the daemon and of its guardian (a host's crash, the OOM
// killer taking both): no one ends or renews the leases. Every lease ends
// at most one lease after the kill (a tagged job submitted while
// hadar-slurmd is dead: one lease after its submission), and Slurm starts
// the job at its next scheduling pass: on a quiet cluster its periodic one,
// every sched_interval (60 s by default). All of them run and complete under
// Slurm alone.
func TestKill9NoGuardianLeaseRunsOut(t *testing.T) {
	tc := need(t)
	// 30 one-GPU jobs of 30 s on 20 GPUs: 10 wait on hadar's lease while
	// the first 20 run.
	d := tc.newDaemon("d", defaultDaemonConfig())
	var ids []string
	for i := range 30 {
		ids = append(ids, tc.submit(tagged(t, sleepModels[i%len(sleepModels)], 1, 30)))
	}
	d.start()
	waitMix(t)
	guardian := 0
	for _, e := range d.log() {
		if e.str("msg") == "fail-open guardian started" {
			guardian = int(e.num("pid"))
		}
	}
	if guardian == 0 {
		t.Fatal("the daemon logged no fail-open guardian")
	}
	if err := syscall.Kill(guardian, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 of the guardian %d: %v", guardian, err)
	}
	killed := time.Now()
	d.kill9()
	// Submitted with hadar-slurmd dead: job_submit.lua still gives the lease.
	late := []string{tc.submit(tagged(t, sleepModels[0], 1, 5)), tc.submit(tagged(t, sleepModels[1], 1, 5))}
	lateAt := time.Now()
	ids = append(ids, late...)
	// Each waiting job's lease end: its begin time, which nobody changes now.
	leaseEnd := map[string]time.Time{}
	for _, j := range queue(t) {
		if waitsForHadar(j) {
			leaseEnd[j.ID()] = j.StartTime
		}
	}
	for _, id := range late {
		if _, ok := leaseEnd[id]; !ok {
			t.Errorf("job %s submitted with hadar dead is not on its lease", id)
		}
	}
	if len(leaseEnd) < len(late)+5 {
		t.Fatalf("only %d jobs on hadar's lease after the kill, want the ~10 that wait for GPUs and the 2 submitted after it", len(leaseEnd))
	}
	var lastEnd time.Time
	for id, end := range leaseEnd {
		from := killed
		if slices.Contains(late, id) {
			from = lateAt
		}
		// Whole seconds: squeue's begin time may be up to a second later.
		if end.After(from.Add(leaseLength + 2*time.Second)) {
			t.Errorf("job %s: lease ends %s, %s after the kill or its submission; want at most the lease (%s)", id, end.Format(time.TimeOnly), end.Sub(from).Round(time.Second), leaseLength)
		}
		lastEnd = maxTime(lastEnd, end)
	}
	interval := schedInterval(t)
	bound := interval + leaseMargin
	started := map[string]time.Time{}
	e2eutil.WaitEvery(time.Until(lastEnd.Add(bound)), 500*time.Millisecond, func() bool {
		q := byID(queue(t))
		for id := range leaseEnd {
			if _, seen := started[id]; seen {
				continue
			}
			if j, ok := q[id]; !ok || j.State != "PENDING" {
				started[id] = time.Now()
			}
		}
		return len(started) == len(leaseEnd)
	})
	var worst time.Duration
	for id, end := range leaseEnd {
		at, ok := started[id]
		if !ok {
			t.Errorf("job %s still pending %s after its lease ended (bound: Slurm's sched_interval %s + %s)", id, time.Since(end).Round(time.Second), interval, leaseMargin)
			continue
		}
		if at.Before(end.Add(-time.Second)) {
			t.Errorf("job %s started at %s, before its lease ended (%s): nobody should have started it", id, at.Format(time.TimeOnly), end.Format(time.TimeOnly))
		}
		worst = max(worst, at.Sub(end))
	}
	waitDone(t, ids, 180*time.Second)
	assertAllCompleted(t, ids)
	if n := countMsg(d, "handed every tagged job hadar held to Slurm's scheduler"); n != 0 {
		t.Errorf("something handed the jobs over (%d log lines), want the leases to run out alone", n)
	}
	record(t, "SIGKILL of the daemon and its guardian with %d jobs on hadar's lease (+2 submitted while it was dead): every lease ended within %s of the kill or the submission (the last %.1fs after the kill); Slurm started each at most %.1fs after its lease ended (its next scheduling pass; bound sched_interval %s + %s); all %d COMPLETED under Slurm alone",
		len(leaseEnd)-len(late), leaseLength, lastEnd.Sub(killed).Seconds(), worst.Seconds(), interval, leaseMargin, len(ids))
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// schedInterval is slurmctld's sched_interval (SchedulerParameters; 60 s
// unless set): how often its main scheduler runs when no event triggers it.
func schedInterval(t *testing.T) time.Duration {
	t.Helper()
	for _, line := range strings.Split(mustRun(t, "scontrol", "show", "config"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "SchedulerParameters" {
			continue
		}
		for _, p := range strings.Split(strings.TrimSpace(v), ",") {
			if n, ok := strings.CutPrefix(p, "sched_interval="); ok {
				if secs, err := strconv.Atoi(n); err == nil {
					return time.Duration(secs) * time.Second
				}
			}
		}
	}
	return 60 * time.Second
}

// countMsg counts the daemon's log lines with message msg.
func countMsg(d *daemon, msg string) int {
	n := 0
	for _, e := range d.log() {
		if e.str("msg") == msg {
			n++
		}
	}
	return n
}

// leaseLength is job_submit.lua's HADAR_LEASE_SECONDS (hadar.toml's lease,
// default 2m); leaseMargin what a start may take past Slurm's scheduling
// pass (a loaded 2-core machine).
const (
	leaseLength = 120 * time.Second
	leaseMargin = 10 * time.Second
)

// failOpenBound is the stated bound (docs/reliability.md) from the daemon's
// death to the end of its jobs' leases by the guardian.
const failOpenBound = 10 * time.Second

func firstLine(s, containing string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, containing) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
