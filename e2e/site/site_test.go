package site

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

var (
	repo, binDir, conf string
	clusterEnv         []string
)

func TestMain(m *testing.M) {
	if !e2eutil.Enabled() {
		fmt.Println("e2e/site: skipped (HADAR_E2E=1 runs it)")
		os.Exit(m.Run())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/site:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// run starts the accounting test cluster, runs the tests and stops it; or,
// with HADAR_E2E_SITE_CONF set, runs them on the running cluster of that
// slurm.conf and leaves it running.
func run(m *testing.M) (int, error) {
	var err error
	if repo, err = e2eutil.RepoRoot(); err != nil {
		return 0, err
	}
	binDir = e2eutil.EnvOr("HADAR_BIN_DIR", filepath.Join(repo, "bin"))
	if err := e2eutil.FindBinaries(binDir); err != nil {
		return 0, err
	}
	if existing := os.Getenv("HADAR_E2E_SITE_CONF"); existing != "" {
		conf = existing
		users := e2eutil.Run(time.Minute, e2eutil.SlurmEnv(conf), "sacctmgr", "-n", "-P", "show", "user", "format=user")
		if err := siteUsers(users.Stdout, users.Err); err != nil {
			return 0, fmt.Errorf("the cluster of HADAR_E2E_SITE_CONF=%s: %w", conf, err)
		}
		return m.Run(), nil
	}
	clusterEnv = []string{"HADAR_CLUSTER_DIR=" + e2eutil.EnvOr("HADAR_E2E_ACCT_DIR", "/tmp/hadar-e2e-acct"),
		"HADAR_CLUSTER_PORT=" + e2eutil.EnvOr("HADAR_E2E_ACCT_PORT", "24000"), "HADAR_CLUSTER_LAYOUT=demo"}
	up := e2eutil.Run(5*time.Minute, clusterEnv, filepath.Join(repo, "contrib", "testcluster", "up"), "--accounting")
	if up.Err != nil {
		return 0, fmt.Errorf("accounting cluster up: %w\n%s", up.Err, up.Stderr)
	}
	if conf, err = e2eutil.ParseUpOutput(up.Stdout); err != nil {
		return 0, err
	}
	code := m.Run()
	if down := e2eutil.Run(2*time.Minute, clusterEnv, filepath.Join(repo, "contrib", "testcluster", "down")); down.Err != nil {
		fmt.Fprintln(os.Stderr, "e2e/site: cluster down:", down.Err)
	}
	return code, nil
}

// siteUsers checks sacctmgr's list of users (one a line) for the site's:
// the suite needs the accounts of contrib/testcluster/up --accounting.
func siteUsers(out string, err error) error {
	if err != nil {
		return fmt.Errorf("no accounting (sacctmgr show user): %w", err)
	}
	have := map[string]bool{}
	for _, u := range strings.Fields(out) {
		have[u] = true
	}
	for _, u := range []string{"alice", "bob"} {
		if !have[u] {
			return fmt.Errorf("no user %s in its accounting (up --accounting makes alice and bob)", u)
		}
	}
	return nil
}

func requireE2E(t *testing.T) {
	t.Helper()
	if !e2eutil.Enabled() {
		t.Skip("HADAR_E2E=1 runs the end-to-end tests")
	}
}

// as runs Slurm commands as a user of the site (root: "").
func as(user string) e2eutil.Cmd {
	c := e2eutil.Cmd{Timeout: time.Minute, Env: e2eutil.SlurmEnv(conf), Dir: "/tmp"}
	if user != "" {
		c.User, c.UserEnv = user, []string{"SLURM_CONF=" + conf}
	}
	return c
}

func mustRun(t *testing.T, c e2eutil.Cmd, name string, args ...string) string {
	t.Helper()
	return c.Run(name, args...).Must(t)
}

// submit submits n jobs as user (tagged for hadar or not) and returns
// their ids.
func submit(t *testing.T, user string, n int, tagged bool, args ...string) []string {
	t.Helper()
	var ids []string
	for range n {
		a := append([]string{"-o", "/dev/null", "-J", "site-" + user}, args...)
		if tagged {
			a = append(a, "--comment=hadar model=resnet50-bs64")
		}
		id, err := as(user).Sbatch(a...)
		if err != nil {
			t.Fatalf("sbatch as %s: %v", user, err)
		}
		ids = append(ids, id)
	}
	t.Cleanup(func() { as("").Run("scancel", ids...) })
	return ids
}

// startDaemon runs hadar-slurmd against the cluster until the test ends.
func startDaemon(t *testing.T) string {
	t.Helper()
	dir := e2eutil.WorkDir(t, "site")
	for _, d := range []string{"data", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "hadar.toml")
	text := fmt.Sprintf("policy = \"hadar\"\nround = \"10s\"\npoll_interval = \"2s\"\nmin_round_gap = \"2s\"\n"+
		"launch_timeout = \"30s\"\ndata_dir = %q\nspool_dir = %q\n[metrics]\nlisten = \"\"\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "spool"))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	d := exec.Command(filepath.Join(binDir, "hadar-slurmd"), "--config", cfg)
	d.Env = append(os.Environ(), "SLURM_CONF="+conf, "HADAR_CONFIG=")
	d.Stdout, d.Stderr = log, log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(os.Interrupt)
		d.Wait()
		log.Close()
	})
	return dir
}

// record is one job as sacct shows it: its last run, and how often Slurm
// requeued it (REQUEUED records of sacct -D).
type record struct {
	id, user, state  string
	start, end       time.Time
	requeues         int
	started, stopped bool
}

// accounting reads the jobs' records with sacct -D.
func accounting(t *testing.T, ids []string) map[string]*record {
	t.Helper()
	out := mustRun(t, as(""), "sacct", "-n", "-P", "-X", "-D", "-j", strings.Join(ids, ","),
		"--format=JobID,User,State,Start,End")
	recs := map[string]*record{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			continue
		}
		r := recs[f[0]]
		if r == nil {
			r = &record{id: f[0], user: f[1]}
			recs[f[0]] = r
		}
		if strings.HasPrefix(f[2], "REQUEUED") {
			r.requeues++
			continue
		}
		r.state = f[2]
		if s, err := time.ParseInLocation("2006-01-02T15:04:05", f[3], time.Local); err == nil {
			r.start, r.started = s, true
		}
		if e, err := time.ParseInLocation("2006-01-02T15:04:05", f[4], time.Local); err == nil {
			r.end, r.stopped = e, true
		}
	}
	return recs
}

// waitDone waits until none of ids is in the queue.
func waitDone(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	if err := e2eutil.WaitGone(conf, ids, timeout); err != nil {
		q, _ := e2eutil.Queue(conf, nil)
		t.Fatalf("jobs not done after %s: %v\nqueue: %v", timeout, err, q)
	}
}

// setNodes drains (or resumes) nodes.
func setNodes(t *testing.T, nodes string, drain bool) {
	t.Helper()
	if drain {
		mustRun(t, as(""), "scontrol", "update", "NodeName="+nodes, "State=DRAIN", "Reason=e2e-site")
		return
	}
	mustRun(t, as(""), "scontrol", "update", "NodeName="+nodes, "State=RESUME")
}

// priorities are the jobs' priorities as squeue shows them (%Q).
func priorities(t *testing.T, ids []string) map[string]int64 {
	t.Helper()
	out := mustRun(t, as(""), "squeue", "-h", "-j", strings.Join(ids, ","), "-o", "%i|%Q")
	p := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if id, v, ok := strings.Cut(line, "|"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			p[id] = n
		}
	}
	return p
}

// The site's fairshare decides who starts first. bob's account has used
// the cluster, so his jobs' priority is below alice's; with 8 GPUs free,
// his ten tagged jobs submitted first and alice's ten submitted after, the
// first eight to start must be alice's, as under Slurm alone (measured
// there: alice's 8 first). hadar used to start them in submission order:
// bob's first. Tagged jobs show their real priority while they wait.
func TestFairshareOrderKept(t *testing.T) {
	requireE2E(t)
	for _, u := range []string{"alice", "bob"} {
		if err := e2eutil.EnsureUser(u); err != nil {
			t.Fatal(err)
		}
	}
	setNodes(t, "node[3-5]", true)
	t.Cleanup(func() { setNodes(t, "node[3-5]", false) })

	// bob's usage: eight GPUs for 40 s.
	usage := submit(t, "bob", 8, false, "--gres=gpu:1", "--wrap", "sleep 40")
	waitDone(t, usage, 3*time.Minute)
	ok := e2eutil.WaitEvery(3*time.Minute, 5*time.Second, func() bool {
		out := as("").Run("sshare", "-n", "-P", "-a", "-o", "User,FairShare").Stdout
		fs := map[string]float64{}
		for _, line := range strings.Split(out, "\n") {
			if u, v, ok := strings.Cut(strings.TrimSpace(line), "|"); ok && (u == "alice" || u == "bob") {
				fs[u], _ = strconv.ParseFloat(v, 64)
			}
		}
		return fs["alice"] > fs["bob"]
	})
	if !ok {
		t.Fatalf("bob's fairshare never fell below alice's:\n%s", as("").Run("sshare", "-a", "-l").Output())
	}

	startDaemon(t)
	blockers := submit(t, "", 8, false, "--gres=gpu:1", "--wrap", "sleep 25")
	bob := submit(t, "bob", 10, true, "--gres=gpu:1", "--wrap", "sleep 20")
	alice := submit(t, "alice", 10, true, "--gres=gpu:1", "--wrap", "sleep 20")

	// While they wait, squeue shows the site's priority of every tagged job.
	var prio map[string]int64
	e2eutil.WaitEvery(90*time.Second, 2*time.Second, func() bool {
		prio = priorities(t, append(append([]string(nil), bob...), alice...))
		return prio[alice[0]] > prio[bob[0]] && prio[bob[0]] > 0
	})
	if prio[alice[0]] <= prio[bob[0]] || prio[bob[0]] <= 0 {
		t.Errorf("waiting tagged jobs' priorities: alice %d, bob %d; want both shown, alice's higher", prio[alice[0]], prio[bob[0]])
	}
	all := append(append(append([]string(nil), blockers...), bob...), alice...)
	waitDone(t, all, 5*time.Minute)

	recs := accounting(t, append(append([]string(nil), bob...), alice...))
	var order []*record
	for _, r := range recs {
		if !r.started {
			t.Fatalf("job %s never started: %+v", r.id, r)
		}
		order = append(order, r)
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].start.Before(order[b].start) })
	firstWave := 0
	for _, r := range order[:8] {
		if r.user == "alice" {
			firstWave++
		}
	}
	var seq []string
	for _, r := range order {
		seq = append(seq, r.user+"@"+r.start.Format("15:04:05"))
	}
	e2eutil.Figure(t, "fairshare_first_wave_alice", firstWave)
	if firstWave < 8 {
		t.Errorf("%d of the first 8 jobs to start are alice's, want 8 (the site's fairshare order); start order: %v", firstWave, seq)
	}
}

// A user over his QOS limit: bob may hold 4 GPUs (QOS gpu4), he submits
// eight 1-GPU jobs, alice fourteen. Slurm alone runs 18 at once, bob's
// other 4 pending QOSMaxGRESPerUser. hadar must do the same: no GPU idles
// more than a round while an eligible job waits, no job is requeued, and
// the makespan is no worse than Slurm alone's (measured here first).
// hadar used to place all eight of bob's jobs, four pended on GPUs alice's
// jobs waited for, and its re-placements requeued runs.
func TestQOSLimitPredicted(t *testing.T) {
	requireE2E(t)
	for _, u := range []string{"alice", "bob"} {
		if err := e2eutil.EnsureUser(u); err != nil {
			t.Fatal(err)
		}
	}
	const run = 40 * time.Second
	workload := func(tagged bool) (ids []string, makespan time.Duration, maxRunning int) {
		start := time.Now()
		bob := submit(t, "bob", 8, tagged, "--qos=gpu4", "--gres=gpu:1", "--wrap", fmt.Sprintf("sleep %d", int(run.Seconds())))
		alice := submit(t, "alice", 14, tagged, "--gres=gpu:1", "--wrap", fmt.Sprintf("sleep %d", int(run.Seconds())))
		ids = append(append(ids, bob...), alice...)
		e2eutil.WaitEvery(6*time.Minute, time.Second, func() bool {
			q, err := e2eutil.Queue(conf, ids)
			if err != nil {
				return false
			}
			running := 0
			for _, j := range q {
				if j.State == "RUNNING" {
					running++
				}
			}
			maxRunning = max(maxRunning, running)
			return len(q) == 0
		})
		waitDone(t, ids, time.Minute)
		recs := accounting(t, ids)
		var last time.Time
		for _, r := range recs {
			if r.end.After(last) {
				last = r.end
			}
		}
		return ids, last.Sub(start.Truncate(time.Second)), maxRunning
	}
	_, alone, aloneMax := workload(false)
	e2eutil.Figure(t, "qos_slurm_alone_makespan_s", alone.Seconds())

	startDaemon(t)
	ids, hadar, hadarMax := workload(true)
	e2eutil.Figure(t, "qos_hadar_makespan_s", hadar.Seconds())
	e2eutil.Figure(t, "qos_max_running", fmt.Sprintf("hadar %d, Slurm alone %d", hadarMax, aloneMax))
	if hadarMax < 18 {
		t.Errorf("at most %d jobs ran at once under hadar, want 18 (bob's limit of 4 and alice's 14; Slurm alone: %d)", hadarMax, aloneMax)
	}
	for _, r := range accounting(t, ids) {
		if r.requeues > 0 {
			t.Errorf("job %s (%s) was requeued %d times", r.id, r.user, r.requeues)
		}
	}
	// A round (10 s) of slack for hadar's first placement.
	if hadar > alone+15*time.Second {
		t.Errorf("makespan under hadar %s, under Slurm alone %s: want no worse (within a round)", hadar, alone)
	}
}

// A maintenance reservation on node1 and node2 (the v100s) that starts in
// a minute: tagged jobs with --time=5 would run into it, so Slurm would not
// start them there. hadar must place them elsewhere at once (before, it
// pinned them to node1 round after round while other GPUs idled, until the
// reservation began).
func TestReservationRespected(t *testing.T) {
	requireE2E(t)
	if err := e2eutil.EnsureUser("alice"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, as(""), "scontrol", "create", "reservation", "ReservationName=e2e_maint", "StartTime=now+60",
		"Duration=10", "Nodes=node[1-2]", "Users=root", "Flags=maint")
	t.Cleanup(func() { as("").Run("scontrol", "delete", "ReservationName=e2e_maint") })
	startDaemon(t)
	ids := submit(t, "alice", 8, true, "--time=5", "--gres=gpu:1", "--wrap", "sleep 20")
	var q map[string]e2eutil.QueuedJob
	ok := e2eutil.WaitEvery(40*time.Second, time.Second, func() bool {
		var err error
		if q, err = e2eutil.Queue(conf, ids); err != nil {
			return false
		}
		running := 0
		for _, j := range q {
			if j.State == "RUNNING" {
				running++
			}
		}
		return running == len(ids)
	})
	for id, j := range q {
		if j.Nodes == "node1" || j.Nodes == "node2" {
			t.Errorf("job %s runs on %s, in the reservation ahead", id, j.Nodes)
		}
	}
	if !ok {
		t.Errorf("not all 8 jobs run 40 s after submission, with 12 GPUs free outside the reservation: %v", q)
	}
}
