package optimizer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHadarStateRoundTrip: a policy restored from a saved state plans the
// next round as the original does (prices and fluid plan carried over).
func TestHadarStateRoundTrip(t *testing.T) {
	build := func() *Snapshot {
		b := newSnapshot().node("a", "v100", 4).node("b", "k80", 4)
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5"} {
			b.job(id, 2, 36000, map[string]float64{"v100": 2, "k80": 1})
		}
		return b.s
	}
	for _, name := range []string{"hadar", "hadare"} {
		orig, _ := New(name, Options{})
		for range 3 {
			if _, err := orig.Plan(build()); err != nil {
				t.Fatal(err)
			}
		}
		b, ok, err := SaveState(orig)
		if err != nil || !ok || len(b) < 10 {
			t.Fatalf("%s: SaveState = %d bytes, %v, %v", name, len(b), ok, err)
		}
		restored, _ := New(name, Options{})
		if err := LoadState(restored, b); err != nil {
			t.Fatal(err)
		}
		again, _, _ := SaveState(restored)
		if diff := cmp.Diff(string(b), string(again)); diff != "" {
			t.Errorf("%s: state after a load differs (-saved +loaded):\n%s", name, diff)
		}
		p1, _ := orig.Plan(build())
		p2, _ := restored.Plan(build())
		if diff := cmp.Diff(placedTypes(p1), placedTypes(p2)); diff != "" {
			t.Errorf("%s: the restored policy plans differently (-orig +restored):\n%s", name, diff)
		}
		if err := LoadState(restored, []byte("{bad")); err == nil {
			t.Errorf("%s: LoadState accepted garbage", name)
		}
	}
}
