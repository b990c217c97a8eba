package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
	"github.com/hadar-sched/hadar/slurm"
)

// statusJSON is `hadar status --json`.
type statusJSON struct {
	Nodes []struct {
		Name        string                               `json:"name"`
		State       string                               `json:"state"`
		GPUs        map[string]struct{ Total, Used int } `json:"gpus"`
		Schedulable bool                                 `json:"schedulable"`
	} `json:"nodes"`
	Jobs []struct {
		ID        string `json:"id"`
		User      string `json:"user"`
		State     string `json:"state"`
		Reason    string `json:"reason"`
		Tagged    bool   `json:"tagged"`
		Model     string `json:"model"`
		TagError  string `json:"tag_error"`
		GPUs      int    `json:"gpus"`
		Placement []struct {
			Node string `json:"node"`
			Type string `json:"type"`
			GPUs int    `json:"gpus"`
		} `json:"placement"`
	} `json:"jobs"`
}

// wantJob is what status must say of one job.
type wantJob struct {
	state, reason string
	tagged        bool
	model         string
	tagError      bool
	gpus          int
	nodes         string // "node1" or "" (pending)
	placeType     string // the placement's GPU type ("" for none or several)
}

// checkStatus compares `hadar status --json` with what the test set up:
// every node of the layout with its GPU types (site names), totals and the
// GPUs the test's jobs hold; every job in the queue.
func checkStatus(t *testing.T, conf, dir string, used map[string]map[string]int, states map[string]string, jobs map[string]wantJob) {
	t.Helper()
	var st statusJSON
	hadarJSON(t, conf, &st, "status", "--json")
	layout, err := e2eutil.ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	order := layout.Nodes
	var got []string
	for _, n := range st.Nodes {
		got = append(got, n.Name)
		want, ok := layout.GPUs[n.Name]
		if !ok {
			t.Errorf("status lists node %s, which is not in the layout", n.Name)
			continue
		}
		if len(n.GPUs) != len(want) {
			t.Errorf("node %s: GPU types %v, want %v", n.Name, n.GPUs, want)
		}
		for ty, total := range want {
			g, ok := n.GPUs[ty]
			if !ok || g.Total != total || g.Used != used[n.Name][ty] {
				t.Errorf("node %s, type %s: %+v (present %v), want total %d used %d", n.Name, ty, g, ok, total, used[n.Name][ty])
			}
		}
		if ws := states[n.Name]; n.State != ws {
			t.Errorf("node %s: state %q, want %q", n.Name, n.State, ws)
		}
		if sched := n.State != "drained" && n.State != "draining"; n.Schedulable != sched {
			t.Errorf("node %s (%s): schedulable %v", n.Name, n.State, n.Schedulable)
		}
	}
	sort.Strings(got)
	sort.Strings(order)
	if strings.Join(got, ",") != strings.Join(order, ",") {
		t.Errorf("status nodes %v, want every node of the layout %v", got, order)
	}

	// Every job of the queue, and right about ours.
	q, err := e2eutil.Queue(conf, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, j := range st.Jobs {
		seen[j.ID] = true
		if _, ok := q[j.ID]; !ok {
			t.Errorf("status lists job %s, which squeue does not", j.ID)
		}
		w, ok := jobs[j.ID]
		if !ok {
			continue
		}
		var nodes []string
		for _, p := range j.Placement {
			nodes = append(nodes, p.Node)
			if p.Type != w.placeType || p.GPUs != w.gpus {
				t.Errorf("job %s: placement %+v, want type %q with %d GPUs", j.ID, p, w.placeType, w.gpus)
			}
		}
		if j.State != w.state || (w.reason != "" && j.Reason != w.reason) || j.Tagged != w.tagged || j.Model != w.model ||
			(j.TagError != "") != w.tagError || j.GPUs != w.gpus || strings.Join(nodes, ",") != w.nodes {
			t.Errorf("job %s: %+v, want %+v", j.ID, j, w)
		}
	}
	for id := range q {
		if !seen[id] {
			t.Errorf("squeue lists job %s, status does not", id)
		}
	}
	for id := range jobs {
		if !seen[id] {
			t.Errorf("status lacks job %s", id)
		}
	}

	// The table form names every node and job too.
	text := must(t, conf, hadarBin(), "status")
	for _, n := range order {
		if !strings.Contains(text, n) {
			t.Errorf("hadar status (table) lacks node %s", n)
		}
	}
}

// TestStatusDemoLayout: status on the demo layout with untagged jobs
// holding GPUs (untyped and typed), a CPU-only job, a tagged job on a lease, a
// tagged job with a bad tag and a pending untagged job.
func TestStatusDemoLayout(t *testing.T) {
	requireE2E(t)
	requireDemoLayout(t)
	if err := e2eutil.WaitGone(slurmConf, nil, 60*time.Second); err != nil {
		t.Fatalf("the cluster is not idle: %v\n%s", err, squeueDump(slurmConf))
	}
	var ids []string
	cancelOnCleanup(t, slurmConf, &ids)
	sub := func(args ...string) string {
		id := sbatch(t, slurmConf, append([]string{"-J", "e2e-status", "-o", "/dev/null"}, args...)...)
		ids = append(ids, id)
		return id
	}
	a := sub("--gres=gpu:2", "-w", "node1", "--wrap", "sleep 300")
	b := sub("--gres=gpu:v100:1", "-w", "node2", "--wrap", "sleep 300")
	d := sub("-w", "node3", "--wrap", "sleep 300")
	c := sub(`--comment=hadar model="ResNet-50 (batch size 64)" steps=100`, "--gres=gpu:1", "--wrap", "sleep 300")
	g := sub("--nodes=2", "--comment=hadar model=resnet18-bs128 steps=100", "--gres=gpu:4", "--wrap", "sleep 300")
	f := sub("--comment=hadar steps=-1", "--gres=gpu:1", "--wrap", "sleep 300")
	e := sub("--gres=gpu:4", "--begin=now+3600", "--wrap", "sleep 300")
	waitState(t, slurmConf, []string{a, b, d}, "RUNNING", 60*time.Second)

	checkStatus(t, slurmConf, clusterDir,
		map[string]map[string]int{"node1": {"v100": 2}, "node2": {"v100": 1}},
		map[string]string{"node1": "mixed", "node2": "mixed", "node3": "mixed", "node4": "idle", "node5": "idle"},
		map[string]wantJob{
			a: {state: "RUNNING", gpus: 2, nodes: "node1", placeType: "v100"},
			b: {state: "RUNNING", gpus: 1, nodes: "node2", placeType: "v100"},
			d: {state: "RUNNING", gpus: 0, nodes: "node3", placeType: "p100"},
			c: {state: "PENDING", reason: "BeginTime", tagged: true, model: "ResNet-50 (batch size 64)", gpus: 1},
			g: {state: "PENDING", reason: "BeginTime", tagged: true, model: "resnet18-bs128", gpus: 8},
			f: {state: "PENDING", reason: "BeginTime", tagged: true, tagError: true, gpus: 1},
			e: {state: "PENDING", reason: "BeginTime", gpus: 4},
		})

	// explain: the quoted model resolves; the two-node job is a waiting
	// gang of 8 GPUs; the bad tag is passed through.
	var ex struct {
		Class, Model, Summary string
		GPUs, Nodes           int
	}
	hadarJSON(t, slurmConf, &ex, "explain", "--json", c)
	if ex.Class != "waiting" || ex.Model != "ResNet-50 (batch size 64)" {
		t.Errorf("explain %s: %+v", c, ex)
	}
	hadarJSON(t, slurmConf, &ex, "explain", "--json", g)
	if ex.Class != "waiting" || ex.GPUs != 8 || ex.Nodes != 2 || ex.Summary == "" {
		t.Errorf("explain %s: %+v", g, ex)
	}
	e2eutil.Figure(t, "explain_two_node_job", fmt.Sprintf("%q", ex.Summary))
	hadarJSON(t, slurmConf, &ex, "explain", "--json", f)
	if ex.Class != "pass-through" || !strings.HasPrefix(ex.Summary, "passed through") {
		t.Errorf("explain %s: %+v", f, ex)
	}
}

// TestStatusSiteLayout starts a second test cluster of the site layout
// (its own state dir and port) and checks status there: site GRES type
// names, a node with two GPU types, a CPU-only node, a drained node, GPUs
// held by untagged jobs. plan and explain run there too.
func TestStatusSiteLayout(t *testing.T) {
	requireE2E(t)
	site := e2eutil.TestCluster{Repo: repoRoot, Layout: "site",
		Dir: e2eutil.EnvOr("HADAR_E2E_SITE_DIR", "/tmp/hadar-e2e-site"), Port: e2eutil.EnvOr("HADAR_E2E_SITE_PORT", "23000")}
	dir := site.Dir
	conf, _, err := site.Up(3 * time.Minute)
	t.Cleanup(func() {
		if err := site.Down(90 * time.Second); err != nil {
			t.Errorf("down of the site cluster: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("up of the site cluster: %v", err)
	}
	var ids []string
	cancelOnCleanup(t, conf, &ids)
	must(t, conf, "scontrol", "update", "NodeName=gpu-a100-01", "State=DRAIN", "Reason=e2e")
	sub := func(args ...string) string {
		id := sbatch(t, conf, append([]string{"-J", "e2e-site", "-o", "/dev/null"}, args...)...)
		ids = append(ids, id)
		return id
	}
	v := sub("--gres=gpu:4", "-w", "gpu-v100-01", "--wrap", "sleep 300")
	m := sub("--gres=gpu:NVlink_A100_40GB:1", "-w", "gpu-mix-01", "--wrap", "sleep 300")
	c := sub("-w", "cpu-01", "--wrap", "sleep 300")
	h := sub("--comment=hadar model=resnet50-bs64 steps=100", "--gres=gpu:2", "--wrap", "sleep 300")
	waitState(t, conf, []string{v, m, c}, "RUNNING", 60*time.Second)

	const v100, a100 = "tesla_v100-sxm2-32gb", "NVlink_A100_40GB"
	checkStatus(t, conf, dir,
		map[string]map[string]int{"gpu-v100-01": {v100: 4}, "gpu-mix-01": {a100: 1}},
		map[string]string{"gpu-v100-01": "mixed", "gpu-v100-02": "idle", "gpu-a100-01": "drained", "gpu-mix-01": "mixed", "cpu-01": "mixed"},
		map[string]wantJob{
			v: {state: "RUNNING", gpus: 4, nodes: "gpu-v100-01", placeType: v100},
			m: {state: "RUNNING", gpus: 1, nodes: "gpu-mix-01", placeType: ""},
			c: {state: "RUNNING", gpus: 0, nodes: "cpu-01", placeType: ""},
			h: {state: "PENDING", reason: "BeginTime", tagged: true, model: "resnet50-bs64", gpus: 2},
		})

	// plan: the site's names resolve; the drained and the CPU-only node are
	// not planned on, nor, before Slurm 24.11, the node with two types (from
	// 24.11 it is planned on per type); the waiting job would go to the idle
	// v100 node (from 24.11: or to the two idle v100 of the mixed node);
	// nothing changes.
	ver, err := slurm.ParseVersion(strings.NewReader(must(t, conf, "scontrol", "--version")))
	if err != nil {
		t.Fatal(err)
	}
	perType := ver.AtLeast(24, 11)
	var plan struct {
		Nodes []struct {
			Name    string `json:"name"`
			GPUType string `json:"gpu_type"`
			Usable  bool   `json:"usable"`
			Why     string `json:"why"`
		} `json:"nodes"`
		Decisions []struct {
			Job      string   `json:"job"`
			Decision string   `json:"decision"`
			Nodes    []string `json:"nodes"`
			GPUType  string   `json:"gpu_type"`
		} `json:"decisions"`
	}
	hadarJSON(t, conf, &plan, "plan", "--json")
	for _, n := range plan.Nodes {
		switch n.Name {
		case "gpu-v100-01", "gpu-v100-02":
			if !n.Usable || n.GPUType != "v100" {
				t.Errorf("plan node %+v: want usable, v100", n)
			}
		case "gpu-mix-01":
			if perType != n.Usable || perType && !strings.Contains(n.GPUType, "v100") {
				t.Errorf("plan node %+v on Slurm %s: want usable per type (v100 and the A100's type) exactly from 24.11", n, ver)
			}
		default:
			if n.Usable {
				t.Errorf("plan node %+v: want unusable", n)
			}
		}
	}
	hNode := "gpu-v100-02"
	if perType && len(plan.Decisions) == 1 && strings.Join(plan.Decisions[0].Nodes, ",") == "gpu-mix-01" {
		hNode = "gpu-mix-01"
	}
	if len(plan.Decisions) != 1 || plan.Decisions[0].Job != h || plan.Decisions[0].Decision != "place" ||
		strings.Join(plan.Decisions[0].Nodes, ",") != hNode || plan.Decisions[0].GPUType != "v100" {
		t.Errorf("plan decisions %+v, want job %s placed on %s (v100)", plan.Decisions, h, hNode)
	}
	var ex struct {
		Class   string `json:"class"`
		Summary string `json:"summary"`
		Types   []struct {
			Type      string   `json:"type"`
			SiteNames []string `json:"site_names"`
		} `json:"types"`
	}
	hadarJSON(t, conf, &ex, "explain", "--json", h)
	// Its types: v100 under the site's name; from 24.11 also the mixed
	// node's A100, under its own.
	sites := map[string]string{}
	for _, et := range ex.Types {
		sites[et.Type] = fmt.Sprint(et.SiteNames)
	}
	wantTypes := 1
	if perType {
		wantTypes = 2
	}
	if ex.Class != "waiting" || !strings.HasPrefix(ex.Summary, "placed now on "+hNode+":2 (v100)") ||
		len(ex.Types) != wantTypes || sites["v100"] != "["+v100+"]" || perType && !slices.Contains(slices.Collect(maps.Values(sites)), "["+a100+"]") {
		t.Errorf("explain %s: %+v", h, ex)
	}
	var exu struct{ Summary string }
	hadarJSON(t, conf, &exu, "explain", "--json", v)
	if !strings.HasPrefix(exu.Summary, "not managed by hadar") {
		t.Errorf("explain of untagged job %s: %q", v, exu.Summary)
	}
	q, err := e2eutil.Queue(conf, []string{h})
	if err != nil || !q[h].OnLease() {
		t.Errorf("after plan and explain the tagged job is %v (%v); want still on its lease", q[h], err)
	}
}

// asUser runs commands as the unprivileged test user, in the cluster's
// jobs directory, with SLURM_CONF set (what a user's shell would have).
func asUser(user, conf string, timeout time.Duration) e2eutil.Cmd {
	jobs := filepath.Join(filepath.Dir(conf), "jobs")
	return e2eutil.Cmd{Timeout: timeout, User: user,
		// env takes options only before its NAME=VALUE words.
		UserEnv: []string{"--chdir=" + jobs, "SLURM_CONF=" + conf, "HOME=" + jobs, "TMPDIR=/tmp"}}
}

// TestUserCommands runs what docs/user-guide.md shows a user doing, as an
// unprivileged user: tag jobs, hold and release his own (hadar neither
// releases his hold nor overrides his begin time), fail to re-target one
// or raise its priority, look with hadar status/plan/explain (no hadar config, not root), see a
// bad tag passed through with its AdminComment after a daemon round, and
// scancel.
func TestUserCommands(t *testing.T) {
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
	sub := func(args ...string) string {
		id, err := asUser(user, slurmConf, 30*time.Second).Sbatch(append([]string{"-o", "/dev/null"}, args...)...)
		if err != nil {
			t.Fatalf("sbatch as %s: %v", user, err)
		}
		ids = append(ids, id)
		return id
	}
	good := sub(`--comment=hadar model=resnet50-bs64 steps=2000`, "--gres=gpu:1", "--wrap", "sleep 120")
	bad := sub(`--comment=hadar model=resnet50-bs64 steps=-10`, "--gres=gpu:1", "--wrap", "sleep 5")
	typed := sub(`--comment=hadar model=a3c`, "--gres=gpu:v100:1", "--wrap", "sleep 5")
	waitState(t, slurmConf, []string{good, bad, typed}, "PENDING", 30*time.Second)

	// The user holds and releases his own tagged job: it is back on its
	// lease; his StartTime=now gets the lease on top (job_submit.lua).
	scontrolAs := func(args ...string) e2eutil.Result {
		return asUser(user, slurmConf, 30*time.Second).Run("scontrol", args...)
	}
	for _, step := range []struct {
		args []string
		want func(e2eutil.QueuedJob) bool
	}{
		{[]string{"hold", good}, e2eutil.QueuedJob.Held},
		{[]string{"release", good}, e2eutil.QueuedJob.OnLease},
		{[]string{"update", "JobId=" + good, "StartTime=now"}, e2eutil.QueuedJob.OnLease},
	} {
		if r := scontrolAs(step.args...); r.Err != nil {
			t.Errorf("scontrol %s as %s: %v %s", strings.Join(step.args, " "), user, r.Err, r.Stderr)
		}
		// Slurm shows the new reason after its next scheduling pass.
		var q map[string]e2eutil.QueuedJob
		if !e2eutil.WaitFor(10*time.Second, func() bool {
			q, _ = e2eutil.Queue(slurmConf, []string{good})
			return step.want(q[good])
		}) {
			t.Errorf("after scontrol %s as %s job %s is %+v", strings.Join(step.args, " "), user, good, q[good])
		}
	}
	if st, err := e2eutil.StartTime(slurmConf, good); err != nil || time.Until(st) < time.Minute {
		t.Errorf("after the user's StartTime=now, job %s begins at %v (%v); want the lease (~2 min) ahead", good, st, err)
	}
	// He cannot re-target it (job_submit.lua) nor raise its priority
	// (Slurm: "change nice instead").
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"update", "JobId=" + good, "NodeList=node1"}, "Access/permission denied"},
		{[]string{"update", "JobId=" + good, "Priority=100"}, "change nice instead"},
	} {
		r := scontrolAs(c.args...)
		if r.Err == nil || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("scontrol %s as %s: err %v, stderr %q; want %q", strings.Join(c.args, " "), user, r.Err, r.Stderr, c.want)
		}
	}
	if q, _ := e2eutil.Queue(slurmConf, []string{good}); !q[good].OnLease() {
		t.Errorf("after the refused updates job %s is %v, want still on its lease", good, q[good])
	}

	// status, plan and explain work for the user, without any hadar config.
	for _, args := range [][]string{{"status"}, {"plan"}, {"explain", good}} {
		r := asUser(user, slurmConf, 60*time.Second).Run(hadarBin(), args...)
		if r.Err != nil || r.Stdout == "" {
			t.Errorf("hadar %s as %s: %v\n%s", strings.Join(args, " "), user, r.Err, r.Stderr)
		}
	}
	r := asUser(user, slurmConf, 60*time.Second).Run(hadarBin(), "explain", "--json", bad)
	if r.Err != nil || !strings.Contains(r.Stdout, `passed through to Slurm's scheduler: bad hadar tag: steps`) {
		t.Errorf("hadar explain --json %s as %s: %v\n%s%s", bad, user, r.Err, r.Stdout, r.Stderr)
	}

	// One daemon round: the bad tags are passed through with an
	// AdminComment saying why; the good job is placed and started.
	dir := e2eutil.WorkDir(t, "user")
	cfg := writeConfig(t, dir, "")
	if r := e2eutil.Run(60*time.Second, e2eutil.SlurmEnv(slurmConf), daemonBin(), "--once", "--config", cfg); r.Err != nil {
		t.Fatalf("hadar-slurmd --once: %v\n%s", r.Err, r.Stderr)
	}
	// A typed request is a constraint: placed, on its type only.
	for id, want := range map[string]string{bad: `AdminComment=hadar: bad hadar tag: steps: "-10": want a number > 0; released to Slurm's scheduler`,
		typed: "AdminComment=hadar: placed by hadar-slurmd", good: "AdminComment=hadar: placed by hadar-slurmd"} {
		out := must(t, slurmConf, "scontrol", "show", "job", id)
		if !strings.Contains(out, want) {
			t.Errorf("scontrol show job %s lacks %q:\n%s", id, want, out)
		}
	}
	waitState(t, slurmConf, []string{good, typed}, "RUNNING", 30*time.Second)
	if q, _ := e2eutil.Queue(slurmConf, []string{typed}); !strings.HasPrefix(q[typed].Nodes, "node1") && !strings.HasPrefix(q[typed].Nodes, "node2") {
		t.Errorf("typed v100 job %s runs on %q, want a v100 node (node1, node2)", typed, q[typed].Nodes)
	}

	// With the daemon stopped (--once has ended), explain as the user says so,
	// from the daemon's world-readable status file.
	r = asUser(user, slurmConf, 60*time.Second).Run(hadarBin(), "explain", "--spool", filepath.Join(dir, "spool"), "--json", good)
	var ex struct {
		Daemon      string `json:"daemon"`
		DaemonAlive bool   `json:"daemon_alive"`
	}
	if r.Err != nil || json.Unmarshal([]byte(r.Stdout), &ex) != nil || ex.DaemonAlive || !strings.Contains(ex.Daemon, "hadar-slurmd is not running") {
		t.Errorf("hadar explain %s as %s with the daemon stopped: %v %+v\n%s%s", good, user, r.Err, ex, r.Stdout, r.Stderr)
	}

	// scancel works for the user.
	if r := asUser(user, slurmConf, 30*time.Second).Run("scancel", good); r.Err != nil {
		t.Errorf("scancel %s as %s: %v", good, user, r.Err)
	}
	if err := e2eutil.WaitGone(slurmConf, []string{good}, 30*time.Second); err != nil {
		t.Errorf("job %s after scancel: %v", good, err)
	}
}
