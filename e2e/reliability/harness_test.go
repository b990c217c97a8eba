package reliability

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
	"github.com/hadar-sched/hadar/slurm"
)

// The suite's environment, set up once by TestMain.
var (
	enabled    bool
	setupErr   error
	repoRoot   string
	binDir     string // built hadar and hadar-slurmd
	artifacts  string // logs and databases of every test; kept on failure
	cluster    e2eutil.TestCluster
	clusterDir string
	slurmConf  string
	jobsDir    string
	testUser   = e2eutil.TestUser
)

func TestMain(m *testing.M) {
	os.Exit(mainRun(m))
}

func mainRun(m *testing.M) int {
	if !e2eutil.Enabled() {
		return m.Run() // every test skips
	}
	enabled = true
	start := time.Now()
	setupErr = setup()
	code := m.Run()
	if enabled && setupErr == nil {
		printResults()
	}
	teardown(code)
	fmt.Printf("reliability: suite took %s\n", time.Since(start).Round(time.Second))
	return code
}

func setup() error {
	if os.Geteuid() != 0 {
		return errors.New("the reliability tests need root (they start a test cluster and submit as another user)")
	}
	var err error
	if repoRoot, err = e2eutil.RepoRoot(); err != nil {
		return err
	}
	artifacts, err = os.MkdirTemp("", "hadar-rel-")
	if err != nil {
		return err
	}
	if err := os.Chmod(artifacts, 0o755); err != nil {
		return err
	}
	// HADAR_BIN_DIR: binaries built elsewhere (the container cluster's
	// login host has no Go); else a fresh build of this checkout.
	if dir := os.Getenv("HADAR_BIN_DIR"); dir != "" {
		binDir = dir
		if err := e2eutil.FindBinaries(binDir); err != nil {
			return fmt.Errorf("HADAR_BIN_DIR: %w", err)
		}
	} else {
		binDir = filepath.Join(artifacts, "bin")
		if err := e2eutil.BuildBinaries(repoRoot, binDir); err != nil {
			return err
		}
	}
	if err := e2eutil.EnsureUser(testUser); err != nil {
		return err
	}
	cluster = e2eutil.TestCluster{Repo: repoRoot, Layout: "demo",
		Dir: e2eutil.EnvOr("HADAR_REL_CLUSTER_DIR", "/tmp/hadar-rel-tc"), Port: e2eutil.EnvOr("HADAR_REL_CLUSTER_PORT", "21000")}
	clusterDir = cluster.Dir
	conf, upLog, err := cluster.Up(0)
	if err != nil {
		return err
	}
	slurmConf = conf
	os.Setenv("SLURM_CONF", slurmConf)
	jobsDir = filepath.Join(clusterDir, "jobs")
	fmt.Printf("reliability: cluster %s (%s), artifacts %s\n", clusterDir, strings.TrimSpace(upLog), artifacts)
	return nil
}

func teardown(code int) {
	if clusterDir != "" && os.Getenv("HADAR_REL_KEEP") != "1" {
		if err := cluster.Down(0); err != nil {
			fmt.Printf("reliability: %v\n", err)
		}
	}
	if artifacts == "" {
		return
	}
	if code != 0 || os.Getenv("HADAR_REL_KEEP") == "1" {
		fmt.Printf("reliability: artifacts kept in %s\n", artifacts)
		return
	}
	os.RemoveAll(artifacts)
}

// need skips the test unless HADAR_E2E=1 and fails it if setup failed.
func need(t *testing.T) *tcase {
	t.Helper()
	if !enabled {
		t.Skip("set HADAR_E2E=1 (as root) to run the reliability tests on a real Slurm test cluster")
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	tc := &tcase{t: t, dir: filepath.Join(artifacts, t.Name())}
	if err := os.MkdirAll(tc.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	waitQueueEmpty(t)
	clearStaleGres(t)
	t.Cleanup(tc.cleanup)
	return tc
}

// clearStaleGres keeps the tests independent of each other's slurmctld
// restarts: with the queue empty, GPUs Slurm 22.05 still counts as used are
// left from jobs that ended while slurmctld was down (the daemon counts
// them free, bridge.NodeView.StaleUsed), and `scontrol reconfigure`
// corrects Slurm's figure.
func clearStaleGres(t *testing.T) {
	t.Helper()
	stale := func() map[string]int {
		r := e2eutil.Run(0, nil, "scontrol", "-a", "-d", "-o", "show", "node")
		if r.Err != nil {
			return nil
		}
		nodes, _ := slurm.ParseNodes(strings.NewReader(r.Stdout))
		out := map[string]int{}
		for _, n := range nodes {
			for _, c := range slurm.GPUsByType(n.GresUsed) {
				if c > 0 {
					out[n.Name] += c
				}
			}
		}
		return out
	}
	s := stale()
	if len(s) == 0 {
		return
	}
	t.Logf("Slurm counts GPUs as used with the queue empty %v (left by an earlier test's slurmctld restart): scontrol reconfigure", s)
	mustRun(t, "scontrol", "reconfigure")
	if !e2eutil.WaitFor(20*time.Second, func() bool { return len(stale()) == 0 }) {
		t.Fatalf("GPUs still counted used after scontrol reconfigure: %v", stale())
	}
}

// ---------------------------------------------------------------- results

var (
	resultsMu sync.Mutex
	results   []string
)

// record keeps a measured figure for the summary (and docs/reliability.md).
func record(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log("RESULT " + line)
	resultsMu.Lock()
	results = append(results, line)
	resultsMu.Unlock()
}

func printResults() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "RESULT %s\n", r)
	}
	fmt.Print(b.String())
	if artifacts != "" {
		os.WriteFile(filepath.Join(artifacts, "results.txt"), []byte(b.String()), 0o644)
	}
}

// ---------------------------------------------------------------- a test case

// tcase is one test's jobs and daemons, cleaned up whatever happens.
type tcase struct {
	t       *testing.T
	dir     string
	mu      sync.Mutex
	jobs    []string
	daemons []*daemon
	arrays  []string
	undo    []func()
}

func (tc *tcase) cleanup() {
	for _, d := range tc.daemons {
		d.stop()
	}
	tc.mu.Lock()
	ids := append(append([]string(nil), tc.jobs...), tc.arrays...)
	undo := tc.undo
	tc.mu.Unlock()
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	for chunk := range slices.Chunk(ids, 200) {
		e2eutil.Run(0, nil, "scancel", chunk...)
	}
	waitQueueEmpty(tc.t)
}

// onCleanup runs f when the test ends (before its jobs are cancelled).
func (tc *tcase) onCleanup(f func()) {
	tc.mu.Lock()
	tc.undo = append(tc.undo, f)
	tc.mu.Unlock()
}

// job is what a test submits.
type job struct {
	Comment string // "" for untagged
	GPUs    int
	Seconds float64 // of the sleep, unless Script is set
	Name    string
	Chdir   string // default jobsDir
	User    string // "" for root
	Script  string // path of a batch script instead of --wrap sleep
	Args    []string
	Env     []string
	Extra   []string // more sbatch options
}

// submit runs sbatch and returns the job id; the job is cancelled when the
// test ends.
func (tc *tcase) submit(j job) string {
	tc.t.Helper()
	id, err := sbatch(j)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.mu.Lock()
	tc.jobs = append(tc.jobs, id)
	tc.mu.Unlock()
	return id
}

func sbatch(j job) (string, error) {
	chdir := j.Chdir
	if chdir == "" {
		chdir = jobsDir
	}
	args := []string{"--chdir=" + chdir, "-o", "/dev/null", "-e", "/dev/null"}
	if j.Name != "" {
		args = append(args, "--job-name="+j.Name)
	}
	if j.Comment != "" {
		args = append(args, "--comment="+j.Comment)
	}
	if j.GPUs > 0 {
		args = append(args, fmt.Sprintf("--gres=gpu:%d", j.GPUs))
	}
	args = append(args, j.Extra...)
	if j.Script != "" {
		args = append(args, j.Script)
		args = append(args, j.Args...)
	} else {
		args = append(args, "--wrap", fmt.Sprintf("sleep %.1f", j.Seconds))
	}
	c := e2eutil.Cmd{Dir: jobsDir, Env: j.Env}
	if j.User != "" {
		c.User, c.UserEnv = j.User, []string{"SLURM_CONF=" + slurmConf}
	}
	return c.Sbatch(args...)
}

// asTestUser runs commands as the unprivileged test user on the cluster.
func asTestUser() e2eutil.Cmd {
	return e2eutil.Cmd{User: testUser, UserEnv: []string{"SLURM_CONF=" + slurmConf}}
}

// ---------------------------------------------------------------- Slurm reads

// mustRun runs a command that has to succeed (no time limit) and returns
// its stdout.
func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	return e2eutil.Run(0, nil, name, args...).Must(t)
}

// queue lists the queue with hadar's own squeue command and parser.
func queue(t *testing.T) []slurm.Job {
	t.Helper()
	for try := 0; ; try++ {
		r := e2eutil.Run(0, nil, slurm.JobQueryArgs[0], slurm.JobQueryArgs[1:]...)
		if r.Err != nil {
			if try < 30 {
				time.Sleep(time.Second) // slurmctld restarting
				continue
			}
			t.Fatal(r.Err)
		}
		jobs, errs := slurm.ParseJobs(strings.NewReader(r.Stdout))
		if len(errs) > 0 {
			t.Errorf("parsing squeue: %v", errs)
		}
		return jobs
	}
}

func byID(jobs []slurm.Job) map[string]slurm.Job {
	m := map[string]slurm.Job{}
	for _, j := range jobs {
		m[j.ID()] = j
	}
	return m
}

// waitsForHadar reports whether a pending job waits for hadar: on its
// begin-time lease (reason BeginTime: job_submit.lua's, renewed by hadar),
// or in hadar's own hold (a migration's requeuehold, released in the same
// round).
func waitsForHadar(j slurm.Job) bool {
	return j.State == "PENDING" && (j.Reason == "BeginTime" || j.Reason == "job_requeued_in_held_state" || j.Reason == "job requeued in held state")
}

// isHeld reports whether a pending job is held by its owner or an admin.
func isHeld(j slurm.Job) bool {
	return j.State == "PENDING" && (j.Reason == "JobHeldUser" || j.Reason == "JobHeldAdmin")
}

func gpus(j slurm.Job) int {
	n := 0
	for _, c := range slurm.GPUsByType(j.Gres) {
		n += c
	}
	return n
}

// finalStates returns each job's state as squeue -t all shows it (finished
// jobs stay MinJobAge = 300 s). No user text is read.
func finalStates(t *testing.T, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for chunk := range slices.Chunk(ids, 200) {
		s := mustRun(t, "squeue", "-h", "-t", "all", "-j", strings.Join(chunk, ","), "-o", "%A|%T")
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			if id, st, ok := strings.Cut(line, "|"); ok {
				out[id] = st
			}
		}
	}
	return out
}

// waitDone waits until none of ids is pending, running or completing.
func waitDone(t *testing.T, ids []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	left := 0
	var sample []string
	if !e2eutil.WaitEvery(timeout, 500*time.Millisecond, func() bool {
		left, sample = 0, nil
		for _, j := range queue(t) {
			if want[j.ID()] || want[j.JobID] {
				left++
				if len(sample) < 8 {
					sample = append(sample, fmt.Sprintf("%s:%s(%s)", j.ID(), j.State, j.Reason))
				}
			}
		}
		return left == 0
	}) {
		t.Fatalf("%d of %d jobs still queued after %s: %s", left, len(ids), timeout, strings.Join(sample, " "))
	}
	return time.Since(start)
}

// waitQueueEmpty waits up to a minute for the cluster to be idle, so that
// a test starts (and leaves) it without jobs.
func waitQueueEmpty(t *testing.T) {
	t.Helper()
	if err := e2eutil.WaitGone("", nil, 60*time.Second); err != nil {
		t.Errorf("queue not empty: %v", err)
	}
}

// assertAllCompleted checks that every job ended COMPLETED and is no
// longer in the queue (so none is held or lost).
func assertAllCompleted(t *testing.T, ids []string) {
	t.Helper()
	st := finalStates(t, ids)
	bad := 0
	for _, id := range ids {
		if st[id] != "COMPLETED" {
			bad++
			t.Errorf("job %s ended %q, want COMPLETED; what Slurm logged of it:\n%s", id, st[id], jobStory(id))
		}
	}
	if bad == 0 {
		t.Logf("all %d jobs COMPLETED", len(ids))
	}
}

// ---------------------------------------------------------------- Slurm's own records

// jobStory is what slurmctld's log and the jobcomp log say of job id (the
// last 30 lines), for a failure message: a CI run keeps no artifacts.
func jobStory(id string) string {
	var lines []string
	for _, name := range []string{"slurmctld.log", "jobcomp.log"} {
		b, err := os.ReadFile(filepath.Join(clusterDir, "log", name))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "JobId="+id+" ") || strings.HasSuffix(l, "JobId="+id) {
				lines = append(lines, name+": "+l)
			}
		}
	}
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// jobcompRecords reads the jobcomp log: one record per end of a run
// (COMPLETED, and PENDING/REQUEUED/NODE_FAIL for runs that were requeued).
// Only jobs with plain names are read reliably (the log is not escaped).
func jobcompRecords(t *testing.T) map[string][]string {
	t.Helper()
	recs, err := e2eutil.ReadJobcomp(e2eutil.JobcompLog(clusterDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range recs {
		out[r["JobId"]] = append(out[r["JobId"]], r["JobState"])
	}
	return out
}

// ctldEvent is one line of slurmctld's log about a job.
type ctldEvent struct {
	At   string
	Kind string // submit, release, hold, start, requeue, update, requeue-rpc
	UID  string
}

var ctldPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"submit", regexp.MustCompile(`_slurm_rpc_submit_batch_job: JobId=(\d+) `)},
	{"release", regexp.MustCompile(`_release_job_rec: release hold on JobId=(\d+) by uid (\d+)`)},
	{"hold", regexp.MustCompile(`_hold_job_rec: hold on JobId=(\d+) by uid (\d+)`)},
	{"start", regexp.MustCompile(`sched: Allocate JobId=(\d+) `)},
	{"start", regexp.MustCompile(`_start_job: Started JobId=(\d+) `)},
	{"requeue", regexp.MustCompile(`requeue job JobId=(\d+) `)},
	{"requeue", regexp.MustCompile(`Requeuing JobId=(\d+)`)},
	{"update", regexp.MustCompile(`_slurm_rpc_update_job: complete JobId=(\d+) uid=(\d+)`)},
	{"requeue-rpc", regexp.MustCompile(`_slurm_rpc_requeue: .*JobId=(\d+)`)},
	{"done", regexp.MustCompile(`_job_complete: JobId=(\d+) done`)},
}

// ctldEvents reads slurmctld's log: per job id, its events in order.
func ctldEvents(t *testing.T) map[string][]ctldEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(clusterDir, "log", "slurmctld.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]ctldEvent{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range ctldPatterns {
			if m := p.re.FindStringSubmatch(line); m != nil {
				ev := ctldEvent{Kind: p.kind}
				if len(line) > 25 {
					ev.At = line[1:24]
				}
				if len(m) > 2 {
					ev.UID = m[2]
				}
				out[m[1]] = append(out[m[1]], ev)
			}
		}
	}
	return out
}

// requeuesOfEndedRuns are, by slurmctld's log, how long after each of job
// id's runs had ended Slurm requeued it (Slurm requeues a completed job and
// runs it again): a run's "done" followed by a "requeue" before the next
// start.
func requeuesOfEndedRuns(ev []ctldEvent) []time.Duration {
	var out []time.Duration
	var done time.Time
	for _, e := range ev {
		at, err := time.Parse("2006-01-02T15:04:05.000", e.At)
		if err != nil {
			continue
		}
		switch e.Kind {
		case "done":
			done = at
		case "start":
			done = time.Time{}
		case "requeue":
			if !done.IsZero() {
				out = append(out, at.Sub(done))
				done = time.Time{}
			}
		}
	}
	return out
}

// assertNoDoubleRelease checks Slurm's own log: no job was released twice
// without being held, requeued or started in between (a second release of
// the same run: an action applied twice). It returns the releases per job.
func assertNoDoubleRelease(t *testing.T, ids []string) map[string]int {
	t.Helper()
	ev := ctldEvents(t)
	rel := map[string]int{}
	for _, id := range ids {
		armed := false // a release happened since the last hold/start/requeue
		for _, e := range ev[id] {
			switch e.Kind {
			case "release":
				rel[id]++
				if armed {
					t.Errorf("job %s released twice in the same run (at %s): %v", id, e.At, ev[id])
				}
				armed = true
			case "hold", "start", "requeue":
				armed = false
			}
		}
	}
	return rel
}

// ---------------------------------------------------------------- the daemon

// daemonConfig is the hadar-slurmd config a test runs with.
type daemonConfig struct {
	Round, Poll, Gap, Penalty, LaunchTimeout, CommandTimeout string
	LogFormat, LogLevel                                      string
	Metrics                                                  *string // nil: no [metrics] key (the default)
	Extra                                                    string
}

func defaultDaemonConfig() daemonConfig {
	off := ""
	return daemonConfig{Round: "4s", Poll: "1s", Gap: "1s", Penalty: "5s", LaunchTimeout: "30s",
		CommandTimeout: "15s", LogFormat: "json", LogLevel: "debug", Metrics: &off}
}

// daemon is one hadar-slurmd under test, restartable. Its Slurm commands
// go through shims (bin/squeue, bin/scontrol) that log every call and
// inject the faults asked for in bin/rules/.
type daemon struct {
	t       *testing.T
	dir     string
	cfgPath string
	logPath string
	shims   string
	cfg     daemonConfig

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	exit   error
	starts []time.Time
	// parsed log
	logOff  int64
	entries []logEntry
}

type logEntry map[string]any

func (e logEntry) str(k string) string {
	switch v := e[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (e logEntry) num(k string) float64 {
	v, _ := e[k].(float64)
	return v
}

func (e logEntry) time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.str("time"))
	return t
}

func (tc *tcase) newDaemon(name string, cfg daemonConfig) *daemon {
	t := tc.t
	dir := filepath.Join(tc.dir, name)
	d := &daemon{t: t, dir: dir, cfg: cfg, cfgPath: filepath.Join(dir, "hadar.toml"),
		logPath: filepath.Join(dir, "hadar-slurmd.log"), shims: filepath.Join(dir, "bin")}
	for _, sub := range []string{"", "spool", "bin/rules"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d.writeConfig()
	for _, c := range []string{"squeue", "scontrol", "sinfo", "scancel"} {
		real, err := exec.LookPath(c)
		if err != nil {
			t.Fatal(err)
		}
		script := strings.NewReplacer("@REAL@", real, "@CTLD_PID@", filepath.Join(clusterDir, "run", "slurmctld.pid")).Replace(shimScript)
		if err := os.WriteFile(filepath.Join(d.shims, c), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tc.daemons = append(tc.daemons, d)
	return d
}

func (d *daemon) writeConfig() {
	c := d.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "policy = \"hadar\"\nround = %q\npoll_interval = %q\nmin_round_gap = %q\nmigration_penalty = %q\n", c.Round, c.Poll, c.Gap, c.Penalty)
	fmt.Fprintf(&b, "launch_timeout = %q\ndata_dir = %q\nspool_dir = %q\n", c.LaunchTimeout, filepath.Join(d.dir, "data"), filepath.Join(d.dir, "spool"))
	b.WriteString(c.Extra)
	fmt.Fprintf(&b, "\n[slurm]\nbin_dir = %q\ncommand_timeout = %q\n", d.shims, c.CommandTimeout)
	fmt.Fprintf(&b, "[log]\nformat = %q\nlevel = %q\n", c.LogFormat, c.LogLevel)
	if c.Metrics != nil {
		fmt.Fprintf(&b, "[metrics]\nlisten = %q\n", *c.Metrics)
	}
	if err := os.WriteFile(d.cfgPath, []byte(b.String()), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// shimScript stands in for a Slurm command in the daemon's bin_dir. Rules
// (files in rules/, each used once):
//
//	fail-once.CMD      "ID PATTERN": a call whose argv contains PATTERN and
//	                   names job ID fails for ID (exit 1, scontrol's style);
//	                   the other ids of a batch are done by the real command
//	kill-before.CMD*   "PATTERN": SIGKILL the daemon (the caller) instead
//	kill-after.CMD*    "PATTERN": run the real command, then SIGKILL the daemon
//	                   (both write "before|after ARGS" to rules/killed)
//	stop-ctld.CMD      "PATTERN": stop slurmctld (SIGTERM, by its pid file)
//	                   first, then run the real command
const shimScript = `#!/bin/bash
# hadar reliability-test shim: logs the call, injects faults, runs the real command.
name=${0##*/}
here=${0%/*}
real=@REAL@
rules=$here/rules
printf '%s\t%s\t%s\n' "$EPOCHREALTIME" "$name" "$*" >>"$here/calls.log"
has() { [[ " $* " == *"$pat"* ]]; }
if [[ -f $rules/stop-ctld.$name ]]; then
	pat=$(<"$rules/stop-ctld.$name")
	if has "$@"; then
		rm -f "$rules/stop-ctld.$name"
		pid=$(<@CTLD_PID@)
		kill -TERM "$pid"
		for ((i = 0; i < 200; i++)); do
			st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) || break
			[[ $st == Z ]] && break
			sleep 0.05
		done
		echo "$EPOCHREALTIME" >"$rules/stop-ctld.done"
	fi
fi
for f in "$rules/kill-before.$name"*; do
	[[ -f $f ]] || continue
	pat=$(<"$f")
	if has "$@"; then
		rm -f "$f"
		echo "before $*" >"$rules/killed"
		kill -KILL "$PPID"
		exit 137
	fi
done
for f in "$rules/kill-after.$name"*; do
	[[ -f $f ]] || continue
	pat=$(<"$f")
	if has "$@"; then
		rm -f "$f"
		"$real" "$@"
		rc=$?
		echo "after $*" >"$rules/killed"
		kill -KILL "$PPID"
		exit $rc
	fi
done
if [[ -f $rules/fail-once.$name ]]; then
	read -r fid pat <"$rules/fail-once.$name"
	args=("$@")
	hit=-1
	for i in "${!args[@]}"; do
		a=${args[i]}
		list=$a
		[[ $a == JobId=* ]] && list=${a#JobId=}
		if [[ ,$list, == *",$fid,"* ]] && { [[ $a == JobId=* ]] || ((i == 1)); }; then hit=$i; fi
	done
	if ((hit >= 0)) && has "$@"; then
		rm -f "$rules/fail-once.$name"
		echo "$EPOCHREALTIME $*" >"$rules/failed"
		a=${args[hit]}
		prefix=
		[[ $a == JobId=* ]] && prefix=JobId= && a=${a#JobId=}
		rest=$(tr ',' '\n' <<<"$a" | grep -vx "$fid" | paste -sd,)
		rc=0
		if [[ -n $rest ]]; then
			args[hit]=$prefix$rest
			"$real" "${args[@]}" || rc=$?
		fi
		echo "Transient error (injected by the hadar reliability test) for job $fid" >&2
		exit 1
	fi
fi
exec "$real" "$@"
`

// rule arms a shim rule (see shimScript).
func (d *daemon) rule(name, content string) {
	if err := os.WriteFile(filepath.Join(d.shims, "rules", name), []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

func (d *daemon) ruleGone(name string) bool {
	_, err := os.Stat(filepath.Join(d.shims, "rules", name))
	return os.IsNotExist(err)
}

func (d *daemon) start(extraArgs ...string) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		d.t.Fatal("daemon already running")
	}
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "hadar-slurmd"), append([]string{"--config", d.cfgPath}, extraArgs...)...)
	cmd.Dir = d.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "SLURM_CONF="+slurmConf, "HADAR_CONFIG=")
	// If the test binary dies (a -timeout panic), the daemon stops too,
	// ending its leases.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		d.t.Fatal(err)
	}
	logf.Close()
	done := make(chan struct{})
	d.cmd, d.done = cmd, done
	d.starts = append(d.starts, time.Now())
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		d.exit = err
		d.mu.Unlock()
		close(done)
	}()
}

// alive reports whether the daemon runs, and since when.
func (d *daemon) alive() (bool, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return false, time.Time{}
	}
	select {
	case <-d.done:
		return false, time.Time{}
	default:
		return true, d.starts[len(d.starts)-1]
	}
}

// wait waits for the daemon to exit and returns its exit error.
func (d *daemon) wait(timeout time.Duration) (error, bool) {
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	if done == nil {
		return nil, true
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmd, d.done = nil, nil
	return d.exit, true
}

func (d *daemon) signal(sig syscall.Signal) {
	d.mu.Lock()
	cmd := d.cmd
	d.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(sig)
	}
}

// kill9 kills the daemon with SIGKILL and waits for it.
func (d *daemon) kill9() {
	d.t.Helper()
	d.signal(syscall.SIGKILL)
	if _, ok := d.wait(10 * time.Second); !ok {
		d.t.Fatal("daemon did not die on SIGKILL")
	}
}

// term stops the daemon with SIGTERM (fail-open) and returns its exit code.
func (d *daemon) term() int {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	err, ok := d.wait(60 * time.Second)
	if !ok {
		d.signal(syscall.SIGKILL)
		d.wait(10 * time.Second)
		d.t.Fatal("daemon did not stop within 60 s of SIGTERM")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// stop ends the daemon at the end of a test (SIGTERM: hadar's leases end).
func (d *daemon) stop() {
	if ok, _ := d.alive(); !ok {
		d.wait(time.Second)
		return
	}
	d.signal(syscall.SIGTERM)
	if _, ok := d.wait(60 * time.Second); !ok {
		d.signal(syscall.SIGKILL)
		d.wait(10 * time.Second)
	}
}

// log returns the daemon's log entries so far (JSON format). Lines that
// are not JSON are returned as {"raw": line}.
func (d *daemon) log() []logEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.Open(d.logPath)
	if err != nil {
		return d.entries
	}
	defer f.Close()
	if _, err := f.Seek(d.logOff, 0); err != nil {
		return d.entries
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // a partial last line is read next time
		}
		d.logOff += int64(len(line))
		var e logEntry
		if jerr := json.Unmarshal(line, &e); jerr != nil {
			e = logEntry{"raw": string(line)}
		}
		d.entries = append(d.entries, e)
	}
	return d.entries
}

// rounds returns the log's "round" entries (one per finished round).
func (d *daemon) rounds() []logEntry {
	var out []logEntry
	for _, e := range d.log() {
		if e.str("msg") == "round" {
			out = append(out, e)
		}
	}
	return out
}

// waitRounds waits until n more rounds than already logged have finished.
func (d *daemon) waitRounds(n int, timeout time.Duration) bool {
	have := len(d.rounds())
	return e2eutil.WaitFor(timeout, func() bool { return len(d.rounds()) >= have+n })
}

// assertHealthyLog checks the daemon never panicked and wrote only log
// records.
func (d *daemon) assertHealthyLog() {
	d.t.Helper()
	for _, e := range d.log() {
		if raw := e.str("raw"); raw != "" {
			if strings.Contains(raw, "panic") || strings.HasPrefix(raw, "goroutine ") {
				d.t.Errorf("daemon panicked: %s", raw)
				return
			}
		}
	}
}

// stateDB opens the daemon's state database; the caller closes it.
func (d *daemon) stateDB() *e2eutil.StateDB {
	d.t.Helper()
	db, err := e2eutil.OpenStateDB(filepath.Join(d.dir, "data", "state.db"))
	if err != nil {
		d.t.Fatal(err)
	}
	return db
}

// actions returns the daemon's recorded actions.
func (d *daemon) actions() []e2eutil.Action {
	d.t.Helper()
	db := d.stateDB()
	defer db.Close()
	acts, err := db.Actions()
	if err != nil {
		d.t.Fatal(err)
	}
	return acts
}

// dbDecisions returns job -> kinds of the recorded decisions (and reasons).
func (d *daemon) dbDecisions() map[string][]string {
	d.t.Helper()
	db := d.stateDB()
	defer db.Close()
	decisions, err := db.Decisions()
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, dec := range decisions {
		out[dec.Job] = append(out[dec.Job], dec.Kind+": "+dec.Reason)
	}
	return out
}

// shimCalls returns the Slurm commands the daemon ran (from the shims' log).
func (d *daemon) shimCalls() []string {
	b, _ := os.ReadFile(filepath.Join(d.shims, "calls.log"))
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// ---------------------------------------------------------------- stall detector

// stallWatch samples the queue and the nodes every second and measures,
// for each tagged job waiting for hadar, how long it waited while a node hadar
// uses had room for it and the daemon was running (counted from the later
// of the room appearing and the daemon's last start).
type stallWatch struct {
	t     *testing.T
	d     *daemon
	stopC chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	since map[string]time.Time
	worst map[string]time.Duration
	n     int
}

func watchStalls(t *testing.T, d *daemon) *stallWatch {
	w := &stallWatch{t: t, d: d, stopC: make(chan struct{}), done: make(chan struct{}),
		since: map[string]time.Time{}, worst: map[string]time.Duration{}}
	go w.loop()
	return w
}

func (w *stallWatch) loop() {
	defer close(w.done)
	for {
		select {
		case <-w.stopC:
			return
		case <-time.After(time.Second):
		}
		w.sample()
	}
}

func (w *stallWatch) sample() {
	ok, startedAt := w.d.alive()
	queueOut := e2eutil.Run(0, nil, slurm.JobQueryArgs[0], slurm.JobQueryArgs[1:]...)
	nodesOut := e2eutil.Run(0, nil, slurm.NodeQueryArgs[0], slurm.NodeQueryArgs[1:]...)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if queueOut.Err != nil || nodesOut.Err != nil || !ok {
		w.since = map[string]time.Time{}
		return
	}
	w.n++
	jobs, _ := slurm.ParseJobs(strings.NewReader(queueOut.Stdout))
	ns, _ := slurm.ParseNodes(strings.NewReader(nodesOut.Stdout))
	maxFree := 0
	for _, n := range ns {
		if !n.Schedulable() {
			continue
		}
		tot, used := 0, 0
		for _, c := range slurm.GPUsByType(n.Gres) {
			tot += c
		}
		for _, c := range slurm.GPUsByType(n.GresUsed) {
			used += c
		}
		maxFree = max(maxFree, tot-used)
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		if !waitsForHadar(j) || !strings.HasPrefix(j.Comment, "hadar") || gpus(j) == 0 || gpus(j) > maxFree {
			continue
		}
		id := j.ID()
		seen[id] = true
		if _, ok := w.since[id]; !ok {
			s := now
			if startedAt.After(s) {
				s = startedAt
			}
			w.since[id] = s
		}
		if d := now.Sub(w.since[id]); d > w.worst[id] {
			w.worst[id] = d
		}
	}
	for id := range w.since {
		if !seen[id] {
			delete(w.since, id)
		}
	}
}

// stop ends the sampling and returns the longest stall and its job.
func (w *stallWatch) stop() (time.Duration, string, int) {
	close(w.stopC)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var worst time.Duration
	var who string
	for id, d := range w.worst {
		if d > worst {
			worst, who = d, id
		}
	}
	return worst, who, w.n
}

// ---------------------------------------------------------------- misc

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
