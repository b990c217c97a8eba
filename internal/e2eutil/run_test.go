package e2eutil

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCmdRun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		cmd     Cmd
		argv    []string
		want    Result
		wantErr []string // what the error says
	}{
		{name: "output", argv: []string{"sh", "-c", "echo out; echo err >&2"}, want: Result{Stdout: "out\n", Stderr: "err\n"}},
		{name: "failure", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, want: Result{Stdout: "out\n", Stderr: "err\n"},
			wantErr: []string{"sh -c echo out; echo err >&2; exit 3: ", "exit status 3", ": err"}},
		{name: "env", cmd: Cmd{Env: []string{"E2EUTIL_TEST=yes"}}, argv: []string{"sh", "-c", "echo $E2EUTIL_TEST"},
			want: Result{Stdout: "yes\n"}},
		{name: "dir", cmd: Cmd{Dir: dir}, argv: []string{"pwd"}, want: Result{Stdout: dir + "\n"}},
		{name: "not found", argv: []string{"e2eutil-no-such-command"}, wantErr: []string{"e2eutil-no-such-command: "}},
	} {
		got := tc.cmd.Run(tc.argv[0], tc.argv[1:]...)
		if diff := cmp.Diff(tc.want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Err" }, cmp.Ignore())); diff != "" {
			t.Errorf("%s: Run (-want +got):\n%s", tc.name, diff)
		}
		if (got.Err != nil) != (tc.wantErr != nil) {
			t.Errorf("%s: error %v, want one: %v", tc.name, got.Err, tc.wantErr != nil)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(got.Err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, got.Err, w)
			}
		}
	}
}

// TestCmdRunTimeout: a timeout ends the command's whole process group, so
// a child holding stdout does not keep Run waiting.
func TestCmdRunTimeout(t *testing.T) {
	start := time.Now()
	r := Cmd{Timeout: 300 * time.Millisecond}.Run("sh", "-c", "sleep 30 & sleep 30")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Run took %s after a 300ms timeout", took)
	}
	if r.Err == nil || !strings.Contains(r.Err.Error(), "timed out after 300ms") {
		t.Errorf("error %v, want a timeout", r.Err)
	}
}

func TestCmdRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runuser needs root")
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skip("no runuser")
	}
	r := Cmd{User: "nobody", UserEnv: []string{"E2EUTIL_TEST=inner"}}.Run("sh", "-c", "id -un; echo $E2EUTIL_TEST")
	if r.Err != nil || r.Stdout != "nobody\ninner\n" {
		t.Errorf("as nobody: %q, %v; want nobody and the variable set", r.Stdout, r.Err)
	}
}

func TestSlurmEnv(t *testing.T) {
	for _, tc := range []struct {
		conf string
		more []string
		want []string
	}{
		{"", nil, nil},
		{"", []string{"A=1"}, []string{"A=1"}},
		{"/tmp/c/slurm.conf", []string{"A=1"}, []string{"SLURM_CONF=/tmp/c/slurm.conf", "A=1"}},
	} {
		if diff := cmp.Diff(tc.want, SlurmEnv(tc.conf, tc.more...)); diff != "" {
			t.Errorf("SlurmEnv(%q, %q) (-want +got):\n%s", tc.conf, tc.more, diff)
		}
	}
}

func TestWaitEvery(t *testing.T) {
	calls := 0
	if !WaitEvery(time.Second, time.Millisecond, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("WaitEvery for the third call: %d calls", calls)
	}
	calls = 0
	start := time.Now()
	if WaitEvery(50*time.Millisecond, 10*time.Millisecond, func() bool { calls++; return false }) {
		t.Error("WaitEvery held for a condition that never does")
	}
	if calls < 2 || time.Since(start) < 50*time.Millisecond {
		t.Errorf("WaitEvery gave up after %d calls and %s", calls, time.Since(start))
	}
}

func TestEnvOr(t *testing.T) {
	t.Setenv("E2EUTIL_SET", "26000")
	t.Setenv("E2EUTIL_EMPTY", "")
	for key, want := range map[string]string{"E2EUTIL_SET": "26000", "E2EUTIL_EMPTY": "23000", "E2EUTIL_UNSET": "23000"} {
		if got := EnvOr(key, "23000"); got != want {
			t.Errorf("EnvOr(%s) = %q, want %q", key, got, want)
		}
	}
}

// TestImportedOnlyByTests: no program or library of the repository links
// the suites' helpers.
func TestImportedOnlyByTests(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const self = "github.com/hadar-sched/hadar/internal/e2eutil"
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir // the go tool ignores these too
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not Go a build would compile
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == self {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s; only tests may", rel, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
