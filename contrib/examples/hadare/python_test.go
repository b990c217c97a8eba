package hadare

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// findPython returns a python3 that imports torch (e2eutil.FindPython).
// Without one the test skips, unless HADAR_E2E=1 (make test installs
// python3-torch), where that is a failure.
func findPython(t *testing.T) string {
	t.Helper()
	p, err := e2eutil.FindPython("torch")
	if err != nil && os.Getenv("HADAR_E2E") == "1" {
		t.Fatal(err)
	} else if err != nil {
		t.Skipf("%v: the copy helper's tests need one", err)
	}
	return p
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
