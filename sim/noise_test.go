package sim

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
)

// seeing is a policy that records what each round's snapshot shows of the
// jobs and plans as inner does.
type seeing struct {
	inner optimizer.Policy
	total [][]float64 // per round, per job: TotalSteps
	left  [][]float64 // per round, per job: RemainingSteps
}

func (s *seeing) Name() string { return s.inner.Name() }

func (s *seeing) Plan(snap *optimizer.Snapshot) (*optimizer.Plan, error) {
	var tot, rem []float64
	for _, j := range snap.Jobs {
		tot = append(tot, j.TotalSteps)
		rem = append(rem, j.RemainingSteps)
	}
	s.total = append(s.total, tot)
	s.left = append(s.left, rem)
	return s.inner.Plan(snap)
}

// seedWith returns the first seed whose first step factor is below 1
// (under) or above 1.
func seedWith(t *testing.T, sigma float64, under bool) (int64, float64) {
	for seed := int64(0); seed < 100; seed++ {
		if f := stepFactors(1, sigma, seed)[0]; (f < 1) == under && math.Abs(f-1) > 0.2 {
			return seed, f
		}
	}
	t.Fatal("no seed found")
	return 0, 0
}

func TestStepNoise(t *testing.T) {
	const steps, rate = 36000.0, 10.0 // 10 rounds of 360 s on the v100
	for _, under := range []bool{true, false} {
		t.Run(fmt.Sprintf("estimate under the truth: %v", under), func(t *testing.T) {
			seed, f := seedWith(t, 0.5, under)
			inner, err := optimizer.New("yarn-cs", optimizer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := &seeing{inner: inner}
			res, err := Run(context.Background(), Config{
				Cluster: Cluster{GPUs: map[string]int{"v100": 1}, GPUsPerNode: 1}, Round: 360 * time.Second,
				Throughputs: tinyMatrix(), Policy: p, StepNoise: 0.5, NoiseSeed: seed,
			}, []TraceJob{job(steps, 1, 0)})
			if err != nil {
				t.Fatal(err)
			}
			// The job progresses at the truth: done after its true steps.
			if got := res.Jobs[0].Completion; got != steps/rate {
				t.Errorf("completed at %v s, want %v s", got, steps/rate)
			}
			est := steps * f
			var wantTotal, wantLeft, gotTotal, gotLeft []float64
			for k := range p.total {
				done := float64(k) * rate * 360
				wantTotal = append(wantTotal, est)
				wantLeft = append(wantLeft, math.Max(est-done, math.Max(0.05*est, done-est)))
				gotTotal = append(gotTotal, p.total[k][0])
				gotLeft = append(gotLeft, p.left[k][0])
			}
			if len(p.total) != 10 {
				t.Errorf("%d rounds, want 10", len(p.total))
			}
			approx := cmpopts.EquateApprox(1e-12, 0)
			if diff := cmp.Diff(wantTotal, gotTotal, approx); diff != "" {
				t.Errorf("seen total steps (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(wantLeft, gotLeft, approx); diff != "" {
				t.Errorf("seen remaining steps (-want +got)\n%s", diff)
			}
			// Past its estimate the job is seen to need as much again as
			// it has overrun: in the last round it has done 9 rounds' steps.
			if last, overrun := gotLeft[len(gotLeft)-1], 9*rate*360-est; under && math.Abs(last-overrun) > 1e-9*est {
				t.Errorf("past its estimate the job is seen with %v steps left, want its overrun %v", last, overrun)
			}
		})
	}
}

// Without noise the run is what it was: the truth, exactly.
func TestStepNoiseZeroIsExact(t *testing.T) {
	inner, _ := optimizer.New("hadar", optimizer.Options{})
	p := &seeing{inner: inner}
	trace := []TraceJob{job(3600, 1, 0), job(7200, 2, 0), job(1000, 1, 500)}
	if _, err := Run(context.Background(), Config{
		Cluster: Cluster{GPUs: map[string]int{"v100": 2, "k80": 2}, GPUsPerNode: 2}, Round: 360 * time.Second,
		Throughputs: tinyMatrix(), Policy: p, NoiseSeed: 7,
	}, trace); err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{3600, 7200} {
		if p.total[0][i] != want || p.left[0][i] != want {
			t.Errorf("job %d seen as %v total, %v left; want %v", i, p.total[0][i], p.left[0][i], want)
		}
	}
	if _, err := Run(context.Background(), Config{
		Cluster: Cluster{GPUs: map[string]int{"v100": 1}}, Round: time.Minute,
		Throughputs: tinyMatrix(), Policy: inner, StepNoise: -1,
	}, trace); err == nil {
		t.Error("negative sigma: no error")
	}
}

func TestStepFactors(t *testing.T) {
	if stepFactors(5, 0, 1) != nil {
		t.Error("sigma 0 draws factors")
	}
	f := stepFactors(20000, 0.5, 1)
	mean, sq := 0.0, 0.0
	for _, x := range f {
		mean += math.Log(x)
	}
	mean /= float64(len(f))
	for _, x := range f {
		sq += (math.Log(x) - mean) * (math.Log(x) - mean)
	}
	sd := math.Sqrt(sq / float64(len(f)-1))
	if math.Abs(mean) > 0.02 || math.Abs(sd-0.5) > 0.02 {
		t.Errorf("log factors: mean %v, sd %v; want 0, 0.5", mean, sd)
	}
	if diff := cmp.Diff(f[:10], stepFactors(10, 0.5, 1)); diff != "" {
		t.Errorf("not deterministic\n%s", diff)
	}
}

func TestNoisyThroughputs(t *testing.T) {
	thr := optimizer.Throughputs{}
	for i := 0; i < 40; i++ {
		for _, gt := range []string{"a", "b", "c", "d", "e"} {
			for _, w := range []int{1, 2, 4} {
				thr.Set(fmt.Sprintf("job-%02d", i), gt, w, float64(w)*(1+float64(i)))
			}
		}
	}
	orig := optimizer.Throughputs{}
	for jt, byType := range thr {
		for gt, byW := range byType {
			for w, r := range byW {
				orig.Set(jt, gt, w, r)
			}
		}
	}
	same, err := NoisyThroughputs(thr, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(thr, same); diff != "" {
		t.Errorf("sigma 0 changed the matrix\n%s", diff)
	}
	noisy, err := NoisyThroughputs(thr, 0.3, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, thr); diff != "" {
		t.Fatalf("the input was modified\n%s", diff)
	}
	var logs []float64
	for jt, byType := range thr {
		for gt, byW := range byType {
			f := noisy[jt][gt][1] / byW[1]
			for w, r := range byW {
				// One factor per job type x GPU type, at every worker count.
				if g := noisy[jt][gt][w] / r; math.Abs(g-f) > 1e-12*f {
					t.Errorf("%s on %s: factor %v at %d workers, %v at 1", jt, gt, g, w, f)
				}
			}
			logs = append(logs, math.Log(f))
		}
	}
	mean, sq := 0.0, 0.0
	for _, l := range logs {
		mean += l
	}
	mean /= float64(len(logs))
	for _, l := range logs {
		sq += (l - mean) * (l - mean)
	}
	if sd := math.Sqrt(sq / float64(len(logs)-1)); math.Abs(mean) > 0.06 || sd < 0.25 || sd > 0.35 {
		t.Errorf("log factors over %d cells: mean %v, sd %v; want about 0, 0.3", len(logs), mean, sd)
	}
	again, _ := NoisyThroughputs(thr, 0.3, 3)
	if diff := cmp.Diff(noisy, again); diff != "" {
		t.Errorf("not deterministic\n%s", diff)
	}
	other, _ := NoisyThroughputs(thr, 0.3, 4)
	if cmp.Equal(noisy, other) {
		t.Error("seeds 3 and 4 give the same matrix")
	}
	if _, err := NoisyThroughputs(thr, math.NaN(), 1); err == nil {
		t.Error("NaN sigma: no error")
	}
}
