package optimizer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestThroughputModel(t *testing.T) {
	thr := Throughputs{}
	thr.Set("m", "v100", 1, 10)
	thr.Set("m", "v100", 2, 18)
	thr.Set("m", "k80", 1, 4)
	thr.Set("m", "k80", 2, 7)
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"measured", thr.Rate("m", "v100", 2), 18},
		{"unmeasured count scales from the largest below", thr.Rate("m", "v100", 4), 36},
		{"unknown type", thr.Rate("m", "a100", 1), 0},
		{"unknown job type", thr.Rate("x", "v100", 1), 0},
		{"zero workers", thr.Rate("m", "v100", 0), 0},
		{"gang on one type", thr.PlacementRate("m", 2, []Task{{Type: "v100", GPUs: 2}}), 18},
		{"gang across types runs at the slowest", thr.PlacementRate("m", 2, []Task{{Type: "v100", GPUs: 1}, {Type: "k80", GPUs: 1}}), 7},
		{"partial gang runs at 0", thr.PlacementRate("m", 2, []Task{{Type: "v100", GPUs: 1}}), 0},
		{"copies add up", thr.CopiesRate("m", []Task{{Type: "v100", GPUs: 1, Copy: 1}, {Type: "k80", GPUs: 2, Copy: 2}}, 1), 17},
		{"copies with efficiency", thr.CopiesRate("m", []Task{{Type: "v100", GPUs: 1, Copy: 1}, {Type: "k80", GPUs: 2, Copy: 2}}, 0.9), 15.3},
		{"fastest type speed", thr.TypeSpeed("v100"), 1},
		{"slower type speed", thr.TypeSpeed("k80"), 0.4},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, tc.got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"k80", "v100"}, thr.GPUTypes()); diff != "" {
		t.Errorf("GPUTypes (-want +got):\n%s", diff)
	}
}

func TestRegistry(t *testing.T) {
	want := []string{"elas", "gavel", "gavel-ftf", "gavel-makespan", "hadar", "las", "tiresias", "yarn-cs"}
	got := Names()
	for _, n := range want {
		if _, err := New(n, Options{}); err != nil {
			t.Errorf("New(%q): %v", n, err)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreSliceElements(func(s string) bool { return s == "hadare" })); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
	if _, err := New("nope", Options{}); err == nil {
		t.Error(`New("nope") = nil error`)
	}
}

func TestOptimistic(t *testing.T) {
	filled := Throughputs{}
	filled.Set("m", "a100", 1, 4) // known
	filled.Set("m", "h100", 1, 6) // the prior's
	filled.Set("m", "h100", 2, 11)
	known := Throughputs{}
	known.Set("m", "a100", 1, 4)
	for _, tc := range []struct {
		bonus float64
		want  Throughputs
	}{
		{0, filled},
		{-1, filled},
		{0.5, Throughputs{"m": {"a100": {1: 4}, "h100": {1: 9, 2: 16.5}}}},
	} {
		got := filled.Optimistic(known, tc.bonus)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("bonus %g (-want +got):\n%s", tc.bonus, diff)
		}
	}
	if filled["m"]["h100"][1] != 6 {
		t.Errorf("Optimistic changed its receiver: %v", filled)
	}
}

func TestBestRate(t *testing.T) {
	thr := Throughputs{}
	thr.Set("m", "v100", 1, 10)
	thr.Set("m", "k80", 1, 2)
	thr.Set("m", "v100", 8, 60)
	thr.Set("m", "k80", 8, 12)
	tests := []struct {
		name     string
		jobType  string
		workers  int
		capacity map[string]int
		want     float64
	}{
		{"fastest type", "m", 1, map[string]int{"v100": 4, "k80": 4}, 10},
		{"a type without GPUs is not counted", "m", 1, map[string]int{"v100": 0, "k80": 4}, 2},
		{"the fastest type that holds the gang", "m", 8, map[string]int{"v100": 4, "k80": 8}, 12},
		{"wider than every type: the fastest there is", "m", 8, map[string]int{"v100": 4, "k80": 4}, 60},
		{"unknown model", "other", 1, map[string]int{"v100": 4}, 0},
		{"no capacity", "m", 1, nil, 0},
	}
	for _, tc := range tests {
		if got := thr.BestRate(tc.jobType, tc.workers, tc.capacity); got != tc.want {
			t.Errorf("%s: BestRate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRemainingEstimate(t *testing.T) {
	for _, tc := range []struct {
		est, done, want float64
	}{
		{1000, 0, 1000},
		{1000, 400, 600},
		{1000, 960, 50},    // within the estimate, but at least 5% of it
		{1000, 1000, 50},   // at the estimate: 5% of it
		{1000, 1030, 50},   // past it by less than 5%: still 5%
		{1000, 1500, 500},  // past it: as much again as it has overrun
		{1000, 4000, 3000}, // far past it
	} {
		if got := RemainingEstimate(tc.est, tc.done); got != tc.want {
			t.Errorf("RemainingEstimate(%v, %v) = %v, want %v", tc.est, tc.done, got, tc.want)
		}
	}
}
