package e2eutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"
	"time"
)

// TestUser is the unprivileged user the suites submit jobs as.
const TestUser = "hadartest"

// Enabled reports whether the end-to-end tests are to run (HADAR_E2E=1);
// they skip otherwise.
func Enabled() bool { return os.Getenv("HADAR_E2E") == "1" }

// EnvOr is the environment variable key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// RepoRoot is the repository's top directory: the nearest one above the
// working directory (a test's package directory) that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// WorkDir makes a world-readable work directory under /tmp for a test
// (jobs read and write there), named hadar-e2e-NAME-*. It is removed when
// the test passes, and kept and named when it fails or with
// HADAR_E2E_KEEP=1.
func WorkDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hadar-e2e-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("HADAR_E2E_KEEP") == "1" {
			t.Logf("work directory kept: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// Figure logs a measured figure as "E2E name=value" (go test -v shows it).
func Figure(t testing.TB, name string, value any) {
	t.Helper()
	t.Logf("E2E %s=%v", name, value)
}

// EnsureUser creates the user (no home, no login shell) unless it exists.
func EnsureUser(name string) error {
	if _, err := user.Lookup(name); err == nil {
		return nil
	}
	r := Run(time.Minute, nil, "useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name)
	if r.Err != nil {
		if _, err := user.Lookup(name); err == nil {
			return nil // another suite made it meanwhile
		}
		return fmt.Errorf("creating user %s: %w", name, r.Err)
	}
	return nil
}

// binaries are the programs the suites run, built from cmd/NAME.
var binaries = []string{"hadar", "hadar-slurmd"}

// FindBinaries returns an error naming the first of hadar and hadar-slurmd
// that dir lacks.
func FindBinaries(dir string) error {
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("%s not built: %w", b, err)
		}
	}
	return nil
}

// BuildBinaries builds the repository's hadar and hadar-slurmd into dir.
func BuildBinaries(repo, dir string) error {
	for _, b := range binaries {
		if r := (Cmd{Dir: repo}).Run("go", "build", "-o", filepath.Join(dir, b), "./cmd/"+b); r.Err != nil {
			return fmt.Errorf("building %s: %w", b, r.Err)
		}
	}
	return nil
}

// FindPython returns the first python3 that imports modules (e.g. "torch,
// sklearn.datasets"): $HADAR_PYTHON, else Debian's /usr/bin/python3, else
// python3 on PATH; an error naming the fix when none does. The example
// jobs need Debian's python3-torch and python3-sklearn (make test-deps).
func FindPython(modules string) (string, error) {
	cands := []string{os.Getenv("HADAR_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, p := range cands {
		if p == "" {
			continue
		}
		if r := Run(2*time.Minute, nil, p, "-c", "import "+modules); r.Err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no python3 that imports %s: apt-get install -y python3-torch python3-sklearn (or set HADAR_PYTHON)", modules)
}
