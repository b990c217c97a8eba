package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// qjob is one squeue row of a fake cluster.
type qjob struct {
	id, user, state, reason, gres, nodes, comment string
	numNodes                                      int
	submit                                        time.Time
	used                                          time.Duration
}

var testSubmit = time.Date(2026, 11, 29, 14, 47, 7, 0, time.Local)

// squeueOutput prints jobs exactly as `squeue -o slurm.JobFormat` does:
// Slurm's fields '|'-terminated, then the name and the comment padded to
// their fixed widths.
func squeueOutput(jobs ...qjob) []byte {
	var b strings.Builder
	for _, j := range jobs {
		user, state, reason, gres, comment := j.user, j.state, j.reason, j.gres, j.comment
		if user == "" {
			user = "alice"
		}
		if state == "" {
			state = "PENDING"
		}
		if reason == "" {
			reason = "None"
			if state == "PENDING" && jobproto.IsTagged(comment) {
				reason = "BeginTime" // job_submit.lua's lease
			}
		}
		if gres == "" {
			gres = "N/A"
		}
		if comment == "" {
			comment = "(null)"
		}
		n := max(1, j.numNodes)
		submit := j.submit
		if submit.IsZero() {
			submit = testSubmit
		}
		start := "N/A"
		switch {
		case state == "RUNNING":
			start = submit.Add(time.Second).Format("2006-01-02T15:04:05")
		case reason == "BeginTime":
			start = time.Now().Add(time.Minute).Format("2006-01-02T15:04:05") // on its lease
		}
		used := fmt.Sprintf("%d:%02d", int(j.used.Minutes()), int(j.used.Seconds())%60)
		prio := 1000
		if strings.HasPrefix(reason, "JobHeld") {
			prio = 0
		}
		fmt.Fprintf(&b, "%s|%s|N/A|%s|%s|%d|%s|%s|%s|%s|%s|%s|%d|(null)|%-64.64s|%-512.512s\n",
			j.id, j.id, user, state, n, submit.Format("2006-01-02T15:04:05"), start, used, gres, j.nodes, reason, prio, "wrap", comment)
	}
	return []byte(b.String())
}

// demoNodes is the verbatim `scontrol -a -d -o show node` of the idle demo
// cluster (node1-2 v100 x4, node3 p100 x4, node4-5 k80 x4), with the GPUs
// of used[node] allocated.
func demoNodes(t testing.TB, used map[string]int) []byte {
	t.Helper()
	fx, err := slurm.LoadFixture("../../slurm/testdata/scontrol-show-node/22.05-idle.txt")
	if err != nil {
		t.Fatal(err)
	}
	reUsed := regexp.MustCompile(`GresUsed=gpu:([a-z0-9]+):0\(IDX:N/A\)`)
	var out []string
	for _, line := range strings.SplitAfter(string(fx.Output), "\n") {
		name := strings.TrimPrefix(strings.Fields(line + " x")[0], "NodeName=")
		if n := used[name]; n > 0 {
			line = reUsed.ReplaceAllString(line, fmt.Sprintf("GresUsed=gpu:${1}:%d(IDX:0-%d)", n, n-1))
			state := "MIXED"
			if n == 4 {
				state = "ALLOCATED"
			}
			line = strings.Replace(line, "State=IDLE", "State="+state, 1)
			// The jobs holding the GPUs hold CPUs too (a node with GPUs
			// used and no CPU allocated is read as Slurm's stale count).
			line = strings.Replace(line, "CPUAlloc=0 ", fmt.Sprintf("CPUAlloc=%d ", n), 1)
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, ""))
}

func siteNodes(t testing.TB) []byte {
	t.Helper()
	fx, err := slurm.LoadFixture("../../slurm/testdata/scontrol-show-node/22.05-site-alloc.txt")
	if err != nil {
		t.Fatal(err)
	}
	return fx.Output
}

func fakeSlurm(nodes []byte, jobs ...qjob) *slurm.FakeRunner {
	r := slurm.NewFakeRunner()
	r.Set(slurm.JobQueryArgs, squeueOutput(jobs...), nil)
	r.Set(slurm.NodeQueryArgs, nodes, nil)
	return r
}

// isolate makes the dry round find no config, no daemon database and a
// private temporary directory, as on a machine without hadar-slurmd.
func isolate(t *testing.T) (tmp string) {
	t.Helper()
	dir := t.TempDir()
	tmp = filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	t.Setenv("HADAR_DB", filepath.Join(dir, "no-daemon", "hadar.db"))
	t.Setenv("HADAR_CONFIG", "")
	os.Unsetenv("HADAR_CONFIG")
	t.Setenv("HADAR_SLURM_BIN_DIR", "")
	old, oldDefaults := defaultConfigPath, configDefaults
	defaultConfigPath = filepath.Join(dir, "etc", "hadar.toml")
	configDefaults = func() config.Config {
		c := config.Default()
		c.DataDir = filepath.Join(dir, "no-daemon")
		c.SpoolDir = filepath.Join(dir, "no-spool")
		return c
	}
	t.Cleanup(func() { defaultConfigPath, configDefaults = old, oldDefaults })
	return tmp
}

// runCLI runs `hadar args...` with Slurm served by r.
func runCLI(t *testing.T, r slurm.Runner, args ...string) (string, string, error) {
	t.Helper()
	old := slurmRunner
	slurmRunner = func(string) slurm.Runner { return r }
	defer func() { slurmRunner = old }()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	app.ExitErrHandler = func(*cli.Context, error) {}
	err := app.Run(append([]string{"hadar"}, args...))
	return out.String(), errOut.String(), err
}

func decodePlan(t *testing.T, s string) planOutput {
	t.Helper()
	var p planOutput
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatalf("decode plan %q: %v", s, err)
	}
	return p
}

func onlyReads(t *testing.T, r *slurm.FakeRunner) {
	t.Helper()
	for _, c := range r.Calls() {
		k := slurm.FakeKey(c...)
		if k != slurm.FakeKey(slurm.JobQueryArgs...) && k != slurm.FakeKey(slurm.NodeQueryArgs...) && k != slurm.FakeKey(slurm.JobDetailQueryArgs...) &&
			k != slurm.FakeKey(slurm.VersionArgs...) {
			t.Errorf("ran %q: plan and explain may only read (squeue, scontrol show node, scontrol show job, scontrol --version)", k)
		}
	}
	if len(r.Calls()) != 4 {
		t.Errorf("ran %d Slurm commands, want 4 (one squeue, one scontrol show node, one scontrol show job, one scontrol --version): %v", len(r.Calls()), r.Calls())
	}
}

func decisionsByJob(p planOutput) map[string]planDecision {
	out := map[string]planDecision{}
	for _, d := range p.Decisions {
		out[d.Job] = d
	}
	return out
}

// TestPlanDemoCluster: held tagged jobs are placed on free nodes of a GPU
// type they run on, a bad tag is passed through with its AdminComment (in
// its own release, after the placed jobs are seen started), an untagged
// job gets no decision and is named by no action, and nothing but the two
// reads runs.
func TestPlanDemoCluster(t *testing.T) {
	tmp := isolate(t)
	r := fakeSlurm(demoNodes(t, map[string]int{"node1": 4}),
		qjob{id: "1", state: "RUNNING", gres: "gres:gpu:4", nodes: "node1"},
		qjob{id: "2", comment: "hadar model=resnet50-bs64 steps=1000", gres: "gres:gpu:1"},
		// Just submitted: a pass-through job that has waited launch_timeout
		// would hold the placements back for a round.
		qjob{id: "3", comment: "hadar steps=-5", gres: "gres:gpu:1", submit: time.Now()},
		qjob{id: "4", comment: "hadar model=lm-bs20 steps=1000", gres: "gres:gpu:2"},
		qjob{id: "5", state: "PENDING", reason: "Resources", gres: "gres:gpu:4"},
	)
	out, stderr, err := runCLI(t, r, "plan", "--json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr)
	}
	onlyReads(t, r)
	p := decodePlan(t, out)
	if p.Policy != "hadar" || !p.DryRun || p.Jobs != 5 || p.Tagged != 3 {
		t.Errorf("header = %+v", p)
	}
	ds := decisionsByJob(p)
	for _, id := range []string{"1", "5"} {
		if d, ok := ds[id]; ok {
			t.Errorf("untagged job %s got a decision: %+v", id, d)
		}
	}
	for _, id := range []string{"2", "4"} {
		d := ds[id]
		if d.Decision != "place" || len(d.Nodes) != 1 || d.Nodes[0] == "node1" || d.GPUType == "" {
			t.Errorf("job %s: %+v, want a place on a free node", id, d)
		}
	}
	if d := ds["3"]; d.Decision != "pass-through" || !strings.Contains(d.Reason, "steps") {
		t.Errorf("job 3 (bad tag): %+v", d)
	}
	var release, await []string
	for _, a := range p.Actions {
		for _, id := range a.Jobs {
			if id == "1" || id == "5" {
				t.Errorf("action names untagged job %s: %+v", id, a)
			}
		}
		if a.Kind == "start-now" {
			release = append(release, strings.Join(a.Jobs, ","))
		}
		if a.Kind == "await-start" {
			await = a.Jobs
		}
		if a.Kind == "comment" && (a.Jobs[0] != "3" || !strings.Contains(a.Text, "released to Slurm's scheduler")) {
			t.Errorf("comment action %+v", a)
		}
	}
	if strings.Join(release, " ") != "2,4 3" || strings.Join(await, ",") != "2,4" {
		t.Errorf("StartTime=now %v, await %v; want 2,4 then (after awaiting 2,4) 3", release, await)
	}
	if n := len(p.Nodes); n != 5 {
		t.Errorf("%d nodes, want 5", n)
	}
	for _, n := range p.Nodes {
		if n.Name == "node1" && (n.Used != 4 || n.Available != 0) {
			t.Errorf("node1 = %+v, want 4 used by the untagged job, 0 for hadar", n)
		}
	}
	// The throwaway data dir is gone.
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left behind in TMPDIR: %v", ents)
	}

	// The text form says the same.
	text, _, err := runCLI(t, r, "plan")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nothing was changed", "config: defaults", "throughputs: built-in defaults",
		"JOB  DECISION", "pass-through", "hadar-slurmd would run:", "scontrol update JobId=2,4 StartTime=now", "scontrol update JobId=3 StartTime=now",
		`scontrol update JobId=3 AdminComment="hadar: bad hadar tag: steps`} {
		if !strings.Contains(text, want) {
			t.Errorf("plan output lacks %q:\n%s", want, text)
		}
	}
}

// TestPlanSiteLayout: site GRES names resolve to canonical types; a node
// with two types, a drained node and a CPU-only node are not planned on.
func TestPlanSiteLayout(t *testing.T) {
	isolate(t)
	r := fakeSlurm(siteNodes(t),
		qjob{id: "1", state: "RUNNING", gres: "gres:gpu:tesla_v100-sxm2-32gb:4", nodes: "gpu-v100-01"},
		qjob{id: "6", comment: "hadar model=resnet50-bs64 steps=100", gres: "gres:gpu:2"},
	)
	out, _, err := runCLI(t, r, "plan", "--json")
	if err != nil {
		t.Fatal(err)
	}
	p := decodePlan(t, out)
	why := map[string]string{}
	for _, n := range p.Nodes {
		why[n.Name] = n.Why
		if n.Name == "gpu-v100-02" && (n.GPUType != "v100" || n.SiteTypes["tesla_v100-sxm2-32gb"] != 4 || !n.Usable) {
			t.Errorf("gpu-v100-02 = %+v", n)
		}
	}
	for node, want := range map[string]string{"cpu-01": "no GPUs", "gpu-a100-01": "not schedulable", "gpu-mix-01": "several GPU types"} {
		if !strings.Contains(why[node], want) {
			t.Errorf("%s: why %q, want %q", node, why[node], want)
		}
	}
	if d := decisionsByJob(p)["6"]; d.Decision != "place" || strings.Join(d.Nodes, ",") != "gpu-v100-02" || d.GPUType != "v100" {
		t.Errorf("job 6: %+v, want a place on gpu-v100-02 (v100)", d)
	}
}

// TestPlanSiteLayout2411: on Slurm 24.11 (scontrol --version) the node
// with two GPU types is planned on per type, as the daemon does: a job
// placed there (its only free GPU is an A100: the v100 nodes are taken or
// slower, the A100 node drained) is retyped in the node's spelling before
// its NodeList pin.
func TestPlanSiteLayout2411(t *testing.T) {
	isolate(t)
	r := fakeSlurm(siteNodes(t),
		qjob{id: "1", state: "RUNNING", gres: "gres:gpu:tesla_v100-sxm2-32gb:4", nodes: "gpu-v100-01"},
		qjob{id: "6", comment: "hadar model=resnet50-bs64 steps=100", gres: "gres:gpu:1"},
	)
	if err := r.SetFixture(slurm.VersionArgs, "../../slurm/testdata/scontrol-version/24.11.5-debian13.txt"); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, r, "plan", "--json")
	if err != nil {
		t.Fatal(err)
	}
	p := decodePlan(t, out)
	for _, n := range p.Nodes {
		if n.Name == "gpu-mix-01" && (!n.Usable || n.Why != "" || !strings.Contains(n.GPUType, "+")) {
			t.Errorf("gpu-mix-01 = %+v, want usable per type", n)
		}
	}
	if d := decisionsByJob(p)["6"]; d.Decision != "place" || strings.Join(d.Nodes, ",") != "gpu-mix-01" {
		t.Fatalf("job 6: %+v, want a place on gpu-mix-01", d)
	}
	var cmds []string
	for _, a := range p.Actions {
		cmds = append(cmds, a.Command)
	}
	want := []string{"scontrol update JobId=6 Gres=gpu:NVlink_A100_40GB:1", "scontrol update JobId=6 NodeList=gpu-mix-01"}
	if len(cmds) < 2 || !slices.Equal(cmds[:2], want) {
		t.Errorf("actions %q, want %q first", cmds, want)
	}
	onlyReads(t, r)
	// explain counts the mixed node under each of its types, with the
	// type's own site name.
	out, _, err = runCLI(t, r, "explain", "--json", "6")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Types []struct {
			Type      string   `json:"type"`
			SiteNames []string `json:"site_names"`
			Nodes     int      `json:"nodes"`
		} `json:"types"`
	}
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatal(err)
	}
	sites := map[string][]string{}
	for _, et := range ex.Types {
		sites[et.Type] = et.SiteNames
	}
	if len(sites) != 2 || sites["v100"] == nil || sites[""] != nil || !slices.Equal(sites["v100"], []string{"tesla_v100-sxm2-32gb"}) {
		t.Errorf("explain types %+v: want v100 (tesla_v100-sxm2-32gb) and the A100's type, each with its own site name", ex.Types)
	}
}

// TestPlanNeverTouchesDaemonDB: plan reads the daemon's config and a copy
// of its databases (a job hadar released is known as launching), and
// leaves the daemon's files byte for byte as they were.
func TestPlanNeverTouchesDaemonDB(t *testing.T) {
	tmp := isolate(t)
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	t.Setenv("HADAR_DB", "")
	os.Unsetenv("HADAR_DB")
	cfgPath := filepath.Join(t.TempDir(), "hadar.toml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("policy = \"hadar\"\ndata_dir = %q\nspool_dir = %q\n", dataDir, filepath.Join(dataDir, "spool"))), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := profiles.Open(ctx, filepath.Join(dataDir, profiles.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	st, _, err := statedb.Open(ctx, filepath.Join(dataDir, statedb.File), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteRound(ctx, statedb.RoundWrite{Round: statedb.Round{Number: 41, Started: time.Now(), Policy: "hadar"},
		Placed: map[string]statedb.Placement{"7": {Nodes: []string{"node3"}, ReleasedAt: time.Now().Add(-10 * time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	before := hashDir(t, dataDir)

	r := fakeSlurm(demoNodes(t, nil),
		qjob{id: "7", reason: "Resources", comment: "hadar model=a3c steps=10", gres: "gres:gpu:4"},
		qjob{id: "8", comment: "hadar model=a3c steps=10", gres: "gres:gpu:4"},
	)
	out, stderr, err := runCLI(t, r, "plan", "--json", "--config", cfgPath)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr)
	}
	onlyReads(t, r)
	p := decodePlan(t, out)
	srcs := strings.Join(p.Sources, "\n")
	for _, want := range []string{"config: " + cfgPath, "throughputs: a copy of " + filepath.Join(dataDir, "hadar.db"), "state: a copy of " + filepath.Join(dataDir, "state.db")} {
		if !strings.Contains(srcs, want) {
			t.Errorf("sources lack %q: %s", want, srcs)
		}
	}
	for _, n := range p.Nodes {
		if n.Name == "node3" && n.Available != 0 {
			t.Errorf("node3 is reserved for launching job 7, but plan offers %d GPUs", n.Available)
		}
	}
	if d := decisionsByJob(p)["8"]; d.Decision != "place" || strings.Join(d.Nodes, ",") == "node3" {
		t.Errorf("job 8: %+v", d)
	}
	if _, ok := decisionsByJob(p)["7"]; ok {
		t.Errorf("launching job 7 was re-planned")
	}
	if after := hashDir(t, dataDir); after != before {
		t.Errorf("the daemon's data dir changed:\nbefore %s\nafter  %s", before, after)
	}
	st, _, err = statedb.Open(ctx, filepath.Join(dataDir, statedb.File), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, _ := st.LastRound(ctx); n != 41 {
		t.Errorf("daemon's last round = %d, want 41", n)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left behind in TMPDIR: %v", ents)
	}

	// The same while the daemon has both databases open (their write-ahead
	// logs exist): the copy goes through a read-only connection; the
	// databases and their logs do not change.
	live, err := profiles.Open(ctx, filepath.Join(dataDir, profiles.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.Throughputs(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Placements(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{profiles.DBFile, statedb.File} {
		if _, err := os.Stat(filepath.Join(dataDir, f+"-wal")); err != nil {
			t.Fatalf("the live database has no write-ahead log: %v", err)
		}
	}
	before = hashDir(t, dataDir)
	out, stderr, err = runCLI(t, r, "plan", "--json", "--config", cfgPath)
	if err != nil {
		t.Fatalf("plan with the daemon running: %v\n%s", err, stderr)
	}
	p = decodePlan(t, out)
	if _, ok := decisionsByJob(p)["7"]; ok || !strings.Contains(strings.Join(p.Sources, "\n"), "state: a copy of") {
		t.Errorf("with the daemon running, the state copy was not used: %+v", p)
	}
	if after := hashDir(t, dataDir); after != before {
		t.Errorf("the daemon's data dir changed while it ran:\nbefore %s\nafter  %s", before, after)
	}
}

func hashDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "-shm") {
			return err // -shm is SQLite's shared lock memory, which readers use
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		fmt.Fprintf(&b, "%s %x %s; ", strings.TrimPrefix(p, dir), sha256.Sum256(data), info.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestPlanPolicyAndErrors(t *testing.T) {
	isolate(t)
	r := fakeSlurm(demoNodes(t, nil), qjob{id: "2", comment: "hadar model=resnet50-bs64 steps=1000", gres: "gres:gpu:1"})
	out, _, err := runCLI(t, r, "plan", "--json", "--policy", "gavel")
	if err != nil {
		t.Fatal(err)
	}
	if p := decodePlan(t, out); p.Policy != "gavel" {
		t.Errorf("policy %q, want gavel", p.Policy)
	}
	if _, _, err := runCLI(t, r, "plan", "--policy", "nosuch"); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("--policy nosuch: %v", err)
	}
	if _, _, err := runCLI(t, r, "plan", "--config", filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Error("an explicit missing --config must be an error")
	}
	if _, _, err := runCLI(t, r, "plan", "extra"); err == nil {
		t.Error("plan takes no arguments")
	}

	// A daemon database that does not open: plan with the defaults.
	junk := filepath.Join(t.TempDir(), "hadar.db")
	if err := os.WriteFile(junk, []byte("not a database, not even close; not a database, not even close; not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADAR_DB", junk)
	out, _, err = runCLI(t, r, "plan", "--json")
	if err != nil {
		t.Fatalf("plan with an unreadable daemon database: %v", err)
	}
	if p := decodePlan(t, out); !strings.Contains(strings.Join(p.Sources, "\n"), "throughputs: built-in defaults (the copy of "+junk+" does not open") || len(p.Decisions) != 1 {
		t.Errorf("plan with a junk database: %+v", p)
	}

	// slurmctld down: the error says so, nothing is printed.
	down := slurm.NewFakeRunner()
	fx, err := slurm.LoadFixture("../../slurm/testdata/errors/22.05-controller-down-squeue.txt")
	if err != nil {
		t.Fatal(err)
	}
	down.Set(slurm.JobQueryArgs, nil, &slurm.CommandError{Argv: slurm.JobQueryArgs, ExitCode: 1, Stderr: string(fx.Output)})
	down.Set(slurm.NodeQueryArgs, demoNodes(t, nil), nil)
	out, _, err = runCLI(t, down, "plan")
	if err == nil || !errors.Is(err, slurm.ErrControllerDown) {
		t.Errorf("controller down: err %v", err)
	}
	if out != "" {
		t.Errorf("printed %q on failure", out)
	}
}

// TestPlanJobExpectedStart: with every GPU taken by running hadar jobs,
// plan --job gives a waiting job the end of the running job that frees
// room for it first, as sbatch --test-only would; a job placed now starts now.
func TestPlanJobExpectedStart(t *testing.T) {
	isolate(t)
	nodes := demoNodes(t, map[string]int{"node1": 4, "node2": 4, "node3": 4, "node4": 4, "node5": 4})
	jobs := []qjob{
		{id: "1", state: "RUNNING", comment: "hadar model=a3c steps=100000", gres: "gres:gpu:4", nodes: "node1", used: time.Minute},
		{id: "2", state: "RUNNING", comment: "hadar model=a3c steps=200000", gres: "gres:gpu:4", nodes: "node2", used: time.Minute},
		{id: "3", state: "RUNNING", comment: "hadar model=a3c steps=300000", gres: "gres:gpu:4", nodes: "node3", used: time.Minute},
		{id: "4", state: "RUNNING", comment: "hadar model=a3c steps=400000", gres: "gres:gpu:4", nodes: "node4", used: time.Minute},
		{id: "5", state: "RUNNING", comment: "hadar model=a3c steps=500000", gres: "gres:gpu:4", nodes: "node5", used: time.Minute},
		{id: "6", comment: "hadar model=a3c steps=1000", gres: "gres:gpu:4"},
	}
	r := fakeSlurm(nodes, jobs...)
	out, stderr, err := runCLI(t, r, "plan", "--job", "6", "--json")
	if err != nil {
		t.Fatalf("plan --job: %v\n%s", err, stderr)
	}
	var p planJobOutput
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Start == "" || p.InSeconds <= 0 || !strings.Contains(p.Why, "running jobs end") {
		t.Errorf("plan --job 6 = %+v, want a start when job 1 (the shortest) ends", p)
	}
	// Job 1 frees node1 first: 100,000 steps at a3c's 4-GPU v100 rate.
	r2 := fakeSlurm(nodes, jobs[1:]...)
	out, _, err = runCLI(t, r2, "plan", "--job", "6", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var later planJobOutput
	if err := json.Unmarshal([]byte(out), &later); err != nil {
		t.Fatal(err)
	}
	if later.InSeconds <= p.InSeconds {
		t.Errorf("without job 1 the start is %.0fs away, with it %.0fs; want later without it", later.InSeconds, p.InSeconds)
	}
	// With room now, the round places it: it starts now.
	r3 := fakeSlurm(demoNodes(t, nil), jobs[5])
	out, _, err = runCLI(t, r3, "plan", "--job", "6")
	if err != nil || !strings.Contains(out, "placed this round") {
		t.Errorf("plan --job 6 on an idle cluster: %v %q", err, out)
	}
}
