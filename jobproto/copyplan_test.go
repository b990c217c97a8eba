package jobproto

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteCopyPlanRefusesForeignDirs(t *testing.T) {
	spool := t.TempDir()
	cp := CopyPlan{Job: "55", Copies: []CopyMember{{Index: 0, Task: "55_0", Node: "n1"}}}
	if err := WriteCopyPlan(spool, os.Getuid(), cp); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCopyPlan(spool, "55")
	if err != nil || got.Job != "55" || len(got.Copies) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	// A job that replaces its directory with a symlink does not redirect
	// the bridge's write.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(spool, CopiesSubdir, "56")); err != nil {
		t.Fatal(err)
	}
	if err := WriteCopyPlan(spool, os.Getuid(), CopyPlan{Job: "56"}); err == nil {
		t.Error("wrote through a symlink")
	}
	if _, err := os.Stat(filepath.Join(victim, "plan.json")); err == nil {
		t.Error("plan.json written outside the spool")
	}
	for _, bad := range []string{"", "../x", "5_1", "a"} {
		if err := WriteCopyPlan(spool, os.Getuid(), CopyPlan{Job: bad}); err == nil {
			t.Errorf("job id %q accepted", bad)
		}
	}
	if os.Getuid() == 0 {
		// Owned by someone else than the job's user: refused.
		if err := os.Mkdir(filepath.Join(spool, CopiesSubdir, "57"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(spool, CopiesSubdir, "57"), 4242, -1); err != nil {
			t.Fatal(err)
		}
		if err := WriteCopyPlan(spool, 4343, CopyPlan{Job: "57"}); err == nil {
			t.Error("wrote into another user's directory")
		}
		// Created for the job's user.
		if err := WriteCopyPlan(spool, 4343, CopyPlan{Job: "58"}); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(spool, CopiesSubdir, "58"))
		if err != nil || st.Sys().(*syscall.Stat_t).Uid != 4343 {
			t.Errorf("job directory: %v %+v", err, st)
		}
	}
}

// TestCopyPlanJSON: plan.json is a contract with the copies
// (contrib/examples/hadare/hadar_copies.py reads generation, written_unix,
// round_seconds and each copy's index, node, rate and steps): its keys do
// not change with the Go names.
func TestCopyPlanJSON(t *testing.T) {
	spool := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cp := CopyPlan{Job: "47", User: "alice", Generation: 12, WrittenAt: at, WrittenUnix: float64(at.Unix()), RoundSeconds: 360,
		Model: "resnet50-bs64", TotalSteps: 10000, RemainingSteps: 4000, Allowed: 2,
		Copies: []CopyMember{{Index: 1, Task: "47_1", Node: "v1", GPUType: "v100", GPUs: 1, Rate: 10, Steps: 3600, State: "running"}}}
	if err := WriteCopyPlan(spool, os.Getuid(), cp); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(spool, CopiesSubdir, "47", "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "job": "47",
  "generation": 12,
  "written_at": "2026-12-01T10:00:00Z",
  "written_unix": 1796119200,
  "round_seconds": 360,
  "model": "resnet50-bs64",
  "total_steps": 10000,
  "remaining_steps": 4000,
  "allowed": 2,
  "copies": [
    {
      "index": 1,
      "task": "47_1",
      "node": "v1",
      "gpu_type": "v100",
      "gpus": 1,
      "rate": 10,
      "steps": 3600,
      "state": "running"
    }
  ]
}
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("plan.json (-want +got):\n%s", diff)
	}
}
