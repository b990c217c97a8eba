package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

var (
	rateMu    sync.Mutex
	rateCache = map[string]float64{}
)

// bestRate is a model's steps/s on its fastest GPU type of the test
// cluster (the embedded matrix), as the toy job paces itself.
func bestRate(t *testing.T, model string, workers int) float64 {
	t.Helper()
	key := fmt.Sprintf("%s/%d", model, workers)
	rateMu.Lock()
	defer rateMu.Unlock()
	if r, ok := rateCache[key]; ok {
		return r
	}
	best := 0.0
	for _, typ := range []string{"v100", "p100", "k80"} {
		out, err := exec.Command(filepath.Join(binDir, "hadar"), "profiles", "rate", "--embedded", "--model", model,
			"--gpu-type", typ, "--workers", strconv.Itoa(workers)).Output()
		if err != nil {
			continue
		}
		if r, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil {
			best = max(best, r)
		}
	}
	if best == 0 {
		t.Fatalf("no rate for %s", key)
	}
	rateCache[key] = best
	return best
}

// Models of the workloads: the tagged sleep jobs use any; the toy jobs
// (which pace themselves to the matrix for the GPU type they got) use
// models whose slowest type is at most ~2x slower, so a run on a k80 stays
// short.
var (
	sleepModels = []string{"resnet50-bs64", "resnet18-bs64", "lm-bs20", "transformer-bs16", "a3c", "cyclegan"}
	toyModels   = []string{"a3c", "transformer-bs16", "recommendation-bs512"}
)

// tagged is a tagged sleep job of secs seconds.
func tagged(t *testing.T, model string, g int, secs float64) job {
	steps := int(bestRate(t, model, g)*secs) + 1
	return job{Comment: fmt.Sprintf("hadar model=%s steps=%d", model, steps), GPUs: g, Seconds: secs,
		Name: fmt.Sprintf("rel-%s", model)}
}

// toy is a toy training job (contrib/examples/toyjob) that reports
// progress to the daemon d and resumes after a requeue.
func toy(t *testing.T, d *daemon, model string, g int, secs float64) job {
	steps := int(bestRate(t, model, g)*secs) + 1
	return job{Comment: fmt.Sprintf("hadar model=%s steps=%d", model, steps), GPUs: g,
		Name: "rel-toy-" + model, Script: filepath.Join(repoRoot, "contrib", "examples", "toyjob"),
		Env: []string{"HADAR=" + filepath.Join(binDir, "hadar"), "HADAR_SPOOL=" + filepath.Join(d.dir, "spool"), "TOYJOB_TICK=1"}}
}

// randomWorkload is n tagged jobs of 1, 2 or 4 GPUs and lo..hi seconds,
// every fifth one a toy job.
func randomWorkload(t *testing.T, rng *rand.Rand, d *daemon, n int, lo, hi float64) []job {
	var out []job
	for i := range n {
		g := []int{1, 1, 2, 2, 4}[rng.IntN(5)]
		secs := lo + rng.Float64()*(hi-lo)
		if i%5 == 4 {
			out = append(out, toy(t, d, toyModels[rng.IntN(len(toyModels))], min(g, 2), secs))
		} else {
			out = append(out, tagged(t, sleepModels[rng.IntN(len(sleepModels))], g, secs))
		}
	}
	return out
}

func seed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("HADAR_REL_SEED"), 10, 64); err == nil {
		return s
	}
	return 1
}

// restartCtld starts slurmctld the way contrib/testcluster/up does (it
// recovers its state from StateSaveLocation) and waits until it answers.
func restartCtld(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(clusterDir, "log", "slurmctld.stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("setsid", "slurmctld", "-f", slurmConf)
	cmd.Dir = clusterDir
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "HADAR_TESTCLUSTER_DIR="+clusterDir, "SLURM_CONF="+slurmConf)
	if err := cmd.Run(); err != nil {
		t.Fatalf("restarting slurmctld: %v", err)
	}
	if !ctldUp(30 * time.Second) {
		t.Fatal("slurmctld not answering 30 s after its restart")
	}
}

func ctldUp(timeout time.Duration) bool {
	return e2eutil.WaitFor(timeout, func() bool {
		r := e2eutil.Run(0, nil, "scontrol", "ping")
		return r.Err == nil && strings.Contains(r.Stdout, " is UP")
	})
}

// ctldPid is slurmctld's pid from the cluster's run dir ("" if not alive).
func ctldPid() string {
	b, err := os.ReadFile(filepath.Join(clusterDir, "run", "slurmctld.pid"))
	if err != nil {
		return ""
	}
	pid := strings.TrimSpace(string(b))
	st, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(st)[strings.LastIndex(string(st), ")")+1:]); len(f) > 0 && f[0] == "Z" {
		return ""
	}
	return pid
}

// ensureCtld restarts slurmctld if a test left it stopped.
func ensureCtld(t *testing.T) {
	if ctldPid() == "" {
		restartCtld(t)
	}
}

// resumeNodes returns every drained or down node to service and waits
// until all are idle.
func resumeNodes(t *testing.T, names ...string) {
	for _, n := range names {
		e2eutil.Run(0, nil, "scontrol", "update", "NodeName="+n, "State=RESUME")
	}
	ok := e2eutil.WaitFor(90*time.Second, func() bool {
		r := e2eutil.Run(0, nil, "sinfo", "-h", "-N", "-o", "%N %T")
		if r.Err != nil {
			return false
		}
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			f := strings.Fields(l)
			if len(f) == 2 && (strings.Contains(f[1], "drain") || strings.Contains(f[1], "down") || strings.HasSuffix(f[1], "*")) {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Errorf("nodes not back in service: %s", e2eutil.Run(0, nil, "sinfo", "-N").Stdout)
	}
}
