package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
