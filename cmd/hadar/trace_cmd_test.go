package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
)

// runTraceCLI runs `hadar trace args...` and returns stdout and stderr.
func runTraceCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:      "hadar",
		Commands:  []*cli.Command{traceCommand()},
		Writer:    &out,
		ErrWriter: &errOut,
		// Return errors instead of exiting the test binary.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"hadar", "trace"}, args...))
	return out.String(), errOut.String(), err
}

// tinyGavelJSON is a two-job-type matrix in Gavel's file format.
const tinyGavelJSON = `{
  "v100": {
    "('A', 1)": {"null": 2.0},
    "('A', 2)": {"null": 3.5},
    "('B', 1)": {"null": 1.0, "('A', 1)": [0.5, 1.0]}
  },
  "k80": {
    "('A', 1)": {"null": 0.5},
    "('B', 1)": {"null": 0.25}
  },
  "v100_unconsolidated": {"('A', 1)": {"null": 9}}
}`

func TestTraceGenerateStdoutDeterministic(t *testing.T) {
	args := []string{"generate", "--jobs", "30", "--seed", "3", "--multi-gpu", "--rate", "4"}
	first, _, err := runTraceCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := runTraceCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Error("same flags, different traces")
	}
	jobs, err := sim.ParseTrace(strings.NewReader(first), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 30 || jobs[0].Arrival != 0 || jobs[29].Arrival == 0 {
		t.Errorf("got %d jobs, arrivals %v..%v", len(jobs), jobs[0].Arrival, jobs[len(jobs)-1].Arrival)
	}
	// Same as the library with the embedded matrix.
	want, err := sim.Generate(sim.GenerateOptions{Jobs: 30, Seed: 3, MultiGPU: true, ArrivalRate: 4, Throughputs: mustThroughputs(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("CLI and sim.Generate differ (-lib +cli):\n%s", diff)
	}
}

func mustThroughputs(t *testing.T, path string) optimizer.Throughputs {
	t.Helper()
	thr, err := loadThroughputs(path)
	if err != nil {
		t.Fatal(err)
	}
	return thr
}

func TestTraceGenerateFileWithThroughputs(t *testing.T) {
	dir := t.TempDir()
	thrPath := filepath.Join(dir, "thr.json")
	if err := os.WriteFile(thrPath, []byte(tinyGavelJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "gen.trace")
	stdout, stderr, err := runTraceCLI(t, "generate", "--jobs", "200", "--multi-gpu", "--throughputs", thrPath, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "" || !strings.Contains(stderr, "wrote 200 jobs to "+out) {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	jobs, err := sim.ReadTraceFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sfs := map[string]bool{}
	for _, j := range jobs {
		sfs[fmt.Sprintf("%s/%d", j.JobType, j.ScaleFactor)] = true
	}
	// Only A is measured with 2 workers; nothing has 4 or 8.
	if diff := cmp.Diff(map[string]bool{"A/1": true, "A/2": true, "B/1": true}, sfs); diff != "" {
		t.Errorf("job types/scale factors (-want +got):\n%s", diff)
	}

	// show prices the work with the same matrix, on the reference type.
	stdout, _, err = runTraceCLI(t, "show", "--throughputs", thrPath, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"jobs           200 (2 job types)", "arrivals       all at 0 s (static)", "GPU-hours on v100"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "left out") {
		t.Errorf("every job should be priced:\n%s", stdout)
	}
	stdout, _, err = runTraceCLI(t, "show", "--throughputs", thrPath, "--reference-type", "k80", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "GPU-hours on k80") {
		t.Errorf("show --reference-type k80:\n%s", stdout)
	}
}

func TestTraceShowEmbedded(t *testing.T) {
	stdout, _, err := runTraceCLI(t, "show", "gavel:max_min_fairness")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"trace          gavel:max_min_fairness",
		"jobs           96 (8 job types)",
		"scale factors  1 GPU: 59 (61%), 2 GPU: 19 (20%), 4 GPU: 18 (19%)",
		"arrivals       0 s to 46317 s (12.87 h, 7.38 jobs/hour)",
		"total steps    18166806",
		"work           ",
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
}

func TestTraceCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.trace")
	if err := os.WriteFile(bad, []byte("A3C\tc\td\t-n\t1\t10\tx\t1\t-1\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"show no args", []string{"show"}, "want one trace"},
		{"show unknown embedded", []string{"show", "gavel:nope"}, "unknown embedded trace"},
		{"show missing file", []string{"show", filepath.Join(dir, "missing")}, "no such file"},
		{"show malformed", []string{"show", bad}, bad + `:1: field 7 (scale_factor): "x" is not an integer`},
		{"generate stray arg", []string{"generate", "x"}, "unexpected argument"},
		{"generate negative rate", []string{"generate", "--rate", "-1"}, "arrival rate"},
		{"generate negative jobs", []string{"generate", "--jobs", "-1"}, "jobs"},
		{"generate no jobs", []string{"generate", "--jobs", "0"}, "--jobs must be at least 1, got 0"},
		{"generate unknown reference", []string{"generate", "--reference-type", "a100"}, `"a100"`},
		{"generate bad throughputs", []string{"generate", "--throughputs", filepath.Join(dir, "none.json")}, "no such file"},
		{"generate unwritable", []string{"generate", "--out", filepath.Join(dir, "no", "dir", "x.trace")}, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runTraceCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The trace for a current cluster: Lambda's matrix, durations on an
// A100, gangs of 1-8.
func TestTraceGenerateLambda(t *testing.T) {
	stdout, _, err := runTraceCLI(t, "generate", "--throughputs", "lambda", "--reference-type", "a100", "--multi-gpu", "--jobs", "200")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sim.ParseTrace(strings.NewReader(stdout), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	lambda := profiles.Lambda()
	scales := map[int]bool{}
	for _, j := range jobs {
		if lambda[j.JobType]["a100"][j.ScaleFactor] <= 0 {
			t.Errorf("job %+v: no lambda rate on %d x a100", j, j.ScaleFactor)
		}
		scales[j.ScaleFactor] = true
	}
	if len(jobs) != 200 || len(scales) < 3 {
		t.Errorf("%d jobs, scale factors %v; want 200 with gangs of several sizes", len(jobs), scales)
	}
	if _, _, err := runTraceCLI(t, "generate", "--throughputs", "lamda"); err == nil || !strings.Contains(err.Error(), "gavel, lambda, lambda-fp16") {
		t.Errorf("unknown matrix: %v", err)
	}
}

// No matrix measured an l40s: with --prior the trace's durations are the
// prior's rates there.
func TestTraceGeneratePrior(t *testing.T) {
	args := []string{"generate", "--throughputs", "lambda", "--reference-type", "l40s", "--multi-gpu", "--jobs", "50"}
	if _, _, err := runTraceCLI(t, args...); err == nil || !strings.Contains(err.Error(), `"l40s"`) {
		t.Fatalf("without --prior: %v; want no rates on l40s", err)
	}
	stdout, _, err := runTraceCLI(t, append(args, "--prior")...)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sim.ParseTrace(strings.NewReader(stdout), "stdout")
	if err != nil || len(jobs) != 50 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	filled := profiles.WithPrior(profiles.Lambda(), []string{"l40s"})
	for _, j := range jobs {
		if filled[j.JobType]["l40s"][j.ScaleFactor] <= 0 {
			t.Errorf("job %+v: no prior rate on %d x l40s", j, j.ScaleFactor)
		}
	}
}
