package profiles

import (
	"math"
	"testing"
)

// TestPriorDeterministic: the prior is the same, to the last bit, in every
// fit (map order must not reach a floating-point sum): the simulator's
// schedules depend on it.
func TestPriorDeterministic(t *testing.T) {
	m := Lambda()
	types := CatalogTypes()
	want := WithPrior(m, types)
	for range 20 {
		got := WithPrior(m, types)
		for jt, byType := range want {
			for gt, byW := range byType {
				for w, r := range byW {
					if g := got.Rate(jt, gt, w); math.Float64bits(g) != math.Float64bits(r) {
						t.Fatalf("%s on %s x%d: %v then %v", jt, gt, w, r, g)
					}
				}
			}
		}
	}
}
