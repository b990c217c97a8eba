package bridge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAcquireLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := AcquireLock(dir, LockDaemon)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLockWaiting(dir, LockDaemon, time.Second); !errors.Is(err, ErrLocked) {
		t.Fatalf("second AcquireLock = %v, want ErrLocked", err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireLock(dir, LockReleaseAll)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	// A starting daemon waits for a fail-open to finish.
	go func() {
		time.Sleep(300 * time.Millisecond)
		again.Release()
	}()
	start := time.Now()
	l, err := AcquireLockWaiting(dir, LockDaemon, 5*time.Second)
	if err != nil {
		t.Fatalf("waiting for the release-all holder: %v", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("took the lock after %s, while release-all still held it", waited)
	}
	l.Release()
}

// TestPollSeesNodeChanges: a node drained, downed or resumed starts a round
// early, as a job's arrival does.
func TestPollSeesNodeChanges(t *testing.T) {
	h := newHarness(t, nil)
	b := h.bridge()
	h.cycle(b)
	ctx := context.Background()
	if changed, err := b.poll(ctx); err != nil || changed {
		t.Fatalf("poll with nothing changed = %v, %v", changed, err)
	}
	for _, state := range []string{"IDLE+DRAIN", "IDLE"} {
		h.fc.mu.Lock()
		h.fc.nodes[0].state = state
		h.fc.mu.Unlock()
		if changed, err := b.poll(ctx); err != nil || !changed {
			t.Fatalf("poll after node1 became %s = %v, %v", state, changed, err)
		}
		h.cycle(b)
	}
}

// A symlink planted in place of the lock file is refused, not followed:
// the file it points to is neither truncated nor written.
func TestAcquireLockRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	l, err := AcquireLock(dir, LockDaemon)
	if err == nil {
		l.Release()
	}
	if err == nil || !strings.Contains(err.Error(), "is a symlink; refusing to follow it") {
		t.Errorf("AcquireLock through a symlink: %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep me\n" {
		t.Errorf("the link's target now holds %q", got)
	}
}
