package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// predictWorkload is a short workload (the demo's format: MODEL GPUS
// SECONDS on its fastest type) whose jobs each have a clear best GPU type:
// the recommendation models run 2.3x faster on a p100 than on a v100, the
// vision models 1.3-1.8x faster on a v100 than on a p100. Eight GPUs of
// twenty: hadar may give every job its best type.
const predictWorkload = `recommendation-bs1024 1 20
resnet50-bs64         1 20
recommendation-bs512  1 20
transformer-bs128     1 20
recommendation-bs2048 1 20
cyclegan              1 20
recommendation-bs1024 1 20
resnet18-bs256        1 20
`

// TestPredictedGPUTypes is issue 14's second acceptance: one short trace
// through `hadar simulate --layout` and through hadar-slurmd on the test
// cluster (toy jobs, contrib/demo/run with this workload) finds the same
// GPU type for at least 90% of the jobs.
func TestPredictedGPUTypes(t *testing.T) {
	requireE2E(t)
	requireDemoLayout(t)
	if err := e2eutil.WaitGone(slurmConf, nil, 60*time.Second); err != nil {
		t.Fatalf("the cluster is not idle: %v\n%s", err, squeueDump(slurmConf))
	}
	dir := e2eutil.WorkDir(t, "predict")
	demo := filepath.Join(dir, "demo")
	workload := filepath.Join(dir, "workload")
	if err := os.WriteFile(workload, []byte(predictWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HADAR_BIN_DIR=" + binDir, "HADAR_CLUSTER_DIR=" + clusterDir, "HADAR_DEMO_DIR=" + demo,
		"HADAR_DEMO_KEEP=1", "HADAR_DEMO_TIMEOUT=300", "HADAR_DEMO_WORKLOAD=" + workload,
		"HADAR_DEMO_UNTAGGED=0", "HADAR_DEMO_STATUS=0"}
	t.Cleanup(func() {
		var ids []string
		for _, f := range []string{"hadar.jobs", "slurm.jobs"} {
			for _, j := range readJobListIfAny(filepath.Join(demo, f)) {
				ids = append(ids, j.ID)
			}
		}
		if len(ids) > 0 {
			e2eutil.Run(30*time.Second, e2eutil.SlurmEnv(slurmConf), "scancel", ids...)
		}
	})
	res := e2eutil.Run(10*time.Minute, e2eutil.SlurmEnv(slurmConf, env...), filepath.Join(repoRoot, "contrib", "demo", "run"))
	_ = os.WriteFile(filepath.Join(dir, "demo.stdout"), []byte(res.Stdout), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "demo.stderr"), []byte(res.Stderr), 0o644)
	if res.Err != nil {
		t.Fatalf("demo: %v\n--- stderr (tail):\n%s", res.Err, lastLines(res.Stderr, 30))
	}

	predicted, measured := demoGPUTypes(t, demo)
	n := strings.Count(predictWorkload, "\n")
	if len(predicted) != n || len(measured) != n {
		t.Fatalf("predicted %d GPU types %v, measured %d %v; want %d each", len(predicted), predicted, len(measured), measured, n)
	}
	same := 0
	for i := range measured {
		if measured[i] == predicted[i] {
			same++
		}
	}
	e2eutil.Figure(t, "predicted_gpu_type_same_pct", 100*same/n)
	t.Logf("GPU types: predicted %v, measured %v", predicted, measured)
	if 10*same < 9*n {
		t.Errorf("same GPU type for %d of %d jobs, want at least 90%%: predicted %v, measured %v", same, n, predicted, measured)
	}
}

// demoGPUTypes returns, for a demo run in dir demo, each tagged job's GPU
// type as the demo's prediction (predicted.json) and as it finished on the
// cluster (hadar.report), in workload order.
func demoGPUTypes(t *testing.T, demo string) (predicted, measured []string) {
	t.Helper()
	// Predicted: the simulated daemon's GPU type per job, in workload order.
	b, err := os.ReadFile(filepath.Join(demo, "predicted.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pred struct {
		GPUTypes map[string][]string `json:"gpu_types"`
	}
	if err := json.Unmarshal(b, &pred); err != nil {
		t.Fatal(err)
	}
	predicted = pred.GPUTypes["hadar"]
	// Measured: the GPU type each job finished on (hadar.report: ID STATE
	// NODE TYPE ..., in the order of hadar.jobs, the workload's).
	b, err = os.ReadFile(filepath.Join(demo, "hadar.report"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] != "TOTAL" {
			measured = append(measured, f[3])
		}
	}
	return predicted, measured
}

// readJobListIfAny is readJobList for a file that may not exist yet.
func readJobListIfAny(path string) []demoJob {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []demoJob
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, demoJob{ID: f[0]})
		}
	}
	return out
}
