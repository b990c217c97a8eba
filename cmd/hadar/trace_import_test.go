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
		"states: every job that ran, whatever its end state",
		"  FAILED               1        1",
		"warning: the file has free text users set (JobName)",
		"note: no job has more than one record",
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
	headerOnly := filepath.Join(dir, "header.txt")
	noState := filepath.Join(dir, "nostate.txt")
	for path, text := range map[string]string{
		headerOnly: "# sacct --parsable2 --format=" + sim.SacctFormat + "\n" + strings.ReplaceAll(sim.SacctFormat, ",", "|") + "\n",
		noState:    "JobID|Submit|Start|End|AllocTRES\n1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:30|gres/gpu=1\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
		{[]string{"import", "--philly", fixture, "--week", "99"}, "no job to import: none of the 10 jobs of " + fixture + " is kept"},
		{[]string{"import", "--sacct", headerOnly}, headerOnly + ":2: no job records after the header"},
		{[]string{"import", "--philly", fixture, "--states", "COMPLETED"}, "--states: Philly's records have no job state"},
		{[]string{"import", "--sacct", noState, "--states", "completed"}, "--states: " + noState + " has no State field"},
		{[]string{"import", "--sacct", noState, "--states", "DONE"}, `--states: "DONE" is not a job state sacct prints`},
		{[]string{"import", "--philly", filepath.Join(dir, "nope.csv")}, "no such file"},
	} {
		_, _, err := runTraceCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// sacct -D: the runs of a requeued job are one job; the summary counts
// what was merged and thrown away, and the jobs by end state.
func TestTraceImportSacctDuplicates(t *testing.T) {
	fixture := filepath.Join("..", "..", "sim", "testdata", "sacct", "hand-duplicates.txt")
	stdout, stderr, err := runTraceCLI(t, "import", "--sacct", fixture)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sim.ParseTrace(strings.NewReader(stdout), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 7 {
		t.Errorf("%d jobs, want 7", len(jobs))
	}
	for _, want := range []string{
		"read 20 records: 7 jobs imported (t=0 is 2026-12-06 22:00:00)",
		"merged       4  earlier runs of 3 requeued jobs (arrival = first submit, duration = last run); 1289 GPU-s of runs thrown away",
		"skipped      1  " + sim.SkipRequeuedLast,
		"  CANCELLED            1        1",
		"  REQUEUED             0        1",
		"priced on: p100 1, v100 6 (recorded types not in the matrix, priced on v100: h100 1)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "note: no job has more than one record") || strings.Contains(stderr, "free text") {
		t.Errorf("a -D file in the recommended format got a note:\n%s", stderr)
	}

	_, stderr, err = runTraceCLI(t, "import", "--sacct", fixture, "--states", "COMPLETED,timeout", "--ignore-gpu-type")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"states: jobs that ended COMPLETED, TIMEOUT",
		"read 20 records: 4 jobs imported",
		"skipped      3  " + sim.SkipState,
		"  NODE_FAIL            0        1",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--states: stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "priced on") {
		t.Errorf("--ignore-gpu-type: stderr names pricing types:\n%s", stderr)
	}
}

// The security review's case: a '|' in one user's job name aborted an
// admin's import (hand-written, in its pipe.txt's format).
func TestTraceImportSacctPipeInJobName(t *testing.T) {
	in := filepath.Join(t.TempDir(), "pipe.txt")
	text := "JobID|JobName|Submit|Start|End|AllocTRES\n" +
		"1|a|b|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T01:00:00|gres/gpu=1\n" +
		"2|ok|2024-01-01T00:10:00|2024-01-01T00:10:00|2024-01-01T00:30:00|gres/gpu=2\n"
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runTraceCLI(t, "import", "--sacct", in)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := sim.ParseTrace(strings.NewReader(stdout), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ScaleFactor != 1 || jobs[1].Arrival != 600 ||
		!strings.Contains(stderr, "1 records had a '|' or a newline in it and were read by their other fields") {
		t.Errorf("jobs %v, stderr:\n%s", jobs, stderr)
	}
}
