package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// TestExampleConfigAndMetrics runs hadar-slurmd with the shipped example
// config (contrib/hadar.toml: /var/lib/hadar, /var/spool/hadar, metrics on
// 127.0.0.1:9788) against the test cluster, runs a few tagged toy jobs, and
// checks that the Prometheus endpoint reports the rounds, the placements and
// the learned-throughput samples with non-zero values (issue 6 acceptance).
func TestExampleConfigAndMetrics(t *testing.T) {
	requireE2E(t)
	requireDemoLayout(t)
	config := filepath.Join(repoRoot, "contrib", "hadar.toml")
	log := filepath.Join(e2eutil.WorkDir(t, "ops"), "hadar-slurmd.log")
	logFile, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// Progress reports of an earlier cluster's jobs would match this one's
	// job ids (a fresh test cluster numbers jobs from 1 again).
	if err := os.RemoveAll("/var/spool/hadar/progress"); err != nil {
		t.Fatal(err)
	}
	// Shorter rounds than the example's 6m so that the test takes a minute;
	// everything else is the shipped file.
	daemon := exec.Command(daemonBin(), "--config", config, "--round", "10s")
	daemon.Env = append(os.Environ(), "SLURM_CONF="+slurmConf, "HADAR_CONFIG=")
	daemon.Stdout, daemon.Stderr = logFile, logFile
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- daemon.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hadar-slurmd exited with %v on SIGTERM; log:\n%s", err, tail(log, 30))
			}
		case <-time.After(60 * time.Second):
			_ = daemon.Process.Kill()
			t.Errorf("hadar-slurmd did not stop within 60s of SIGTERM")
		}
	}
	t.Cleanup(stop)

	var ids []string
	cancelOnCleanup(t, slurmConf, &ids)
	toy := filepath.Join(repoRoot, "contrib", "examples", "toyjob")
	for _, job := range []struct{ model, steps, gres string }{
		{"resnet18-bs128", "720", "gpu:1"}, {"lm-bs20", "2600", "gpu:1"}, {"resnet50-bs64", "180", "gpu:1"},
	} {
		ids = append(ids, sbatch(t, slurmConf, "--comment=hadar model="+job.model+" steps="+job.steps, "--gres="+job.gres,
			"--export=ALL,HADAR="+hadarBin()+",HADAR_SPOOL=/var/spool/hadar,TOYJOB_TICK=1", "-o", "/dev/null", toy))
	}
	if err := e2eutil.WaitGone(slurmConf, ids, 4*time.Minute); err != nil {
		t.Fatalf("%v\n%s\ndaemon log:\n%s", err, squeueDump(slurmConf), tail(log, 40))
	}
	time.Sleep(12 * time.Second) // one more round sees the completions

	resp, err := http.Get("http://127.0.0.1:9788/metrics")
	if err != nil {
		t.Fatalf("metrics endpoint of the example config: %v\nlog:\n%s", err, tail(log, 30))
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`hadar_rounds_total\{result="ok"\} ([0-9.e+]+)`,
		`hadar_slurm_actions_total\{kind="start-now",result="ok"\} ([0-9.e+]+)`,
		`hadar_round_duration_seconds_count\{phase="observe"\} ([0-9.e+]+)`,
		`hadar_throughput_samples_total ([0-9.e+]+)`,
	} {
		m := regexp.MustCompile(want).FindSubmatch(body)
		if m == nil {
			t.Errorf("metrics: no line matching %s", want)
			continue
		}
		if v, _ := strconv.ParseFloat(string(m[1]), 64); v <= 0 {
			t.Errorf("metrics: %s is %s, want > 0", want, m[1])
		}
		e2eutil.Figure(t, "metric", string(m[0]))
	}
	stop()
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}
