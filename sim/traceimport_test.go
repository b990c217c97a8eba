package sim

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
)

// readFixture returns a testdata file. Its leading "# " lines (the
// producing command and notes, slurm/testdata's convention) are comments
// to both parsers, so errors name the file's own lines.
func readFixture(t testing.TB, parts ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func at(s string) time.Time {
	t, err := time.Parse(sacctTime, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseSacctFixture(t *testing.T) {
	src, err := ParseSacct(strings.NewReader(readFixture(t, "sacct", "22.05-history.txt")), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	want := &ImportSource{
		Name: "fixture",
		Records: []ImportRecord{
			{ID: "101", Line: 4, Submit: at("2022-05-02T09:00:00"), Duration: 3600, GPUs: 2, State: "COMPLETED", GPUType: "v100"},
			{ID: "103_1", Line: 9, Submit: at("2022-05-02T09:30:00"), Duration: 7200, GPUs: 1, State: "COMPLETED"},
			{ID: "103_2", Line: 11, Submit: at("2022-05-02T09:30:00"), Duration: 1800, GPUs: 1, State: "FAILED"},
			{ID: "105", Line: 16, Submit: at("2022-05-02T10:30:00"), Duration: 4 * 3600, GPUs: 16, State: "COMPLETED", GPUType: "v100"},
			// p100 and k80: no one type.
			{ID: "106", Line: 18, Submit: at("2022-05-02T11:00:00"), Duration: 1800, GPUs: 4, State: "COMPLETED"},
		},
		Lines:    17,
		HasState: true,
		FreeText: []string{"JobName"},
		Dropped:  map[string]int{"COMPLETED": 1, "PENDING": 1, "RUNNING": 1, "CANCELLED": 1, "FAILED": 1},
		Skipped: map[string]int{
			SkipStep:       7,
			SkipNoGPU:      1,
			SkipNotStarted: 2,
			SkipRunning:    1,
			SkipZero:       1,
		},
	}
	if diff := cmp.Diff(want, src); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	checkAccounted(t, src)
}

// checkAccounted checks that nothing is silently dropped: every data
// record is a job, an earlier run merged into one, or a skip.
func checkAccounted(t *testing.T, src *ImportSource) {
	t.Helper()
	n, merged := len(src.Records), 0
	for _, c := range src.Skipped {
		n += c
	}
	for _, r := range src.Records {
		merged += r.Requeued
	}
	if n+merged != src.Lines || merged != src.Merged {
		t.Errorf("%d records + skips + %d merged (%d counted), %d lines", n, merged, src.Merged, src.Lines)
	}
}

func TestParseSacct(t *testing.T) {
	const head = "JobID|Submit|Start|End|AllocTRES\n"
	for _, tc := range []struct {
		name, in string
		want     []ImportRecord
		skipped  map[string]int
		err      string // substring of the error; "" for none
	}{
		{
			name: "fields in any order, extra ones ignored, --parsable's trailing bar",
			in:   "AllocTRES|Elapsed|End|JobID|Start|Submit|\ngres/gpu=3|00:01:00|2024-01-01T00:02:00|7|2024-01-01T00:01:00|2024-01-01T00:00:00|\n",
			want: []ImportRecord{{ID: "7", Line: 2, Submit: at("2024-01-01T00:00:00"), Duration: 60, GPUs: 3}},
		},
		{
			name: "gres/gpu wins over typed counts",
			in:   head + "1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T01:00:00|gres/gpu:a100=2,gres/gpu:h100=2,gres/gpu=4\n",
			want: []ImportRecord{{ID: "1", Line: 2, Submit: at("2024-01-01T00:00:00"), Duration: 3600, GPUs: 4}},
		},
		{
			name: "CRLF and blank lines",
			in:   "JobID|Submit|Start|End|AllocTRES\r\n\r\n1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:30|gres/gpu=1\r\n",
			want: []ImportRecord{{ID: "1", Line: 3, Submit: at("2024-01-01T00:00:00"), Duration: 30, GPUs: 1}},
		},
		{
			name:    "array step of an array task",
			in:      head + "5_3.batch|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:30|gres/gpu=1\n",
			skipped: map[string]int{SkipStep: 1},
		},
		{name: "no header", in: "1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:30|gres/gpu=1\n", err: "fixture:1: the header (first line) has no JobID, Submit, Start, End, AllocTRES field"},
		{name: "header without AllocTRES", in: "JobID|Submit|Start|End\n", err: "fixture:1: the header (first line) has no AllocTRES field"},
		{name: "empty", in: "", err: "fixture:1: empty"},
		{name: "field count", in: head + "1|a|b\n", err: "fixture:2: got 3 '|'-separated fields, the header has 5"},
		{name: "bad submit", in: head + "1|yesterday|None|None|\n", err: `fixture:2: Submit: "yesterday" is not a time`},
		{name: "no submit", in: head + "1|Unknown|None|None|\n", err: "fixture:2: Submit: \"Unknown\": a job always has a submit time"},
		{name: "bad start", in: head + "1|2024-01-01T00:00:00|2024-01-01 00:00|None|\n", err: "fixture:2: Start:"},
		{name: "end before start", in: head + "1|2024-01-01T00:00:00|2024-01-01T00:10:00|2024-01-01T00:00:00|gres/gpu=1\n", err: "fixture:2: End: 2024-01-01T00:00:00 is before Start"},
		{name: "bad TRES item", in: head + "1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:01|cpu\n", err: `fixture:2: AllocTRES: "cpu" is not KEY=VALUE`},
		{name: "bad GPU count", in: head + "1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:01|gres/gpu=2G\n", err: `fixture:2: AllocTRES: gres/gpu: "2G" is not a GPU count`},
		{name: "empty job id", in: head + "|2024-01-01T00:00:00|None|None|\n", err: "fixture:2: JobID: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := ParseSacct(strings.NewReader(tc.in), "fixture")
			if tc.err != "" {
				var ie *ImportError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ie) {
					t.Fatalf("error %v, want an *ImportError containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.skipped == nil {
				tc.skipped = map[string]int{}
			}
			if diff := cmp.Diff(tc.want, src.Records); diff != "" {
				t.Errorf("records (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.skipped, src.Skipped); diff != "" {
				t.Errorf("skipped (-want +got)\n%s", diff)
			}
		})
	}
}

func TestParsePhilly(t *testing.T) {
	src, err := ParsePhilly(strings.NewReader(readFixture(t, "philly", "2017-sample.csv")), "sample")
	if err != nil {
		t.Fatal(err)
	}
	if src.Lines != 10 || len(src.Records) != 10 || len(src.Skipped) != 0 {
		t.Fatalf("lines %d, records %d, skipped %v; want 10, 10, none", src.Lines, len(src.Records), src.Skipped)
	}
	want := ImportRecord{ID: "112", Line: 8, Submit: PhillyEpoch.Add(2601211 * time.Second), Duration: 1453510, GPUs: 16}
	if diff := cmp.Diff(want, src.Records[5]); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}

	for _, tc := range []struct{ name, in, err string }{
		{"columns", "1,0,CLOS,1,1\n", "x:1: got 5 comma-separated fields, want 6"},
		{"arrival", "1,soon,CLOS,1,1,10\n", `x:1: arrival time: "soon" is not a number of seconds`},
		{"negative arrival", "# h\n1,-1,CLOS,1,1,10\n", "x:2: arrival time: \"-1\" is not between 0 and"},
		{"NaN duration", "1,0,CLOS,1,1,NaN\n", "x:1: duration:"},
		{"size", "1,0,CLOS,1,1.5,10\n", `x:1: size: "1.5" is not a GPU count`},
		{"id", " ,0,CLOS,1,1,10\n", "x:1: job id: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePhilly(strings.NewReader(tc.in), "x")
			var ie *ImportError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ie) {
				t.Fatalf("error %v, want an *ImportError containing %q", err, tc.err)
			}
		})
	}
	src, err = ParsePhilly(strings.NewReader("1,0,CLOS,1,0,10\n2,1,CLOS,1,1,0\n3,2,CLOS,1,1,5\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{SkipNoGPU: 1, SkipZero: 1}, src.Skipped); diff != "" || len(src.Records) != 1 {
		t.Errorf("skipped (-want +got)\n%s; records %v", diff, src.Records)
	}
}

// importMatrix has one single-GPU-only type and two distributed ones.
func importMatrix() optimizer.Throughputs {
	thr := optimizer.Throughputs{}
	thr.Set("Solo", "v100", 1, 2)
	thr.Set("Solo", "k80", 1, 1)
	for _, jt := range []string{"DistA", "DistB"} {
		thr.Set(jt, "v100", 1, 10)
		thr.Set(jt, "v100", 2, 18)
		thr.Set(jt, "v100", 8, 60)
		thr.Set(jt, "k80", 1, 3)
	}
	return thr
}

func TestImport(t *testing.T) {
	day := PhillyEpoch
	src := &ImportSource{
		Name: "src",
		Records: []ImportRecord{
			{ID: "a", Line: 1, Submit: day.Add(10 * time.Hour), Duration: 100, GPUs: 1},
			{ID: "b", Line: 2, Submit: day.Add(2 * time.Hour), Duration: 50.5, GPUs: 2},
			{ID: "c", Line: 3, Submit: day.Add(3 * time.Hour), Duration: 10, GPUs: 16},
			{ID: "d", Line: 4, Submit: day.Add(4 * time.Hour), Duration: 10, GPUs: 4},
			{ID: "e", Line: 5, Submit: day.Add(30 * time.Hour), Duration: 10, GPUs: 1},
			{ID: "f", Line: 6, Submit: day.Add(1 * time.Hour), Duration: 10, GPUs: 1},
		},
		Lines:   8,
		Skipped: map[string]int{SkipStep: 2},
	}
	opts := ImportOptions{Throughputs: importMatrix(), Seed: 3, MaxGPUs: 8, From: day.Add(2 * time.Hour), To: day.Add(24 * time.Hour)}
	jobs, rep, err := Import(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Arrival float64
		GPUs    int
		Steps   float64
		Dist    bool
	}
	var got []row
	for _, j := range jobs {
		got = append(got, row{j.Arrival, j.ScaleFactor, j.TotalSteps, j.JobType != "Solo"})
	}
	rate8 := 60.0
	rate4 := 18.0 * 2 // linear from the 2-GPU measurement
	want := []row{
		{0, 2, 909, true}, // floor(50.5 x 18)
		{3600, 8, 10 * rate8, true},
		{7200, 4, 10 * rate4, true},
		{8 * 3600, 1, 0, false}, // checked below: depends on the type drawn
	}
	got[3].Steps, got[3].Dist = 0, false // every type is measured at 1 GPU
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	wantRep := ImportReport{
		Read: 8, Jobs: 4, Skipped: map[string]int{SkipStep: 2, SkipWindow: 2}, Capped: 1,
		Kept: map[string]int{"": 4}, Dropped: map[string]int{"": 2}, PricedOn: map[string]int{"v100": 4}, Unmatched: map[string]int{},
		Start: day.Add(2 * time.Hour), ScaleFactors: map[int]int{1: 1, 2: 1, 4: 1, 8: 1}, JobTypes: rep.JobTypes,
	}
	if diff := cmp.Diff(wantRep, rep); diff != "" {
		t.Errorf("report (-want +got)\n%s", diff)
	}
	if j := jobs[3]; j.TotalSteps != 100*importMatrix()[j.JobType]["v100"][1] {
		t.Errorf("1-GPU job %s: %v steps", j.JobType, j.TotalSteps)
	}

	// The same seed draws the same types; the cap off keeps 16 GPUs at
	// 8-GPU rate x 2.
	again, _, _ := Import(src, opts)
	if diff := cmp.Diff(jobs, again); diff != "" {
		t.Errorf("not deterministic (-first +second)\n%s", diff)
	}
	opts.MaxGPUs = 0
	kept, rep, err := Import(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if kept[1].ScaleFactor != 16 || kept[1].TotalSteps != 10*2*rate8 || rep.Capped != 0 {
		t.Errorf("uncapped: %d GPUs, %v steps, %d capped", kept[1].ScaleFactor, kept[1].TotalSteps, rep.Capped)
	}

	// Every type is drawn with some seed; single-GPU jobs draw from all.
	seen := map[string]bool{}
	for seed := int64(0); seed < 40; seed++ {
		opts.Seed = seed
		js, _, _ := Import(src, opts)
		seen[js[3].JobType] = true
	}
	if len(seen) != 3 {
		t.Errorf("1-GPU job types drawn over 40 seeds: %v, want all 3", seen)
	}

	if _, _, err := Import(src, ImportOptions{Throughputs: importMatrix(), ReferenceType: "a100"}); err == nil {
		t.Error("a reference type the matrix lacks: no error")
	}
}

func TestImportWeek(t *testing.T) {
	src, err := ParsePhilly(strings.NewReader(readFixture(t, "philly", "2017-sample.csv")), "sample")
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := src.Week(5)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2017, 9, 18, 23, 27, 0, 0, time.UTC); !from.Equal(want) || to.Sub(from) != 7*24*time.Hour {
		t.Errorf("week 5 = [%s, %s), want to start at %s", from, to, want)
	}
	jobs, rep, err := Import(src, ImportOptions{Throughputs: importMatrix(), From: from, To: to, MaxGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Rows 277 and 278 arrive at 3346857 s and 3346858 s: week 5.
	if len(jobs) != 2 || jobs[1].Arrival != 1 || rep.Skipped[SkipWindow] != 8 {
		t.Errorf("week 5: %d jobs, %v, skipped %v", len(jobs), jobs, rep.Skipped)
	}
	if _, _, err := src.Week(-1); err == nil {
		t.Error("week -1: no error")
	}
}

// The imported trace writes and reads back, and simulates.
func TestImportRoundTrip(t *testing.T) {
	src, err := ParseSacct(strings.NewReader(readFixture(t, "sacct", "22.05-history.txt")), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := Import(src, ImportOptions{Throughputs: importMatrix(), MaxGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	back, err := ParseTrace(&buf, "back")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, back); diff != "" {
		t.Errorf("(-imported +read back)\n%s", diff)
	}
}

func fuzzSeeds(f *testing.F, parts ...string) {
	data := readFixture(f, parts...)
	f.Add(data)
	sc := bufio.NewScanner(strings.NewReader(data))
	for i := 0; sc.Scan() && i < 4; i++ {
		f.Add(sc.Text())
	}
}

// checkImported holds for whatever a parser accepts: every line accounted
// for, every record importable into a trace that validates.
func checkImported(t *testing.T, src *ImportSource, err error) {
	if err != nil {
		var ie *ImportError
		if !errors.As(err, &ie) {
			t.Fatalf("error %v is not an *ImportError", err)
		}
		return
	}
	checkAccounted(t, src)
	if t.Failed() {
		t.FailNow()
	}
	for _, r := range src.Records {
		if r.GPUs <= 0 || !(r.Duration > 0) || r.ID == "" || r.Requeued < 0 || r.DiscardedGPUSeconds < 0 {
			t.Fatalf("bad record %+v", r)
		}
	}
	jobs, rep, err := Import(src, ImportOptions{Throughputs: importMatrix(), MaxGPUs: 8})
	if len(src.Records) == 0 {
		if !errors.Is(err, ErrNoJobs) {
			t.Fatalf("no records: import error %v, want ErrNoJobs", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	n := rep.Jobs + rep.Merged
	for _, c := range rep.Skipped {
		n += c
	}
	if n != rep.Read {
		t.Fatalf("report: %d jobs + merged + skipped, %d read", n, rep.Read)
	}
	if err := WriteTrace(&bytes.Buffer{}, jobs); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func FuzzParseSacct(f *testing.F) {
	fuzzSeeds(f, "sacct", "22.05-history.txt")
	fuzzSeeds(f, "sacct", "hand-duplicates.txt")
	fuzzSeeds(f, "sacct", "fox-2024-11-13.txt")
	f.Add("JobID|JobName|Submit|Start|End|AllocTRES\n1|a|b\n|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:01|gres/gpu=1\n")
	f.Add("JobID|JobName|Submit|Comment|Start|End|State|AllocTRES|\n1|a|2024-01-01T00:00:00|c|None|None|PENDING||\n1|\n|2024-01-01T00:00:00||2024-01-01T00:00:00|2024-01-01T00:00:01|REQUEUED|gres/gpu:a=1|\n")
	f.Add("JobID|Submit|Start|End|AllocTRES|\n1|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:00:01|gres/gpu:x=1|\n")
	f.Fuzz(func(t *testing.T, in string) {
		src, err := ParseSacct(strings.NewReader(in), "fuzz")
		checkImported(t, src, err)
	})
}

func FuzzParsePhilly(f *testing.F) {
	fuzzSeeds(f, "philly", "2017-sample.csv")
	f.Add("1,1e9,CLOS,1,1,1e-300\n")
	f.Fuzz(func(t *testing.T, in string) {
		src, err := ParsePhilly(strings.NewReader(in), "fuzz")
		checkImported(t, src, err)
	})
}
