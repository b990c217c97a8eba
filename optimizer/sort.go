package optimizer

import "slices"

// stableSort sorts s stably by less. It runs the same algorithm as
// sort.SliceStable (both are generated from one template and test only
// less), so it gives the same order even for a comparator with a tolerance,
// which is not transitive; it is faster because it swaps elements directly,
// where sort.SliceStable swaps through reflection (and, for elements with
// pointers, a write barrier per word).
func stableSort[E any](s []E, less func(a, b E) bool) {
	slices.SortStableFunc(s, func(a, b E) int {
		if less(a, b) {
			return -1
		}
		return 0
	})
}
