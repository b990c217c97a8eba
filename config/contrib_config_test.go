package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

const exampleConfig = "../contrib/hadar.toml"

// The example config loads, sets every key of Config (so a new field
// cannot be forgotten), and its values are the defaults (so it documents
// them).
func TestExampleConfigMatchesCode(t *testing.T) {
	cfg, err := Load(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.DataDir = profiles.SystemDir // the default as root, which the example shows
	if diff := cmp.Diff(want, cfg, cmp.Comparer(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) }),
		cmp.Comparer(func(a, b map[string]float64) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
		t.Errorf("contrib/hadar.toml differs from Default (-default +example):\n%s", diff)
	}
	var raw map[string]any
	md, err := toml.DecodeFile(exampleConfig, &raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		if !md.IsDefined(strings.Split(k.Key, ".")...) {
			t.Errorf("contrib/hadar.toml does not set %s (Config.%s)", k.Key, k.Field)
		}
	}
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	// Every policy is named in the comment of policy.
	head, _, _ := strings.Cut(string(data), "\npolicy =")
	for _, p := range optimizer.Names() {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(p) + `\b`).MatchString(head) {
			t.Errorf("contrib/hadar.toml: policy %q is not listed in the comment of policy", p)
		}
	}
	// Every key has a comment right above it (or above its table).
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") {
			continue
		}
		if i == 0 || !(strings.HasPrefix(lines[i-1], "#") || strings.HasPrefix(lines[i-1], "[") || strings.Contains(lines[i-1], " = ")) {
			t.Errorf("contrib/hadar.toml:%d: %q has no comment", i+1, l)
		}
	}
}

func TestKeys(t *testing.T) {
	var keys []string
	for _, k := range Keys() {
		keys = append(keys, k.Key+":"+k.Kind)
	}
	want := []string{"policy:string", "round:duration", "poll_interval:duration", "min_round_gap:duration",
		"dry_run:bool", "migration_penalty:duration", "preemption:bool", "order:string", "move_without_progress:bool", "launch_timeout:duration", "lease:duration",
		"default_duration:duration", "explore:float64", "data_dir:string", "spool_dir:string", "default_model:string",
		"throughputs:string", "slurm.bin_dir:string", "slurm.command_timeout:duration", "gres.aliases:map", "models.new_per_round:int", "models.new_per_user:int", "models.aliases:map",
		"learning.min_interval:duration", "weights.accounts:map", "weights.qos:map",
		"log.format:string", "log.level:string", "metrics.listen:string",
		"policies.hadar.critical:float64", "policies.hadar.price_rounds:int", "policies.hadar.fluid_every:int",
		"policies.hadar.lead_share:float64", "policies.hadar.min_share:float64", "policies.hadar.share_tie:float64",
		"policies.hadar.uncontended_share:float64", "policies.hadar.lead_remaining:float64",
		"policies.hadar.quick_share:float64", "policies.hadar.starvation:float64", "policies.hadar.fair_deadline:float64", "policies.hadar.incumbency:float64", "policies.hadar.probe:float64", "policies.hadare.copy_efficiency:string", "policies.tiresias.thresholds:slice", "policies.tiresias.promote_knob:float64"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Format prints every key and reads back to the same config.
func TestFormatRoundTrip(t *testing.T) {
	for name, cfg := range map[string]Config{
		"defaults": Default(),
		"custom": func() Config {
			c := Default()
			c.Policy = "gavel"
			c.Round = Duration{90 * time.Second}
			c.MigrationPenalty = Duration{1500 * time.Millisecond}
			c.DefaultDuration = Duration{5400 * time.Second}
			c.DataDir = "/srv/hadar data"
			c.DefaultModel = `ResNet-50 "64"\`
			c.Slurm.BinDir = "/opt/slurm/bin"
			c.GRES.Aliases = map[string]string{"tesla_v100-sxm2-32gb": "v100", "NVlink A100 40GB": "a100", "x.y": "k80"}
			c.Models.Aliases = map[string]string{"bert\tx": "Transformer (batch size 64)"}
			c.Log = LogConfig{Format: "json", Level: "debug"}
			c.Metrics.Listen = ""
			c.Learning.MinInterval = Duration{2 * time.Minute}
			c.Weights = WeightsConfig{Accounts: map[string]float64{"acct_a": 2, "lab b": 0.5}, QOS: map[string]float64{"high": 4}}
			return c
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			out := Format(cfg)
			got, err := Parse(out, "formatted")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if diff := cmp.Diff(cfg, got, cmp.Comparer(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) }),
				cmp.Comparer(func(a, b map[string]float64) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("round trip (-want +got):\n%s\n%s", diff, out)
			}
			var raw map[string]any
			md, err := toml.Decode(string(out), &raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range Keys() {
				if !md.IsDefined(strings.Split(k.Key, ".")...) {
					t.Errorf("Format leaves out %s:\n%s", k.Key, out)
				}
			}
		})
	}
	if s := string(Format(Default())); !strings.Contains(s, "round = \"6m\"\n") || !strings.Contains(s, "\n[slurm]\nbin_dir = \"\"\ncommand_timeout = \"1m\"\n") {
		t.Errorf("format:\n%s", s)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 360 * time.Second: "6m", 5400 * time.Second: "1h30m", time.Hour: "1h", 3661 * time.Second: "1h1m1s",
		1500 * time.Millisecond: "1.5s", 10 * time.Millisecond: "10ms", -90 * time.Second: "-1m30s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("FormatDuration(%v) = %q does not parse back: %v %v", d, FormatDuration(d), back, err)
		}
	}
}

// The example, copied with a mistake, fails with the key and the line.
func TestExampleConfigErrorsNameKeyAndLine(t *testing.T) {
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(s, prefix string) int {
		for i, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, prefix) {
				return i + 1
			}
		}
		t.Fatalf("no line %q", prefix)
		return 0
	}
	for _, c := range []struct{ from, to, want string }{
		{`round = "6m"`, `round = "6 minutes"`, `round`},
		{`policy = "hadar"`, `policy = "fastest"`, `unknown policy`},
		{`level = "info"`, `levle = "info"`, `unknown key "log.levle"`},
		{`listen = "127.0.0.1:9788"`, `listen = 9788`, `listen`},
	} {
		bad := strings.Replace(string(data), c.from, c.to, 1)
		path := filepath.Join(t.TempDir(), "hadar.toml")
		if err := os.WriteFile(path, []byte(bad), 0o640); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		line := lineOf(bad, c.to)
		if err == nil || !strings.Contains(err.Error(), c.want) || !regexp.MustCompile(`(hadar\.toml:|line )`+strconv.Itoa(line)+`\b`).MatchString(err.Error()) {
			t.Errorf("%s: got %v, want %q at line %d", c.to, err, c.want, line)
		}
	}
}
