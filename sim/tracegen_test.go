package sim_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
)

// genMatrix is a small matrix shaped like Gavel's: two distributed job types
// (1, 2, 4, 8 workers on every type), one single-GPU type, one type measured
// only on k80 (never drawn, since the reference type is v100) and one whose
// multi-GPU rates exist only on k80 (drawn only with 1 worker).
func genMatrix() optimizer.Throughputs {
	t := optimizer.Throughputs{}
	for _, h := range []string{"v100", "p100", "k80"} {
		for _, w := range []int{1, 2, 4, 8} {
			t.Set("ResNet-50 (batch size 64)", h, w, 2*float64(w))
			t.Set("LM (batch size 20)", h, w, 5*float64(w))
		}
		t.Set("A3C", h, 1, 3)
		t.Set("Recommendation (batch size 512)", h, 1, 7)
	}
	t.Set("Recommendation (batch size 512)", "k80", 2, 10)
	t.Set("K80Only", "k80", 1, 1)
	return t
}

func TestGenerateDeterministic(t *testing.T) {
	opts := sim.GenerateOptions{Jobs: 200, Seed: 42, MultiGPU: true, ArrivalRate: 3, Throughputs: genMatrix()}
	a, err := sim.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different traces (-first +second):\n%s", diff)
	}
	opts.Seed = 43
	c, err := sim.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(a, c) {
		t.Error("seeds 42 and 43 gave the same trace")
	}
	// Durations and arrivals have their own streams: switching multi-GPU
	// off keeps the arrival times.
	opts.Seed, opts.MultiGPU = 42, false
	d, err := sim.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i].Arrival != d[i].Arrival {
			t.Fatalf("job %d: arrival %v with multi-GPU, %v without", i, a[i].Arrival, d[i].Arrival)
		}
	}
}

func TestGenerateScaleFactorDistribution(t *testing.T) {
	const n = 10000
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: n, Seed: 1, MultiGPU: true, Throughputs: genMatrix()})
	if err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, j := range jobs {
		count[j.ScaleFactor]++
	}
	// Binomial standard deviations are at most 0.005 here; allow 4 of them.
	for sf, p := range map[int]float64{1: .70, 2: .10, 4: .15, 8: .05} {
		if got := float64(count[sf]) / n; math.Abs(got-p) > 0.02 {
			t.Errorf("scale factor %d: fraction %.3f, want %.2f", sf, got, p)
		}
	}
	if len(count) != 4 {
		t.Errorf("scale factors %v, want only 1, 2, 4, 8", count)
	}
}

func TestGenerateSingleGPU(t *testing.T) {
	const n = 10000
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: n, Seed: 7, Throughputs: genMatrix()})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, j := range jobs {
		if j.ScaleFactor != 1 {
			t.Fatalf("single-GPU trace has %+v", j)
		}
		types[j.JobType]++
	}
	// Uniform over the four job types measured on v100.
	if len(types) != 4 || types["K80Only"] != 0 {
		t.Errorf("job types %v, want the four with a v100 rate", types)
	}
	for jt, c := range types {
		if math.Abs(float64(c)/n-0.25) > 0.02 {
			t.Errorf("%s drawn %d times of %d, want about a quarter", jt, c, n)
		}
	}
}

// Every job can run on the reference type at its scale factor, with a
// measured (not extrapolated) rate, and its steps are its duration at that
// rate.
func TestGenerateJobsHaveReferenceThroughput(t *testing.T) {
	thr := genMatrix()
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: 5000, Seed: 3, MultiGPU: true, Throughputs: thr, ReferenceType: "v100"})
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for i, j := range jobs {
		rate := thr[j.JobType]["v100"][j.ScaleFactor]
		if rate <= 0 {
			t.Fatalf("job %d: %q with %d workers has no v100 rate", i, j.JobType, j.ScaleFactor)
		}
		if j.TotalSteps != math.Floor(j.TotalSteps) || j.TotalSteps < 1 {
			t.Fatalf("job %d: steps %v not a positive whole number", i, j.TotalSteps)
		}
		// 60*10^1.5 s to 60*10^4 s, less the truncation to whole steps.
		dur := j.TotalSteps / rate
		if dur < 60*math.Pow(10, 1.5)-1/rate || dur > 60*1e4 {
			t.Fatalf("job %d: duration %v s out of range", i, dur)
		}
		if dur >= 60*1000 {
			long++
		}
		if err := j.Validate(); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if got := float64(long) / float64(len(jobs)); math.Abs(got-0.2) > 0.03 {
		t.Errorf("fraction of jobs longer than 1000 min = %.3f, want 0.2", got)
	}
}

// A scale factor no job type has is drawn again: with only 1 and 2 workers
// measured, P(2) = .10/.80.
func TestGenerateRedrawsMissingScaleFactors(t *testing.T) {
	thr := optimizer.Throughputs{}
	thr.Set("a", "v100", 1, 1)
	thr.Set("b", "v100", 1, 1)
	thr.Set("b", "v100", 2, 1.5)
	const n = 10000
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: n, Seed: 5, MultiGPU: true, Throughputs: thr})
	if err != nil {
		t.Fatal(err)
	}
	two := 0
	for _, j := range jobs {
		switch {
		case j.ScaleFactor == 2 && j.JobType == "b":
			two++
		case j.ScaleFactor != 1:
			t.Fatalf("unexpected job %+v", j)
		}
	}
	if got := float64(two) / n; math.Abs(got-0.125) > 0.015 {
		t.Errorf("fraction with 2 workers = %.3f, want 0.125", got)
	}
}

func TestGenerateArrivals(t *testing.T) {
	const n, rate = 10000, 10.0 // mean inter-arrival 360 s
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: n, Seed: 9, ArrivalRate: rate, Throughputs: genMatrix()})
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Arrival != 0 {
		t.Errorf("first arrival %v, want 0", jobs[0].Arrival)
	}
	for i := 1; i < n; i++ {
		if jobs[i].Arrival < jobs[i-1].Arrival || jobs[i].Arrival != math.Floor(jobs[i].Arrival) {
			t.Fatalf("arrival %d = %v after %v", i, jobs[i].Arrival, jobs[i-1].Arrival)
		}
	}
	// The standard error of the mean gap is 3.6 s; allow 5%, about 5 of them.
	mean := jobs[n-1].Arrival / (n - 1)
	if math.Abs(mean-3600/rate) > 0.05*3600/rate {
		t.Errorf("mean inter-arrival %.1f s, want %.0f", mean, 3600/rate)
	}

	static, err := sim.Generate(sim.GenerateOptions{Jobs: 50, Seed: 9, Throughputs: genMatrix()})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range static {
		if j.Arrival != 0 {
			t.Fatalf("static trace: job %d arrives at %v", i, j.Arrival)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	noV100 := optimizer.Throughputs{}
	noV100.Set("a", "k80", 1, 1)
	tests := []struct {
		name string
		opts sim.GenerateOptions
		want string
	}{
		{"negative jobs", sim.GenerateOptions{Jobs: -1, Throughputs: genMatrix()}, "jobs"},
		{"negative rate", sim.GenerateOptions{Jobs: 1, ArrivalRate: -1, Throughputs: genMatrix()}, "arrival rate"},
		{"NaN rate", sim.GenerateOptions{Jobs: 1, ArrivalRate: math.NaN(), Throughputs: genMatrix()}, "arrival rate"},
		{"empty matrix", sim.GenerateOptions{Jobs: 1}, "no job type"},
		{"no reference type", sim.GenerateOptions{Jobs: 1, Throughputs: noV100}, `"v100"`},
		{"unknown reference type", sim.GenerateOptions{Jobs: 1, Throughputs: genMatrix(), ReferenceType: "a100"}, `"a100"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sim.Generate(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate = %v, want an error mentioning %s", err, tc.want)
			}
		})
	}
	if jobs, err := sim.Generate(sim.GenerateOptions{Throughputs: genMatrix()}); err != nil || len(jobs) != 0 {
		t.Errorf("0 jobs: %v, %v", jobs, err)
	}
}

// On Gavel's own matrix, only ResNet-18/50, Transformer and LM are
// distributed, commands come from Gavel's traces, and the trace round-trips
// through the file format.
func TestGenerateGavelMatrix(t *testing.T) {
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: 2000, Seed: 0, MultiGPU: true, ArrivalRate: 2.8, Throughputs: profiles.Default()})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, j := range jobs {
		types[j.JobType] = true
		if j.ScaleFactor > 1 {
			distributed := false
			for _, m := range []string{"ResNet-18 ", "ResNet-50 ", "Transformer ", "LM "} {
				distributed = distributed || strings.HasPrefix(j.JobType, m)
			}
			if !distributed {
				t.Errorf("%q drawn with %d workers", j.JobType, j.ScaleFactor)
			}
		}
		if j.JobType == "ResNet-18 (batch size 128)" && (j.WorkingDir != "image_classification/cifar10" || !strings.HasPrefix(j.Command, "python3 main.py --data_dir=%s/cifar10")) {
			t.Errorf("ResNet-18 command %q in %q, want Gavel's", j.Command, j.WorkingDir)
		}
	}
	if len(types) != 26 {
		t.Errorf("%d job types drawn, want all 26", len(types))
	}
	var buf bytes.Buffer
	if err := sim.WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	back, err := sim.ParseTrace(&buf, "generated")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, back); diff != "" {
		t.Errorf("round trip (-generated +parsed):\n%s", diff)
	}
}

func TestGeneratePlaceholderCommand(t *testing.T) {
	thr := optimizer.Throughputs{}
	thr.Set("My Net-1 (batch size 32)", "v100", 1, 1)
	thr.Set("Weird/Model!", "v100", 1, 1)
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: 40, Seed: 1, Throughputs: thr})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]string{
		"My Net-1 (batch size 32)": {"python3 train.py --batch_size 32", "my_net-1", "--num_steps"},
		"Weird/Model!":             {"python3 train.py", "weird_model", "--num_steps"},
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.JobType] = true
		if diff := cmp.Diff(want[j.JobType], [3]string{j.Command, j.WorkingDir, j.NumStepsArg}); diff != "" || !j.NeedsDataDir {
			t.Errorf("%s: (-want +got):\n%s", j.JobType, diff)
		}
	}
	if len(seen) != 2 {
		t.Errorf("job types drawn: %v", seen)
	}
}
