package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// demoJob is one line of the demo's job lists (hadar.jobs, slurm.jobs,
// untagged.jobs): "ID MODEL GPUS STEPS".
type demoJob struct {
	ID, Model string
	GPUs      int
}

func readJobList(t *testing.T, path string) []demoJob {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []demoJob
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		g, _ := strconv.Atoi(f[2])
		out = append(out, demoJob{ID: f[0], Model: f[1], GPUs: g})
	}
	return out
}

var rePredicted = regexp.MustCompile(`^PREDICTED hadar_makespan_s=(\d+) slurm_only_makespan_s=(\d+)$`)

var reSummary = regexp.MustCompile(`^SUMMARY jobs=(\d+) completed=(\d+) hadar_makespan_s=(\d+) slurm_only_makespan_s=(\d+)$`)

// liveChecks are `hadar status`, `hadar plan` and `hadar explain` run
// against the live daemon while the demo's phase 1 runs.
type liveChecks struct {
	status, plan, explain e2eutil.Result
	explainID             string
	skipped               string
}

// TestWorkload runs the demo (contrib/demo/run: the mixed workload under
// hadar-slurmd, then under Slurm alone) and checks what hadar did against
// what Slurm recorded.
func TestWorkload(t *testing.T) {
	requireE2E(t)
	requireDemoLayout(t)
	if err := e2eutil.WaitGone(slurmConf, nil, 60*time.Second); err != nil {
		t.Fatalf("the cluster is not idle: %v\n%s", err, squeueDump(slurmConf))
	}
	dir := e2eutil.WorkDir(t, "workload")
	demo := filepath.Join(dir, "demo")
	env := []string{"HADAR_BIN_DIR=" + binDir, "HADAR_CLUSTER_DIR=" + clusterDir, "HADAR_DEMO_DIR=" + demo,
		"HADAR_DEMO_KEEP=1", "HADAR_DEMO_TIMEOUT=420"}
	var jobLists []string
	t.Cleanup(func() {
		// Whatever happened, no job of the demo outlives it.
		var ids []string
		for _, f := range jobLists {
			if b, err := os.ReadFile(f); err == nil {
				for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
					if f := strings.Fields(line); len(f) > 0 {
						ids = append(ids, f[0])
					}
				}
			}
		}
		if len(ids) > 0 {
			e2eutil.Run(30*time.Second, e2eutil.SlurmEnv(slurmConf), "scancel", ids...)
		}
	})
	for _, f := range []string{"hadar.jobs", "untagged.jobs", "slurm.jobs"} {
		jobLists = append(jobLists, filepath.Join(demo, f))
	}

	// While phase 1 runs: status, plan and explain against the live daemon.
	var live liveChecks
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		live = runLiveChecks(demo, stop)
	}()

	start := time.Now()
	res := e2eutil.Run(15*time.Minute, e2eutil.SlurmEnv(slurmConf, env...), filepath.Join(repoRoot, "contrib", "demo", "run"))
	close(stop)
	wg.Wait()
	e2eutil.Figure(t, "demo_seconds", int(time.Since(start).Seconds()))
	_ = os.WriteFile(filepath.Join(dir, "demo.stdout"), []byte(res.Stdout), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "demo.stderr"), []byte(res.Stderr), 0o644)
	daemonLog := filepath.Join(demo, "hadar-slurmd.log")
	if res.Err != nil {
		t.Errorf("demo: %v\n--- stderr (tail):\n%s\n--- daemon log (tail):\n%s\n--- queue:\n%s",
			res.Err, lastLines(res.Stderr, 30), tail(daemonLog, 30), squeueDump(slurmConf))
	}
	if time.Since(start) > 10*time.Minute {
		t.Errorf("the demo took %s, want under 10 minutes", time.Since(start).Round(time.Second))
	}

	// The demo's output: live placements, a per-job table, SUMMARY last.
	lines := strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	m := reSummary.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("the demo's last line is %q, want SUMMARY jobs=N completed=N hadar_makespan_s=X slurm_only_makespan_s=Y", last)
	}
	nJobs, _ := strconv.Atoi(m[1])
	completed, _ := strconv.Atoi(m[2])
	hadarMakespan, _ := strconv.Atoi(m[3])
	slurmMakespan, _ := strconv.Atoi(m[4])
	e2eutil.Figure(t, "workload_jobs", nJobs)
	e2eutil.Figure(t, "hadar_makespan_s", hadarMakespan)
	e2eutil.Figure(t, "slurm_only_makespan_s", slurmMakespan)
	if !strings.Contains(res.Stdout, "live placements (hadar status)") || !strings.Contains(res.Stdout, "NODE") {
		t.Errorf("the demo showed no live placements (hadar status) on stdout")
	}
	// Issue 14: the prediction of `hadar simulate --layout`, printed before
	// the workload runs, is within 25% of both measured makespans.
	pm := rePredicted.FindStringSubmatch(lines[0])
	if pm == nil {
		t.Errorf("the demo's first line is %q, want PREDICTED hadar_makespan_s=X slurm_only_makespan_s=Y", lines[0])
	} else {
		for i, measured := range []int{hadarMakespan, slurmMakespan} {
			predicted, _ := strconv.Atoi(pm[i+1])
			e2eutil.Figure(t, []string{"predicted_hadar_makespan_s", "predicted_slurm_only_makespan_s"}[i], predicted)
			if d := float64(measured - predicted); d > 0.25*float64(predicted) || -d > 0.25*float64(predicted) {
				t.Errorf("%s: measured %d s, predicted %d s: more than 25%% apart", []string{"hadar", "Slurm alone"}[i], measured, predicted)
			}
		}
	}
	if predicted, measured := demoGPUTypes(t, demo); len(predicted) == len(measured) && len(measured) > 0 {
		same := 0
		for i := range measured {
			if measured[i] == predicted[i] {
				same++
			}
		}
		e2eutil.Figure(t, "predicted_gpu_type_same_pct", 100*same/len(measured))
		t.Logf("GPU types: predicted %v, measured %v", predicted, measured)
	} else {
		t.Errorf("GPU types: predicted %v, measured %v", predicted, measured)
	}

	tagged := readJobList(t, filepath.Join(demo, "hadar.jobs"))
	untagged := readJobList(t, filepath.Join(demo, "untagged.jobs"))
	alone := readJobList(t, filepath.Join(demo, "slurm.jobs"))
	if nJobs != len(tagged) || completed != nJobs {
		t.Errorf("SUMMARY jobs=%d completed=%d, want jobs=%d completed=%d", nJobs, completed, len(tagged), len(tagged))
	}
	models, sizes := map[string]bool{}, map[int]bool{}
	for _, j := range tagged {
		models[j.Model] = true
		sizes[j.GPUs] = true
		if !strings.Contains(res.Stdout, j.Model) {
			t.Errorf("the per-job table lacks %s", j.Model)
		}
	}
	if len(tagged) < 12 || len(models) < 6 || len(sizes) < 3 || len(untagged) < 1 {
		t.Errorf("workload: %d tagged jobs of %d models and %d sizes, %d untagged; want >= 12 tagged of several models and sizes, and untagged jobs",
			len(tagged), len(models), len(sizes), len(untagged))
	}
	if len(alone) != len(tagged) {
		t.Errorf("phase 2 ran %d jobs, phase 1 %d", len(alone), len(tagged))
	}

	jobcomp, err := e2eutil.ReadJobcomp(e2eutil.JobcompLog(clusterDir))
	if err != nil {
		t.Fatal(err)
	}
	comp := e2eutil.JobcompByJob(jobcomp)
	layout, err := e2eutil.ReadLayout(clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	typeOf := func(node string) string {
		for ty := range layout.GPUs[node] {
			return ty
		}
		return ""
	}
	logs := readLog(t, daemonLog)
	st := openStateDB(t, filepath.Join(demo, "data", "state.db"))
	dbDecisions, err := st.Decisions()
	if err != nil {
		t.Fatal(err)
	}

	// Every tagged job ran where the daemon's last place/migrate decision
	// put it, and completed.
	lastLog := map[string]logLine{}
	for _, l := range logs {
		if l["msg"] == "decision" && (l["decision"] == "place" || l["decision"] == "migrate") {
			lastLog[l["job"]] = l
		}
	}
	lastDB := map[string]e2eutil.Decision{}
	migrated := map[string]bool{}
	for _, d := range dbDecisions {
		if d.Kind == "place" || d.Kind == "migrate" {
			lastDB[d.Job] = d
		}
		if d.Kind == "migrate" {
			migrated[d.Job] = true
		}
	}
	onType := map[string]int{}
	for _, j := range tagged {
		recs := comp[j.ID]
		if len(recs) == 0 {
			t.Errorf("tagged job %s (%s): no jobcomp record", j.ID, j.Model)
			continue
		}
		final := recs[len(recs)-1]
		if final["JobState"] != "COMPLETED" {
			t.Errorf("tagged job %s (%s): final state %s", j.ID, j.Model, final["JobState"])
		}
		ran := expandNodes(t, final["NodeList"])
		l, ok := lastLog[j.ID]
		if !ok {
			t.Errorf("tagged job %s (%s) ran on %v, but the daemon log has no place/migrate decision for it", j.ID, j.Model, ran)
			continue
		}
		want := placementNodes(l["to"])
		if strings.Join(ran, ",") != strings.Join(want, ",") {
			t.Errorf("tagged job %s (%s) ran on %v; the daemon's last decision (%s) put it on %v", j.ID, j.Model, ran, l["decision"], want)
		}
		for _, n := range ran {
			if ty := typeOf(n); ty != l["gpu_type"] {
				t.Errorf("tagged job %s ran on %s (%s); the decision chose GPU type %q", j.ID, n, ty, l["gpu_type"])
			}
			onType[typeOf(n)]++
		}
		if d := lastDB[j.ID]; d.To != l["to"] || d.Kind != l["decision"] || d.GPUType != l["gpu_type"] {
			t.Errorf("job %s: the state database's last decision %+v differs from the log's %v", j.ID, d, l)
		}
		if migrated[j.ID] && len(recs) < 2 {
			t.Errorf("migrated job %s has %d jobcomp records, want one per run", j.ID, len(recs))
		}
	}
	e2eutil.Figure(t, "hadar_jobs_per_type", fmt.Sprint(onType))

	// A migration happened, and the migrated jobs completed, resuming from
	// their last progress report.
	e2eutil.Figure(t, "migrations", countKind(dbDecisions, "migrate"))
	if len(migrated) == 0 {
		t.Errorf("no job was migrated (decisions: %d place, %d migrate)", countKind(dbDecisions, "place"), countKind(dbDecisions, "migrate"))
	}
	resumed := 0
	for id := range migrated {
		recs := comp[id]
		if len(recs) == 0 || recs[len(recs)-1]["JobState"] != "COMPLETED" {
			t.Errorf("migrated job %s did not complete: %v", id, recs)
		}
		if out, err := os.ReadFile(filepath.Join(demo, "out", id+".out")); err == nil {
			for _, m := range regexp.MustCompile(`resume=([0-9.]+)`).FindAllStringSubmatch(string(out), -1) {
				if v, _ := strconv.ParseFloat(m[1], 64); v > 0 {
					resumed++
					break
				}
			}
		}
	}
	e2eutil.Figure(t, "migrated_jobs_resumed_from_progress", fmt.Sprintf("%d/%d", resumed, len(migrated)))
	if len(migrated) > 0 && resumed == 0 {
		t.Errorf("no migrated job resumed from its last progress report (toyjob prints resume=STEPS when it restarts)")
	}

	// Untagged jobs: untouched (no action, no log line names them) and run
	// exactly once, to completion.
	untaggedIDs := map[string]bool{}
	for _, j := range untagged {
		untaggedIDs[j.ID] = true
		recs := comp[j.ID]
		if len(recs) != 1 || recs[0]["JobState"] != "COMPLETED" {
			t.Errorf("untagged job %s: %d runs, want exactly one COMPLETED: %v", j.ID, len(recs), recs)
		}
	}
	actions, err := st.Actions()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		for _, id := range strings.Split(a.JobIDs, ",") {
			if untaggedIDs[id] {
				t.Errorf("daemon action names untagged job %s: %+v", id, a)
			}
		}
	}
	for _, d := range dbDecisions {
		if untaggedIDs[d.Job] {
			t.Errorf("daemon decision about untagged job %s: %+v", d.Job, d)
		}
	}
	for _, l := range logs {
		for id := range jobNumbers(l) {
			if untaggedIDs[id] {
				t.Errorf("daemon log line names untagged job %s: %v", id, l)
			}
		}
	}

	// Phase 2 (Slurm alone) completed too, and took longer.
	for _, j := range alone {
		if recs := comp[j.ID]; len(recs) == 0 || recs[len(recs)-1]["JobState"] != "COMPLETED" {
			t.Errorf("phase 2 job %s (%s) did not complete: %v", j.ID, j.Model, recs)
		}
	}
	if hadarMakespan <= 0 || hadarMakespan >= slurmMakespan {
		t.Errorf("makespan under hadar %ds, under Slurm alone %ds: want hadar sooner", hadarMakespan, slurmMakespan)
	}

	// The rounds stayed fast.
	rounds, err := st.Rounds()
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for _, r := range rounds {
		worst = max(worst, r.Observe+r.Solve+r.Enforce)
	}
	e2eutil.Figure(t, "workload_slowest_round_ms", int(worst*1000))

	checkLive(t, live, tagged, untaggedIDs)
}

func countKind(ds []e2eutil.Decision, kind string) int {
	n := 0
	for _, d := range ds {
		if d.Kind == kind {
			n++
		}
	}
	return n
}

// runLiveChecks waits until the demo has submitted its tagged jobs and the
// daemon has decided something, then runs status, plan and explain.
func runLiveChecks(demo string, stop <-chan struct{}) liveChecks {
	var lc liveChecks
	deadline := time.Now().Add(3 * time.Minute)
	var ids []string
	for {
		select {
		case <-stop:
			lc.skipped = "the demo ended before its jobs were submitted"
			return lc
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			lc.skipped = "no decision in the daemon log after 3 minutes"
			return lc
		}
		b, _ := os.ReadFile(filepath.Join(demo, "hadar.jobs"))
		logb, _ := os.ReadFile(filepath.Join(demo, "hadar-slurmd.log"))
		ids = nil
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				ids = append(ids, f[0])
			}
		}
		if len(ids) >= 12 && strings.Contains(string(logb), "msg=decision") {
			break
		}
	}
	cfg := filepath.Join(demo, "hadar.toml")
	// Explain the last job submitted that is still in the queue.
	if q, err := e2eutil.Queue(slurmConf, ids); err == nil {
		for i := len(ids) - 1; i >= 0; i-- {
			if _, ok := q[ids[i]]; ok {
				lc.explainID = ids[i]
				break
			}
		}
	}
	env := e2eutil.SlurmEnv(slurmConf)
	lc.status = e2eutil.Run(30*time.Second, env, hadarBin(), "status", "--json")
	lc.plan = e2eutil.Run(30*time.Second, env, hadarBin(), "plan", "--json", "--config", cfg)
	if lc.explainID != "" {
		lc.explain = e2eutil.Run(30*time.Second, env, hadarBin(), "explain", "--json", "--config", cfg, lc.explainID)
	}
	return lc
}

func checkLive(t *testing.T, lc liveChecks, tagged []demoJob, untagged map[string]bool) {
	t.Helper()
	if lc.skipped != "" {
		t.Errorf("live status/plan/explain not run: %s", lc.skipped)
		return
	}
	taggedIDs := map[string]bool{}
	for _, j := range tagged {
		taggedIDs[j.ID] = true
	}
	var st struct {
		Nodes []struct{ Name string } `json:"nodes"`
		Jobs  []struct {
			ID     string `json:"id"`
			Tagged bool   `json:"tagged"`
		} `json:"jobs"`
	}
	if lc.status.Err != nil || json.Unmarshal([]byte(lc.status.Stdout), &st) != nil {
		t.Errorf("live hadar status --json: %v\n%s", lc.status.Err, lc.status.Stdout)
	} else {
		if len(st.Nodes) != 5 {
			t.Errorf("live status: %d nodes, want 5", len(st.Nodes))
		}
		for _, j := range st.Jobs {
			if taggedIDs[j.ID] && !j.Tagged {
				t.Errorf("live status: job %s is tagged but shown untagged", j.ID)
			}
		}
	}
	var plan struct {
		Policy    string `json:"policy"`
		DryRun    bool   `json:"dry_run"`
		Tagged    int    `json:"tagged"`
		Sources   []string
		Decisions []struct {
			Job      string `json:"job"`
			Decision string `json:"decision"`
		} `json:"decisions"`
		Actions []struct {
			Jobs []string `json:"jobs"`
		} `json:"actions"`
	}
	if lc.plan.Err != nil || json.Unmarshal([]byte(lc.plan.Stdout), &plan) != nil {
		t.Errorf("live hadar plan --json: %v\n%s", lc.plan.Err, lc.plan.Stdout)
	} else {
		if plan.Policy != "hadar" || !plan.DryRun {
			t.Errorf("live plan: policy %q dry_run %v", plan.Policy, plan.DryRun)
		}
		if !strings.Contains(strings.Join(plan.Sources, "\n"), "state: a copy of") {
			t.Errorf("live plan did not use a copy of the daemon's state: %v", plan.Sources)
		}
		for _, d := range plan.Decisions {
			if !taggedIDs[d.Job] {
				t.Errorf("live plan decided about job %s, not a tagged job of the workload", d.Job)
			}
		}
		for _, a := range plan.Actions {
			for _, id := range a.Jobs {
				if untagged[id] {
					t.Errorf("live plan would act on untagged job %s", id)
				}
			}
		}
		e2eutil.Figure(t, "live_plan_decisions", len(plan.Decisions))
	}
	if lc.explainID == "" {
		t.Logf("live explain skipped: every job had finished")
		return
	}
	var ex struct {
		Job     string `json:"job"`
		Tagged  bool   `json:"tagged"`
		Class   string `json:"class"`
		Model   string `json:"model"`
		Summary string `json:"summary"`
	}
	if lc.explain.Err != nil {
		if strings.Contains(lc.explain.Stderr, "not in the queue") {
			t.Logf("live explain: job %s finished meanwhile", lc.explainID)
			return
		}
		t.Errorf("live hadar explain %s: %v", lc.explainID, lc.explain.Err)
		return
	}
	if err := json.Unmarshal([]byte(lc.explain.Stdout), &ex); err != nil || !ex.Tagged || ex.Model == "" || ex.Summary == "" || ex.Class == "untagged" {
		t.Errorf("live explain %s: %+v (%v)\n%s", lc.explainID, ex, err, lc.explain.Stdout)
	}
	e2eutil.Figure(t, "live_explain", fmt.Sprintf("%q", ex.Summary))
}

// TestRoundTime100: with 100 pending tagged jobs (more than the cluster
// can run), one round of hadar-slurmd (observe + solve + enforce, from its
// state database and its log) takes well under a second.
func TestRoundTime100(t *testing.T) {
	requireE2E(t)
	requireDemoLayout(t)
	if err := e2eutil.WaitGone(slurmConf, nil, 60*time.Second); err != nil {
		t.Fatalf("the cluster is not idle: %v\n%s", err, squeueDump(slurmConf))
	}
	dir := e2eutil.WorkDir(t, "round100")
	cfg := writeConfig(t, dir, "")
	models := []string{"resnet50-bs64", "resnet18-bs128", "lm-bs20", "transformer-bs16", "a3c", "cyclegan", "recommendation-bs512", "lm-bs5"}
	var ids []string
	cancelOnCleanup(t, slurmConf, &ids)
	t0 := time.Now()
	for i := 0; i < 100; i++ {
		ids = append(ids, sbatch(t, slurmConf, "-J", "e2e-round100", "-o", "/dev/null",
			"--comment", fmt.Sprintf("hadar model=%s steps=%d", models[i%len(models)], 1000+i),
			"--gres", fmt.Sprintf("gpu:%d", []int{1, 2, 4}[i%3]), "--wrap", "sleep 600"))
	}
	e2eutil.Figure(t, "submit_100_seconds", fmt.Sprintf("%.1f", time.Since(t0).Seconds()))
	waitState(t, slurmConf, ids, "PENDING", 60*time.Second)

	// The dry run first: plan decides about all 100 and changes nothing.
	var plan struct {
		Tagged    int     `json:"tagged"`
		ObserveMS float64 `json:"observe_ms"`
		SolveMS   float64 `json:"solve_ms"`
		Decisions []struct {
			Job      string `json:"job"`
			Decision string `json:"decision"`
		} `json:"decisions"`
	}
	hadarJSON(t, slurmConf, &plan, "plan", "--json", "--config", cfg)
	e2eutil.Figure(t, "plan_100_observe_ms", plan.ObserveMS)
	e2eutil.Figure(t, "plan_100_solve_ms", plan.SolveMS)
	if plan.Tagged != 100 || len(plan.Decisions) != 100 {
		t.Errorf("plan: %d tagged, %d decisions; want 100 each", plan.Tagged, len(plan.Decisions))
	}
	q, err := e2eutil.Queue(slurmConf, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !q[id].OnLease() {
			t.Fatalf("after hadar plan, job %s is %v: plan must not change anything", id, q[id])
		}
	}

	// Three real rounds, each a fresh hadar-slurmd --once.
	for i := 1; i <= 3; i++ {
		t1 := time.Now()
		r := e2eutil.Run(60*time.Second, e2eutil.SlurmEnv(slurmConf), daemonBin(), "--once", "--config", cfg)
		wall := time.Since(t1)
		if r.Err != nil {
			t.Fatalf("hadar-slurmd --once: %v\n%s", r.Err, r.Stderr)
		}
		var round logLine
		for _, s := range strings.Split(r.Stderr, "\n") {
			if l := parseLogLine(s); l["msg"] == "round" {
				round = l
			}
		}
		rounds, err := openStateDB(t, filepath.Join(dir, "data", "state.db")).Rounds()
		if err != nil {
			t.Fatal(err)
		}
		if len(rounds) != i {
			t.Fatalf("state database has %d rounds after %d runs", len(rounds), i)
		}
		rr := rounds[i-1]
		total := rr.Observe + rr.Solve + rr.Enforce
		e2eutil.Figure(t, fmt.Sprintf("round%d_100_jobs", i), fmt.Sprintf("observe=%.0fms solve=%.1fms enforce=%.0fms total=%.0fms placed=%d process_wall=%.0fms log=%q",
			rr.Observe*1000, rr.Solve*1000, rr.Enforce*1000, total*1000, rr.Placed, wall.Seconds()*1000,
			fmt.Sprintf("observe=%s solve=%s enforce=%s", round["observe"], round["solve"], round["enforce"])))
		if rr.Tagged < 90 || rr.Error != "" {
			t.Errorf("round %d: %+v", i, rr)
		}
		if total >= 1 {
			t.Errorf("round %d took %.3fs (observe %.3f + solve %.3f + enforce %.3f), want < 1s", i, total, rr.Observe, rr.Solve, rr.Enforce)
		}
		if i == 1 && rr.Placed == 0 {
			t.Errorf("the first round placed nothing")
		}
		time.Sleep(2 * time.Second)
	}
	// It started what fits and left the rest on its lease.
	q, err = e2eutil.Queue(slurmConf, ids)
	if err != nil {
		t.Fatal(err)
	}
	leased, gpus := 0, 0
	for i, id := range ids {
		if q[id].OnLease() {
			leased++
		} else {
			gpus += []int{1, 2, 4}[i%3]
		}
	}
	e2eutil.Figure(t, "round100_started_gpus", gpus)
	if leased < 80 || gpus > 20 || gpus == 0 {
		t.Errorf("after three rounds: %d still on hadar's lease, %d GPUs started; want most on the lease and at most the cluster's 20 GPUs started", leased, gpus)
	}
}
