package bridge

import (
	"context"
	"errors"
	"testing"
)

func TestAcquireLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second AcquireLock = %v, want ErrLocked", err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
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
