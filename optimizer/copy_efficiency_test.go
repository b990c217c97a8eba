package optimizer

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestCopyEfficiencyAt: the measured curve's speed-ups (1.26, 1.36, 1.44 at
// 2, 4, 8 copies) are interpolated linearly in K and held beyond 8; a
// constant applies from 2 copies; one copy is always 1.
func TestCopyEfficiencyAt(t *testing.T) {
	measured := MeasuredCopyEfficiency()
	tests := []struct {
		name string
		c    CopyEfficiency
		want []float64 // At(1), At(2), ...
	}{
		{"zero value: perfect", CopyEfficiency{}, []float64{1, 1, 1, 1}},
		{"constant", CopyEfficiency{Constant: 0.34}, []float64{1, 0.34, 0.34, 0.34, 0.34}},
		{"measured", measured, []float64{
			1, 0.63,
			1.31 / 3, // speed-up halfway between 1.26 and 1.36 (measured at 3: 0.44)
			0.34,
			1.38 / 5, 1.40 / 6, 1.42 / 7,
			0.18,
			1.44 / 9, 1.44 / 10, // speed-up held at 8's
		}},
		{"one point", CopyEfficiency{Points: []CopyPoint{{4, 0.5}}}, []float64{1, 4.0 / 3 / 2, 5.0 / 3 / 3, 0.5, 2.0 / 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]float64, len(tc.want))
			for k := range got {
				got[k] = tc.c.At(k + 1)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("At(1..%d) (-want +got):\n%s", len(tc.want), diff)
			}
		})
	}
}

func TestParseCopyEfficiency(t *testing.T) {
	tests := []struct {
		in   string
		want CopyEfficiency
		err  bool
	}{
		{in: "0.34", want: CopyEfficiency{Constant: 0.34}},
		{in: "1", want: CopyEfficiency{Constant: 1}},
		{in: "2:0.63,4:0.34,8:0.18", want: MeasuredCopyEfficiency()},
		{in: " 8:0.18, 2:0.63 ,4:0.34", want: MeasuredCopyEfficiency()},
		{in: "3:0.5", want: CopyEfficiency{Points: []CopyPoint{{3, 0.5}}}},
		{in: "0", err: true},
		{in: "1.5", err: true},
		{in: "-0.2", err: true},
		{in: "NaN", err: true},
		{in: "", err: true},
		{in: "x", err: true},
		{in: "1:0.5", err: true},       // one copy is always 1
		{in: "2:0.6,2:0.5", err: true}, // K twice
		{in: "2:0", err: true},
		{in: "2:1.2", err: true},
		{in: "2:0.6,", err: true},
		{in: "two:0.6", err: true},
	}
	for _, tc := range tests {
		got, err := ParseCopyEfficiency(tc.in)
		if tc.err {
			if !errors.Is(err, ErrCopyEfficiency) {
				t.Errorf("ParseCopyEfficiency(%q) = %v, %v; want an ErrCopyEfficiency", tc.in, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseCopyEfficiency(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseCopyEfficiency(%q) (-want +got):\n%s", tc.in, diff)
		}
		again, err := ParseCopyEfficiency(got.String())
		if err != nil || !cmp.Equal(got, again) {
			t.Errorf("ParseCopyEfficiency(%q).String() = %q reads back as %v, %v", tc.in, got.String(), again, err)
		}
	}
	if got := (CopyEfficiency{}).String(); got != "1" {
		t.Errorf("zero value String() = %q, want \"1\"", got)
	}
}
