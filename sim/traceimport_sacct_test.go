package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The hand-written sacct -D fixture (see its note): the runs of one job id
// are one job, submitted at its first record, running as its last.
func TestParseSacctDuplicates(t *testing.T) {
	src, err := ParseSacct(strings.NewReader(readFixture(t, "sacct", "hand-duplicates.txt")), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	want := []ImportRecord{
		// 44 s thrown away.
		{ID: "141", Line: 7, Submit: at("2026-12-06T22:11:59"), Duration: 45, GPUs: 1, State: "COMPLETED", GPUType: "v100", Requeued: 1, DiscardedGPUSeconds: 44},
		// 1 s + 44 s thrown away; the last run on a v100.
		{ID: "135", Line: 12, Submit: at("2026-12-06T22:11:55"), Duration: 45, GPUs: 1, State: "COMPLETED", GPUType: "v100", Requeued: 2, DiscardedGPUSeconds: 45},
		// Preempted after 600 s on 2 GPUs; the type is only in ReqTRES.
		{ID: "150", Line: 14, Submit: at("2026-12-06T22:00:00"), Duration: 3600, GPUs: 2, State: "COMPLETED", GPUType: "h100", Requeued: 1, DiscardedGPUSeconds: 1200},
		{ID: "171", Line: 19, Submit: at("2026-12-06T22:07:00"), Duration: 120, GPUs: 1, State: "CANCELLED", GPUType: "p100"},
		{ID: "172", Line: 20, Submit: at("2026-12-06T22:08:00"), Duration: 300, GPUs: 1, State: "TIMEOUT", GPUType: "v100"},
		{ID: "173", Line: 21, Submit: at("2026-12-06T22:09:00"), Duration: 30, GPUs: 1, State: "FAILED", GPUType: "v100"},
		{ID: "174", Line: 22, Submit: at("2026-12-06T22:10:00"), Duration: 60, GPUs: 1, State: "NODE_FAIL", GPUType: "v100"},
	}
	if diff := cmp.Diff(want, src.Records); diff != "" {
		t.Errorf("records (-want +got)\n%s", diff)
	}
	wantSkipped := map[string]int{SkipStep: 4, SkipRequeuedLast: 1, SkipNotStarted: 3, SkipRunning: 1}
	if diff := cmp.Diff(wantSkipped, src.Skipped); diff != "" {
		t.Errorf("skipped (-want +got)\n%s", diff)
	}
	wantDropped := map[string]int{"REQUEUED": 1, "PENDING": 1, "CANCELLED": 1, "RUNNING": 1}
	if diff := cmp.Diff(wantDropped, src.Dropped); diff != "" {
		t.Errorf("dropped (-want +got)\n%s", diff)
	}
	if src.Lines != 20 || src.Merged != 4 || src.Duplicated != 4 || len(src.FreeText) != 0 {
		t.Errorf("lines %d, merged %d, duplicated %d, free text %v; want 20, 4, 4, none", src.Lines, src.Merged, src.Duplicated, src.FreeText)
	}
	checkAccounted(t, src)

	jobs, rep, err := Import(src, ImportOptions{Throughputs: importMatrix(), MaxGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Arrivals from the first submit: 150 at 22:00:00 is t=0.
	if jobs[0].Arrival != 0 || jobs[0].ScaleFactor != 2 || rep.Merged != 4 || rep.RequeuedJobs != 3 || rep.DiscardedGPUSeconds != 1289 {
		t.Errorf("first job %+v; merged %d of %d jobs, %v GPU-s", jobs[0], rep.Merged, rep.RequeuedJobs, rep.DiscardedGPUSeconds)
	}
	if diff := cmp.Diff(map[string]int{"COMPLETED": 3, "CANCELLED": 1, "TIMEOUT": 1, "FAILED": 1, "NODE_FAIL": 1}, rep.Kept); diff != "" {
		t.Errorf("kept (-want +got)\n%s", diff)
	}
}

// Without -D a requeued job is one record, submitted at its requeue:
// sacct's Restarts (Slurm 24.11+) tells it.
func TestParseSacctMissingRuns(t *testing.T) {
	// Hand-written: job 141 of hand-duplicates.txt as sacct without -D
	// prints it, plus the Restarts field.
	in := "JobID|Submit|Start|End|State|AllocTRES|Restarts\n" +
		"141|2026-12-06T22:12:44|2026-12-06T22:12:46|2026-12-06T22:13:31|COMPLETED|gres/gpu=1|1\n" +
		"142|2026-12-06T22:12:44|2026-12-06T22:12:46|2026-12-06T22:13:31|COMPLETED|gres/gpu=1|0\n"
	src, err := ParseSacct(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	if src.MissingRuns != 1 || !src.HasRestarts || len(src.Records) != 2 {
		t.Errorf("missing runs %d, restarts field %v, %d records; want 1, true, 2", src.MissingRuns, src.HasRestarts, len(src.Records))
	}
}

func TestParseSacctRuns(t *testing.T) {
	const head = "JobID|Submit|Start|End|State|AllocTRES\n"
	for _, tc := range []struct {
		name, in string
		want     []ImportRecord
		skipped  map[string]int
		err      string
	}{
		{
			name: "records out of order: the latest submit is the last run",
			in: head + "9|2024-01-01T01:00:00|2024-01-01T01:00:00|2024-01-01T02:00:00|COMPLETED|gres/gpu=1\n" +
				"9|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:30:00|REQUEUED|gres/gpu=2\n",
			want: []ImportRecord{{ID: "9", Line: 2, Submit: at("2024-01-01T00:00:00"), Duration: 3600, GPUs: 1, State: "COMPLETED", Requeued: 1, DiscardedGPUSeconds: 3600}},
		},
		{
			name: "an earlier run that never started throws nothing away",
			in: head + "9|2024-01-01T00:00:00|None|2024-01-01T00:10:00|REVOKED|\n" +
				"9|2024-01-01T00:10:00|2024-01-01T00:10:00|2024-01-01T00:20:00|COMPLETED|gres/gpu=1\n",
			want: []ImportRecord{{ID: "9", Line: 3, Submit: at("2024-01-01T00:00:00"), Duration: 600, GPUs: 1, State: "COMPLETED", Requeued: 1}},
		},
		{
			name: "resized",
			in: head + "9|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:10:00|RESIZING|gres/gpu=2\n" +
				"9|2024-01-01T00:10:00|2024-01-01T00:10:00|2024-01-01T00:20:00|COMPLETED|gres/gpu=1\n",
			skipped: map[string]int{SkipResized: 2},
		},
		{
			name: "overlapping runs are not one requeued job",
			in: head + "9|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T01:00:00|COMPLETED|gres/gpu=1\n" +
				"9|2024-01-01T00:30:00|2024-01-01T00:30:00|2024-01-01T02:00:00|COMPLETED|gres/gpu=1\n",
			err: "x:3: JobID: job 9 is also on line 2, and this record was submitted before that run ended",
		},
		{
			name: "an earlier run without an End",
			in: head + "9|2024-01-01T00:00:00|2024-01-01T00:00:00|Unknown|RUNNING|gres/gpu=1\n" +
				"9|2024-01-01T00:30:00|2024-01-01T00:30:00|2024-01-01T02:00:00|COMPLETED|gres/gpu=1\n",
			err: "that run has no End",
		},
		{
			name:    "header only",
			in:      "# sacct ...\n" + head + "\n",
			err:     "x:3: no job records after the header",
			skipped: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := ParseSacct(strings.NewReader(tc.in), "x")
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
			checkAccounted(t, src)
		})
	}
}

// A '|' or a newline in a user's job name neither stops the import nor
// shifts a field. All inputs hand-written, in the format of the security
// review's pipe.txt and forged.txt.
func TestParseSacctFreeText(t *testing.T) {
	const (
		rest  = "2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T01:00:00|gres/gpu=1"
		other = "2|ok|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:30:00|gres/gpu=2"
	)
	one := ImportRecord{ID: "1", Line: 2, Submit: at("2024-01-01T00:00:00"), Duration: 3600, GPUs: 1}
	two := func(line int) ImportRecord {
		return ImportRecord{ID: "2", Line: line, Submit: at("2024-01-01T00:00:00"), Duration: 1800, GPUs: 2}
	}
	for _, tc := range []struct {
		name, in string
		want     []ImportRecord
		skipped  map[string]int
		repaired int
		warning  string
	}{
		{
			name:     "a '|' in JobName between the fields",
			in:       "JobID|JobName|Submit|Start|End|AllocTRES\n1|a|b|" + rest + "\n" + other + "\n",
			want:     []ImportRecord{one, two(3)},
			repaired: 1,
		},
		{
			name:     "a forged tail in JobName: the real fields come last",
			in:       "JobID|JobName|Submit|Start|End|AllocTRES\n1|x|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-02T00:00:00|gres/gpu=512|" + rest + "\n",
			want:     []ImportRecord{one},
			repaired: 1,
		},
		{
			name:     "JobName last, with '|', --parsable's trailing bar",
			in:       "JobID|Submit|Start|End|AllocTRES|JobName|\n1|" + rest + "|a|b||\n",
			want:     []ImportRecord{one},
			repaired: 1,
		},
		{
			name:     "a newline in JobName: the lines are rejoined",
			in:       "JobID|JobName|Submit|Start|End|AllocTRES\n1|a\n\n# b\n|" + rest + "\n" + other + "\n",
			want:     []ImportRecord{one, two(6)},
			repaired: 1,
		},
		{
			name:     "a newline and a whole forged line in JobName",
			in:       "JobID|JobName|Submit|Start|End|AllocTRES\n1|x\n999|n|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-02T00:00:00|gres/gpu=512|" + rest + "\n",
			want:     []ImportRecord{one},
			repaired: 1,
		},
		{
			name:    "cut short at the end of the file",
			in:      "JobID|JobName|Submit|Start|End|AllocTRES\n" + other + "\n1|a\n",
			want:    []ImportRecord{two(2)},
			skipped: map[string]int{SkipCut: 1},
			warning: "x:3: the file ends inside this record",
		},
		{
			name:     "a field between two free-text fields cannot be placed",
			in:       "JobID|JobName|Submit|Comment|Start|End|AllocTRES\n1|a|b|2024-01-01T00:00:00|c|2024-01-01T00:00:00|2024-01-01T01:00:00|gres/gpu=1\n",
			skipped:  map[string]int{SkipUnreadable: 1},
			repaired: 1,
			warning:  "x:2: Submit: cannot be told apart from the free text of JobName, Comment",
		},
		{
			name:    "with free text, a record that does not read is skipped, not fatal",
			in:      "JobID|JobName|Submit|Start|End|AllocTRES\n1|a|b|c|d|e\n" + other + "\n",
			want:    []ImportRecord{two(3)},
			skipped: map[string]int{SkipUnreadable: 1},
			warning: `x:2: Submit: "b" is not a time`,
		},
		{
			name: "a forged record sharing a real job's id",
			in: "JobID|JobName|Submit|Start|End|AllocTRES\n" + other + "\n" +
				"2|x|2024-01-01T00:10:00|2024-01-01T00:10:00|2024-01-01T00:20:00|gres/gpu=8\n",
			skipped: map[string]int{SkipUnreadable: 2},
			warning: "job 2 is also on line 2",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := ParseSacct(strings.NewReader(tc.in), "x")
			if err != nil {
				t.Fatal(err)
			}
			if tc.skipped == nil {
				tc.skipped = map[string]int{}
			}
			if diff := cmp.Diff(tc.want, src.Records, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("records (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.skipped, src.Skipped); diff != "" {
				t.Errorf("skipped (-want +got)\n%s", diff)
			}
			if src.Repaired != tc.repaired {
				t.Errorf("repaired %d, want %d", src.Repaired, tc.repaired)
			}
			if got := strings.Join(src.Warnings, "\n"); !strings.Contains(got, tc.warning) || (tc.warning == "") != (got == "") {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
			checkAccounted(t, src)
		})
	}
}

// Fox's verbatim captures (shared/data/fox-sacct): JobName is the last
// field, cancelled jobs before and after they started, PENDING and
// RUNNING records, typed GPUs.
func TestParseSacctFox(t *testing.T) {
	for _, tc := range []struct {
		file    string
		jobs    int
		skipped map[string]int
		dropped map[string]int
	}{
		{
			file: "fox-2024-11-13.txt", jobs: 16,
			skipped: map[string]int{SkipStep: 67, SkipNoGPU: 13},
			dropped: map[string]int{"COMPLETED": 8, "FAILED": 4, "TIMEOUT": 1},
		},
		{
			file: "fox-2025-09.txt", jobs: 47,
			skipped: map[string]int{SkipStep: 179, SkipNotStarted: 35, SkipNoGPU: 8, SkipRunning: 32},
			dropped: map[string]int{"CANCELLED": 5, "COMPLETED": 6, "FAILED": 1, "PENDING": 31, "RUNNING": 32},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			src, err := ParseSacct(strings.NewReader(readFixture(t, "sacct", tc.file)), tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(src.Records) != tc.jobs || src.Repaired != 0 || len(src.Warnings) != 0 {
				t.Errorf("%d jobs, %d repaired, warnings %v; want %d, 0, none", len(src.Records), src.Repaired, src.Warnings, tc.jobs)
			}
			if diff := cmp.Diff(tc.skipped, src.Skipped); diff != "" {
				t.Errorf("skipped (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.dropped, src.Dropped); diff != "" {
				t.Errorf("dropped (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff([]string{"JobName"}, src.FreeText); diff != "" {
				t.Errorf("free text (-want +got)\n%s", diff)
			}
			checkAccounted(t, src)
		})
	}
	// Jobs cancelled after they started held their GPUs: kept by default,
	// dropped by States.
	src, err := ParseSacct(strings.NewReader(readFixture(t, "sacct", "fox-2024-11-13.txt")), "fox")
	if err != nil {
		t.Fatal(err)
	}
	thr := importMatrix()
	_, rep, err := Import(src, ImportOptions{Throughputs: thr, MaxGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kept["CANCELLED"] != 3 || rep.Kept["TIMEOUT"] != 1 {
		t.Errorf("kept %v, want 3 CANCELLED and 1 TIMEOUT among them", rep.Kept)
	}
	jobs, rep, err := Import(src, ImportOptions{Throughputs: thr, MaxGPUs: 8, States: []string{"COMPLETED"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 12 || rep.Skipped[SkipState] != 4 || rep.Dropped["CANCELLED"] != 3 || rep.Dropped["TIMEOUT"] != 2 {
		t.Errorf("COMPLETED only: %d jobs, skipped %v, dropped %v", len(jobs), rep.Skipped, rep.Dropped)
	}
}

// sacct's User, Account and QOS, when the file has them, go into the
// trace: Fox's capture has User and Account (its data lines verbatim);
// a QOS column is hand-written here in the same format.
func TestImportUserAccountQOS(t *testing.T) {
	src, err := ParseSacct(strings.NewReader(readFixture(t, "sacct", "fox-2025-09.txt")), "fox")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range src.Records {
		if r.User == "" || r.Account == "" || r.QOS != "" {
			t.Fatalf("job %s: user %q, account %q, QOS %q; want Fox's user and account, no QOS", r.ID, r.User, r.Account, r.QOS)
		}
	}
	hand := "JobID|Submit|Start|End|AllocTRES|User|Account|QOS\n" +
		"7|2026-12-06T22:10:20|2026-12-06T22:10:21|2026-12-06T22:11:06|billing=5,cpu=1,gres/gpu:v100=1,gres/gpu=1,node=1|bob|acct_b|gpu4\n" +
		"7.batch|2026-12-06T22:10:21|2026-12-06T22:10:21|2026-12-06T22:11:06|cpu=1,gres/gpu:v100=1,gres/gpu=1,node=1|||\n" +
		"8|2026-12-06T22:10:20|2026-12-06T22:10:21|2026-12-06T22:11:06|billing=5,cpu=1,gres/gpu:v100=1,gres/gpu=1,node=1|alice|acct_a|normal\n"
	src, err = ParseSacct(strings.NewReader(hand), "hand")
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := Import(src, ImportOptions{Throughputs: importMatrix()})
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]string
	for _, j := range jobs {
		got = append(got, [3]string{j.User, j.Account, j.QOS})
	}
	if diff := cmp.Diff([][3]string{{"bob", "acct_b", "gpu4"}, {"alice", "acct_a", "normal"}}, got); diff != "" {
		t.Errorf("users, accounts, QOS (-want +got):\n%s", diff)
	}
	if _, err := ParseSacct(strings.NewReader(strings.Replace(hand, "|bob|", "|bob smith|", 1)), "hand"); err == nil || !strings.Contains(err.Error(), "User") {
		t.Errorf("a user with a blank: %v", err)
	}
}

func TestImportStatesNeedState(t *testing.T) {
	src := &ImportSource{Name: "p", Lines: 1, Records: []ImportRecord{{ID: "1", Line: 1, Submit: PhillyEpoch, Duration: 1, GPUs: 1}}}
	if _, _, err := Import(src, ImportOptions{Throughputs: importMatrix(), States: []string{"COMPLETED"}}); err == nil || !strings.Contains(err.Error(), "has no State") {
		t.Errorf("error %v, want one saying the job has no State", err)
	}
}

// A job's recorded GPU type prices its duration when the matrix has it.
func TestImportRecordedType(t *testing.T) {
	src := &ImportSource{Name: "s", Lines: 3, Records: []ImportRecord{
		{ID: "1", Line: 1, Submit: PhillyEpoch, Duration: 100, GPUs: 1, GPUType: "K80"},
		{ID: "2", Line: 2, Submit: PhillyEpoch.Add(time.Second), Duration: 100, GPUs: 1, GPUType: "h100"},
		{ID: "3", Line: 3, Submit: PhillyEpoch.Add(2 * time.Second), Duration: 100, GPUs: 1},
	}}
	thr := importMatrix()
	jobs, rep, err := Import(src, ImportOptions{Throughputs: thr, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jobs[0].TotalSteps, 100*thr[jobs[0].JobType]["k80"][1]; got != want {
		t.Errorf("k80 job: %v steps, want %v (%s on k80)", got, want, jobs[0].JobType)
	}
	for _, j := range jobs[1:] {
		if got, want := j.TotalSteps, 100*thr[j.JobType]["v100"][1]; got != want {
			t.Errorf("job priced on the reference: %v steps, want %v", got, want)
		}
	}
	if diff := cmp.Diff(map[string]int{"k80": 1, "v100": 2}, rep.PricedOn); diff != "" {
		t.Errorf("priced on (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"h100": 1}, rep.Unmatched); diff != "" {
		t.Errorf("unmatched (-want +got)\n%s", diff)
	}
	jobs, rep, err = Import(src, ImportOptions{Throughputs: thr, Seed: 1, IgnoreRecordedType: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PricedOn["v100"] != 3 || jobs[0].TotalSteps != 100*thr[jobs[0].JobType]["v100"][1] {
		t.Errorf("ignoring the recorded type: priced on %v, %v steps", rep.PricedOn, jobs[0].TotalSteps)
	}
}

// No job to import is an error, with the counts that say why.
func TestImportNoJobs(t *testing.T) {
	src, err := ParsePhilly(strings.NewReader(readFixture(t, "philly", "2017-sample.csv")), "sample")
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := src.Week(99)
	if err != nil {
		t.Fatal(err)
	}
	_, rep, err := Import(src, ImportOptions{Throughputs: importMatrix(), From: from, To: to})
	if !errors.Is(err, ErrNoJobs) || !strings.Contains(err.Error(), "none of the 10 jobs of sample is kept (they were submitted from 2017-08-") {
		t.Errorf("error %v, want ErrNoJobs naming the records' span", err)
	}
	if rep.Skipped[SkipWindow] != 10 {
		t.Errorf("skipped %v, want 10 outside the window", rep.Skipped)
	}
	if _, err := ParsePhilly(strings.NewReader("# job id, arrival\n"), "h"); err == nil || !strings.Contains(err.Error(), "no job records") {
		t.Errorf("header-only Philly file: error %v", err)
	}
}
