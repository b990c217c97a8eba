// Package docs holds the test that runs the documentation's commands
// (there is no Go code here). Every ```sh block preceded by a
// <!-- tested --> comment in docs/*.md runs in a scratch directory with
// the freshly built hadar and hadar-slurmd first in PATH, and must succeed
// (<!-- tested: fails -->: its last command must fail). The scratch
// environment stands in for a hadar-slurmd host:
//
//   - HADAR_CONFIG is a copy of contrib/hadar.toml whose data_dir and
//     spool_dir are in the scratch directory; data_dir holds a state
//     database with a few hours of history (internal/histtest);
//   - HADAR_DB is a fresh throughput database there;
//   - squeue and scontrol are fakes: the queue holds one held tagged job
//     (42), the nodes are the test cluster's demo layout (a verbatim
//     `scontrol show node` fixture), and updates are accepted and logged.
//
// (The commands' names and flags in every doc are also checked against
// the CLI definitions, by the tests of cmd/hadar and cmd/hadar-slurmd.)
// The hand-written summary tables of results.md are checked against the
// generated tables they summarise (results_test.go).
package docs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/doccheck"
	"github.com/hadar-sched/hadar/internal/histtest"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/slurm"
)

const repo = ".."

func build(t *testing.T, bin string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	for _, p := range []string{"hadar", "hadar-slurmd"} {
		cmd := exec.Command(goCmd, "build", "-o", filepath.Join(bin, p), "./cmd/"+p)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", p, err, out)
		}
	}
}

// fakeSqueue prints job 42 (held, tagged, 2 GPUs) in the format hadar
// asks for (slurm.JobFormat), whatever the arguments.
func fakeSqueue(t *testing.T) string {
	t.Helper()
	values := map[byte]string{
		'A': "42", 'F': "42", 'K': "N/A", 'u': "alice", 'T': "PENDING", 'D': "1",
		'V': time.Now().Add(-10 * time.Minute).Format("2006-01-02T15:04:05"),
		'S': time.Now().Add(time.Minute).Format("2006-01-02T15:04:05"), 'M': "0:00",
		'b': "gres:gpu:2", 'N': "", 'r': "BeginTime", 'Q': "4294901759", 'E': "(null)", 'j': "train",
		'k': "hadar model=resnet50-bs64 steps=200000",
	}
	var fields []string
	for _, f := range strings.Split(slurm.JobFormat, "|") {
		m := regexp.MustCompile(`^%(\d*)([A-Za-z])$`).FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("slurm.JobFormat field %q: update fakeSqueue", f)
		}
		v, ok := values[m[2][0]]
		if !ok {
			t.Fatalf("slurm.JobFormat field %q: no fake value; update fakeSqueue", f)
		}
		if m[1] != "" {
			w, _ := strconv.Atoi(m[1])
			v = fmt.Sprintf("%-*s", w, v)
		}
		fields = append(fields, v)
	}
	return "#!/bin/sh\ncat <<'EOF'\n" + strings.Join(fields, "|") + "\nEOF\n"
}

func fakeScontrol(t *testing.T, dir string) string {
	t.Helper()
	fx, err := slurm.LoadFixture(filepath.Join(repo, "slurm", "testdata", "scontrol-show-node", "22.05-idle.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := filepath.Join(dir, "nodes.txt")
	if err := os.WriteFile(nodes, fx.Output, 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`#!/bin/sh
case "$*" in
*show*node*) cat %q ;;
ping*) echo "Slurmctld(primary) at fake is UP" ;;
*) echo "$*" >>%q ;;
esac
`, nodes, filepath.Join(dir, "scontrol.log"))
}

// sandbox prepares the scratch host and returns the environment and the
// working directory of the blocks.
func sandbox(t *testing.T) ([]string, string) {
	t.Helper()
	root := t.TempDir()
	bin, fake, work := filepath.Join(root, "bin"), filepath.Join(root, "fake"), filepath.Join(root, "work")
	data, spool := filepath.Join(root, "var", "lib", "hadar"), filepath.Join(root, "spool")
	for _, d := range []string{bin, fake, work, data, spool, filepath.Join(root, "home"), filepath.Join(root, "etc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build(t, bin)
	for name, script := range map[string]string{"squeue": fakeSqueue(t), "scontrol": fakeScontrol(t, fake)} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	example, err := os.ReadFile(filepath.Join(repo, "contrib", "hadar.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := regexp.MustCompile(`(?m)^data_dir = .*$`).ReplaceAllString(string(example), fmt.Sprintf("data_dir = %q", data))
	cfg = regexp.MustCompile(`(?m)^spool_dir = .*$`).ReplaceAllString(cfg, fmt.Sprintf("spool_dir = %q", spool))
	cfgPath := filepath.Join(root, "etc", "hadar.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := histtest.WriteState(context.Background(), filepath.Join(data, statedb.File), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"contrib", "docs", "man"} {
		if err := os.Symlink(filepath.Join(mustAbs(t, repo), d), filepath.Join(work, d)); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "SLURM_CONF", k == "XDG_DATA_HOME", strings.HasPrefix(k, "HADAR_"):
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PATH="+bin+string(os.PathListSeparator)+fake+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(root, "home"),
		"HADAR_CONFIG="+cfgPath,
		"HADAR_DB="+filepath.Join(data, "hadar.db"),
	)
	return env, work
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTestedBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []doccheck.Block
	for _, f := range files {
		bs, err := doccheck.Blocks(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Tested {
				if !doccheck.ShellLangs[b.Lang] {
					t.Errorf("%s:%d: a tested block must be sh, not %q", b.File, b.Line, b.Lang)
					continue
				}
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("only %d tested blocks", len(blocks))
	}
	env, work := sandbox(t)
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d", b.File, b.Line)
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			script := "set -o pipefail\n" + b.Text
			if !b.Fails {
				script = "set -e\n" + script
			}
			cmd := exec.CommandContext(ctx, "bash", "-c", script)
			cmd.Env, cmd.Dir = env, work
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			switch {
			case b.Fails && err == nil:
				t.Errorf("%s: the block should fail, but succeeded:\n%s\n--- output:\n%s", name, b.Text, out.String())
			case b.Fails && out.Len() == 0:
				t.Errorf("%s: the block failed without a message", name)
			case !b.Fails && err != nil:
				t.Errorf("%s: %v\n%s\n--- output:\n%s", name, err, b.Text, out.String())
			}
		})
	}
}

// Relative links between the docs, and from the decision records, lead
// somewhere.
func TestLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	records, err := filepath.Glob(filepath.Join("decisions", "*.md"))
	if err != nil || len(records) == 0 {
		t.Fatalf("no decision records: %v", err)
	}
	files = append(files, records...)
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s: broken link %s", f, target)
			}
		}
	}
}
