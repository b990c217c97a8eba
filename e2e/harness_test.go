package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
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
	if e2eutil.Enabled() {
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
	var err error
	if repoRoot, err = e2eutil.RepoRoot(); err != nil {
		return err
	}
	binDir = e2eutil.EnvOr("HADAR_BIN_DIR", filepath.Join(repoRoot, "bin"))
	if err := e2eutil.FindBinaries(binDir); err != nil {
		return fmt.Errorf("%w (run make build, or set HADAR_BIN_DIR)", err)
	}
	slurmConf = os.Getenv("SLURM_CONF")
	if slurmConf == "" {
		return errors.New("SLURM_CONF is not set: start the test cluster with eval \"$(contrib/testcluster/up)\"")
	}
	clusterDir = filepath.Dir(slurmConf)
	r := e2eutil.Run(15*time.Second, nil, "scontrol", "ping")
	if r.Err != nil || !strings.Contains(r.Stdout, "is UP") {
		return fmt.Errorf("the test cluster of %s does not answer (scontrol ping: %v %s)", slurmConf, r.Err, r.Output())
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

// requireDemoLayout fails a test that needs the demo layout's five nodes
// on a cluster of another layout.
func requireDemoLayout(t *testing.T) {
	t.Helper()
	if err := e2eutil.CheckLayout(repoRoot, clusterDir, "demo"); err != nil {
		t.Fatalf("%v: start it with contrib/testcluster/up", err)
	}
}

// must runs a command on the cluster of conf that has to succeed within
// a minute and returns its stdout.
func must(t *testing.T, conf string, name string, args ...string) string {
	t.Helper()
	return e2eutil.Run(60*time.Second, e2eutil.SlurmEnv(conf), name, args...).Must(t)
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

// sbatch submits a job from the cluster's jobs directory and returns its id.
func sbatch(t *testing.T, conf string, args ...string) string {
	t.Helper()
	c := e2eutil.Cmd{Timeout: 60 * time.Second, Env: e2eutil.SlurmEnv(conf)}
	id, err := c.Sbatch(append([]string{"--chdir", filepath.Join(filepath.Dir(conf), "jobs")}, args...)...)
	if err != nil {
		t.Fatal(err)
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
		for chunk := range slices.Chunk(*ids, 50) {
			e2eutil.Run(30*time.Second, e2eutil.SlurmEnv(conf), "scancel", chunk...)
		}
		if err := e2eutil.WaitGone(conf, *ids, 60*time.Second); err != nil {
			t.Logf("cleanup: %v\n%s", err, squeueDump(conf))
		}
	})
}

// waitState waits until every job of ids is in state (e.g. RUNNING).
func waitState(t *testing.T, conf string, ids []string, state string, timeout time.Duration) {
	t.Helper()
	var err error
	if !e2eutil.WaitEvery(timeout, 500*time.Millisecond, func() bool {
		var q map[string]e2eutil.QueuedJob
		if q, err = e2eutil.Queue(conf, ids); err != nil {
			return false
		}
		for _, id := range ids {
			if q[id].State != state {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("jobs %v not all %s after %s (err %v):\n%s", ids, state, timeout, err, squeueDump(conf))
	}
}

func squeueDump(conf string) string {
	return e2eutil.Run(20*time.Second, e2eutil.SlurmEnv(conf), "squeue", "-a", "-o", "%.8i %.9P %.24j %.8u %.10T %.8M %.4D %.20R %.40k").Output()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return lastLines(string(b), n)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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

// openStateDB opens a daemon's state database for the rest of the test.
func openStateDB(t *testing.T, path string) *e2eutil.StateDB {
	t.Helper()
	db, err := e2eutil.OpenStateDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
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
