package manpage

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// UpdateEnv is the environment variable that makes CheckGolden rewrite the
// generated files instead of comparing them (`make man` sets it).
const UpdateEnv = "HADAR_UPDATE_MAN"

// CheckGolden compares generated with the committed file at path; with
// $HADAR_UPDATE_MAN=1 it writes the file instead. For tests.
func CheckGolden(t testing.TB, path, generated string) {
	t.Helper()
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(generated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with `make man`)", err)
	}
	if !bytes.Equal(have, []byte(generated)) {
		t.Errorf("%s is stale: the code it is generated from changed; run `make man` and commit the result", path)
	}
}

// Lint formats page with groff (when installed) with every warning on, and
// fails on any warning. For tests.
func Lint(t testing.TB, name, page string) {
	t.Helper()
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Logf("groff not installed: %s not linted", name)
		return
	}
	cmd := exec.Command(groff, "-man", "-ww", "-z", "-Tutf8")
	cmd.Stdin = strings.NewReader(page)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("groff -man -ww on %s: %v\n%s", name, err, out)
	}
}
