package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/jobproto"
)

func TestReportJobID(t *testing.T) {
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string // "" : an error
	}{
		{"plain job", "", map[string]string{"SLURM_JOB_ID": "30"}, "30"},
		{"array task", "", map[string]string{"SLURM_JOB_ID": "30", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "2"}, "28_2"},
		{"first array task", "", map[string]string{"SLURM_JOB_ID": "28", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "0"}, "28_0"},
		{"--job wins", "77", map[string]string{"SLURM_JOB_ID": "30", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "2"}, "77"},
		{"bad task id", "", map[string]string{"SLURM_JOB_ID": "30", "SLURM_ARRAY_JOB_ID": "28", "SLURM_ARRAY_TASK_ID": "x"}, "30"},
		{"outside Slurm", "", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reportJobID(tc.flag, func(k string) string { return tc.env[k] })
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestReportArrayTask(t *testing.T) {
	spool := t.TempDir()
	t.Setenv("SLURM_JOB_ID", "30")
	t.Setenv("SLURM_ARRAY_JOB_ID", "28")
	t.Setenv("SLURM_ARRAY_TASK_ID", "0")
	if out, err := runHadar(t, "report", "--spool", spool, "--steps", "1150", "--total", "3000"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got, errs := jobproto.ReadProgress(spool)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(got) != 1 || got["28_0"].Steps != 1150 || got["28_0"].Total != 3000 {
		t.Errorf("reports = %+v, want 28_0 at 1150 of 3000", got)
	}
	for _, args := range [][]string{
		{"report", "--spool", spool},
		{"report", "--spool", spool, "--steps", "1", "--follow", "x.log"},
		{"report", "--spool", spool, "--steps", "1", "--pattern", `(\d+)`},
		{"report", "--spool", spool, "--follow", "x.log", "--pattern", `no group`},
		{"report", "--spool", spool, "--steps", "-1"},
	} {
		if _, err := runHadar(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestReportFollow runs the sidecar on a log a fake training loop writes,
// then stops it as a batch script would.
func TestReportFollow(t *testing.T) {
	dir := t.TempDir()
	spool, logf := filepath.Join(dir, "spool"), filepath.Join(dir, "train.log")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		app := newApp()
		app.Writer, app.ErrWriter = &out, &out
		done <- app.RunContext(ctx, []string{"hadar", "report", "--job", "41", "--spool", spool,
			"--follow", logf, "--interval", "0s", "--poll", "10ms"})
	}()
	read := func() jobproto.Progress {
		got, _ := jobproto.ReadProgress(spool)
		return got["41"]
	}
	wait := func(steps float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for read().Steps != steps {
			if time.Now().After(deadline) {
				t.Fatalf("report is %+v, want %v steps", read(), steps)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(50 * time.Millisecond) // the log does not exist yet
	f, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("loading data\nstep 10/100 loss 2.3\n")
	wait(10)
	f.WriteString("\r 20%|██   | 20/100 [00:01<00:04, 19.9it/s]")
	wait(20)
	if p := read(); p.Total != 100 {
		t.Errorf("total = %v, want 100", p.Total)
	}
	f.WriteString("\nstep 99/100\nstep 100/100") // unterminated: read at the stop
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sidecar: %v (%s)", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sidecar did not stop")
	}
	if p := read(); p.Steps != 100 || p.Total != 100 {
		t.Errorf("final report %+v, want 100 of 100", p)
	}
}

func TestSidecarRateLimit(t *testing.T) {
	spool := t.TempDir()
	parser, err := jobproto.NewLogParser("")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &sidecar{spool: spool, job: "5", parser: parser, interval: 5 * time.Second, now: func() time.Time { return now }}
	var got []float64
	record := func() {
		if p, _ := jobproto.ReadProgress(spool); len(p) > 0 {
			got = append(got, p["5"].Steps)
		} else {
			got = append(got, -1)
		}
	}
	for i, line := range []string{"nothing", "step 1/9", "step 2/9", "step 3/9", "step 3/9", "step 4/9"} {
		now = now.Add(2 * time.Second)
		if i == 4 {
			now = now.Add(5 * time.Second)
		}
		s.consume([]string{line})
		if err := s.maybeWrite(false); err != nil {
			t.Fatal(err)
		}
		record()
	}
	s.consume([]string{"step 5/9"})
	if err := s.maybeWrite(true); err != nil { // the final write is not rate-limited
		t.Fatal(err)
	}
	record()
	// Written at step 1 (the first), step 3 (7 s later) and step 5 (forced);
	// steps 2, 3 (first seen 4 s after the write) and 4 came too soon.
	if diff := cmp.Diff([]float64{-1, 1, 1, 1, 3, 3, 5}, got); diff != "" {
		t.Errorf("reported steps after each line (-want +got):\n%s", diff)
	}
}

// TestReportImportsOnlyTheJobProtocol: `hadar report` runs inside jobs;
// its code uses the job protocol and the CLI library, never the daemon
// (jobproto itself links only the standard library: its own test).
func TestReportImportsOnlyTheJobProtocol(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "report_cmd.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		first, _, _ := strings.Cut(path, "/")
		if strings.Contains(first, ".") && path != "github.com/urfave/cli/v2" && path != "github.com/hadar-sched/hadar/jobproto" {
			t.Errorf("report_cmd.go imports %s", path)
		}
	}
}
