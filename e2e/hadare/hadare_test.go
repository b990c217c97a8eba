package hadare

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

const (
	model    = "lm-bs20" // v100 64.7, p100 58.2, k80 17.1 steps/s on one GPU
	steps    = 3000
	jobUser  = e2eutil.TestUser
	roundLen = 8 * time.Second
)

// env is what the test found and started.
type env struct {
	root, bin, python, conf, clusterDir, work, spool string
	userEnv                                          []string
}

func TestCopies(t *testing.T) {
	if !e2eutil.Enabled() {
		t.Skip("end-to-end test: set HADAR_E2E=1 (needs root, Slurm, python3-torch, python3-sklearn)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the HadarE e2e test needs root (it starts a test cluster)")
	}
	e := setup(t)

	// (a) one job.
	a := e.runJob(t, "a", nil, nil)
	if a.result.Steps < steps {
		t.Fatalf("(a) did %v steps", a.result.Steps)
	}
	// (b) four copies.
	b := e.runJob(t, "b", []string{"--array=0-3"}, nil)
	// (c) four copies and two spares; one copy cancelled, one killed.
	c := e.runJob(t, "c", []string{"--array=0-5"}, e.failures)

	for _, r := range []*run{a, b, c} {
		figure(t, r.name+"_wall_s", fmt.Sprintf("%.1f", r.wall.Seconds()))
		figure(t, r.name+"_accuracy", fmt.Sprintf("%.2f", r.result.Accuracy))
		figure(t, r.name+"_rounds", r.result.Rounds)
		figure(t, r.name+"_tasks_run", len(r.records))
		figure(t, r.name+"_nodes", strings.Join(r.nodes(), ","))
	}
	figure(t, "speedup_b_over_a", fmt.Sprintf("%.2f", a.wall.Seconds()/b.wall.Seconds()))

	if b.wall >= a.wall {
		t.Errorf("(b) copies took %s, not less than (a) one job %s", b.wall, a.wall)
	}
	if b.result.Accuracy < a.result.Accuracy-1 {
		t.Errorf("(b) accuracy %.2f < (a) %.2f - 1", b.result.Accuracy, a.result.Accuracy)
	}
	if n := len(b.nodes()); n != 4 {
		t.Errorf("(b) ran on %d nodes (%v), want 4", n, b.nodes())
	}
	layout, err := e2eutil.ReadLayout(e.clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	if types := b.gpuTypes(layout); len(types) < 3 {
		t.Errorf("(b) ran on GPU types %v, want v100, p100 and k80", types)
	}
	for _, r := range []*run{b, c} {
		if r.result.Steps < steps {
			t.Errorf("(%s) did %v steps of %d", r.name, r.result.Steps, steps)
		}
		if r.maxRunning > 4 {
			t.Errorf("(%s) ran %d copies at once, copies=4", r.name, r.maxRunning)
		}
		if err := r.overlapOnNode(); err != nil {
			t.Errorf("(%s) %v", r.name, err)
		}
	}
	if c.result.Accuracy < 90 {
		t.Errorf("(c) accuracy %.2f", c.result.Accuracy)
	}
	if len(c.records) <= 4 {
		t.Errorf("(c) no replacement copy ran (%d tasks ran)", len(c.records))
	}
	figure(t, "c_replacements", len(c.records)-4)
}

func setup(t *testing.T) *env {
	t.Helper()
	root, err := e2eutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{root: root}
	e.bin = binaries(t, e.root)
	e.python = findPython(t)
	if err := e2eutil.EnsureUser(jobUser); err != nil {
		t.Fatal(err)
	}

	work := e2eutil.WorkDir(t, "hadare")
	e.work, e.spool = work, filepath.Join(work, "spool")
	for _, d := range []string{"data", "out"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(filepath.Join(work, "out"), 0o1777))

	// Our own cluster: its own state dir and ports.
	cluster := e2eutil.TestCluster{Repo: e.root, Layout: "demo",
		Dir: e2eutil.EnvOr("HADAR_E2E_HADARE_DIR", "/tmp/hadar-hadare-tc"), Port: e2eutil.EnvOr("HADAR_E2E_HADARE_PORT", "22000")}
	e.clusterDir = cluster.Dir
	e.conf, _, err = cluster.Up(2 * time.Minute)
	t.Cleanup(func() {
		if err := cluster.Down(time.Minute); err != nil {
			t.Logf("%v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2eutil.CheckLayout(e.root, e.clusterDir, "demo"); err != nil {
		t.Fatalf("%v: stop it with contrib/testcluster/down", err)
	}

	// hadar-slurmd with the hadare policy and short rounds.
	cfg := fmt.Sprintf(`policy = "hadare"
round = "%s"
poll_interval = "1s"
min_round_gap = "1s"
migration_penalty = "5s"
data_dir = %q
spool_dir = %q
[log]
format = "text"
level = "debug"
[metrics]
listen = ""
`, roundLen, filepath.Join(work, "data"), e.spool)
	cfgPath := filepath.Join(work, "hadar.toml")
	must(os.WriteFile(cfgPath, []byte(cfg), 0o600))
	logf, err := os.Create(filepath.Join(work, "hadar-slurmd.log"))
	if err != nil {
		t.Fatal(err)
	}
	d := exec.Command(filepath.Join(e.bin, "hadar-slurmd"), "--config", cfgPath)
	d.Env = append(os.Environ(), "SLURM_CONF="+e.conf)
	d.Stdout, d.Stderr = logf, logf
	d.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- d.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-d.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
	e.userEnv = []string{"SLURM_CONF=" + e.conf, "HADAR=" + filepath.Join(e.bin, "hadar"), "HADAR_SPOOL=" + e.spool,
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/tmp", "PYTHONDONTWRITEBYTECODE=1"}
	// The daemon makes the spool's directories on its first round.
	waitFor(t, 20*time.Second, "the daemon's first round", func() bool {
		_, err := os.Stat(filepath.Join(e.spool, "copies"))
		return err == nil
	})
	return e
}

// run is one training job's run.
type run struct {
	name, id   string
	wall       time.Duration
	result     result
	records    []record
	maxRunning int
}

type result struct {
	Accuracy float64 `json:"accuracy"`
	Steps    float64 `json:"steps"`
	Rounds   int     `json:"rounds"`
	CopyMode bool    `json:"copy_mode"`
}

// runJob submits train_digits.py as the unprivileged user (extra sbatch
// arguments: --array for copies), calls during (if any) while it runs, and
// waits until it has left the queue, checking every half second that no
// two of its tasks run on one node.
func (e *env) runJob(t *testing.T, name string, extra []string, during func(*testing.T, *run)) *run {
	t.Helper()
	tag := fmt.Sprintf("hadar model=%s steps=%d", model, steps)
	if len(extra) > 0 {
		tag = fmt.Sprintf("hadar copies=4 model=%s steps=%d", model, steps)
	}
	output := "%j.out"
	if len(extra) > 0 {
		output = "%A_%a.out"
	}
	args := append([]string{"--chdir", filepath.Join(e.clusterDir, "jobs"), "--gres=gpu:1", "-J", "digits-" + name,
		"--comment=" + tag, "-o", filepath.Join(e.work, "out", output)}, extra...)
	args = append(args, "--wrap", e.python+" "+filepath.Join(e.root, "contrib/examples/hadare/train_digits.py"))
	start := time.Now()
	id, err := e.asUser(30 * time.Second).Sbatch(args...)
	if err != nil {
		t.Fatalf("(%s) sbatch: %v", name, err)
	}
	r := &run{name: name, id: id}
	t.Logf("(%s) job %s: %s", name, r.id, tag)
	t.Cleanup(func() { e2eutil.Run(30*time.Second, e2eutil.SlurmEnv(e.conf), "scancel", r.id) })
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() { watched <- e.watch(r, stop) }()
	if during != nil {
		during(t, r)
	}
	if !e2eutil.WaitEvery(4*time.Minute, 250*time.Millisecond, func() bool { return !e.queued(r.id) }) {
		close(stop)
		t.Fatalf("(%s) job %s still queued after 4 minutes:\n%s", name, r.id, e.squeue(r.id))
	}
	r.wall = time.Since(start)
	close(stop)
	if err := <-watched; err != nil {
		t.Errorf("(%s) %v", name, err)
	}
	if err := json.Unmarshal(readFile(filepath.Join(e.spool, "copies", r.id, "result.json")), &r.result); err != nil {
		t.Fatalf("(%s) no result.json (%v); job output:\n%s", name, err, e.outputs(r.id))
	}
	waitFor(t, 10*time.Second, "jobcomp records", func() bool {
		r.records = e.jobcomp(r.id)
		return len(r.records) > 0
	})
	t.Logf("(%s) job %s: %.1f s, accuracy %.2f, %v steps in %d rounds, tasks %v", name, r.id, r.wall.Seconds(),
		r.result.Accuracy, r.result.Steps, r.result.Rounds, r.records)
	return r
}

// failures, during (c): scancel the copy on node2 in the first round,
// then SIGKILL the python of another copy in the second.
func (e *env) failures(t *testing.T, r *run) {
	sync := filepath.Join(e.spool, "copies", r.id)
	waitFor(t, 90*time.Second, "round 1", func() bool { return exists(filepath.Join(sync, "round-1", "plan.json")) })
	time.Sleep(3 * time.Second)
	victim := ""
	for _, l := range strings.Split(e.squeue(r.id), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == "RUNNING" && f[2] == "node2" {
			victim = r.id + "_" + f[0]
		}
	}
	if victim == "" {
		t.Fatalf("(c) no copy on node2:\n%s", e.squeue(r.id))
	}
	if r := e.asUser(30*time.Second).Run("scancel", victim); r.Err != nil {
		t.Fatalf("scancel %s: %v", victim, r.Err)
	}
	figure(t, "c_cancelled", victim)
	waitFor(t, 90*time.Second, "round 2", func() bool { return exists(filepath.Join(sync, "round-2", "plan.json")) })
	time.Sleep(2 * time.Second)
	var plan struct {
		Members map[string]any `json:"members"`
	}
	_ = json.Unmarshal(readFile(filepath.Join(sync, "round-2", "plan.json")), &plan)
	var idx []string
	for i := range plan.Members {
		idx = append(idx, i)
	}
	sort.Strings(idx)
	for _, i := range idx {
		if r.id+"_"+i == victim {
			continue
		}
		var hb struct {
			PID   int     `json:"pid"`
			At    float64 `json:"at"`
			Phase string  `json:"phase"`
		}
		if json.Unmarshal(readFile(filepath.Join(sync, "alive", "copy-"+i+".json")), &hb) != nil || hb.PID <= 0 || hb.Phase != "train" {
			continue
		}
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", hb.PID)); !strings.Contains(exe, "python") {
			continue
		}
		if err := syscall.Kill(hb.PID, syscall.SIGKILL); err == nil {
			figure(t, "c_killed", r.id+"_"+i)
			return
		}
	}
	t.Errorf("(c) found no copy of round 2 to kill")
}

// watch polls the job's tasks until stop: no two running on one node;
// records the most running at once.
func (e *env) watch(r *run, stop chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		on := map[string]string{}
		n := 0
		for _, l := range strings.Split(e.squeue(r.id), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 || f[1] != "RUNNING" {
				continue
			}
			n++
			if other, dup := on[f[2]]; dup {
				return fmt.Errorf("tasks %s and %s of job %s run on %s at once", other, f[0], r.id, f[2])
			}
			on[f[2]] = f[0]
		}
		r.maxRunning = max(r.maxRunning, n)
	}
}

// record is one finished run of a task (jobcomp).
type record struct {
	Task, State, Node string
	Start, End        time.Time
}

func (rc record) String() string { return rc.Task + ":" + rc.State + "@" + rc.Node }

func (r *run) nodes() []string {
	seen := map[string]bool{}
	var out []string
	for _, rc := range r.records {
		if !seen[rc.Node] && rc.Node != "" && rc.Node != "(null)" {
			seen[rc.Node] = true
			out = append(out, rc.Node)
		}
	}
	sort.Strings(out)
	return out
}

// gpuTypes returns the GPU types of the nodes the job's tasks ran on.
func (r *run) gpuTypes(layout e2eutil.Layout) []string {
	types := map[string]bool{}
	for _, n := range r.nodes() {
		for ty := range layout.GPUs[n] {
			types[ty] = true
		}
	}
	return slices.Sorted(maps.Keys(types))
}

// overlapOnNode checks, from Slurm's records, that no two runs of the
// job's tasks overlapped in time on one node.
func (r *run) overlapOnNode() error {
	for i, a := range r.records {
		for _, b := range r.records[i+1:] {
			if a.Node == b.Node && a.Node != "" && a.Start.Before(b.End) && b.Start.Before(a.End) {
				return fmt.Errorf("tasks %s and %s ran on %s at once (%s-%s, %s-%s)", a.Task, b.Task, a.Node,
					a.Start.Format("15:04:05"), a.End.Format("15:04:05"), b.Start.Format("15:04:05"), b.End.Format("15:04:05"))
			}
		}
	}
	return nil
}

// jobcomp reads the cluster's finished-job records of job or array id
// (none before Slurm has written its log).
func (e *env) jobcomp(id string) []record {
	var out []record
	recs, _ := e2eutil.ReadJobcomp(e2eutil.JobcompLog(e.clusterDir))
	for _, kv := range recs {
		task := ""
		switch {
		case kv["ArrayJobId"] == id:
			task = id + "_" + kv["ArrayTaskId"]
		case kv["JobId"] == id && (kv["ArrayJobId"] == "" || kv["ArrayJobId"] == "4294967294"):
			task = id
		default:
			continue
		}
		ts := func(s string) time.Time {
			t, _ := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
			return t
		}
		out = append(out, record{Task: task, State: kv["JobState"], Node: kv["NodeList"], Start: ts(kv["StartTime"]), End: ts(kv["EndTime"])})
	}
	return out
}

func (e *env) queued(id string) bool { return strings.TrimSpace(e.squeue(id)) != "" }

// squeue lists the job's tasks: "TASK STATE NODE" lines (and squeue's
// complaint, if any).
func (e *env) squeue(id string) string {
	return e2eutil.Run(30*time.Second, e2eutil.SlurmEnv(e.conf), "squeue", "-h", "-r", "-j", id, "-o", "%K %T %N").Output()
}

func (e *env) outputs(id string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(e.work, "out", id+"[._]*out"))
	for _, f := range files {
		fmt.Fprintf(&b, "== %s\n%s", f, readFile(f))
	}
	return b.String()
}

// asUser runs commands as the unprivileged user, with the environment of
// the jobs.
func (e *env) asUser(timeout time.Duration) e2eutil.Cmd {
	return e2eutil.Cmd{Timeout: timeout, User: jobUser, UserEnv: e.userEnv}
}

// binaries returns the directory of hadar and hadar-slurmd: HADAR_BIN_DIR,
// else the repository's bin/ when both are built, else a fresh build.
func binaries(t *testing.T, root string) string {
	t.Helper()
	dir := os.Getenv("HADAR_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(root, "bin")
		if e2eutil.FindBinaries(dir) == nil {
			return dir
		}
		dir = t.TempDir()
		must(os.Chmod(dir, 0o755))
		if err := e2eutil.BuildBinaries(root, dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := e2eutil.FindBinaries(dir); err != nil {
		t.Fatalf("in %s: %v", dir, err)
	}
	return dir
}

// findPython returns a python3 that imports torch and sklearn
// (e2eutil.FindPython).
func findPython(t *testing.T) string {
	t.Helper()
	p, err := e2eutil.FindPython("torch, sklearn.datasets")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor waits for cond (checked every 200 ms) and ends the test if it
// does not hold within timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !e2eutil.WaitFor(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// figure logs a measured figure, and prints it so that it shows without
// go test -v too.
func figure(t *testing.T, name string, v any) {
	t.Helper()
	e2eutil.Figure(t, name, v)
	fmt.Printf("E2E %s=%v\n", name, v)
}

func readFile(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
