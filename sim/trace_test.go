package sim

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
)

func TestParseTraceGavelFiles(t *testing.T) {
	tests := []struct {
		file         string
		jobs         int
		scaleFactors map[int]int
		lastArrival  float64
	}{
		{"max_min_fairness.trace", 96, map[int]int{1: 59, 2: 19, 4: 18}, 46317},
		{"minimize_makespan.trace", 100, map[int]int{1: 71, 2: 6, 4: 23}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			jobs, err := ReadTraceFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			s := SummarizeTrace(jobs, nil, "v100")
			if s.Jobs != tc.jobs {
				t.Errorf("jobs = %d, want %d", s.Jobs, tc.jobs)
			}
			if diff := cmp.Diff(tc.scaleFactors, s.ScaleFactors); diff != "" {
				t.Errorf("scale factors (-want +got):\n%s", diff)
			}
			if s.FirstArrival != 0 || s.LastArrival != tc.lastArrival {
				t.Errorf("arrivals span [%v, %v], want [0, %v]", s.FirstArrival, s.LastArrival, tc.lastArrival)
			}
			for i, j := range jobs {
				if j.SLO != -1 || j.PriorityWeight != 1 || !j.NeedsDataDir && j.JobType != "A3C" {
					t.Errorf("job %d: unexpected %+v", i, j)
				}
			}
		})
	}
}

func TestParseTraceFirstLine(t *testing.T) {
	jobs, err := ReadTraceFile("testdata/max_min_fairness.trace")
	if err != nil {
		t.Fatal(err)
	}
	want := TraceJob{
		JobType:        "ResNet-18 (batch size 128)",
		Command:        "python3 main.py --data_dir=%s/cifar10 --batch_size 128",
		WorkingDir:     "image_classification/cifar10",
		NumStepsArg:    "--num_steps",
		NeedsDataDir:   true,
		TotalSteps:     925982,
		ScaleFactor:    4,
		PriorityWeight: 1,
		SLO:            -1,
		Arrival:        0,
	}
	if diff := cmp.Diff(want, jobs[0]); diff != "" {
		t.Errorf("first job (-want +got):\n%s", diff)
	}
	if got := jobs[len(jobs)-1].Arrival; got != 46317 {
		t.Errorf("last arrival = %v, want 46317", got)
	}
}

// WriteTrace reproduces Gavel's files byte for byte.
func TestWriteTraceRoundTripsGavelFiles(t *testing.T) {
	for _, name := range EmbeddedTraceNames() {
		t.Run(name, func(t *testing.T) {
			raw, err := embeddedTraces.ReadFile("traces/" + name + ".trace")
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := ParseTrace(bytes.NewReader(raw), name)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteTrace(&buf, jobs); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(raw), buf.String()); diff != "" {
				t.Errorf("rewritten trace differs (-gavel +ours):\n%s", diff)
			}
		})
	}
}

func TestWriteTraceRoundTripsValues(t *testing.T) {
	jobs := []TraceJob{
		{JobType: "LM (batch size 5)", Command: "python3 main.py", WorkingDir: "lm", NumStepsArg: "--steps",
			TotalSteps: 1234.5, ScaleFactor: 8, PriorityWeight: 5, SLO: 1.2, Arrival: 3600.25},
		{JobType: "A3C", TotalSteps: 1e21, ScaleFactor: 1, PriorityWeight: 0.1, SLO: 1.0 / 3, Arrival: 1e-9},
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\t1.200000\t") {
		t.Errorf("SLO 1.2 not written as Gavel's %%f:\n%s", buf.String())
	}
	got, err := ParseTrace(&buf, "buf")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// A trace of a site's jobs carries their user, account and QOS in three
// fields after Gavel's ten, on every line once any job has them; a trace
// without them is Gavel's.
func TestWriteTraceSiteFields(t *testing.T) {
	jobs := []TraceJob{
		{JobType: "A3C", TotalSteps: 10, ScaleFactor: 1, PriorityWeight: 1, SLO: -1, User: "bob", Account: "acct_b", QOS: "gpu4"},
		{JobType: "A3C", TotalSteps: 10, ScaleFactor: 1, PriorityWeight: 1, SLO: -1, Arrival: 1, User: "alice"},
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	want := "A3C\t\t\t\t0\t10\t1\t1\t-1.000000\t0\tbob\tacct_b\tgpu4\n" +
		"A3C\t\t\t\t0\t10\t1\t1\t-1.000000\t1\talice\t\t\n"
	if buf.String() != want {
		t.Errorf("written:\n%q\nwant\n%q", buf.String(), want)
	}
	got, err := ParseTrace(&buf, "buf")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	buf.Reset()
	jobs[0].User, jobs[0].Account, jobs[0].QOS, jobs[1].User = "", "", "", ""
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.SplitN(buf.String(), "\n", 2)[0], "\t"); n != 9 {
		t.Errorf("a trace without users has %d tabs a line, want Gavel's 9", n)
	}
	if _, err := ParseTrace(strings.NewReader("A3C\t\t\t\t0\t10\t1\t1\t-1\t0\tbob smith\t\t\n"), "x"); err == nil ||
		!strings.Contains(err.Error(), "field 11 (user): contains a blank") {
		t.Errorf("user with a blank: %v", err)
	}
}

func TestWriteTraceRejectsInvalid(t *testing.T) {
	ok := TraceJob{JobType: "A3C", TotalSteps: 1, ScaleFactor: 1, PriorityWeight: 1, SLO: -1}
	tests := []struct {
		name string
		edit func(*TraceJob)
		want string
	}{
		{"tab in command", func(j *TraceJob) { j.Command = "a\tb" }, "command"},
		{"newline in dir", func(j *TraceJob) { j.WorkingDir = "a\nb" }, "working_dir"},
		{"empty type", func(j *TraceJob) { j.JobType = " " }, "job_type"},
		{"comment type", func(j *TraceJob) { j.JobType = "#x" }, "job_type"},
		{"zero steps", func(j *TraceJob) { j.TotalSteps = 0 }, "total_steps"},
		{"NaN steps", func(j *TraceJob) { j.TotalSteps = math.NaN() }, "total_steps"},
		{"zero scale", func(j *TraceJob) { j.ScaleFactor = 0 }, "scale_factor"},
		{"zero weight", func(j *TraceJob) { j.PriorityWeight = 0 }, "priority_weight"},
		{"inf SLO", func(j *TraceJob) { j.SLO = math.Inf(1) }, "SLO"},
		{"negative arrival", func(j *TraceJob) { j.Arrival = -1 }, "arrival_time_s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := ok
			tc.edit(&j)
			err := WriteTrace(&bytes.Buffer{}, []TraceJob{ok, j})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "job 1") {
				t.Errorf("WriteTrace = %v, want an error naming job 1 and %s", err, tc.want)
			}
		})
	}
}

func TestParseTraceSkipsBlankAndComments(t *testing.T) {
	in := "# header\n\n   \nA3C\tcmd\trl\t-n\t0\t100\t1\t1\t-1.000000\t7\r\n\t# indented comment\n"
	jobs, err := ParseTrace(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceJob{{JobType: "A3C", Command: "cmd", WorkingDir: "rl", NumStepsArg: "-n",
		TotalSteps: 100, ScaleFactor: 1, PriorityWeight: 1, SLO: -1, Arrival: 7}}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseTraceErrors(t *testing.T) {
	const good = "A3C\tcmd\trl\t-n\t1\t100\t1\t1\t-1.000000\t0"
	// with replaces field i (1-based) of the good line.
	with := func(i int, v string) string {
		f := strings.Split(good, "\t")
		f[i-1] = v
		return strings.Join(f, "\t")
	}
	tests := []struct {
		name  string
		line  string
		field int
		want  string
	}{
		{"too few fields", "A3C\tcmd\trl", 0, `x.trace:3: got 3 tab-separated fields, want 10`},
		{"too many fields", good + "\textra", 0, `x.trace:3: got 11 tab-separated fields, want 10`},
		{"scale factor not integer", with(7, "x"), 7, `x.trace:3: field 7 (scale_factor): "x" is not an integer`},
		{"scale factor zero", with(7, "0"), 7, `x.trace:3: field 7 (scale_factor): "0" must be at least 1`},
		{"scale factor float", with(7, "2.0"), 7, `field 7 (scale_factor): "2.0" is not an integer`},
		{"needs data dir", with(5, "yes"), 5, `field 5 (needs_data_dir): "yes" is not an integer`},
		{"steps negative", with(6, "-5"), 6, `field 6 (total_steps): "-5" must be positive`},
		{"steps zero", with(6, "0"), 6, `field 6 (total_steps): "0" must be positive`},
		{"steps NaN", with(6, "NaN"), 6, `field 6 (total_steps): "NaN" is not finite`},
		{"steps empty", with(6, ""), 6, `field 6 (total_steps): "" is not a number`},
		{"weight zero", with(8, "0"), 8, `field 8 (priority_weight): "0" must be positive`},
		{"SLO inf", with(9, "inf"), 9, `field 9 (SLO): "inf" is not finite`},
		{"arrival negative", with(10, "-1"), 10, `field 10 (arrival_time_s): "-1" is negative`},
		{"arrival text", with(10, "soon"), 10, `field 10 (arrival_time_s): "soon" is not a number`},
		{"empty job type", with(1, " "), 1, `field 1 (job_type): is empty`},
		{"carriage return", with(2, "a\rb"), 2, `field 2 (command): contains a tab or line break`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := "# comment\n" + good + "\n" + tc.line + "\n" + good + "\n"
			_, err := ParseTrace(strings.NewReader(in), "x.trace")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var te *TraceError
			if !errors.As(err, &te) || te.Line != 3 || te.Field != tc.field {
				t.Errorf("error %#v, want a *TraceError at line 3 field %d", err, tc.field)
			}
		})
	}
}

func TestParseTraceLongValueIsShortenedInError(t *testing.T) {
	long := strings.Repeat("9", 500) + "x"
	line := "A3C\tcmd\trl\t-n\t1\t" + long + "\t1\t1\t-1\t0\n"
	_, err := ParseTrace(strings.NewReader(line), "x")
	if err == nil || len(err.Error()) > 120 {
		t.Errorf("error = %v, want a short error", err)
	}
}

func TestParseTraceLineTooLong(t *testing.T) {
	in := "A3C\t" + strings.Repeat("a", maxTraceLine+10) + "\n"
	_, err := ParseTrace(strings.NewReader(in), "big")
	if err == nil || !strings.Contains(err.Error(), "big:1: line longer than") {
		t.Errorf("error = %v", err)
	}
}

func TestReadTraceFileMissing(t *testing.T) {
	_, err := ReadTraceFile(filepath.Join(t.TempDir(), "nope.trace"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error = %v, want os.ErrNotExist", err)
	}
}

func TestEmbeddedTraces(t *testing.T) {
	want := []string{"artifact_evaluation", "debug", "max_min_fairness", "medium_test", "minimize_makespan", "small_test"}
	if diff := cmp.Diff(want, EmbeddedTraceNames()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	counts := map[string]int{"artifact_evaluation": 15, "debug": 14, "max_min_fairness": 96,
		"medium_test": 20, "minimize_makespan": 100, "small_test": 20}
	for _, name := range want {
		jobs, err := EmbeddedTrace(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != counts[name] {
			t.Errorf("%s: %d jobs, want %d", name, len(jobs), counts[name])
		}
	}
	// The embedded copy is the testdata copy, and LoadTrace reaches both.
	fromFile, err := LoadTrace("testdata/max_min_fairness.trace")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"gavel:max_min_fairness", "gavel:max_min_fairness.trace"} {
		got, err := LoadTrace(spec)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fromFile, got); diff != "" {
			t.Errorf("%s differs from testdata (-file +embedded):\n%s", spec, diff)
		}
	}
	for _, bad := range []string{"nope", "", "../trace", "traces/debug"} {
		if _, err := LoadTrace("gavel:" + bad); !errors.Is(err, ErrUnknownTrace) || !strings.Contains(err.Error(), "max_min_fairness") {
			t.Errorf("LoadTrace(gavel:%s) = %v, want ErrUnknownTrace listing the names", bad, err)
		}
	}
}

func TestSummarizeTraceGPUHours(t *testing.T) {
	thr := optimizer.Throughputs{}
	thr.Set("a", "v100", 1, 2)
	thr.Set("a", "v100", 2, 3)
	jobs := []TraceJob{
		{JobType: "a", TotalSteps: 7200, ScaleFactor: 1, Arrival: 10},    // 3600 s x 1 GPU
		{JobType: "a", TotalSteps: 10800, ScaleFactor: 2, Arrival: 5},    // 3600 s x 2 GPUs
		{JobType: "b", TotalSteps: 1, ScaleFactor: 1, Arrival: 20},       // unpriced
		{JobType: "a", TotalSteps: 3600 * 4, ScaleFactor: 4, Arrival: 0}, // 4 workers: 6 steps/s, 2400 s x 4
	}
	got := SummarizeTrace(jobs, thr, "v100")
	want := TraceSummary{Jobs: 4, JobTypes: 2, ScaleFactors: map[int]int{1: 2, 2: 1, 4: 1},
		FirstArrival: 0, LastArrival: 20, TotalSteps: 7200 + 10800 + 1 + 14400,
		ReferenceType: "v100", GPUHours: 1 + 2 + 4*2400.0/3600, Unpriced: 1}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParseTrace(f *testing.F) {
	for _, name := range []string{"max_min_fairness.trace", "minimize_makespan.trace"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
		f.Add(strings.SplitN(string(data), "\n", 2)[0])
	}
	f.Add("# c\n\nA3C\tc\td\t-n\t1\t1.5e3\t2\t0.5\t1.2\t3.25\r\n")
	f.Add("A3C\tc\td\t-n\t1\t1\t0\t1\t-1\t0\n")
	f.Add("\t\t\t\t\t\t\t\t\t\n")
	f.Add("A3C\tc\td\t-n\t1\t1\t1\t1\t-1\t0\tbob\tacct_b\tgpu4\n")
	f.Fuzz(func(t *testing.T, in string) {
		jobs, err := ParseTrace(strings.NewReader(in), "fuzz")
		if err != nil {
			var te *TraceError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *TraceError", err)
			}
			return
		}
		// Whatever parses is valid, writes, and reads back unchanged.
		var buf bytes.Buffer
		if err := WriteTrace(&buf, jobs); err != nil {
			t.Fatalf("parsed jobs do not write: %v", err)
		}
		again, err := ParseTrace(&buf, "rewritten")
		if err != nil {
			t.Fatalf("rewritten trace does not parse: %v\n%q", err, buf.String())
		}
		if diff := cmp.Diff(jobs, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-parsed +reparsed):\n%s", diff)
		}
	})
}
