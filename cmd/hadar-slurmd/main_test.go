package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlagsAndConfig(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	good := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(good, []byte("round = \"2m\"\npolicy = \"gavel\"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("\nround = \"6 minutes\"\n"), 0o640); err != nil {
		t.Fatal(err)
	}

	o, err := parseFlags([]string{"--config", good, "--dry-run", "--round", "30s", "--log-format", "json"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.DryRun || cfg.Round.Duration != 30*time.Second || cfg.Policy != "gavel" || cfg.Log.Format != "json" {
		t.Errorf("flags over file: %+v", cfg)
	}

	// The default path may be missing: defaults. An explicit one may not.
	o, _ = parseFlags([]string{"--policy", "hadar"}, &bytes.Buffer{})
	o.config = filepath.Join(dir, "missing.toml")
	if cfg, src, err := loadConfig(o); err != nil || !strings.HasPrefix(src, "defaults") || cfg.Round.Duration != 360*time.Second {
		t.Errorf("no config file: %v %q %v", cfg.Round, src, err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"--config", filepath.Join(dir, "missing.toml")}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Errorf("explicit missing config: exit %d", code)
	}
	stderr.Reset()
	if code := run([]string{"--config", bad}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "bad.toml:2") {
		t.Errorf("bad config: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"--policy", "nope", "--config", good}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "unknown policy") {
		t.Errorf("bad policy: exit %d, %q", code, stderr.String())
	}
	t.Setenv("HADAR_CONFIG", bad)
	if o, _ := parseFlags(nil, &bytes.Buffer{}); o.config != bad || !o.configSet {
		t.Errorf("HADAR_CONFIG: %+v", o)
	}
	var stdout bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "hadar-slurmd ") {
		t.Errorf("--version: %d %q", code, stdout.String())
	}
}

// TestHelpWritesDoubleDash: --help names flags as the man page does.
func TestHelpWritesDoubleDash(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	help := errOut.String()
	if !strings.Contains(help, "  --config string") || strings.Contains(help, "\n  -config") {
		t.Errorf("--help:\n%s", help)
	}
}

// --round is checked with the config file's rule, not dropped when it is
// out of range.
func TestRoundFlagValidated(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	for _, round := range []string{"-5s", "0s", "500ms"} {
		o, err := parseFlags([]string{"--config", filepath.Join(t.TempDir(), "none.toml"), "--round", round}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		o.configSet = false // a missing default config is the defaults
		if _, _, err := loadConfig(o); err == nil || !strings.Contains(err.Error(), `"round"`) {
			t.Errorf("--round %s: %v, want an error naming round", round, err)
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hadar.toml")
	text := "data_dir = \"" + filepath.Join(dir, "data") + "\"\nspool_dir = \"" + filepath.Join(dir, "spool") + "\"\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if status := run([]string{"--config", cfg, "--round", "-5s", "--once", "--dry-run"}, &bytes.Buffer{}, &stderr); status != 2 || !strings.Contains(stderr.String(), "below the minimum 1s") {
		t.Errorf("hadar-slurmd --round -5s: status %d, stderr %q; want 2 and the minimum", status, stderr.String())
	}
}

// The daemon refuses a config file others could change (it runs as root
// and runs what the config names), with the file and the fix; its
// guardian and a SIGHUP read the config through the same check.
func TestUntrustedConfigRefused(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(path, []byte("policy = \"gavel\"\n"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o664); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"--config", path, "--dry-run", "--once"}, &bytes.Buffer{}, &stderr)
	want := path + " is writable by its group (mode 0664); fix with: chmod go-w " + path
	if code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("group-writable config: exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), want)
	}
	o, err := parseFlags([]string{"--config", path}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadConfig(o); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("loadConfig (guardian, SIGHUP): %v", err)
	}
}

// A data_dir or spool_dir others could change (here: under a directory
// everyone can write, not sticky) is refused before the daemon takes its
// lock or touches Slurm.
func TestUntrustedDirsRefused(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	for _, key := range []string{"data_dir", "spool_dir"} {
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			open := filepath.Join(dir, "open")
			if err := os.Mkdir(open, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(open, 0o777); err != nil {
				t.Fatal(err)
			}
			dirs := map[string]string{"data_dir": filepath.Join(dir, "data"), "spool_dir": filepath.Join(dir, "spool")}
			dirs[key] = filepath.Join(open, "hadar")
			path := filepath.Join(dir, "hadar.toml")
			conf := fmt.Sprintf("data_dir = %q\nspool_dir = %q\n", dirs["data_dir"], dirs["spool_dir"])
			if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			code := run([]string{"--config", path, "--once"}, &bytes.Buffer{}, &stderr)
			want := key + ": untrusted path: " + open + " is writable by its group and every user (mode 0777); fix with: chmod go-w " + open
			if code != 2 || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), want)
			}
			if _, err := os.Lstat(dirs[key]); err == nil {
				t.Errorf("%s was created under the untrusted directory", dirs[key])
			}
		})
	}
}
