package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
)

func TestConfigCheck(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The example: valid; the output is every key, and reads back the same.
	out, err := runHadar(t, "config", "check", "../../contrib/hadar.toml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "# ../../contrib/hadar.toml is valid.") {
		t.Errorf("output:\n%s", out)
	}
	back, err := config.Parse([]byte(out), "output")
	if err != nil {
		t.Fatalf("output does not load: %v\n%s", err, out)
	}
	want, _ := config.Load("../../contrib/hadar.toml")
	if diff := cmp.Diff(want, back, cmp.Comparer(func(a, b map[string]string) bool { return len(a)+len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
		t.Errorf("printed config differs (-file +printed):\n%s", diff)
	}
	for _, k := range config.Keys() {
		short := k.Key[strings.LastIndexByte(k.Key, '.')+1:]
		if k.Kind == "map" {
			short = "[" + k.Key + "]"
		}
		if !strings.Contains(out, short) {
			t.Errorf("output lacks %s", k.Key)
		}
	}

	// Effective = file over defaults.
	good := write("good.toml", "round = \"2m\"\n[gres.aliases]\n\"tesla_v100-sxm2-32gb\" = \"v100\"\n")
	out, err = runHadar(t, "config", "check", good)
	if err != nil || !strings.Contains(out, "round = \"2m\"\n") || !strings.Contains(out, "min_round_gap = \"5s\"\n") ||
		!strings.Contains(out, "[gres.aliases]\ntesla_v100-sxm2-32gb = \"v100\"\n") {
		t.Errorf("%v\n%s", err, out)
	}
	// --config, $HADAR_CONFIG, -q.
	if out, err := runHadar(t, "config", "--config", good, "check", "-q"); err != nil || out != "" {
		t.Errorf("--config -q: %v %q", err, out)
	}
	if out, err := runHadar(t, "config", "check", "--config", good); err != nil || !strings.Contains(out, good+" is valid") {
		t.Errorf("check --config: %v %q", err, out)
	}
	t.Setenv("HADAR_CONFIG", good)
	if out, err := runHadar(t, "config", "check"); err != nil || !strings.Contains(out, good+" is valid") {
		t.Errorf("HADAR_CONFIG: %v %q", err, out)
	}

	// Errors name the key and the line.
	for _, c := range []struct{ body, want string }{
		{"policy = \"hadar\"\n\nround = \"6 minutes\"\n", `:3: key "round"`},
		{"[log]\nformat = \"json\"\nlevle = \"info\"\n", `:3: unknown key "log.levle"`},
		{"policy = \"fastest\"\n", `bad.toml:1: bad config: key "policy": unknown policy "fastest"`},
		{"[metrics]\nlisten = 9788\n", `line 2 (last key "metrics.listen")`},
		{"round = \"6m\"\nround = \"7m\"\n", `bad.toml:2: key "round"`},
	} {
		bad := write("bad.toml", c.body)
		out, err := runHadar(t, "config", "check", bad)
		if err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%q: got %v (output %q), want %q", c.body, err, out, c.want)
		}
	}
	// A named file must exist; the default one may be missing.
	if _, err := runHadar(t, "config", "check", filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing named file: %v", err)
	}
	t.Setenv("HADAR_CONFIG", "")
	if _, err := os.Stat(config.DefaultPath); err != nil {
		out, err := runHadar(t, "config", "check")
		if err != nil || !strings.Contains(out, config.DefaultPath+" does not exist: hadar-slurmd runs on the defaults") {
			t.Errorf("missing default file: %v\n%s", err, out)
		}
	}
	if _, err := runHadar(t, "config", "check", "a", "b"); err == nil {
		t.Error("two files accepted")
	}
	// A world-writable file is refused, as the daemon refuses it.
	ww := write("ww.toml", "")
	if err := os.Chmod(ww, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := runHadar(t, "config", "check", ww); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Errorf("world-writable: %v", err)
	}
}
