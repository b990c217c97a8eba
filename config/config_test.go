package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
)

func TestDefaultConfigValid(t *testing.T) {
	cfg := Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Round.Duration != 360*time.Second || cfg.PollInterval.Duration != 10*time.Second ||
		cfg.MinRoundGap.Duration != 5*time.Second || cfg.MigrationPenalty.Duration != 10*time.Minute ||
		cfg.Preemption || cfg.DryRun || cfg.Policy != "hadar" || cfg.SpoolDir != "/var/spool/hadar" ||
		cfg.Metrics.Listen != "127.0.0.1:9788" || cfg.Log.Format != "text" {
		t.Errorf("unexpected defaults: %+v", cfg)
	}
}

func TestParse(t *testing.T) {
	good := `
policy = "gavel"
round = "2m"
poll_interval = "5s"
min_round_gap = "1s"
dry_run = true
migration_penalty = "15m"
preemption = true
data_dir = "/tmp/hadar-data"
spool_dir = "/tmp/hadar-spool"
default_model = "ResNet-50 (batch size 64)"

[slurm]
bin_dir = "/opt/slurm/bin"
command_timeout = "30s"

[gres]
aliases = { "tesla_v100-sxm2-32gb" = "v100", "NVlink_A100_40GB" = "a100" }

[models]
aliases = { "resnet50" = "ResNet-50 (batch size 64)" }

[log]
format = "json"
level = "debug"

[metrics]
listen = "127.0.0.1:9999"
`
	cfg, err := Parse([]byte(good), "hadar.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Policy = "gavel"
	want.Round = Duration{2 * time.Minute}
	want.PollInterval = Duration{5 * time.Second}
	want.MinRoundGap = Duration{time.Second}
	want.DryRun = true
	want.MigrationPenalty = Duration{15 * time.Minute}
	want.Preemption = true
	want.DataDir = "/tmp/hadar-data"
	want.SpoolDir = "/tmp/hadar-spool"
	want.DefaultModel = "ResNet-50 (batch size 64)"
	want.Slurm = SlurmConfig{BinDir: "/opt/slurm/bin", CommandTimeout: Duration{30 * time.Second}}
	want.GRES.Aliases = map[string]string{"tesla_v100-sxm2-32gb": "v100", "NVlink_A100_40GB": "a100"}
	want.Models.Aliases = map[string]string{"resnet50": "ResNet-50 (batch size 64)"}
	want.Log = LogConfig{Format: "json", Level: "debug"}
	want.Metrics.Listen = "127.0.0.1:9999"
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(want.Diff(Default())) < 10 {
		t.Errorf("Diff found too few changes: %v", want.Diff(Default()))
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"unknown key", "policy = \"hadar\"\nroudn = \"1m\"\n", []string{`unknown key "roudn"`, "hadar.toml:2"}},
		{"unknown key in table", "[slurm]\nbindir = \"/x\"\n", []string{`"slurm.bindir"`, "hadar.toml:2"}},
		{"unknown table", "\n[prometheus]\nlisten = \"x\"\n", []string{`unknown key "prometheus`, "hadar.toml:"}},
		{"bad duration", "round = \"6 minutes\"\n", []string{"round", "hadar.toml:1", "bad duration"}},
		{"duration without unit", "\n\nround = 360\n", []string{"round", "hadar.toml:3"}},
		{"unknown policy", "\npolicy = \"fifo\"\n", []string{`key "policy"`, "unknown policy", "hadar.toml:2"}},
		{"wrong type", "dry_run = \"yes\"\n", []string{"dry_run", "line 1"}},
		{"bad log format", "[log]\nformat = \"xml\"\n", []string{"log.format", "hadar.toml:2"}},
		{"no new job types", "[models]\nnew_per_round = 0\n", []string{"models.new_per_round", "want at least 1", "hadar.toml:2"}},
		{"no new job types per user", "[models]\nnew_per_user = -1\n", []string{"models.new_per_user", "want at least 1"}},
		{"weight of zero", "[weights]\naccounts = { acct_a = 0 }\n", []string{"weights.accounts", `"acct_a" = 0`, "at most 1000"}},
		{"weight too large", "[weights]\nqos = { high = 1e15 }\n", []string{"weights.qos", "at most 1000"}},
		{"learning interval too short", "[learning]\nmin_interval = \"10ms\"\n", []string{"learning.min_interval", "below the minimum"}},
		{"unknown matrix", "throughputs = \"lamda\"\n", []string{"throughputs", "hadar.toml:1", "gavel, lambda, lambda-fp16"}},
		{"relative matrix file", "throughputs = \"m.json\"\n", []string{"throughputs", "absolute path"}},
		{"relative data dir", "data_dir = \"var/lib\"\n", []string{"data_dir"}},
		{"gap longer than round", "round = \"10s\"\nmin_round_gap = \"20s\"\n", []string{"min_round_gap"}},
		{"syntax", "policy = \n", []string{"hadar.toml:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), "hadar.toml")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfigFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(path, []byte("round = \"1m\"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil || cfg.Round.Duration != time.Minute {
		t.Fatalf("Load = %v, %v", cfg.Round, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Errorf("world-writable config accepted: %v", err)
	}
	missing := filepath.Join(dir, "none.toml")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	cfg, found, err := LoadOrDefault(missing, true)
	if err != nil || found || cfg.Policy != "hadar" {
		t.Errorf("LoadOrDefault(missing, true) = %v, %v, %v", cfg.Policy, found, err)
	}
	if _, _, err := LoadOrDefault(missing, false); err == nil {
		t.Error("LoadOrDefault(missing, false): no error")
	}
}

func TestPolicyOptionsFromConfig(t *testing.T) {
	cfg, err := Parse([]byte("[policies.hadar]\ncritical = 0.8\nfluid_every = -1\n[policies.tiresias]\nthresholds = [100, 200]\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.PolicyOptions()
	if o.Hadar.Critical != 0.8 || o.Hadar.FluidEvery != -1 || o.Hadar.PriceRounds != 60 || len(o.Tiresias.Thresholds) != 2 {
		t.Errorf("options %+v", o)
	}
	p, err := optimizer.New(cfg.Policy, cfg.PolicyOptions())
	if err != nil {
		t.Fatal(err)
	}
	_ = p
	if h := optimizer.NewHadar(o); h.Critical != 0.8 || h.FluidEvery != 0 {
		t.Errorf("hadar built with %+v", h)
	}
	for _, bad := range []string{"[policies.hadar]\ncritical = 2\n", "[policies.tiresias]\nthresholds = [300, 200]\n", "[policies.hadar]\nbogus = 1\n"} {
		if _, err := Parse([]byte(bad), "t.toml"); err == nil || !strings.Contains(err.Error(), "t.toml:2") {
			t.Errorf("Parse(%q) = %v, want an error at line 2", bad, err)
		}
	}
}

// TestCopyEfficiencyFromConfig: [policies.hadare] copy_efficiency reaches
// the options hadare is built with (default 1), and a bad value is an
// error at its line.
func TestCopyEfficiencyFromConfig(t *testing.T) {
	tests := []struct {
		file string
		want optimizer.CopyEfficiency
	}{
		{"", optimizer.CopyEfficiency{Constant: 1}},
		{"[policies.hadare]\ncopy_efficiency = \"0.34\"\n", optimizer.CopyEfficiency{Constant: 0.34}},
		{"[policies.hadare]\ncopy_efficiency = \"2:0.63,4:0.34,8:0.18\"\n", optimizer.MeasuredCopyEfficiency()},
	}
	for _, tc := range tests {
		cfg, err := Parse([]byte(tc.file), "t.toml")
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.file, err)
		}
		if diff := cmp.Diff(tc.want, cfg.PolicyOptions().CopyEfficiency); diff != "" {
			t.Errorf("%q: copy efficiency (-want +got):\n%s", tc.file, diff)
		}
		if diff := cmp.Diff(tc.want, optimizer.NewHadarE(cfg.PolicyOptions()).Efficiency); diff != "" {
			t.Errorf("%q: hadare built with (-want +got):\n%s", tc.file, diff)
		}
	}
	for _, bad := range []string{"0", "1.5", "2:0.6,2:0.5", "1:0.5", "x", ""} {
		file := "[policies.hadare]\ncopy_efficiency = \"" + bad + "\"\n"
		_, err := Parse([]byte(file), "t.toml")
		if err == nil || !strings.Contains(err.Error(), "t.toml:2") || !errors.Is(err, ErrInvalid) {
			t.Errorf("copy_efficiency = %q: %v, want a bad config at line 2", bad, err)
		}
	}
}
