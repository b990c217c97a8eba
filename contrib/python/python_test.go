package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
)

// findPython returns $HADAR_PYTHON, else Debian's /usr/bin/python3, else
// python3 on PATH. Without one the tests skip, unless HADAR_E2E=1 (make
// test), where a missing python3 is a failure.
func findPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("HADAR_PYTHON"), "/usr/bin/python3"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	if os.Getenv("HADAR_E2E") == "1" {
		t.Fatal("no python3: apt-get install -y python3 (or set HADAR_PYTHON)")
	}
	t.Skip("no python3 (set HADAR_PYTHON): the Python helper's tests need one")
	return ""
}

func run(t *testing.T, env []string, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(append(cleanEnv(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanEnv is the environment without Slurm's and hadar's variables, so a
// test run inside a Slurm job does not report for it.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "HADAR_SPOOL=") &&
			!strings.HasPrefix(kv, "RANK=") && !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	return env
}

// TestUnittest runs the package's own unit tests.
func TestUnittest(t *testing.T) {
	py := findPython(t)
	out := run(t, nil, "hadar-progress", py, "-m", "unittest", "discover", "-s", "tests", "-v")
	if !strings.Contains(out, "\nOK") {
		t.Fatalf("unittest did not end OK:\n%s", out)
	}
	t.Logf("%s", out[strings.LastIndex(out, "Ran "):])
}

// TestDaemonReadsPythonReports: what report() writes in an array task is
// what hadar-slurmd reads, under the id it looks the task up by.
func TestDaemonReadsPythonReports(t *testing.T) {
	py := findPython(t)
	spool := t.TempDir()
	src, err := filepath.Abs("hadar-progress/src")
	if err != nil {
		t.Fatal(err)
	}
	script := `import sys, hadar_progress as h
assert h.report(1150, total=3000)
assert not h.report(1151)      # too soon: kept
assert h.Reporter().flush() is False   # another reporter has nothing pending
h._default_reporter().flush()  # the kept 1151
`
	before := time.Now().Add(-time.Second)
	run(t, []string{"PYTHONPATH=" + src, "HADAR_SPOOL=" + spool, "SLURM_JOB_ID=30",
		"SLURM_ARRAY_JOB_ID=28", "SLURM_ARRAY_TASK_ID=0"}, t.TempDir(), py, "-c", script)
	got, errs := jobproto.ReadProgress(spool)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p, ok := got["28_0"]
	if !ok || len(got) != 1 {
		t.Fatalf("reports = %+v, want one for 28_0", got)
	}
	if p.Steps != 1151 || p.Total != 3000 || p.UID != os.Getuid() || p.At.Before(before) || p.At.After(time.Now()) {
		t.Errorf("report = %+v, want 1151 of 3000 by uid %d, at about now", p, os.Getuid())
	}
}

// TestPipInstall: `pip install contrib/python/hadar-progress` works and the
// installed package (not this checkout's source) reports.
func TestPipInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("pip install: skipped with -short")
	}
	py := findPython(t)
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		if os.Getenv("HADAR_E2E") == "1" {
			t.Fatalf("python3 -m venv: %v\n%s", err, out)
		}
		t.Skipf("python3 -m venv does not work here (apt-get install python3-venv): %s", out)
	}
	// From a copy: setuptools writes build/ and *.egg-info beside the sources.
	pkg := filepath.Join(dir, "hadar-progress")
	if err := os.CopyFS(pkg, os.DirFS("hadar-progress")); err != nil {
		t.Fatal(err)
	}
	// Offline: setuptools from the system (no build isolation, no index).
	run(t, nil, dir, filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", pkg)
	spool := filepath.Join(dir, "spool")
	out := run(t, []string{"HADAR_SPOOL=" + spool, "SLURM_JOB_ID=77"}, dir, filepath.Join(venv, "bin", "python"), "-c",
		"import hadar_progress as h; print(h.__file__); h.report(5, force=True)")
	if !strings.HasPrefix(strings.TrimSpace(out), venv) {
		t.Errorf("imported %s, want the package installed in %s", out, venv)
	}
	if got, _ := jobproto.ReadProgress(spool); got["77"].Steps != 5 {
		t.Errorf("installed package's report = %+v", got)
	}
}
