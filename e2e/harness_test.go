package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/hadar-sched/hadar/slurm"
)

// The suite's environment, checked once by TestMain.
var (
	enabled    bool
	setupErr   error
	repoRoot   string
	binDir     string
	slurmConf  string // the main (demo layout) cluster
	clusterDir string
)

func TestMain(m *testing.M) {
	if os.Getenv("HADAR_E2E") == "1" {
		enabled = true
		setupErr = setup()
		if setupErr != nil {
			fmt.Fprintln(os.Stderr, "e2e: setup:", setupErr)
		}
	}
	os.Exit(m.Run())
}

func setup() error {
	if os.Geteuid() != 0 {
		return errors.New("the e2e tests need root (they submit jobs and start a second test cluster)")
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repoRoot = filepath.Dir(wd)
	binDir = os.Getenv("HADAR_BIN_DIR")
	if binDir == "" {
		binDir = filepath.Join(repoRoot, "bin")
	}
	for _, b := range []string{"hadar", "hadar-slurmd"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%s not built (run make build, or set HADAR_BIN_DIR): %w", b, err)
		}
	}
	slurmConf = os.Getenv("SLURM_CONF")
	if slurmConf == "" {
		return errors.New("SLURM_CONF is not set: start the test cluster with eval \"$(contrib/testcluster/up)\"")
	}
	clusterDir = filepath.Dir(slurmConf)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "ping").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is UP") {
		return fmt.Errorf("the test cluster of %s does not answer (scontrol ping: %v %s)", slurmConf, err, out)
	}
	return nil
}

// requireE2E skips unless HADAR_E2E=1 and fails if the setup did.
func requireE2E(t *testing.T) {
	t.Helper()
	if !enabled {
		t.Skip("end-to-end test: set HADAR_E2E=1 with a running test cluster (make e2e)")
	}
	if setupErr != nil {
		t.Fatalf("e2e setup: %v", setupErr)
	}
}

// requireDemoLayout skips a test that needs the demo layout's five nodes.
func requireDemoLayout(t *testing.T) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(repoRoot, "contrib", "testcluster", "layouts", "demo.layout"))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(clusterDir, "layout"))
	if err != nil || !bytes.Equal(want, have) {
		t.Fatalf("the cluster of %s is not of the demo layout (%v): start it with contrib/testcluster/up", slurmConf, err)
	}
}

// figure logs a measured figure ("E2E name=value", shown by go test -v).
func figure(t *testing.T, name string, value any) {
	t.Helper()
	t.Logf("E2E %s=%v", name, value)
}

// workDir makes a world-readable work directory under /tmp (jobs read
// and write there). It is removed when the test passes, kept and named
// when it fails (or with HADAR_E2E_KEEP=1).
func workDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hadar-e2e-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("HADAR_E2E_KEEP") == "1" {
			t.Logf("work directory kept: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// cmdResult is what a command printed.
type cmdResult struct {
	Stdout, Stderr string
	Err            error
}

// run runs a command with SLURM_CONF=conf (if not empty) and a timeout.
func run(timeout time.Duration, conf string, env []string, name string, args ...string) cmdResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = os.Environ()
	if conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+conf)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: timed out after %s (%v)", name, strings.Join(args, " "), timeout, err)
	} else if err != nil {
		err = fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return cmdResult{out.String(), errOut.String(), err}
}

// must runs a command that has to succeed and returns its stdout.
func must(t *testing.T, conf string, name string, args ...string) string {
	t.Helper()
	r := run(60*time.Second, conf, nil, name, args...)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r.Stdout
}

func hadarBin() string  { return filepath.Join(binDir, "hadar") }
func daemonBin() string { return filepath.Join(binDir, "hadar-slurmd") }

// hadarJSON runs `hadar args...` on the cluster of conf and decodes its
// JSON output into v.
func hadarJSON(t *testing.T, conf string, v any, args ...string) {
	t.Helper()
	out := must(t, conf, hadarBin(), args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("hadar %s: bad JSON (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// sbatch submits a job and returns its id.
func sbatch(t *testing.T, conf string, args ...string) string {
	t.Helper()
	out := must(t, conf, "sbatch", append([]string{"--parsable", "--chdir", filepath.Join(filepath.Dir(conf), "jobs")}, args...)...)
	id := strings.TrimSpace(strings.Split(out, ";")[0])
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch printed %q", out)
	}
	return id
}

// cancelOnCleanup scancels the jobs when the test ends, whatever happens,
// and waits until they have left the queue (so the next test starts on an
// empty cluster).
func cancelOnCleanup(t *testing.T, conf string, ids *[]string) {
	t.Helper()
	t.Cleanup(func() {
		if len(*ids) == 0 {
			return
		}
		for _, chunk := range chunks(*ids, 50) {
			run(30*time.Second, conf, nil, "scancel", chunk...)
		}
		if err := waitGone(conf, *ids, 60*time.Second); err != nil {
			t.Logf("cleanup: %v\n%s", err, squeueDump(conf))
		}
	})
}

func chunks(ids []string, n int) [][]string {
	var out [][]string
	for len(ids) > n {
		out = append(out, ids[:n])
		ids = ids[n:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}

// queue is squeue's view of some jobs: id -> "STATE REASON NODELIST".
func queue(conf string, ids []string) (map[string][3]string, error) {
	args := []string{"-h", "-o", "%i|%T|%r|%N"}
	if ids != nil {
		if len(ids) == 0 {
			return map[string][3]string{}, nil
		}
		args = append(args, "-j", strings.Join(ids, ","))
	}
	r := run(30*time.Second, conf, nil, "squeue", args...)
	if r.Err != nil {
		if ids != nil && strings.Contains(r.Stderr, "Invalid job id") {
			return map[string][3]string{}, nil // all gone (22.05 says so for a list of finished jobs)
		}
		return nil, r.Err
	}
	out := map[string][3]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if f := strings.Split(line, "|"); len(f) == 4 {
			out[f[0]] = [3]string{f[1], f[2], f[3]}
		}
	}
	return out, nil
}

// waitGone waits until none of ids is in the queue.
func waitGone(conf string, ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		q, err := queue(conf, ids)
		if err == nil && len(q) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, %d jobs still in the queue (err %v)", timeout, len(q), err)
		}
		time.Sleep(time.Second)
	}
}

// waitState waits until every job of ids is in state (e.g. RUNNING).
func waitState(t *testing.T, conf string, ids []string, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		q, err := queue(conf, ids)
		ok := err == nil
		for _, id := range ids {
			if q[id][0] != state {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs %v not all %s after %s (err %v):\n%s", ids, state, timeout, err, squeueDump(conf))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func squeueDump(conf string) string {
	r := run(20*time.Second, conf, nil, "squeue", "-a", "-o", "%.8i %.9P %.24j %.8u %.10T %.8M %.4D %.20R %.40k")
	return r.Stdout + r.Stderr
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// layoutTypes reads a cluster's layout copy: node -> its GPU types with
// counts, in order ("" types for a CPU-only node).
func layoutTypes(t *testing.T, dir string) (order []string, gpus map[string]map[string]int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	gpus = map[string]map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		order = append(order, f[0])
		gpus[f[0]] = map[string]int{}
		for i := 1; i+1 < len(f); i += 2 {
			n, err := strconv.Atoi(f[i+1])
			if err != nil {
				t.Fatalf("layout line %q: %v", line, err)
			}
			gpus[f[0]][f[i]] += n
		}
	}
	return order, gpus
}

// jobcompRecord is one line of Slurm's jobcomp/filetxt log: one per run
// of a job (a requeued job has one for each run).
type jobcompRecord map[string]string

// readJobcomp reads a jobcomp log: job id -> its records, in order.
func readJobcomp(t *testing.T, path string) map[string][]jobcompRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]jobcompRecord{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rec := jobcompRecord{}
		for _, w := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(w, "="); ok {
				rec[k] = v
			}
		}
		if id := rec["JobId"]; id != "" {
			out[id] = append(out[id], rec)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// logLine is one line of hadar-slurmd's text log (log/slog's key=value).
type logLine map[string]string

var reLogfmt = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|\S*)`)

func parseLogLine(s string) logLine {
	l := logLine{}
	for _, m := range reLogfmt.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		l[m[1]] = v
	}
	return l
}

func readLog(t *testing.T, path string) []logLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []logLine
	for _, s := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(s) != "" {
			out = append(out, parseLogLine(s))
		}
	}
	return out
}

// reCommandJobs finds the job list of an scontrol command the daemon logs.
var reCommandJobs = regexp.MustCompile(`^scontrol (?:update JobId=(\S+)|(?:release|hold|requeuehold) (\S+))`)

// jobNumbers returns every job id a log line names: in job=, in the lists
// of jobs=, ids=, sent=, skipped= and refused=, and in the job list of a
// logged scontrol command (not in free text such as reasons, whose numbers
// are GPU counts).
func jobNumbers(l logLine) map[string]bool {
	out := map[string]bool{}
	addList := func(s string) {
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '[' || r == ']' }) {
			out[f] = true
		}
	}
	for _, k := range []string{"job", "ids", "sent", "skipped", "refused"} {
		if v, ok := l[k]; ok {
			addList(v)
		}
	}
	if v, ok := l["jobs"]; ok && strings.ContainsAny(v, "[,") {
		addList(v) // a list; "jobs=16" in a round line is a count
	}
	if m := reCommandJobs.FindStringSubmatch(l["command"]); m != nil {
		addList(m[1] + m[2])
	}
	return out
}

// decisionRow is one stored decision of the daemon's state database.
type decisionRow struct {
	Round               int64
	Job, Kind, From     string
	To, GPUType, Reason string
}

// actionRow is one stored action.
type actionRow struct {
	Round                int64
	Kind, JobIDs, Detail string
	Result, Error        string
}

// roundRow is one stored round.
type roundRow struct {
	Number                  int64
	Observe, Solve, Enforce float64
	Jobs, Tagged, Placed    int
	Migrated                int
	Error                   string
}

// stateDB reads the daemon's state database (read-only).
type stateDB struct{ db *sql.DB }

func openStateDB(t *testing.T, path string) *stateDB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &stateDB{db}
}

func (s *stateDB) decisions(t *testing.T) []decisionRow {
	t.Helper()
	rows, err := s.db.Query(`SELECT round, job_id, kind, from_pl, to_pl, gpu_type, reason FROM decisions ORDER BY round, rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []decisionRow
	for rows.Next() {
		var d decisionRow
		if err := rows.Scan(&d.Round, &d.Job, &d.Kind, &d.From, &d.To, &d.GPUType, &d.Reason); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func (s *stateDB) actions(t *testing.T) []actionRow {
	t.Helper()
	rows, err := s.db.Query(`SELECT round, kind, job_ids, detail, result, error FROM actions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []actionRow
	for rows.Next() {
		var a actionRow
		if err := rows.Scan(&a.Round, &a.Kind, &a.JobIDs, &a.Detail, &a.Result, &a.Error); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func (s *stateDB) rounds(t *testing.T) []roundRow {
	t.Helper()
	rows, err := s.db.Query(`SELECT number, observe_s, solve_s, enforce_s, jobs, tagged, placed, migrated, error FROM rounds ORDER BY number`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []roundRow
	for rows.Next() {
		var r roundRow
		if err := rows.Scan(&r.Number, &r.Observe, &r.Solve, &r.Enforce, &r.Jobs, &r.Tagged, &r.Placed, &r.Migrated, &r.Error); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// placementNodes reads a placement string ("node1:2,node2:2") as nodes.
func placementNodes(s string) []string {
	if s == "" || s == "-" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		n, _, _ := strings.Cut(p, ":")
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// expandNodes expands a Slurm host list ("node[1-2]").
func expandNodes(t *testing.T, s string) []string {
	t.Helper()
	if s == "" || s == "(null)" || s == "None" {
		return nil
	}
	n, err := slurm.ExpandHostlist(s)
	if err != nil {
		t.Fatalf("host list %q: %v", s, err)
	}
	sort.Strings(n)
	return n
}

// writeConfig writes a hadar-slurmd config for a test into dir.
func writeConfig(t *testing.T, dir string, extra string) string {
	t.Helper()
	for _, d := range []string{"data", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`policy = "hadar"
round = "10s"
poll_interval = "2s"
min_round_gap = "2s"
migration_penalty = "5s"
data_dir = %q
spool_dir = %q
[metrics]
listen = ""
%s`, filepath.Join(dir, "data"), filepath.Join(dir, "spool"), extra)
	path := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
