package e2e

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
	"github.com/hadar-sched/hadar/jobproto"
)

// modernTruth is the hidden truth of TestModernSite: the steps/s per GPU
// each model really runs at on each type. The toy jobs pace themselves to
// it (TOYJOB_THROUGHPUTS); hadar-slurmd never reads it: it starts from
// Lambda's matrix, which knows none of these models and has no L40S column,
// so every value it plans with at first is the prior's. The ratios between
// types differ by model (mistral nearly as fast on L40S as on A100, vit far
// slower there), so a cross-model prior is off and learning has to fix it.
var modernTruth = map[string]map[string]float64{
	"llama3-8b-lora":   {"h100": 8, "a100": 4.5, "l40s": 3, "v100": 1.2},
	"mistral-7b-qlora": {"h100": 6, "a100": 4, "l40s": 3.5, "v100": 1},
	"vit-huge-14":      {"h100": 7, "a100": 4, "l40s": 2, "v100": 1.5},
	"whisper-large-v3": {"h100": 5, "a100": 3.5, "l40s": 2.5, "v100": 1.2},
}

// modernRate is the truth for w workers: 90% scaling past one GPU.
func modernRate(model, gpu string, w int) float64 {
	r := modernTruth[model][gpu] * float64(w)
	if w > 1 {
		r *= 0.9
	}
	return r
}

// writeModernTruth writes modernTruth in Gavel's format for the toy jobs.
func writeModernTruth(t *testing.T, path string) {
	t.Helper()
	on := map[string][]string{}
	for model, types := range modernTruth {
		for gpu := range types {
			on[model] = append(on[model], gpu)
		}
	}
	writeGavelRates(t, path, on, modernRate)
}

// modernJob is one job of TestModernSite's workload: its model, the toy
// job's true work, how its user asks for GPUs, and whether its tag gives
// steps= (without it hadar plans with --time).
type modernJob struct {
	name    string
	model   string
	steps   int
	request []string
	noSteps bool
}

// modernWorkload is every request form of issue 12 point 5 with models no
// matrix knows, some without steps=: 16 jobs asking for 28 GPUs of a
// 24-GPU cluster, so that under Slurm alone a third of them land on V100s
// (4-6x slower) while hadar queues them for the fast types.
var modernWorkload = []modernJob{
	{"gres-2", "llama3-8b-lora", 480, []string{"--gres=gpu:2"}, false},
	{"gres-1", "vit-huge-14", 240, []string{"--gres=gpu:1"}, false},
	{"gres-1-b", "whisper-large-v3", 160, []string{"--gres=gpu:1"}, false},
	{"gpus-2", "mistral-7b-qlora", 360, []string{"--gpus=2"}, false},
	{"gpus-1", "llama3-8b-lora", 240, []string{"--gpus=1"}, false},
	{"gpus-per-node", "vit-huge-14", 240, []string{"--nodes=1", "--gpus-per-node=1"}, false},
	{"gpus-per-task", "whisper-large-v3", 300, []string{"--ntasks=2", "--gpus-per-task=1"}, false},
	{"typed-gres", "mistral-7b-qlora", 200, []string{"--gres=gpu:nvidia_a100-sxm4-80gb:1"}, false},
	{"typed-gpus", "mistral-7b-qlora", 180, []string{"--gpus=nvidia_l40s:1"}, false},
	{"constraint", "vit-huge-14", 240, []string{"-C", "nvidia_h100_80gb_hbm3|nvidia_a100-sxm4-80gb", "--gres=gpu:1"}, false},
	{"multi-node", "llama3-8b-lora", 700, []string{"--nodes=2", "--gpus-per-node=2"}, false},
	{"no-steps", "whisper-large-v3", 200, []string{"--gres=gpu:1", "--time=3"}, true},
	{"no-steps-b", "llama3-8b-lora", 240, []string{"--gpus=1", "--time=3"}, true},
	{"gres-4", "mistral-7b-qlora", 700, []string{"--gres=gpu:4"}, false},
	{"gres-2-b", "vit-huge-14", 500, []string{"--gres=gpu:2"}, false},
	{"gres-1-c", "whisper-large-v3", 160, []string{"--gres=gpu:1"}, false},
}

// TestModernSite is issue 12's site test: a cluster of H100, A100, L40S
// and V100 nodes under NVML's GRES names, tagged jobs of models hadar has
// never seen in every request form (some without steps=), whose toy
// payload runs at a hidden truth. The same workload runs at the same time,
// untagged, on a second cluster of the same layout under Slurm alone. Every
// tagged job runs or is passed through with its reason, all complete, the
// rates hadar-slurmd learned end within 20% of the truth, the workload
// finishes sooner than under Slurm alone, and untagged jobs are untouched.
func TestModernSite(t *testing.T) {
	requireE2E(t)
	clusters := map[string]e2eutil.TestCluster{
		"hadar": {Repo: repoRoot, Layout: "modern",
			Dir: e2eutil.EnvOr("HADAR_E2E_MODERN_DIR", "/tmp/hadar-e2e-modern"), Port: e2eutil.EnvOr("HADAR_E2E_MODERN_PORT", "23200")},
		"slurm": {Repo: repoRoot, Layout: "modern",
			Dir: e2eutil.EnvOr("HADAR_E2E_MODERN_SLURM_DIR", "/tmp/hadar-e2e-modern-slurm"), Port: e2eutil.EnvOr("HADAR_E2E_MODERN_SLURM_PORT", "23300")},
	}
	confs := map[string]string{}
	var upMu sync.Mutex
	var upErr []error
	var wg sync.WaitGroup
	for name, c := range clusters {
		t.Cleanup(func() {
			if err := c.Down(90 * time.Second); err != nil {
				t.Errorf("down of the %s cluster: %v", name, err)
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			conf, _, err := c.Up(3 * time.Minute)
			upMu.Lock()
			defer upMu.Unlock()
			if err != nil {
				upErr = append(upErr, fmt.Errorf("up of the %s cluster: %w", name, err))
			}
			confs[name] = conf
		}()
	}
	wg.Wait()
	for _, err := range upErr {
		t.Fatal(err)
	}
	hconf, sconf := confs["hadar"], confs["slurm"]
	var hids, sids []string
	cancelOnCleanup(t, hconf, &hids)
	cancelOnCleanup(t, sconf, &sids)

	dir := e2eutil.WorkDir(t, "modern")
	// Lambda's matrix of current GPUs seeds the daemon's database.
	cfg := writeConfig(t, dir, "")
	if b, err := os.ReadFile(cfg); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(cfg, append([]byte("throughputs = \"lambda\"\n"), b...), 0o600); err != nil {
		t.Fatal(err)
	}
	truth := filepath.Join(dir, "truth.json")
	writeModernTruth(t, truth)
	toy := filepath.Join(repoRoot, "contrib", "examples", "toyjob")
	spools := map[string]string{"hadar": filepath.Join(dir, "spool"), "slurm": filepath.Join(dir, "slurm-spool")}
	if err := os.MkdirAll(spools["slurm"], 0o755); err != nil {
		t.Fatal(err)
	}

	logFile, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	daemon := exec.Command(daemonBin(), "--config", cfg)
	daemon.Env = append(append(os.Environ(), e2eutil.SlurmEnv(hconf)...), "HADAR_CONFIG=")
	daemon.Stdout, daemon.Stderr = logFile, logFile
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		daemon.Process.Signal(os.Interrupt)
		<-exited
	}()

	// Both clusters get the same jobs at the same time; only the first has
	// the tags (and the daemon).
	submit := func(cluster string, j modernJob, tagged bool) string {
		conf := confs[cluster]
		args := []string{"-o", filepath.Join(dir, cluster+"-"+j.name+".out"), "-J", j.name,
			"--export=ALL,HADAR=" + hadarBin() + ",HADAR_SPOOL=" + spools[cluster] + ",TOYJOB_TICK=1,TOYJOB_THROUGHPUTS=" + truth}
		if tagged {
			tag := "--comment=hadar model=" + j.model
			if !j.noSteps {
				tag += fmt.Sprintf(" steps=%d", j.steps)
			}
			args = append(args, tag)
		}
		args = append(args, j.request...)
		args = append(args, toy, j.model, fmt.Sprint(j.steps))
		return sbatch(t, conf, args...)
	}
	tagged := map[string]string{} // job name -> id on the hadar cluster
	start := time.Now()
	for _, j := range modernWorkload {
		id := submit("hadar", j, true)
		hids = append(hids, id)
		tagged[j.name] = id
		sids = append(sids, submit("slurm", j, false))
	}
	untaggedJob := modernJob{"untagged", "vit-huge-14", 120, []string{"--gres=gpu:1"}, false}
	var untagged []string
	for range 2 {
		id := submit("hadar", untaggedJob, false)
		untagged = append(untagged, id)
		hids = append(hids, id)
	}

	// Poll both queues until both workloads are done: when each finished,
	// and that the untagged jobs were never held nor given a begin time.
	done := map[string]time.Duration{}
	admin, nodes := map[string]string{}, map[string]string{}
	heldUntagged, untaggedAdmin := map[string]bool{}, map[string]string{}
	deadline := time.Now().Add(12 * time.Minute)
	for time.Now().Before(deadline) && len(done) < 2 {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("hadar-slurmd exited: %v\n%s", err, tail(filepath.Join(dir, "daemon.log"), 20))
		default:
		}
		for name, ids := range map[string][]string{"hadar": hids, "slurm": sids} {
			if _, ok := done[name]; ok {
				continue
			}
			q, err := e2eutil.Queue(confs[name], ids)
			if err != nil {
				t.Fatal(err)
			}
			if name == "hadar" {
				for _, id := range untagged {
					if q[id].Held() || q[id].OnLease() {
						heldUntagged[id] = true
					}
					if q[id].State == "RUNNING" {
						untaggedAdmin[id] = adminComment(t, hconf, id)
					}
				}
				// A tagged job's AdminComment once it runs (Slurm forgets
				// finished jobs after MinJobAge).
				for jn, id := range tagged {
					if j, ok := q[id]; ok && j.State == "RUNNING" && !strings.HasPrefix(admin[jn], "hadar:") {
						admin[jn] = adminComment(t, hconf, id)
						nodes[jn] = j.Nodes
					}
				}
			}
			if len(q) == 0 {
				done[name] = time.Since(start)
			}
		}
		time.Sleep(2 * time.Second)
	}
	for name := range confs {
		if _, ok := done[name]; !ok {
			t.Fatalf("the workload under %s did not finish within 12 minutes:\n%s", name, squeueDump(confs[name]))
		}
	}
	e2eutil.Figure(t, "modern_hadar_makespan_s", int(done["hadar"].Seconds()))
	e2eutil.Figure(t, "modern_slurm_only_makespan_s", int(done["slurm"].Seconds()))
	if done["hadar"] >= done["slurm"] {
		t.Errorf("makespan under hadar %s, under Slurm alone %s: want hadar sooner", done["hadar"].Round(time.Second), done["slurm"].Round(time.Second))
	}

	// All completed; each tagged job was placed by hadar or passed through
	// with its reason; the untagged ones never were held, leased or annotated.
	for name, c := range clusters {
		recs, err := e2eutil.ReadJobcomp(e2eutil.JobcompLog(c.Dir))
		if err != nil {
			t.Fatal(err)
		}
		comp := e2eutil.JobcompByJob(recs)
		ids := hids
		if name == "slurm" {
			ids = sids
		}
		for _, id := range ids {
			if r := comp[id]; len(r) == 0 || r[len(r)-1]["JobState"] != "COMPLETED" {
				t.Errorf("%s cluster, job %s: jobcomp %v, want COMPLETED", name, id, r)
			}
		}
	}
	for name, id := range tagged {
		a := admin[name]
		if !strings.HasPrefix(a, "hadar: placed by hadar-slurmd") && !strings.Contains(a, "passed through") {
			t.Errorf("%s (job %s): AdminComment %q, want hadar's placement or a pass-through with its reason", name, id, a)
		}
	}
	for _, id := range untagged {
		if a := untaggedAdmin[id]; strings.Contains(a, "hadar") || heldUntagged[id] {
			t.Errorf("untagged job %s: AdminComment %q, held %v: want it untouched", id, a, heldUntagged[id])
		}
	}

	// What hadar-slurmd learned, against the truth it never read.
	var rows []profileRow
	var report []string
	learnedModels := map[string]int{}
	// A model no matrix knows is learned as the job type
	// jobproto.UnknownModelType names.
	modelOf := map[string]string{}
	for model := range modernTruth {
		jt := jobproto.UnknownModelType(model)
		modelOf[jt] = model
		var mrows []profileRow
		hadarJSON(t, hconf, &mrows, "profiles", "show", "--json", "--db", filepath.Join(dir, "data", "hadar.db"), jt)
		rows = append(rows, mrows...)
	}
	for _, r := range rows {
		r.JobType = modelOf[r.JobType]
		if r.Source != "learned" && r.Source != "measured" {
			continue
		}
		want := modernRate(r.JobType, r.GPUType, r.Workers)
		if want == 0 {
			t.Errorf("learned %s on %d x %s: the truth has no such cell", r.JobType, r.Workers, r.GPUType)
			continue
		}
		rel := (r.StepsPerSecond - want) / want
		learnedModels[r.JobType]++
		report = append(report, fmt.Sprintf("%s/%s/%d: %.2f vs %.2f (%+.0f%%, %d samples)", r.JobType, r.GPUType, r.Workers, r.StepsPerSecond, want, 100*rel, r.Samples))
		if math.Abs(rel) > 0.2 {
			t.Errorf("learned %s on %d x %s: %.3f steps/s, truth %.3f (%+.0f%%): want within 20%%", r.JobType, r.Workers, r.GPUType, r.StepsPerSecond, want, 100*rel)
		}
	}
	for model := range modernTruth {
		if learnedModels[model] == 0 {
			t.Errorf("nothing learned for %s", model)
		}
	}
	sort.Strings(report)
	t.Logf("RESULT TestModernSite: makespan hadar %s, Slurm alone %s; learned cells: %s",
		done["hadar"].Round(time.Second), done["slurm"].Round(time.Second), strings.Join(report, "; "))
	names := make([]string, 0, len(admin))
	for n := range admin {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t.Logf("RESULT TestModernSite: %s (job %s) on %s: %s", n, tagged[n], nodes[n], admin[n])
	}
}

// profileRow is a row of `hadar profiles show --json`.
type profileRow struct {
	JobType        string  `json:"job_type"`
	GPUType        string  `json:"gpu_type"`
	Workers        int     `json:"workers"`
	StepsPerSecond float64 `json:"steps_per_s"`
	Source         string  `json:"source"`
	Samples        int     `json:"samples"`
}

// adminComment is a job's AdminComment (scontrol show job), "" if none.
func adminComment(t *testing.T, conf, id string) string {
	t.Helper()
	out := must(t, conf, "scontrol", "show", "job", id)
	i := strings.Index(out, "AdminComment=")
	if i < 0 {
		return ""
	}
	rest := out[i+len("AdminComment="):]
	if j := strings.Index(rest, " Comment="); j >= 0 {
		rest = rest[:j]
	}
	if j := strings.Index(rest, "\n"); j >= 0 {
		rest = rest[:j]
	}
	return strings.TrimSpace(rest)
}
