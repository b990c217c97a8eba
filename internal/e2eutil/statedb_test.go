package e2eutil

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/internal/statedb"
)

// TestStateDB reads what the daemon's state database stores.
func TestStateDB(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), statedb.File)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	db, _, err := statedb.Open(ctx, path, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.WriteRound(ctx, statedb.RoundWrite{
		Round:     statedb.Round{Number: 3, Started: at, Observe: 250 * time.Millisecond, Jobs: 2, Tagged: 1, Placed: 1},
		Decisions: []statedb.Decision{{JobID: "7", Kind: "place", From: "-", To: "n1:2", GPUType: "v100", Reason: "planned"}},
		Actions: []statedb.Action{{Kind: "release", JobIDs: "7,8", Result: "partial",
			Error: "skipped (an earlier step for them failed): 8"}},
		Progress: map[string]statedb.JobProgress{"7": {JobID: "7", Reported: true, ReportedSteps: 30}},
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := OpenStateDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rounds, err := s.Rounds()
	if diff := cmp.Diff([]Round{{Number: 3, Observe: 0.25, Jobs: 2, Tagged: 1, Placed: 1}}, rounds); err != nil || diff != "" {
		t.Errorf("rounds (-want +got) %v:\n%s", err, diff)
	}
	ds, err := s.Decisions()
	if diff := cmp.Diff([]Decision{{Round: 3, Job: "7", Kind: "place", From: "-", To: "n1:2", GPUType: "v100", Reason: "planned"}}, ds); err != nil || diff != "" {
		t.Errorf("decisions (-want +got) %v:\n%s", err, diff)
	}
	as, err := s.Actions()
	if err != nil || len(as) != 1 || !as[0].Done() || cmp.Diff([]string{"7"}, as[0].Jobs()) != "" {
		t.Errorf("actions %+v %v", as, err)
	}
	if rep, steps, ok, err := s.Progress("7"); !rep || steps != 30 || !ok || err != nil {
		t.Errorf("progress of 7: %v %v %v %v", rep, steps, ok, err)
	}
	if _, _, ok, err := s.Progress("9"); ok || err != nil {
		t.Errorf("progress of 9: %v %v", ok, err)
	}
}
