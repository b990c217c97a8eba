package profiles

import "testing"

// The daemon fills the prior every round: these keep its cost in sight.
func BenchmarkWithPrior(b *testing.B) {
	m, types := Default(), CatalogTypes()
	if got := WithPrior(m, types); len(got["A3C"]) != len(types) {
		b.Fatalf("A3C on %d types, want %d", len(got["A3C"]), len(types))
	}
	for i := 0; i < b.N; i++ {
		WithPrior(m, types)
	}
}

func BenchmarkPriorForUnknownModel(b *testing.B) {
	m, types := Lambda(), CatalogTypes()
	if got := PriorForModel(m, "llama3-8b-lora", types); len(got) != len(types) {
		b.Fatalf("unknown model on %d types, want %d", len(got), len(types))
	}
	for i := 0; i < b.N; i++ {
		PriorForModel(m, "llama3-8b-lora", types)
	}
}
