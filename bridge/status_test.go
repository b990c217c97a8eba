package bridge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
)

func TestStatusFileLiveness(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit(resnet, 1, 1, t0)
	b := h.bridge()
	h.cycle(b)
	st, err := ReadStatus(h.cfg.SpoolDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(h.cfg.SpoolDir, StatusFile)); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("status file mode %v, %v: users must be able to read it", fi.Mode(), err)
	}
	if js := st.Jobs[id]; js.Decision != DecidePlace || js.To == "" {
		t.Errorf("job %s in status = %+v, want its placement", id, js)
	}
	round := h.cfg.Round.Duration
	for _, tc := range []struct {
		name  string
		mod   func(*DaemonStatus)
		now   time.Time
		alive bool
		why   string
	}{
		{"just ran", nil, st.LastRound.Add(time.Second), true, "hadar-slurmd runs"},
		{"late", nil, st.LastRound.Add(3*round + 2*time.Minute), false, "is not running: its last round was"},
		{"stopped", func(s *DaemonStatus) { s.Stopped = s.LastRound }, st.LastRound.Add(time.Second), false, "is stopped"},
		{"process gone", func(s *DaemonStatus) { s.PID = 1 << 22 }, st.LastRound.Add(time.Second), false, "is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := st
			if tc.mod != nil {
				tc.mod(&s)
			}
			alive, why := s.Liveness(tc.now)
			if alive != tc.alive || !strings.Contains(why, tc.why) {
				t.Errorf("Liveness = %v %q, want %v %q", alive, why, tc.alive, tc.why)
			}
		})
	}
	if err := b.MarkStopped(); err != nil {
		t.Fatal(err)
	}
	if st, _ := ReadStatus(h.cfg.SpoolDir); st.Stopped.IsZero() {
		t.Error("MarkStopped left no stop time")
	}
}

// TestWaitingJobsSayHadarHoldsThem: a job hadar holds for want of GPUs gets
// an admin comment that says so (users otherwise see only JobHeldUser); the
// next round leaves an unchanged comment alone.
func TestWaitingJobsSayHadarHoldsThem(t *testing.T) {
	h := newHarness(t, nil)
	var ids []string
	for i := range 7 {
		ids = append(ids, h.fc.submit("hadar model=resnet50-bs64 steps=1000000", 4, 1, t0.Add(time.Duration(i)*time.Second)))
	}
	b := h.bridge()
	rep := h.cycle(b)
	waiting := 0
	for _, id := range ids {
		j := h.fc.job(id)
		switch j.state {
		case "PENDING":
			waiting++
			if !strings.HasPrefix(j.admin, "hadar: waiting for free ") || !strings.Contains(j.admin, "hadar explain JOBID") {
				t.Errorf("waiting job %s: admin comment %q", id, j.admin)
			}
		case "RUNNING":
			if j.admin != PlacedComment {
				t.Errorf("running job %s: admin comment %q", id, j.admin)
			}
		}
	}
	if waiting != 2 {
		t.Fatalf("%d jobs wait, want 2 (5 nodes of 4 GPUs, 7 jobs of 4): %v", waiting, actionStrings(rep.Actions))
	}
	// One update per distinct text, not per job: 7 jobs on 3 GPU types and
	// one set of types to wait for make at most 4.
	comments := 0
	for _, a := range rep.Actions {
		if a.Kind == ActComment {
			comments++
		}
	}
	if comments > 4 {
		t.Errorf("%d comment updates for 7 jobs, want at most 4: %v", comments, actionStrings(rep.Actions))
	}
	h.clock.advance(time.Minute)
	rep = h.cycle(b)
	for _, a := range rep.Actions {
		if a.Kind == ActComment {
			t.Errorf("second round rewrote a comment: %s", a)
		}
	}
}

func TestStatusOfAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SLURM_CONF", "/etc/slurm/a.conf")
	if err := WriteStatus(dir, DaemonStatus{PID: 1, SlurmConf: "/etc/slurm/a.conf"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStatus(dir); err != nil {
		t.Fatalf("same cluster: %v", err)
	}
	t.Setenv("SLURM_CONF", "/tmp/other/slurm.conf")
	if _, err := ReadStatus(dir); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("another cluster's status: %v, want ErrOtherCluster", err)
	}
}

// TestPolicyStateSurvivesRestart: the daemon's policy bookkeeping is in
// state.db, so a restarted daemon (and hadar plan on a copy) starts from it.
func TestPolicyStateSurvivesRestart(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 6 {
		h.fc.submit(resnet, 4, 1, t0.Add(time.Duration(i)*time.Second))
	}
	b := h.bridge()
	for range 2 {
		h.cycle(b)
		h.clock.advance(time.Minute)
	}
	saved, err := b.state.PolicyState(context.Background(), "hadar")
	if err != nil || len(saved) == 0 {
		t.Fatalf("no hadar state in state.db: %v", err)
	}
	b.Close()
	b2 := h.bridge()
	got, _, err := optimizer.SaveState(b2.policy)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(saved) {
		t.Errorf("restarted policy state\n%s\nwant the saved\n%s", got, saved)
	}
}
