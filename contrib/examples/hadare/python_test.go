package hadare

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// findPython returns $HADAR_PYTHON, else Debian's /usr/bin/python3, else
// python3 on PATH, if it imports torch. Without one the test skips, unless
// HADAR_E2E=1 (make test installs python3-torch), where that is a failure.
func findPython(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("HADAR_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, p := range cands {
		if p == "" {
			continue
		}
		if err := exec.Command(p, "-c", "import torch").Run(); err == nil {
			return p
		}
	}
	if os.Getenv("HADAR_E2E") == "1" {
		t.Fatal("no python3 with torch: apt-get install -y python3-torch (or set HADAR_PYTHON)")
	}
	t.Skip("no python3 with torch (set HADAR_PYTHON): the copy helper's tests need one")
	return ""
}

// TestUnittest runs test_hadar_copies.py.
func TestUnittest(t *testing.T) {
	py := findPython(t)
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_hadar_copies")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "HADAR_") && !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nOK") {
		t.Fatalf("%s -m unittest test_hadar_copies: %v\n%s", py, err, out)
	}
	t.Logf("%s", out[strings.LastIndex(string(out), "Ran "):])
}
