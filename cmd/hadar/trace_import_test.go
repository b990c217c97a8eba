package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/sim"
)

func TestTraceImportSacct(t *testing.T) {
	fixture := filepath.Join("..", "..", "sim", "testdata", "sacct", "22.05-history.txt")
	stdout, stderr, err := runTraceCLI(t, "import", "--sacct", fixture, "--seed", "2")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sim.ParseTrace(strings.NewReader(stdout), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	var gpus []int
	for _, j := range jobs {
		gpus = append(gpus, j.ScaleFactor)
	}
	if diff := cmp.Diff([]int{2, 1, 1, 8, 4}, gpus); diff != "" {
		t.Errorf("GPUs (-want +got)\n%s", diff)
	}
	for _, want := range []string{
		"read 17 records: 5 jobs imported (t=0 is 2022-05-02 09:00:00)",
		"skipped      7  " + sim.SkipStep,
		"skipped      1  " + sim.SkipRunning,
		"skipped      2  " + sim.SkipNotStarted,
		"capped       1  jobs with more than 8 GPUs",
		"GPU counts above 8 capped to 8",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestTraceImportPhillyWindow(t *testing.T) {
	fixture := filepath.Join("..", "..", "sim", "testdata", "philly", "2017-sample.csv")
	out := filepath.Join(t.TempDir(), "w.trace")
	_, stderr, err := runTraceCLI(t, "import", "--philly", fixture, "--from", "2017-09-01", "--to", "2017-10-01", "--max-gpus", "0", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sim.ReadTraceFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Rows 112 (16 GPUs, 14 Sep), 277 and 278 (23 Sep).
	if len(jobs) != 3 || jobs[0].ScaleFactor != 16 || !strings.Contains(stderr, "GPU counts kept (no cap)") ||
		!strings.Contains(stderr, "window: submitted in [2017-09-01 00:00:00, 2017-10-01 00:00:00)") {
		t.Errorf("%d jobs (%v), stderr:\n%s", len(jobs), jobs, stderr)
	}
	_, stderr, err = runTraceCLI(t, "import", "--philly", fixture, "--week", "5")
	if err != nil || !strings.Contains(stderr, "week 5: submitted in [2017-09-18 23:27:00, 2017-09-25 23:27:00)") {
		t.Errorf("--week 5: %v\n%s", err, stderr)
	}
}

func TestTraceImportErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("#h\n1,0,CLOS,1,1,10\n2,x,CLOS,1,1,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join("..", "..", "sim", "testdata", "philly", "2017-sample.csv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"import"}, "exactly one of --philly FILE and --sacct FILE"},
		{[]string{"import", "--philly", bad}, bad + `:3: arrival time: "x" is not a number of seconds`},
		{[]string{"import", "--philly", fixture, "--week", "1", "--from", "2017-09-01"}, "--week and --from/--to both set"},
		{[]string{"import", "--philly", fixture, "--from", "Sept 1"}, `--from: "Sept 1" is not a time`},
		{[]string{"import", "--philly", fixture, "--from", "2017-09-02", "--to", "2017-09-01"}, "is empty"},
		{[]string{"import", "--philly", fixture, "--max-gpus", "-1"}, "--max-gpus must be at least 0"},
		{[]string{"import", "--sacct", fixture}, "the header (first line) has no JobID"},
		{[]string{"import", "--philly", filepath.Join(dir, "nope.csv")}, "no such file"},
	} {
		_, _, err := runTraceCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
