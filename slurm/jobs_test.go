package slurm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// squeueEmulator prints records the way squeue's _print_str does for the
// given -o format: a field of width N is the value cut to N bytes and padded
// with spaces to N bytes; width 0 prints the value as is; then the suffix.
// A nil comment prints as glibc prints a NULL %s: "(null)".
func squeueEmulator(t testing.TB, format string, rows ...map[string]string) []byte {
	t.Helper()
	l, err := squeueLayout(format)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, row := range rows {
		b.WriteString(l.prefix)
		for _, f := range l.fields {
			v, ok := row[f.name]
			if !ok {
				v = "(null)"
			}
			if f.width > 0 {
				if len(v) > f.width {
					v = v[:f.width]
				}
				pad := strings.Repeat(" ", f.width-len(v))
				if f.right {
					v = pad + v
				} else {
					v += pad
				}
			}
			b.WriteString(v)
			b.WriteString(f.suffix)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// row is a squeue record with sensible defaults for JobFormat's letters.
func row(id string, kv ...string) map[string]string {
	r := map[string]string{"A": id, "F": id, "K": "N/A", "u": "alice", "T": "PENDING", "D": "1",
		"V": "2026-11-29T14:40:52", "S": "N/A", "M": "0:00", "b": "gres:gpu:1", "N": "", "r": "BeginTime", "Q": "4294901759", "E": "(null)",
		"j": "train", "k": "hadar model=resnet50"}
	for i := 0; i+1 < len(kv); i += 2 {
		r[kv[i]] = kv[i+1]
	}
	return r
}

func TestJobQueryArgs(t *testing.T) {
	want := []string{"squeue", "-h", "-a", "-r", "-t", "PD,R,S,CG,CF", "-o",
		"%A|%F|%K|%u|%T|%D|%V|%S|%M|%b|%N|%r|%Q|%E|%64j|%512k"}
	if diff := cmp.Diff(want, JobQueryArgs); diff != "" {
		t.Errorf("JobQueryArgs (-want +got):\n%s", diff)
	}
	l, err := squeueLayout(JobFormat)
	if err != nil {
		t.Fatal(err)
	}
	n := len(l.fields)
	if l.fields[n-2].name != "j" || l.fields[n-2].width != JobNameWidth || l.fields[n-1].name != "k" || l.fields[n-1].width != JobCommentWidth {
		t.Errorf("JobFormat must end with %%%dj|%%%dk", JobNameWidth, JobCommentWidth)
	}
	for _, f := range l.fields[:n-2] {
		if f.width != 0 || f.suffix != "|" {
			t.Errorf("Slurm field %%%s must be variable width ending in '|'", f.name)
		}
	}
}

func TestParseJobs(t *testing.T) {
	submit := time.Date(2026, 11, 29, 14, 40, 52, 0, time.Local)
	pending := Job{JobID: "7", ArrayJobID: "7", User: "alice", State: "PENDING", NumNodes: 1, SubmitTime: submit,
		GresRaw: "gres:gpu:1", Gres: []GRES{{Name: "gpu", Count: 1}}, Reason: "BeginTime", Priority: 4294901759, Name: "train",
		Comment: "hadar model=resnet50"}
	with := func(j Job, f func(*Job)) Job { f(&j); return j }

	tests := []struct {
		name     string
		rows     []map[string]string
		want     []Job
		wantErrs []error
	}{
		{"pending tagged", []map[string]string{row("7")}, []Job{pending}, nil},
		{"running on two nodes", []map[string]string{row("6", "T", "RUNNING", "N", "node[1-2]", "D", "2",
			"S", "2026-11-29T14:40:53", "M", "1-02:03:04", "r", "None", "b", "gres:gpu:v100:2", "k", "")},
			[]Job{with(pending, func(j *Job) {
				j.JobID, j.ArrayJobID, j.State, j.NodeList, j.Nodes, j.NumNodes = "6", "6", "RUNNING", "node[1-2]", []string{"node1", "node2"}, 2
				j.StartTime = submit.Add(time.Second)
				j.TimeUsed = 26*time.Hour + 3*time.Minute + 4*time.Second
				j.Reason, j.GresRaw, j.Gres, j.Comment = "None", "gres:gpu:v100:2", []GRES{{Name: "gpu", Type: "v100", Count: 2}}, ""
			})}, nil},
		{"array task", []map[string]string{row("11", "F", "10", "K", "1")},
			[]Job{with(pending, func(j *Job) { j.JobID, j.ArrayJobID, j.ArrayTaskID = "11", "10", "1" })}, nil},
		{"no comment prints (null)", []map[string]string{row("7", "k", "(null)")},
			[]Job{with(pending, func(j *Job) { j.Comment = "" })}, nil},
		{"--gpus job shows N/A", []map[string]string{row("7", "b", "N/A")},
			[]Job{with(pending, func(j *Job) { j.GresRaw, j.Gres = "N/A", nil })}, nil},
		{"bad gres keeps the job, incomplete", []map[string]string{row("7", "b", "gres:gpu:x:y:z")},
			[]Job{with(pending, func(j *Job) { j.GresRaw, j.Gres, j.Incomplete = "gres:gpu:x:y:z", nil, true })},
			[]error{ErrMalformed}},
		{"bad id skipped, next parsed", []map[string]string{row("7x"), row("8")},
			[]Job{with(pending, func(j *Job) { j.JobID, j.ArrayJobID = "8", "8" })}, []error{ErrMalformed}},
		{"bad state skipped", []map[string]string{row("7", "T", "running now")}, nil, []error{ErrMalformed}},
		{"duplicate", []map[string]string{row("7"), row("7", "k", "other")}, []Job{pending}, []error{ErrDuplicate}},
		{"held, waiting on a dependency", []map[string]string{row("7", "r", "JobHeldAdmin", "Q", "0", "E", "afterok:6(unfulfilled)")},
			[]Job{with(pending, func(j *Job) { j.Reason, j.Priority, j.Dependency = "JobHeldAdmin", 0, "afterok:6(unfulfilled)" })}, nil},
		{"bad priority keeps the job, incomplete", []map[string]string{row("7", "Q", "high")},
			[]Job{with(pending, func(j *Job) { j.Priority, j.Incomplete = 0, true })}, []error{ErrMalformed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := squeueEmulator(t, JobFormat, tt.rows...)
			got, errs := ParseJobs(bytes.NewReader(in))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseJobs (-want +got):\n%s", diff)
			}
			checkErrs(t, errs, tt.wantErrs)
		})
	}
}

// TestParseJobsHostile feeds names and comments that try to break the
// framing; each must stay inside its own job, and the jobs around it must
// parse unchanged.
func TestParseJobsHostile(t *testing.T) {
	forged := string(squeueEmulator(t, JobFormat, row("999", "u", "victim", "k", "hadar model=x")))
	long := strings.Repeat("hadar model=resnet50 ", 40) // 840 bytes
	tests := []struct {
		name, jobName, comment string
		wantName, wantComment  string
		truncated              bool
	}{
		{"pipes", "a|b|c", "hadar | x|y", "a|b|c", "hadar | x|y", false},
		{"quotes", `say "hi"`, `it's "quoted" 'x'`, `say "hi"`, `it's "quoted" 'x'`, false},
		{"shell", "$(rm -rf /)", "`id`; reboot && echo $HOME", "$(rm -rf /)", "`id`; reboot && echo $HOME", false},
		{"newline in comment", "n", "hadar\nmodel=x", "n", "hadar\nmodel=x", false},
		{"forged record in comment", "n", "x\n" + forged, "n", "x\n" + strings.TrimRight(forged, " \n"), false},
		{"forged record in name", "x\n999|999|N/A|victim|PENDING|1|", "c", "x\n999|999|N/A|victim|PENDING|1|", "c", false},
		{"non-UTF-8", "\xff\xfe", "hadar \xc3\x28 model=x", "\xff\xfe", "hadar \xc3\x28 model=x", false},
		{"long comment is cut", strings.Repeat("n", 100), long, strings.Repeat("n", JobNameWidth), strings.TrimRight(long[:JobCommentWidth], " "), true},
		{"comment of exactly the width", "n", strings.Repeat("c", JobCommentWidth), "n", strings.Repeat("c", JobCommentWidth), true},
		{"leading spaces kept", "n", "  hadar", "n", "  hadar", false},
		{"only spaces", "n", "   ", "n", "", false},
		{"carriage returns and tabs", "n\r", "hadar\tmodel=x\r\n", "n\r", "hadar\tmodel=x\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := squeueEmulator(t, JobFormat, row("5"), row("6", "j", tt.jobName, "k", tt.comment), row("7"))
			jobs, errs := ParseJobs(bytes.NewReader(in))
			checkErrs(t, errs, nil)
			var ids []string
			for _, j := range jobs {
				ids = append(ids, j.ID())
			}
			if diff := cmp.Diff([]string{"5", "6", "7"}, ids); diff != "" {
				t.Fatalf("job ids (-want +got):\n%s", diff)
			}
			j := jobs[1]
			if j.Name != tt.wantName || j.Comment != tt.wantComment || j.CommentTruncated != tt.truncated {
				t.Errorf("job 6: name %q comment %q truncated %v; want %q %q %v",
					j.Name, j.Comment, j.CommentTruncated, tt.wantName, tt.wantComment, tt.truncated)
			}
			if jobs[0].Comment != "hadar model=resnet50" || jobs[2].Comment != "hadar model=resnet50" {
				t.Errorf("neighbours changed: %q %q", jobs[0].Comment, jobs[2].Comment)
			}
		})
	}
}

func TestParseJobsTruncatedOutput(t *testing.T) {
	in := squeueEmulator(t, JobFormat, row("5"), row("6"))
	jobs, errs := ParseJobs(bytes.NewReader(in[:len(in)-100]))
	if len(jobs) != 1 || jobs[0].JobID != "5" {
		t.Errorf("want only job 5, got %+v", jobs)
	}
	checkErrs(t, errs, []error{ErrMalformed})
}

func TestParseJobsFormatLegacy(t *testing.T) {
	// The pipe-separated layout of the early captures: readable, but a '|'
	// in the name shifts fields and a newline in the comment ends the row.
	const format = "%A|%F|%K|%u|%T|%b|%N|%r|%V|%S|%M|%D|%j|%k"
	in := "10|10|0,2|root|PENDING|gres:gpu:1||JobHeldUser|2026-11-29T14:40:52|N/A|0:00|1|wrap|hadar model=vae\n" +
		"12|12|N/A|root|RUNNING|gres:gpu:1|node4|None|2026-11-29T14:40:52|2026-11-29T14:40:53|0:03|1|wrap|say \"hi\" | it's a|b\n"
	jobs, errs := ParseJobsFormat(strings.NewReader(in), format)
	checkErrs(t, errs, nil)
	if len(jobs) != 2 {
		t.Fatalf("got %d jobs", len(jobs))
	}
	if jobs[0].ID() != "10" || jobs[0].ArrayTaskID != "0,2" {
		t.Errorf("pending array without -r: ID %q task %q", jobs[0].ID(), jobs[0].ArrayTaskID)
	}
	if jobs[1].Comment != `say "hi" | it's a|b` {
		t.Errorf("comment %q", jobs[1].Comment)
	}
	if _, errs := ParseJobsFormat(strings.NewReader(""), "%j|%k"); len(errs) != 1 {
		t.Errorf("a format without %%A must be refused")
	}
}

func TestParseSlurmDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0:00": 0, "0:05": 5 * time.Second, "1:02:03": time.Hour + 2*time.Minute + 3*time.Second,
		"2-00:00:01": 48*time.Hour + time.Second, "INVALID": 0, "": 0,
	} {
		got, err := parseSlurmDuration(in)
		if err != nil || got != want {
			t.Errorf("parseSlurmDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"5", "a:b", "1:2:3:4", "-1:00", "x-1:00"} {
		if _, err := parseSlurmDuration(bad); err == nil {
			t.Errorf("parseSlurmDuration(%q) accepted", bad)
		}
	}
}
