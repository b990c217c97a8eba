// Package progress tests hadar's progress helpers with real PyTorch
// (Debian's python3-torch, CPU): a tiny training job reports through the
// Python callback, through hadar_progress.report in a job array task, and
// through `hadar report --follow` on its printed `step N/M` log; the test
// reads the reports as hadar-slurmd does (jobproto.ReadProgress). It needs no
// Slurm cluster: the job's Slurm variables are set by the test.
//
// It runs whenever a python3 with torch is found ($HADAR_PYTHON, else
// /usr/bin/python3, else python3 on PATH) and skips otherwise, except under
// HADAR_E2E=1 (make test), where a missing torch is a failure.
package progress

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
	"github.com/hadar-sched/hadar/jobproto"
)

const steps = 40

func findTorchPython(t *testing.T) string {
	t.Helper()
	p, err := e2eutil.FindPython("torch")
	if err != nil && e2eutil.Enabled() {
		t.Fatal(err)
	} else if err != nil {
		t.Skipf("%v; runs under HADAR_E2E=1", err)
	}
	return p
}

// hadarBinary is $HADAR_BIN_DIR/hadar if that is set, else a fresh build
// of this checkout's.
func hadarBinary(t *testing.T, repo string) string {
	t.Helper()
	if d := os.Getenv("HADAR_BIN_DIR"); d != "" {
		return filepath.Join(d, "hadar")
	}
	p := filepath.Join(t.TempDir(), "hadar")
	if r := (e2eutil.Cmd{Dir: repo}).Run("go", "build", "-o", p, "./cmd/hadar"); r.Err != nil {
		t.Fatalf("go build ./cmd/hadar: %v\n%s", r.Err, r.Output())
	}
	return p
}

type result struct {
	FirstLoss float64 `json:"first_loss"`
	LastLoss  float64 `json:"last_loss"`
	Steps     int     `json:"steps"`
}

func TestTorchReports(t *testing.T) {
	py := findTorchPython(t)
	repo, err := e2eutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	hadar := hadarBinary(t, repo)
	script := filepath.Join(repo, "contrib", "python", "hadar-progress", "examples", "tiny_torch.py")
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	env := func(more ...string) []string {
		var e []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "HADAR_SPOOL=") && !strings.HasPrefix(kv, "RANK=") {
				e = append(e, kv)
			}
		}
		return append(append(e, "HADAR_SPOOL="+spool, "PYTHONDONTWRITEBYTECODE=1"), more...)
	}
	train := func(name string, extra []string, args ...string) *exec.Cmd {
		cmd := exec.Command(py, append([]string{script}, args...)...)
		cmd.Env, cmd.Dir = env(extra...), dir
		cmd.Args = append(cmd.Args, "--steps", "40", "--result", filepath.Join(dir, name+".json"))
		return cmd
	}
	checkTrained := func(name string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.Steps != steps || !(r.LastLoss < r.FirstLoss/10) {
			t.Errorf("%s: %+v: did not train (%d steps, loss not down 10x)", name, r, steps)
		}
	}
	report := func(id string) jobproto.Progress {
		got, errs := jobproto.ReadProgress(spool)
		for _, err := range errs {
			t.Errorf("progress dir: %v", err)
		}
		return got[id]
	}
	wantFinal := func(id string) {
		t.Helper()
		if p := report(id); p.Steps != steps || p.Total != steps || p.UID != os.Getuid() {
			t.Errorf("report %s = %+v, want %d of %d steps by uid %d", id, p, steps, steps, os.Getuid())
		}
	}

	// (1) The callback, called as Lightning calls it, in job 101.
	if out, err := train("callback", []string{"SLURM_JOB_ID=101"}, "callback").CombinedOutput(); err != nil {
		t.Fatalf("callback job: %v\n%s", err, out)
	}
	checkTrained("callback")
	wantFinal("101")

	// (2) report() in task 0 of job array 128 (its own job id 130).
	if out, err := train("array", []string{"SLURM_JOB_ID=130", "SLURM_ARRAY_JOB_ID=128", "SLURM_ARRAY_TASK_ID=0"}, "report").CombinedOutput(); err != nil {
		t.Fatalf("array job: %v\n%s", err, out)
	}
	checkTrained("array")
	wantFinal("128_0")
	if p := report("130"); p.JobID != "" {
		t.Errorf("the array task reported under its own job id 130: %+v", p)
	}

	// (3) The sidecar on the printed log, started before the log exists:
	//   hadar report --follow train.log & python train.py > train.log; kill $!; wait $!
	logf := filepath.Join(dir, "train.log")
	side := exec.Command(hadar, "report", "--follow", logf, "--interval", "300ms", "--poll", "50ms")
	side.Env = env("SLURM_JOB_ID=150")
	sideOut := &strings.Builder{}
	side.Stdout, side.Stderr = sideOut, sideOut
	if err := side.Start(); err != nil {
		t.Fatal(err)
	}
	defer side.Process.Kill()
	lf, err := os.Create(logf + ".tmp")
	if err != nil {
		t.Fatal(err)
	}
	job := train("sidecar", []string{"SLURM_JOB_ID=150"}, "print", "--sleep", "0.1")
	job.Stdout, job.Stderr = lf, lf
	time.Sleep(200 * time.Millisecond)
	if err := os.Rename(logf+".tmp", logf); err != nil { // the log appears after the sidecar starts
		t.Fatal(err)
	}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	seen := map[float64]bool{}
	exited := make(chan error, 1)
	go func() { exited <- job.Wait() }()
	var jobErr error
poll:
	for {
		select {
		case jobErr = <-exited:
			break poll
		case <-time.After(50 * time.Millisecond):
			if p := report("150"); p.JobID != "" {
				seen[p.Steps] = true
			}
		}
	}
	lf.Close()
	if jobErr != nil {
		b, _ := os.ReadFile(logf)
		t.Fatalf("sidecar's job: %v\n%s", jobErr, b)
	}
	if err := side.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := side.Wait(); err != nil {
		t.Fatalf("hadar report --follow: %v\n%s", err, sideOut)
	}
	checkTrained("sidecar")
	wantFinal("150")
	var mid []float64
	for s := range seen {
		if s > 0 && s < steps {
			mid = append(mid, s)
		}
	}
	if len(mid) == 0 {
		t.Errorf("the sidecar reported no step while the job ran (saw %v)", seen)
	}
	t.Logf("sidecar reports seen while the job ran: %d distinct steps below %d", len(mid), steps)
}
