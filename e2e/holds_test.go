package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// liveDaemon is a hadar-slurmd of a test, started and stopped (SIGTERM)
// by it, its log appended to one file.
type liveDaemon struct {
	t        *testing.T
	cfg, log string
	cmd      *exec.Cmd
	done     chan error
}

func (d *liveDaemon) start() {
	d.t.Helper()
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	d.cmd = exec.Command(daemonBin(), "--config", d.cfg)
	d.cmd.Env = append(os.Environ(), "SLURM_CONF="+slurmConf, "HADAR_CONFIG=")
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(d.cmd, d.done)
}

// stop sends SIGTERM (the clean stop: hadar's leases end, ReleaseAll)
// and waits for the exit.
func (d *liveDaemon) stop() {
	d.t.Helper()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Errorf("hadar-slurmd exited with %v on SIGTERM; log:\n%s", err, tail(d.log, 30))
		}
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		d.t.Errorf("hadar-slurmd did not stop within 60s of SIGTERM")
	}
	d.cmd = nil
}

// TestHoldsAndBegin: holds and begin times are not hadar's. On tagged
// jobs, an admin's hold (root's scontrol hold: JobHeldAdmin) and a user's
// own (sbatch -H as an unprivileged user: JobHeldUser) are released by
// neither hadar's rounds nor its clean stop (SIGTERM, which ends hadar's
// leases); once their owner releases them hadar places them. A user's
// --begin=now+3minutes is kept through rounds, a stop and a restart: the
// job does not start before it, and hadar starts it after; a job with a
// bad tag and a --begin (passed through) does not start before it either.
func TestHoldsAndBegin(t *testing.T) {
	requireE2E(t)
	requireDemoLayout(t)
	user := e2eutil.EnvOr("HADAR_SMOKE_USER", e2eutil.TestUser)
	if err := e2eutil.EnsureUser(user); err != nil {
		t.Fatal(err)
	}
	if err := e2eutil.WaitGone(slurmConf, nil, 60*time.Second); err != nil {
		t.Fatalf("the cluster is not idle: %v\n%s", err, squeueDump(slurmConf))
	}
	var ids []string
	cancelOnCleanup(t, slurmConf, &ids)
	const tag = "--comment=hadar model=resnet50-bs64 steps=100"
	asRoot := func(args ...string) string {
		id := sbatch(t, slurmConf, append([]string{"-J", "e2e-holds", "-o", "/dev/null", tag, "--gres=gpu:1"}, args...)...)
		ids = append(ids, id)
		return id
	}
	asTheUser := func(args ...string) string {
		id, err := asUser(user, slurmConf, 30*time.Second).Sbatch(append([]string{"-J", "e2e-holds", "-o", "/dev/null", tag, "--gres=gpu:1"}, args...)...)
		if err != nil {
			t.Fatalf("sbatch as %s: %v", user, err)
		}
		ids = append(ids, id)
		return id
	}
	adminHeld := asRoot("--wrap", "sleep 5")
	must(t, slurmConf, "scontrol", "hold", adminHeld)
	userHeld := asTheUser("-H", "--wrap", "sleep 5")
	submitted := time.Now().Truncate(time.Second)
	begin := asTheUser("--begin=now+3minutes", "--wrap", "sleep 5")
	userBegin := submitted.Add(3 * time.Minute)
	// A bad tag: hadar passes it through, after its --begin.
	passBegin, err := asUser(user, slurmConf, 30*time.Second).Sbatch("-J", "e2e-holds", "-o", "/dev/null", "--comment=hadar steps=-5",
		"--gres=gpu:1", "--begin=now+3minutes", "--wrap", "sleep 5")
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, passBegin)
	control := asRoot("--wrap", "sleep 5")

	// job_submit.lua put the lease on top of the user's begin time.
	if st, err := e2eutil.StartTime(slurmConf, begin); err != nil || st.Before(userBegin.Add(2*time.Minute-time.Second)) || st.After(userBegin.Add(2*time.Minute+3*time.Second)) {
		t.Errorf("job %s with --begin=now+3minutes begins at %v (%v), want its begin time + the lease, %v", begin, st, err, userBegin.Add(2*time.Minute))
	}
	held := func(when string) {
		t.Helper()
		q, err := e2eutil.Queue(slurmConf, []string{adminHeld, userHeld, begin, passBegin})
		if err != nil {
			t.Fatal(err)
		}
		if q[adminHeld].Reason != "JobHeldAdmin" || q[userHeld].Reason != "JobHeldUser" {
			t.Errorf("%s: admin-held job %s is %+v, user-held job %s is %+v; want both still held", when, adminHeld, q[adminHeld], userHeld, q[userHeld])
		}
		for _, id := range []string{begin, passBegin} {
			if q[id].State != "PENDING" && time.Now().Before(userBegin.Add(-beginSlack)) {
				t.Errorf("%s: job %s is %+v before its --begin %v", when, id, q[id], userBegin)
			}
		}
	}
	held("at submission")

	dir := e2eutil.WorkDir(t, "holds")
	d := &liveDaemon{t: t, cfg: writeConfig(t, dir, ""), log: filepath.Join(dir, "hadar-slurmd.log")}
	t.Cleanup(d.stop)
	d.start()
	waitState(t, slurmConf, []string{control}, "RUNNING", 30*time.Second)
	// Two more rounds (round = 10s): nothing of the three moves.
	deadline := time.Now().Add(22 * time.Second)
	for time.Now().Before(deadline) {
		held("under the daemon")
		time.Sleep(2 * time.Second)
	}
	var ex struct{ Class, Summary string }
	hadarJSON(t, slurmConf, &ex, "explain", "--json", "--config", d.cfg, begin)
	if ex.Class != "not-ready" {
		t.Errorf("explain %s (--begin ahead): %+v, want class not-ready", begin, ex)
	}
	for _, id := range []string{adminHeld, userHeld} {
		hadarJSON(t, slurmConf, &ex, "explain", "--json", "--config", d.cfg, id)
		if ex.Class != "held" {
			t.Errorf("explain %s: %+v, want class held", id, ex)
		}
	}

	// A clean stop ends hadar's leases only: the holds stay, and the user's
	// begin time is still ahead.
	d.stop()
	held("after SIGTERM")
	if st, err := e2eutil.StartTime(slurmConf, begin); err != nil || st.Before(userBegin.Add(-time.Second)) {
		t.Errorf("after SIGTERM job %s begins at %v (%v), want not before its --begin %v", begin, st, err, userBegin)
	}
	d.start()
	time.Sleep(12 * time.Second) // a round of the new daemon
	held("after the restart")

	// Released by their owners, they are hadar's again: placed by it.
	must(t, slurmConf, "scontrol", "release", adminHeld)
	if r := asUser(user, slurmConf, 30*time.Second).Run("scontrol", "release", userHeld); r.Err != nil {
		t.Fatalf("scontrol release %s as %s: %v %s", userHeld, user, r.Err, r.Stderr)
	}
	released := time.Now()
	var placedIn []time.Duration
	for _, id := range []string{adminHeld, userHeld} {
		if !e2eutil.WaitFor(40*time.Second, func() bool {
			q, _ := e2eutil.Queue(slurmConf, []string{id})
			return q[id].State == "RUNNING" || q[id].State == "COMPLETING" || q[id].State == ""
		}) {
			t.Fatalf("job %s not started 40s after its release:\n%s\n%s", id, squeueDump(slurmConf), tail(d.log, 20))
		}
		placedIn = append(placedIn, time.Since(released).Round(100*time.Millisecond))
		if a := adminComment(t, slurmConf, id); !strings.HasPrefix(a, "hadar: placed by hadar-slurmd") {
			t.Errorf("released job %s: AdminComment %q, want hadar's placement", id, a)
		}
	}

	// The begin-time jobs start after their --begin: by hadar, or handed
	// to Slurm (the bad tag).
	startedAt := map[string]time.Time{}
	if !e2eutil.WaitEvery(time.Until(userBegin)+60*time.Second, time.Second, func() bool {
		q, _ := e2eutil.Queue(slurmConf, []string{begin, passBegin})
		for _, id := range []string{begin, passBegin} {
			if _, ok := startedAt[id]; !ok && q[id].State != "PENDING" {
				startedAt[id] = time.Now()
			}
		}
		return len(startedAt) == 2
	}) {
		t.Fatalf("jobs %s, %s not both started 60s after their --begin %v (started %v):\n%s", begin, passBegin, userBegin, startedAt, squeueDump(slurmConf))
	}
	for id, at := range startedAt {
		if at.Before(userBegin.Add(-beginSlack)) {
			t.Errorf("job %s started at %v, before its --begin %v", id, at, userBegin)
		}
	}
	if a := adminComment(t, slurmConf, begin); !strings.HasPrefix(a, "hadar: placed by hadar-slurmd") {
		t.Errorf("begin-time job %s: AdminComment %q, want hadar's placement", begin, a)
	}
	if a := adminComment(t, slurmConf, passBegin); !strings.Contains(a, "released to Slurm's scheduler") {
		t.Errorf("begin-time job %s with a bad tag: AdminComment %q, want the pass-through's", passBegin, a)
	}
	t.Logf("RESULT TestHoldsAndBegin: admin hold (JobHeldAdmin) and user hold (sbatch -H) kept through 2 rounds, SIGTERM and a restart; placed by hadar %v after their release; --begin=now+3minutes jobs kept through SIGTERM and a restart, started %.1fs (placed by hadar) and %.1fs (bad tag, passed through) after their begin time",
		placedIn, startedAt[begin].Sub(userBegin).Seconds(), startedAt[passBegin].Sub(userBegin).Seconds())
}

// beginSlack is how early hadar may start a job before its --begin: it
// allows 2 s for Slurm's whole seconds and job_submit.lua's clock
// (bridge's leaseSlack), and the test's clock reads squeue a moment late.
const beginSlack = 3 * time.Second
