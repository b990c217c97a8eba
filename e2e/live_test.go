package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// liveRates is the matrix of TestLiveSite, in Gavel's format: job types
// that run on every GPU type, or only on one, so that the request forms of
// issue 13 meet "its only rated type" in every way.
func liveRates(t *testing.T, path string) {
	t.Helper()
	types := map[string]float64{"h100": 4, "a100": 3, "l40s": 2, "v100": 1}
	models := map[string][]string{
		"e2e-every":     {"h100", "a100", "l40s", "v100"},
		"e2e-only-v100": {"v100"},
		"e2e-only-h100": {"h100"},
		"e2e-only-l40s": {"l40s"},
	}
	writeGavelRates(t, path, models, func(_, gpu string, w int) float64 { return types[gpu] * float64(w) })
}

// writeGavelRates writes, in Gavel's JSON format, rate(model, gpu, w) for
// every model on its GPU types (on) at 1, 2, 4 and 8 workers.
func writeGavelRates(t *testing.T, path string, on map[string][]string, rate func(model, gpu string, w int) float64) {
	t.Helper()
	out := map[string]map[string]map[string]*float64{}
	for model, gpus := range on {
		for _, gt := range gpus {
			if out[gt] == nil {
				out[gt] = map[string]map[string]*float64{}
			}
			for _, w := range []int{1, 2, 4, 8} {
				r := rate(model, gt, w)
				out[gt][fmt.Sprintf("('%s', %d)", model, w)] = map[string]*float64{"null": &r}
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLiveSite is issue 13's live test on a current site's layout (A100 and
// H100 nodes of 8 GPUs, L40S and V100 of 4, under NVML's GRES names) with
// the daemon running: every job of points 1-2 (its only type drained, -C,
// --exclude, CPUs and memory) and the request forms --gpus=N and
// --gres=gpu:TYPE:N either runs where its request allows or is passed
// through within two rounds; none ends in BadConstraints; requests no node
// of the cluster has (8 GPUs where the type's nodes have 4, 2 x 4 GPUs with
// one node of the type) are refused by sbatch, as without hadar: a tagged
// job on a lease is not held, so Slurm checks it at submission; an array
// task's progress reaches the task; an untagged job is untouched; all
// complete.
func TestLiveSite(t *testing.T) {
	requireE2E(t)
	live := e2eutil.TestCluster{Repo: repoRoot, Layout: "live",
		Dir: e2eutil.EnvOr("HADAR_E2E_LIVE_DIR", "/tmp/hadar-e2e-live"), Port: e2eutil.EnvOr("HADAR_E2E_LIVE_PORT", "23100")}
	conf, _, err := live.Up(3 * time.Minute)
	t.Cleanup(func() {
		if err := live.Down(90 * time.Second); err != nil {
			t.Errorf("down of the live cluster: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("up of the live cluster: %v", err)
	}
	var ids []string
	cancelOnCleanup(t, conf, &ids)
	dir := e2eutil.WorkDir(t, "live")
	cfg := writeConfig(t, dir, "")
	rates := filepath.Join(dir, "rates.json")
	liveRates(t, rates)
	env := e2eutil.SlurmEnv(conf)
	if r := e2eutil.Run(60*time.Second, env, hadarBin(), "profiles", "--db", filepath.Join(dir, "data", "hadar.db"), "import-gavel", rates); r.Err != nil {
		t.Fatalf("profiles import-gavel: %v\n%s", r.Err, r.Output())
	}
	must(t, conf, "scontrol", "update", "NodeName=gpu-l40s-01", "State=DRAIN", "Reason=e2e-only-rated-type-drained")

	sub := func(args ...string) string {
		id := sbatch(t, conf, append([]string{"-o", "/dev/null"}, args...)...)
		ids = append(ids, id)
		return id
	}
	tag := func(model string) string { return "--comment=hadar model=" + model + " steps=60" }
	// With the prior every model is rated on every type, so "its only
	// type" is what a typed request allows.
	// Requests no node of the cluster has: Slurm refuses them at
	// submission, with or without hadar (a job on a lease is not held).
	for name, args := range map[string][]string{
		"8 GPUs of a type whose nodes have 4": {tag("e2e-only-v100"), "--gres=gpu:tesla_v100-sxm2-32gb:8", "--wrap", "sleep 15"},
		"2 x 4 GPUs of a type with one node":  {tag("e2e-only-h100"), "--nodes=2", "--gres=gpu:nvidia_h100_80gb_hbm3:4", "--wrap", "sleep 15"},
	} {
		c := e2eutil.Cmd{Timeout: 60 * time.Second, Env: e2eutil.SlurmEnv(conf)}
		if id, err := c.Sbatch(append([]string{"--chdir", filepath.Join(filepath.Dir(conf), "jobs"), "-o", "/dev/null"}, args...)...); err == nil {
			ids = append(ids, id)
			t.Errorf("%s: sbatch accepted it (job %s), want Slurm's refusal", name, id)
		} else if !strings.Contains(err.Error(), "Requested node configuration is not available") {
			t.Errorf("%s: sbatch: %v, want \"Requested node configuration is not available\"", name, err)
		}
	}
	jobs := map[string]string{
		"its only type drained":                               sub(tag("e2e-only-l40s"), "--gres=gpu:l40s:1", "--wrap", "sleep 15"),
		"8 GPUs, only rated on 4-GPU nodes (prior elsewhere)": sub(tag("e2e-only-v100"), "--gres=gpu:8", "--wrap", "sleep 15"),
		"-C":                                 sub(tag("e2e-every"), "-C", "tesla_v100-sxm2-32gb", "--gres=gpu:1", "--wrap", "sleep 15"),
		"--exclude":                          sub(tag("e2e-every"), "--exclude=gpu-h100-01,gpu-a100-01,gpu-a100-02", "--gres=gpu:1", "--wrap", "sleep 15"),
		"--gpus=2":                           sub(tag("e2e-every"), "--gpus=2", "--wrap", "sleep 15"),
		"--gres=gpu:TYPE:1":                  sub(tag("e2e-every"), "--gres=gpu:nvidia_a100-sxm4-80gb:1", "--wrap", "sleep 15"),
		"no steps=, model from the job name": sub("--comment=hadar", "-J", "e2e-every", "--time=2", "--gres=gpu:1", "--wrap", "sleep 15"),
	}
	// Two jobs that each need a whole node's CPUs and memory: they may wait
	// for a node with 8 CPUs free, but never share one.
	cpuPair := []string{
		sub(tag("e2e-every"), "--cpus-per-task=8", "--mem=3900", "--gres=gpu:1", "--wrap", "sleep 20"),
		sub(tag("e2e-every"), "--cpus-per-task=8", "--mem=3900", "--gres=gpu:1", "--wrap", "sleep 20"),
	}
	array := sub(tag("e2e-every"), "--array=0-1", "--gres=gpu:1", "--wrap",
		fmt.Sprintf("%s report --steps 30 --job $SLURM_JOB_ID --spool %s; sleep 60", hadarBin(), filepath.Join(dir, "spool")))
	untagged := sub("--gres=gpu:1", "--wrap", "sleep 15")

	logFile, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	daemon := exec.Command(daemonBin(), "--config", cfg)
	daemon.Env = append(append(os.Environ(), env...), "HADAR_CONFIG=")
	daemon.Stdout, daemon.Stderr = logFile, logFile
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		daemon.Process.Signal(os.Interrupt)
		daemon.Wait()
	}()
	started := time.Now()

	// A request no live node can hold: hadar passes it through at once,
	// and Slurm then leaves it pending itself (ReqNodeNotAvail,
	// BadConstraints), as it would without hadar.
	impossible := map[string]bool{"its only type drained": true}

	// Within two rounds (round = 10s) every tagged job runs (or ran) or is
	// passed through; none sits in BadConstraints meanwhile.
	const bound = 25 * time.Second
	resolved := map[string]time.Duration{}
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && len(resolved) < len(jobs) {
		q, err := e2eutil.Queue(conf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := q[cpuPair[0]], q[cpuPair[1]]; a.State == "RUNNING" && b.State == "RUNNING" && a.Nodes == b.Nodes {
			t.Errorf("jobs %v, which each need a node's 8 CPUs and 3900 MB, run together on %s", cpuPair, a.Nodes)
		}
		for _, id := range cpuPair {
			if strings.HasPrefix(q[id].Reason, "ReqNodeNotAvail") || strings.Contains(q[id].Reason, "BadConstraints") {
				t.Errorf("job %s (CPUs and memory) pinned where it cannot run: %s", id, q[id].Reason)
			}
		}
		for name, id := range jobs {
			j, inQueue := q[id]
			if strings.Contains(j.Reason, "BadConstraints") && !impossible[name] {
				t.Errorf("%s (job %s) is in BadConstraints", name, id)
			}
			if _, done := resolved[name]; done {
				continue
			}
			if !inQueue || j.State == "RUNNING" || j.State == "COMPLETING" || !j.OnLease() {
				resolved[name] = time.Since(started)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for name, id := range jobs {
		if _, ok := resolved[name]; !ok {
			t.Errorf("%s (job %s) still on hadar's lease %s after the daemon started:\n%s", name, id, bound, squeueDump(conf))
		}
	}

	// The array task's report (under its own SLURM_JOB_ID) reaches the task
	// hadar addresses as ARRAY_TASK.
	if !e2eutil.WaitFor(40*time.Second, func() bool {
		db, err := e2eutil.OpenStateDB(filepath.Join(dir, "data", "state.db"))
		if err != nil {
			return false
		}
		defer db.Close()
		rep, steps, ok, err := db.Progress(array + "_0")
		return err == nil && ok && rep && steps == 30
	}) {
		t.Errorf("array task %s_0: no report of 30 steps in state.db", array)
	}

	// Where they ran, and why the others were passed through.
	admin := func(id string) string { return adminComment(t, conf, id) }
	for name, want := range map[string]string{
		"its only type drained": "no live node hadar uses has GPU type l40s",
	} {
		if got := admin(jobs[name]); !strings.Contains(got, want) {
			t.Errorf("%s (job %s): AdminComment %q, want it to say %q", name, jobs[name], got, want)
		}
	}
	nodesOf := map[string]string{}
	waitNodes := func(name string) string {
		id := jobs[name]
		var nodes string
		e2eutil.WaitFor(40*time.Second, func() bool {
			out := must(t, conf, "scontrol", "show", "job", id)
			for _, f := range strings.Fields(out) {
				if v, ok := strings.CutPrefix(f, "NodeList="); ok && v != "(null)" {
					nodes = v
				}
			}
			return nodes != ""
		})
		nodesOf[name] = nodes
		return nodes
	}
	for name, allowed := range map[string][]string{
		"-C":                {"gpu-v100-01"},
		"--exclude":         {"gpu-v100-01"},
		"--gres=gpu:TYPE:1": {"gpu-a100-01", "gpu-a100-02"},
	} {
		got := waitNodes(name)
		ok := false
		for _, n := range allowed {
			ok = ok || got == n
		}
		if !ok {
			t.Errorf("%s (job %s) ran on %q, want one of %v", name, jobs[name], got, allowed)
		}
		if a := admin(jobs[name]); !strings.HasPrefix(a, "hadar: placed by hadar-slurmd") {
			t.Errorf("%s (job %s): AdminComment %q, want hadar's placement", name, jobs[name], a)
		}
	}
	for _, name := range []string{"--gpus=2", "no steps=, model from the job name"} {
		if a := admin(jobs[name]); !strings.HasPrefix(a, "hadar: placed by hadar-slurmd") {
			t.Errorf("%s (job %s): AdminComment %q, want hadar's placement", name, jobs[name], a)
		}
	}
	if a := admin(untagged); strings.Contains(a, "hadar") {
		t.Errorf("untagged job %s has AdminComment %q", untagged, a)
	}

	// One daemon per cluster, and fail-open after kill -9, on this layout:
	// three jobs that each need the H100 node whole, so two of them wait
	// on hadar's lease.
	var waiters []string
	for range 3 {
		waiters = append(waiters, sub(tag("e2e-every"), "--gres=gpu:nvidia_h100_80gb_hbm3:8", "--wrap", "sleep 10"))
	}
	leasedWaiters := func() int {
		q, _ := e2eutil.Queue(conf, waiters)
		n := 0
		for _, id := range waiters {
			if q[id].OnLease() {
				n++
			}
		}
		return n
	}
	if !e2eutil.WaitFor(30*time.Second, func() bool { return leasedWaiters() >= 2 }) {
		t.Fatalf("want at least 2 of the 3 whole-H100 jobs on hadar's lease:\n%s", squeueDump(conf))
	}
	before := leasedWaiters()
	second := exec.Command(daemonBin(), "--config", cfg)
	second.Env = daemon.Env
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another hadar-slurmd is running") || strings.Contains(string(out), "handed") || strings.Contains(string(out), "StartTime") {
		t.Errorf("a second daemon: err %v, want a non-zero exit naming the first, handing over nothing:\n%s", err, out)
	}
	// The first daemon may place one meanwhile; the second ended no lease.
	if n := leasedWaiters(); n < before-1 || n == 0 {
		t.Errorf("after the second daemon exited, %d of the first one's %d leased jobs are on a lease", n, before)
	}
	killed := time.Now()
	daemon.Process.Kill()
	daemon.Wait()
	if !e2eutil.WaitFor(failOpenBound, func() bool { return leasedWaiters() == 0 }) {
		t.Errorf("%d jobs still on hadar's lease %s after kill -9 of the daemon", leasedWaiters(), failOpenBound)
	} else {
		t.Logf("RESULT TestLiveSite: kill -9 of the daemon: its guardian ended its jobs' leases %dms later", time.Since(killed).Milliseconds())
	}

	var possible []string
	for _, id := range ids {
		cancel := false
		for name := range impossible {
			cancel = cancel || jobs[name] == id
		}
		if cancel {
			must(t, conf, "scancel", id)
		} else {
			possible = append(possible, id)
		}
	}
	if err := e2eutil.WaitGone(conf, ids, 180*time.Second); err != nil {
		t.Fatalf("not all jobs completed: %v\n%s", err, squeueDump(conf))
	}
	recs, err := e2eutil.ReadJobcomp(e2eutil.JobcompLog(live.Dir))
	if err != nil {
		t.Fatal(err)
	}
	comp := e2eutil.JobcompByJob(recs)
	for _, id := range append(append(append(mapValues(jobs), cpuPair...), waiters...), untagged) {
		if !slices.Contains(possible, id) {
			continue
		}
		if r := comp[id]; len(r) == 0 || r[len(r)-1]["JobState"] != "COMPLETED" {
			t.Errorf("job %s: jobcomp %v, want COMPLETED", id, r)
		}
	}
	t.Logf("RESULT TestLiveSite: %d request forms, all resolved within %s of the daemon's start: %v; placements %v", len(jobs), bound, resolved, nodesOf)
}

// failOpenBound is the stated bound (docs/reliability.md) from the
// daemon's death to the end of its jobs' leases by its guardian.
const failOpenBound = 10 * time.Second

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
