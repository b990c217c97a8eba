package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestScriptLease(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "contrib", "slurm", "job_submit.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := ScriptLease(string(shipped)); !ok || d != 2*time.Minute {
		t.Errorf("the shipped job_submit.lua's lease = %v %v, want 2m (hadar.toml's default)", d, ok)
	}
	for _, tc := range []struct {
		script string
		want   time.Duration
		ok     bool
	}{
		{"HADAR_LEASE_SECONDS = 300\n", 5 * time.Minute, true},
		{"  HADAR_LEASE_SECONDS=60 -- a minute\n", time.Minute, true},
		{"-- HADAR_LEASE_SECONDS = 60\n", 0, false},
		{"local x = 1\n", 0, false},
	} {
		if d, ok := ScriptLease(tc.script); d != tc.want || ok != tc.ok {
			t.Errorf("ScriptLease(%q) = %v %v, want %v %v", tc.script, d, ok, tc.want, tc.ok)
		}
	}
}

func TestCheckScriptLease(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	if got := CheckScriptLease(conf, 2*time.Minute); got != "" {
		t.Errorf("no script: %q, want nothing to say", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "job_submit.lua"), []byte("HADAR_LEASE_SECONDS = 300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := CheckScriptLease(conf, 2*time.Minute); !strings.Contains(got, "lease of 5m0s") {
		t.Errorf("mismatch: %q", got)
	}
	if got := CheckScriptLease(conf, 5*time.Minute); got != "" {
		t.Errorf("match: %q", got)
	}
}
