package profiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// One user's job reports absurd rates (the security review's H1) while
// jobs of two other users report the truth: the learned cell stays within
// 2x of the truth and is the one in use. Hand-written rates.
func TestPoisonedReportsDoNotBendTheCell(t *testing.T) {
	ctx := context.Background()
	const job, gpu = "ResNet-50 (batch size 64)", "v100"
	s := openTest(t, "")
	before, err := s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	imported := before.Rate(job, gpu, 1)
	truth := 0.6 * imported // this cluster's v100s are slower than Gavel's
	var outliers, invalid int
	record := func(o Observation) {
		o.JobType, o.GPUType, o.Workers = job, gpu, 1
		switch err := s.RecordObservation(ctx, o); {
		case errors.Is(err, ErrOutlier):
			outliers++
		case errors.Is(err, ErrInvalid):
			invalid++
		case err != nil:
			t.Fatal(err)
		}
	}
	for round := range 30 {
		// mallory: five jobs, each trying a different lie every round.
		for j := range 5 {
			lies := []Observation{
				{Steps: 1.46e298, Seconds: 1},
				{Steps: 1.46e-11, Seconds: 1},
				{Steps: 1.7e299, Seconds: 1e-9},
				{Steps: math.NaN(), Seconds: 60},
				{Steps: math.Inf(1), Seconds: 60},
				{Steps: 100 * imported * 60, Seconds: 60},
				{Steps: imported / 100 * 60, Seconds: 60},
				{Steps: 7.9 * imported * 60, Seconds: 60}, // the largest lie the bound lets in
			}
			o := lies[(round+j)%len(lies)]
			o.JobID, o.User = fmt.Sprint("m", j), "mallory"
			record(o)
		}
		// bob and carol: honest, with 10% noise.
		for j, user := range []string{"bob", "carol"} {
			noise := 1 + 0.1*math.Sin(float64(round*3+j))
			record(Observation{Steps: truth * noise * 60, Seconds: 60, JobID: fmt.Sprint(user, round%3), User: user})
		}
	}
	tp, err := s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := tp.Rate(job, gpu, 1)
	if got < truth/2 || got > truth*2 {
		t.Errorf("learned %v steps/s, want within 2x of the truth %v", got, truth)
	}
	if outliers == 0 || invalid == 0 {
		t.Errorf("outliers %d, invalid %d: want both counted", outliers, invalid)
	}
	rows, err := s.Show(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.GPUType == gpu && r.Workers == 1 && r.Source == SourceLearned && (!r.InUse || r.Users != 3) {
			t.Errorf("learned row %+v: want in use, from 3 users", r)
		}
	}

	// Purging mallory leaves the honest users' value.
	n, cells, err := s.PurgeUser(ctx, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || cells != 1 {
		t.Errorf("PurgeUser removed %d samples in %d cells, want some in 1", n, cells)
	}
	tp, err = s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Rate(job, gpu, 1); math.Abs(got-truth)/truth > 0.1 {
		t.Errorf("after the purge: %v steps/s, want the truth %v within 10%%", got, truth)
	}
	if _, _, err := s.PurgeUser(ctx, "mallory"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second purge: %v, want ErrNotFound", err)
	}
	left, err := s.Samples(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range left {
		if x.User == "mallory" {
			t.Fatalf("a sample of mallory's is left: %+v", x)
		}
	}
}

// A cell with no imported value is bounded by the rate the daemon planned
// with (the prior's), and that bound does not follow the learned value, so
// repeated lies cannot ratchet it.
func TestSampleBoundWithoutImportedValue(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", WithMinLearnedUsers(1), WithMinLearnedSamples(1))
	o := func(rate, expected float64, user string) error {
		return s.RecordObservation(ctx, Observation{JobType: "custom", GPUType: "a100", Workers: 1,
			Steps: rate * 10, Seconds: 10, JobID: user, User: user, Expected: expected})
	}
	if err := o(100, 10, "mallory"); !errors.Is(err, ErrOutlier) {
		t.Fatalf("100 steps/s against a prior of 10: %v, want ErrOutlier", err)
	}
	if err := o(70, 10, "mallory"); err != nil {
		t.Fatal(err)
	}
	if err := o(1, 0, "ann"); err != nil { // no expectation: only the absolute bounds
		t.Fatal(err)
	}
	if err := o(2e9, 0, "ann"); !errors.Is(err, ErrInvalid) {
		t.Errorf("2e9 steps/s: %v, want ErrInvalid", err)
	}
}

// Rows out of range (a database written before the bounds) are never in
// use; an import or Set out of range is refused.
func TestRatesOutOfRange(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	for _, r := range []float64{1.7e308, 1e-11, math.Inf(1), math.NaN(), -1} {
		if err := s.Set(ctx, "A3C", "v100", 1, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Set(%v) = %v, want ErrInvalid", r, err)
		}
		if _, err := s.ImportGavel(ctx, map[string]map[string]map[int]float64{"A3C": {"v100": {1: r}}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("ImportGavel(%v) = %v, want ErrInvalid", r, err)
		}
	}
	if _, err := s.db.Exec(`UPDATE throughputs SET steps_per_s = 1.7e308 WHERE job_type = 'A3C' AND gpu_type = 'v100' AND source = 'imported'`); err != nil {
		t.Fatal(err)
	}
	tp, err := s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp["A3C"]["v100"]; ok {
		t.Errorf("a rate of 1.7e308 is in use: %v", tp["A3C"]["v100"])
	}
	if diff := cmp.Diff(Default()["A3C"]["k80"], tp["A3C"]["k80"]); diff != "" {
		t.Errorf("the other cells (-want +got):\n%s", diff)
	}
}
