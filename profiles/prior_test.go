package profiles

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
)

// TestLeaveOneTypeOut holds the prior to the errors docs/prior.md reports
// (measured with `hadar profiles prior-error`), with a little headroom: a
// change that makes the prior worse fails here.
func TestLeaveOneTypeOut(t *testing.T) {
	tests := []struct {
		matrix               string
		maxMedian, maxP90    float64
		maxTypeMedian        float64
		wantTypes, wantCells int
	}{
		{"gavel", 0.32, 1.40, 0.50, 3, 246},
		{"lambda", 0.23, 0.75, 0.90, 11, 300},
		{"lambda-fp16", 0.14, 0.45, 0.26, 11, 300},
	}
	for _, tc := range tests {
		t.Run(tc.matrix, func(t *testing.T) {
			m, err := Matrix(tc.matrix)
			if err != nil {
				t.Fatal(err)
			}
			rows := LeaveOneTypeOut(m)
			if len(rows) != tc.wantTypes+1 {
				t.Fatalf("%d rows, want %d types and all", len(rows), tc.wantTypes)
			}
			all := rows[len(rows)-1]
			if all.GPUType != "all" || all.Cells != tc.wantCells || all.Predicted != all.Cells {
				t.Errorf("all: %+v; want %d cells, every one predicted", all, tc.wantCells)
			}
			if all.Median > tc.maxMedian || all.P90 > tc.maxP90 {
				t.Errorf("all: median %.3f, p90 %.3f; want at most %.2f, %.2f", all.Median, all.P90, tc.maxMedian, tc.maxP90)
			}
			for _, r := range rows[:len(rows)-1] {
				if r.Median > tc.maxTypeMedian || r.Predicted != r.Cells {
					t.Errorf("%s: median %.3f (%d of %d cells); want at most %.2f, all cells", r.GPUType, r.Median, r.Predicted, r.Cells, tc.maxTypeMedian)
				}
			}
		})
	}
}

func TestPriorRatioPath(t *testing.T) {
	// b and c run 3x faster on h100 than on v100 and 1.8x faster on 2 GPUs
	// than on 1; a was measured on one v100 only.
	m := optimizer.Throughputs{}
	for jt, r := range map[string]float64{"b": 2, "c": 5} {
		m.Set(jt, "v100", 1, r)
		m.Set(jt, "h100", 1, 3*r)
		m.Set(jt, "v100", 2, 1.8*r)
	}
	m.Set("a", "v100", 1, 10)
	approx := cmpopts.EquateApprox(1e-9, 0)
	want := map[string]map[int]float64{
		"v100": {1: 10, 2: 18},
		"h100": {1: 30, 2: 54},
	}
	if diff := cmp.Diff(want, PriorForModel(m, "a", []string{"v100", "h100"}), approx); diff != "" {
		t.Errorf("prior of a (-want +got):\n%s", diff)
	}
	// A model no matrix knows: the median model (b and c's geometric mean
	// rates, sqrt(2*5) on one v100).
	g := math.Sqrt(10)
	want = map[string]map[int]float64{"v100": {1: g, 2: 1.8 * g}, "h100": {1: 3 * g, 2: 5.4 * g}}
	got := PriorForModel(m, "llama3-8b-lora", []string{"v100", "h100"})
	if diff := cmp.Diff(want["h100"][1]/want["v100"][1], got["h100"][1]/got["v100"][1], approx); diff != "" {
		t.Errorf("unknown model's h100/v100 ratio (-want +got):\n%s", diff)
	}
	if got["v100"][1] != 5 {
		t.Errorf("unknown model on v100 = %v, want the median of 2, 5, 10", got["v100"][1])
	}
}

func TestPriorMemoryLimit(t *testing.T) {
	// big does not fit a 16 GB v100 (measured 0) but runs on an 80 GB a100.
	m := optimizer.Throughputs{}
	for jt, r := range map[string]float64{"x": 1, "y": 2} {
		for gt, f := range map[string]float64{"v100": 1, "a100": 3, "t4": 0.4, "h100": 6} {
			m.Set(jt, gt, 1, r*f)
		}
	}
	m.Set("big", "v100", 1, 0)
	m.Set("big", "a100", 1, 9)
	got := PriorForModel(m, "big", []string{"v100", "t4", "a10", "a100", "h100", "mi300x"})
	if _, ok := got["t4"]; ok {
		t.Errorf("big on t4 (16 GB, no more than the v100 it failed on) = %v; want no rate", got["t4"])
	}
	if got["v100"][1] != 0 {
		t.Errorf("big on v100 = %v; want the measured 0 kept", got["v100"])
	}
	for _, gt := range []string{"a10", "h100", "mi300x"} {
		if got[gt][1] <= 0 {
			t.Errorf("big on %s = %v; want a prior rate (more memory than 16 GB)", gt, got[gt])
		}
	}
	if want := 9.0 * 2; !cmp.Equal(want, got["h100"][1], cmpopts.EquateApprox(1e-9, 0)) {
		t.Errorf("big on h100 = %v; want %v (a100 rate x the others' h100/a100 ratio)", got["h100"][1], want)
	}
}

func TestWithPrior(t *testing.T) {
	measured := Lambda()
	types := CatalogTypes()
	filled := WithPrior(measured, types)
	if diff := cmp.Diff(Lambda(), measured); diff != "" {
		t.Fatalf("WithPrior modified its input:\n%s", diff)
	}
	for jt, byType := range measured {
		for gt, byW := range byType {
			for w, r := range byW {
				if filled[jt][gt][w] != r {
					t.Errorf("%s on %d x %s: measured %v became %v", jt, w, gt, r, filled[jt][gt][w])
				}
			}
		}
	}
	// Every model gets a rate on every catalogue type at 1, 2, 4, 8 GPUs.
	for _, jt := range measured.JobTypes() {
		for _, gt := range types {
			for _, w := range []int{1, 2, 4, 8} {
				if r := filled[jt][gt][w]; r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
					t.Errorf("%s on %d x %s = %v; want a positive rate", jt, w, gt, r)
				}
			}
		}
	}
	cells := PriorCells(measured, filled)
	if want := 10*len(types)*4 - 300; len(cells) != want {
		t.Errorf("%d prior cells, want %d", len(cells), want)
	}
	// Sanity of the specs: an h100 beats an l4 and a b200 beats an h100
	// for every model.
	for _, jt := range measured.JobTypes() {
		if filled[jt]["l4"][1] >= filled[jt]["h100"][1] || filled[jt]["b200"][1] <= filled[jt]["h100"][1] {
			t.Errorf("%s: l4 %.2f, h100 %.2f, b200 %.2f steps/s", jt, filled[jt]["l4"][1], filled[jt]["h100"][1], filled[jt]["b200"][1])
		}
	}
}

// WithPrior skips the fit when nothing is missing; it must give what the
// fit gives, and fit wherever one cell is missing.
func TestWithPriorShortcut(t *testing.T) {
	gavel := Default()
	gavelTypes := gavel.GPUTypes()
	holed := clone(gavel)
	jt := gavel.JobTypes()[0]
	delete(holed[jt]["v100"], 1)
	lambda := Lambda()
	filled := fillPrior(gavel, gavelTypes) // Gavel's matrix lacks some worker counts
	for _, tc := range []struct {
		name     string
		measured optimizer.Throughputs
		types    []string
		complete bool
	}{
		{"gavel on its types", gavel, gavelTypes, false},
		{"gavel filled, on its types", filled, gavelTypes, true},
		{"gavel filled, on one type more", filled, append(gavelTypes, "a100"), false},
		{"gavel less one cell", holed, gavelTypes, false},
		{"lambda on the catalogue", lambda, CatalogTypes(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := complete(tc.measured, tc.types); got != tc.complete {
				t.Errorf("complete = %v, want %v", got, tc.complete)
			}
			if diff := cmp.Diff(fillPrior(tc.measured, tc.types), WithPrior(tc.measured, tc.types)); diff != "" {
				t.Errorf("WithPrior differs from the fit (-fit +WithPrior):\n%s", diff)
			}
		})
	}
}
