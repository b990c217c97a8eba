package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runHadar runs hadar with args as main does and returns its standard
// output, standard error and exit status.
func runMain(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	status = runApp(app, append([]string{"hadar"}, args...), &errOut)
	return out.String(), errOut.String(), status
}

// Usage errors are two short lines on stderr, the first naming the
// problem and the second --help, exit 2, nothing on stdout.
func TestUsageErrors(t *testing.T) {
	t.Setenv("HADAR_DB", filepath.Join(t.TempDir(), "hadar.db"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuchcmd"}, `unknown command "nosuchcmd"`},
		{[]string{"profiles", "export"}, `hadar profiles: unknown command "export"`},
		{[]string{"profiles", "alias", "frob"}, `unknown command "frob"`},
		{[]string{"help", "nosuch"}, "No help topic for 'nosuch'"},
		{[]string{"--nosuchflag"}, "unknown flag --nosuchflag"},
		{[]string{"simulate", "--nosuchflag"}, "hadar simulate: unknown flag --nosuchflag"},
		{[]string{"simulate", "extra"}, `hadar simulate: unexpected argument "extra"`},
		{[]string{"simulate", "--explore", "x"}, "invalid value"},
		{[]string{"profiles", "set", "--gpu-type", "v100", "--steps-per-s", "1"}, "missing --job-type"},
		{[]string{"profiles", "rate", "--gpu-type", "v100"}, "missing --model"},
		{[]string{"profiles", "show"}, "want one JOBTYPE argument"},
		{[]string{"profiles", "alias", "set", "x"}, "want SITE and CANONICAL arguments"},
		{[]string{"trace", "show"}, "want one trace"},
		{[]string{"trace", "show", "a", "b"}, "got 2 arguments"},
		{[]string{"config", "check", "a", "b"}, "want at most one FILE"},
		{[]string{"history", "x"}, "unexpected argument"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, status := runMain(t, tc.args...)
			if status != exitUsage {
				t.Errorf("exit status %d, want %d; stderr:\n%s", status, exitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty:\n%s", stdout)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], tc.want) || !strings.Contains(lines[1], "--help") {
				t.Errorf("stderr = %q; want a line with %q, then one naming --help", stderr, tc.want)
			}
		})
	}
}

// A runtime error exits 1 with one line on stderr.
func TestRuntimeErrorExitsOne(t *testing.T) {
	stdout, stderr, status := runMain(t, "trace", "show", filepath.Join(t.TempDir(), "missing.trace"))
	if status != exitRuntime || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("status %d, stdout %q, stderr %q; want 1, nothing, one line", status, stdout, stderr)
	}
}

// Flags after a command's positional arguments are taken as flags.
func TestFlagsAfterArguments(t *testing.T) {
	before, _, status := runMain(t, "trace", "show", "--throughputs", "gavel", "gavel:small_test")
	if status != 0 {
		t.Fatalf("trace show with the flag first: status %d", status)
	}
	after, stderr, status := runMain(t, "trace", "show", "gavel:small_test", "--throughputs", "gavel")
	if status != 0 {
		t.Fatalf("trace show with the flag last: status %d: %s", status, stderr)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("flag last vs first (-first +last):\n%s", diff)
	}

	t.Setenv("HADAR_CONFIG", "")
	cfg := filepath.Join(t.TempDir(), "hadar.toml")
	if err := os.WriteFile(cfg, []byte("round = \"2m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, status := runMain(t, "config", "check", cfg, "-q")
	if status != 0 || stdout != "" {
		t.Errorf("config check FILE -q: status %d, stdout %q, stderr %q; want 0 and nothing", status, stdout, stderr)
	}
	// "--" ends the flags: what follows is an argument.
	_, stderr, status = runMain(t, "trace", "show", "--", "--throughputs")
	if status != exitRuntime || !strings.Contains(stderr, "--throughputs") {
		t.Errorf("trace show -- --throughputs: status %d, stderr %q; want a missing trace file named --throughputs", status, stderr)
	}
}

func TestPermuteArgs(t *testing.T) {
	app := newApp()
	for in, want := range map[string]string{
		"hadar trace show t.trace --throughputs lambda":      "hadar trace show --throughputs lambda t.trace",
		"hadar config check hadar.toml -q":                   "hadar config check -q hadar.toml",
		"hadar profiles --db x show A3C --json":              "hadar profiles --db x show --json A3C",
		"hadar profiles import-gavel - --db x":               "hadar profiles import-gavel --db x -",
		"hadar simulate --cluster v100=4 --json":             "hadar simulate --cluster v100=4 --json",
		"hadar explain 42 --json":                            "hadar explain --json 42",
		"hadar trace show -- --x":                            "hadar trace show -- --x",
		"hadar trace show t --throughputs=lambda --":         "hadar trace show --throughputs=lambda t --",
		"hadar nosuch --flag":                                "hadar nosuch --flag",
		"hadar profiles alias set a100_site a100 --db x.db":  "hadar profiles alias set --db x.db a100_site a100",
		"hadar simulate --explore -5 --trace gavel:x --json": "hadar simulate --explore -5 --trace gavel:x --json",
	} {
		if got := strings.Join(permuteArgs(app, strings.Fields(in)), " "); got != want {
			t.Errorf("permuteArgs(%q) = %q, want %q", in, got, want)
		}
	}
}
