package e2eutil

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The fixtures are verbatim output of the test cluster (Slurm 22.05).

func TestParseJobID(t *testing.T) {
	for _, tc := range []struct {
		out, want string
		wantErr   bool
	}{
		{out: "42\n", want: "42"},
		{out: "7;cluster\n", want: "7"},
		{out: "", wantErr: true},
		{out: "Submitted batch job 42\n", wantErr: true},
	} {
		got, err := ParseJobID(tc.out)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseJobID(%q) = %q, %v; want %q, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseQueue(t *testing.T) {
	// squeue -h -o "%i|%T|%r|%N": a pending array, a held tagged job, a
	// running job and a two-node job.
	out := "3_[0-2]|PENDING|BeginTime|\n" +
		"2|PENDING|JobHeldUser|\n" +
		"1|RUNNING|None|node1\n" +
		"4|RUNNING|None|node[4-5]\n"
	want := map[string]QueuedJob{
		"3_[0-2]": {State: "PENDING", Reason: "BeginTime"},
		"2":       {State: "PENDING", Reason: "JobHeldUser"},
		"1":       {State: "RUNNING", Reason: "None", Nodes: "node1"},
		"4":       {State: "RUNNING", Reason: "None", Nodes: "node[4-5]"},
	}
	for _, tc := range []struct {
		name, out string
		want      map[string]QueuedJob
	}{
		{"jobs", out, want},
		{"empty queue", "", map[string]QueuedJob{}},
		{"other lines skipped", "slurm_load_jobs error: Invalid job id specified\n" + out, want},
	} {
		if diff := cmp.Diff(tc.want, ParseQueue(tc.out)); diff != "" {
			t.Errorf("%s: ParseQueue (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestQueuedJobLeaseAndHold(t *testing.T) {
	// Reasons as the test cluster's squeue prints them (%r).
	for _, tc := range []struct {
		j             QueuedJob
		onLease, held bool
	}{
		{QueuedJob{State: "PENDING", Reason: "BeginTime"}, true, false},
		{QueuedJob{State: "PENDING", Reason: "JobHeldUser"}, false, true},
		{QueuedJob{State: "PENDING", Reason: "JobHeldAdmin"}, false, true},
		{QueuedJob{State: "PENDING", Reason: "job_requeued_in_held_state"}, false, false},
		{QueuedJob{State: "PENDING", Reason: "None"}, false, false},
		{QueuedJob{State: "RUNNING", Reason: "None", Nodes: "node1"}, false, false},
		{QueuedJob{}, false, false}, // not in the queue
	} {
		if got := tc.j.OnLease(); got != tc.onLease {
			t.Errorf("%+v.OnLease() = %v, want %v", tc.j, got, tc.onLease)
		}
		if got := tc.j.Held(); got != tc.held {
			t.Errorf("%+v.Held() = %v, want %v", tc.j, got, tc.held)
		}
	}
}

func TestParseStartTime(t *testing.T) {
	// squeue -h -o %S of a tagged job on its lease (the test cluster).
	got, err := ParseStartTime("2026-12-07T14:40:55\n")
	if want := time.Date(2026, 12, 7, 14, 40, 55, 0, time.Local); err != nil || !got.Equal(want) {
		t.Errorf("ParseStartTime = %v, %v; want %v", got, err, want)
	}
	// A job Slurm has no start time for (hand-written: squeue prints N/A).
	if _, err := ParseStartTime("N/A\n"); err == nil {
		t.Error("ParseStartTime(N/A): no error")
	}
}

// jobcompLines are lines of the test cluster's jobcomp log.
var jobcompLines = map[string]string{
	"completed": "JobId=15 UserId=root(0) GroupId=root(0) Name=untagged-0 JobState=COMPLETED Partition=gpu TimeLimit=UNLIMITED StartTime=2026-11-29T15:21:45 EndTime=2026-11-29T15:21:50 NodeList=node3 NodeCnt=1 ProcCnt=1 WorkDir=/work/main ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T15:21:45 EligibleTime=2026-11-29T15:21:45 DerivedExitCode=0:0 ExitCode=0:0 ",
	"requeued":  "JobId=12 UserId=root(0) GroupId=root(0) Name=hadar-resnet50-bs128 JobState=PENDING Partition=gpu TimeLimit=525600 StartTime=2026-11-29T15:21:46 EndTime=2026-11-29T15:21:55 NodeList=node4 NodeCnt=1 ProcCnt=1 WorkDir=/work/main ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T15:21:44 EligibleTime=2026-11-29T15:21:46 DerivedExitCode=0:0 ExitCode=0:0 ",
	"array":     "JobId=4 UserId=hadartest(1001) GroupId=hadartest(1001) Name=digits-b JobState=COMPLETED Partition=gpu TimeLimit=525600 StartTime=2026-11-29T17:17:24 EndTime=2026-11-29T17:17:42 NodeList=node2 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/hadar-hadare-tc/jobs ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T17:17:23 EligibleTime=2026-11-29T17:17:23 ArrayJobId=2 ArrayTaskId=1 DerivedExitCode=0:0 ExitCode=0:0 ",
	"node fail": "JobId=51 UserId=root(0) GroupId=root(0) Name=rel-resnet50-bs64 JobState=NODE_FAIL Partition=gpu TimeLimit=525600 StartTime=2026-11-29T17:20:07 EndTime=2026-11-29T17:20:07 NodeList=node4 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/hadar-rel-tc/jobs ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T17:20:06 EligibleTime=2026-11-29T17:20:07 DerivedExitCode=0:0 ExitCode=0:0 ",
	"never ran": "JobId=4 UserId=root(0) GroupId=root(0) Name=e2e-site JobState=CANCELLED Partition=gpu TimeLimit=UNLIMITED StartTime=2026-11-29T17:11:02 EndTime=2026-11-29T17:11:02 NodeList=(null) NodeCnt=0 ProcCnt=0 WorkDir=/tmp/hadar-e2e-site/jobs ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T17:11:00 EligibleTime=unknown DerivedExitCode=0:0 ExitCode=0:0 ",
	"hostile":   "JobId=146 UserId=hadartest(1001) GroupId=hadartest(1001) Name=`touch /tmp/hadar-rel-pwned-bt`;|&\"' >x JobState=COMPLETED Partition=gpu TimeLimit=UNLIMITED StartTime=2026-11-29T17:22:03 EndTime=2026-11-29T17:22:06 NodeList=node2 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/hadar-rel-2043035980/TestHostileInput/w$(touch hadar-rel-pwned-wd2)|`touch hadar-rel-pwned-wd3` 'q\" & x ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T17:21:59 EligibleTime=2026-11-29T17:22:00 DerivedExitCode=0:0 ExitCode=0:0 ",
	// Slurm cuts a record at 1023 bytes and loses its newline: job 149's
	// (a 600-byte name with raw control bytes) runs into job 152's.
	"cut": "JobId=149 UserId=root(0) GroupId=root(0) Name=esc\x1b[31mred\r\xff\xfe" + strings.Repeat("x", 600) + " JobState=COMPLETED Partition=gpu TimeLimit=UNLIMITED StartTime=2026-11-29T17:22:00 EndTime=2026-11-29T17:22:03 NodeList=node3 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/hadar-rel-tc/jobs ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T17:21:59 EligibleTime=2026-11-29T17:22:00 DerivedExitCode=0:0 ExitCode=JobId=152 UserId=root(0) GroupId=root(0) Name=wrap JobState=COMPLETED Partition=gpu TimeLimit=UNLIMITED StartTime=2026-11-29T17:22:00 EndTime=2026-11-29T17:22:03 NodeList=node4 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/hadar-rel-tc/jobs ReservationName= Tres=cpu=1,mem=4000M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T17:21:59 EligibleTime=2026-11-29T17:22:00 DerivedExitCode=0:0 ExitCode=0:0 ",
}

func TestParseJobcomp(t *testing.T) {
	// Only the keys the suites read.
	keys := []string{"JobId", "JobState", "NodeList", "ArrayJobId", "ArrayTaskId", "StartTime", "EndTime", "ExitCode"}
	for _, tc := range []struct {
		name string
		want []map[string]string
	}{
		{"completed", []map[string]string{{"JobId": "15", "JobState": "COMPLETED", "NodeList": "node3",
			"StartTime": "2026-11-29T15:21:45", "EndTime": "2026-11-29T15:21:50", "ExitCode": "0:0"}}},
		{"requeued", []map[string]string{{"JobId": "12", "JobState": "PENDING", "NodeList": "node4",
			"StartTime": "2026-11-29T15:21:46", "EndTime": "2026-11-29T15:21:55", "ExitCode": "0:0"}}},
		{"array", []map[string]string{{"JobId": "4", "JobState": "COMPLETED", "NodeList": "node2", "ArrayJobId": "2", "ArrayTaskId": "1",
			"StartTime": "2026-11-29T17:17:24", "EndTime": "2026-11-29T17:17:42", "ExitCode": "0:0"}}},
		{"node fail", []map[string]string{{"JobId": "51", "JobState": "NODE_FAIL", "NodeList": "node4",
			"StartTime": "2026-11-29T17:20:07", "EndTime": "2026-11-29T17:20:07", "ExitCode": "0:0"}}},
		{"never ran", []map[string]string{{"JobId": "4", "JobState": "CANCELLED", "NodeList": "(null)",
			"StartTime": "2026-11-29T17:11:02", "EndTime": "2026-11-29T17:11:02", "ExitCode": "0:0"}}},
		{"hostile", []map[string]string{{"JobId": "146", "JobState": "COMPLETED", "NodeList": "node2",
			"StartTime": "2026-11-29T17:22:03", "EndTime": "2026-11-29T17:22:06", "ExitCode": "0:0"}}},
		// Split where job 152's record begins: each job has its own (a CI
		// run of 2026-12-04 found an untagged job "without a record").
		{"cut", []map[string]string{{"JobId": "149", "JobState": "COMPLETED", "NodeList": "node3",
			"StartTime": "2026-11-29T17:22:00", "EndTime": "2026-11-29T17:22:03", "ExitCode": ""},
			{"JobId": "152", "JobState": "COMPLETED", "NodeList": "node4",
				"StartTime": "2026-11-29T17:22:00", "EndTime": "2026-11-29T17:22:03", "ExitCode": "0:0"}}},
	} {
		var got []map[string]string
		for _, rec := range ParseJobcomp(jobcompLines[tc.name] + "\n") {
			m := map[string]string{}
			for _, k := range keys {
				if v, ok := rec[k]; ok {
					m[k] = v
				}
			}
			got = append(got, m)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ParseJobcomp (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestJobcompByJob(t *testing.T) {
	log := strings.Join([]string{jobcompLines["requeued"], "", "not a record", jobcompLines["completed"],
		strings.Replace(jobcompLines["requeued"], "JobState=PENDING", "JobState=COMPLETED", 1)}, "\n")
	got := map[string][]string{}
	for id, recs := range JobcompByJob(ParseJobcomp(log)) {
		for _, r := range recs {
			got[id] = append(got[id], r["JobState"])
		}
	}
	want := map[string][]string{"12": {"PENDING", "COMPLETED"}, "15": {"COMPLETED"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobcompByJob (-want +got):\n%s", diff)
	}
}

func TestParseUpOutput(t *testing.T) {
	for _, tc := range []struct {
		out, want string
		wantErr   bool
	}{
		{out: "export SLURM_CONF=/tmp/hadar-tc-helperB/slurm.conf\n", want: "/tmp/hadar-tc-helperB/slurm.conf"},
		{out: "up: something\nexport SLURM_CONF=/tmp/x/slurm.conf\n", want: "/tmp/x/slurm.conf"},
		{out: "", wantErr: true},
		{out: "export SLURM_CONF=\n", wantErr: true},
	} {
		got, err := ParseUpOutput(tc.out)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseUpOutput(%q) = %q, %v; want %q, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseLayout(t *testing.T) {
	demo := `# Demo layout of the hadar test cluster: five nodes, one GPU type per node, three types,
# so that placing a job on a node is placing it on a GPU type.
#
# Format (one node a line; '#' starts a comment):
#   NODENAME [GPUTYPE COUNT]...
# A node with no GPUTYPE/COUNT pair is a CPU-only node; a node with several pairs has
# several GPU types (its devices are numbered in the order given). Every node gets CPUs=8.
node1 v100 4
node2 v100 4
node3 p100 4
node4 k80 4
node5 k80 4
`
	site := `# A "site-like" layout of the hadar test cluster: GRES type names as real sites spell them,
# a node with two GPU types, and a CPU-only node. Format: see demo.layout.
gpu-v100-01 tesla_v100-sxm2-32gb 4
gpu-v100-02 tesla_v100-sxm2-32gb 4
gpu-a100-01 NVlink_A100_40GB 4
gpu-mix-01 tesla_v100-sxm2-32gb 2 NVlink_A100_40GB 2
cpu-01
`
	const v100, a100 = "tesla_v100-sxm2-32gb", "NVlink_A100_40GB"
	for _, tc := range []struct {
		name, text string
		want       Layout
		wantErr    bool
	}{
		{name: "demo", text: demo, want: Layout{
			Nodes: []string{"node1", "node2", "node3", "node4", "node5"},
			GPUs: map[string]map[string]int{"node1": {"v100": 4}, "node2": {"v100": 4}, "node3": {"p100": 4},
				"node4": {"k80": 4}, "node5": {"k80": 4}},
		}},
		{name: "site", text: site, want: Layout{
			Nodes: []string{"gpu-v100-01", "gpu-v100-02", "gpu-a100-01", "gpu-mix-01", "cpu-01"},
			GPUs: map[string]map[string]int{"gpu-v100-01": {v100: 4}, "gpu-v100-02": {v100: 4}, "gpu-a100-01": {a100: 4},
				"gpu-mix-01": {v100: 2, a100: 2}, "cpu-01": {}},
		}},
		{name: "comment after a node", text: "node1 v100 2 # two\n", want: Layout{
			Nodes: []string{"node1"}, GPUs: map[string]map[string]int{"node1": {"v100": 2}},
		}},
		{name: "bad count", text: "node1 v100 four\n", wantErr: true},
	} {
		got, err := ParseLayout(tc.text)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: ParseLayout error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ParseLayout (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestActionJobs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		action   Action
		wantJobs []string
		wantDone bool
	}{
		{"ok", Action{Kind: "release", JobIDs: "3,4", Result: "ok"}, []string{"3", "4"}, true},
		{"partial", Action{Kind: "release", JobIDs: "3,5,4", Result: "partial", Error: "skipped (an earlier step for them failed): 4"},
			[]string{"3", "5"}, true},
		{"error", Action{Kind: "place", JobIDs: "7", Result: "error", Error: "exit status 1"}, []string{"7"}, false},
		{"no jobs", Action{Kind: "comment", Result: "ok"}, nil, true},
		{"refused", Action{Kind: "release", JobIDs: "9", Result: "refused"}, []string{"9"}, false},
	} {
		if diff := cmp.Diff(tc.wantJobs, tc.action.Jobs()); diff != "" {
			t.Errorf("%s: Jobs (-want +got):\n%s", tc.name, diff)
		}
		if got := tc.action.Done(); got != tc.wantDone {
			t.Errorf("%s: Done = %v, want %v", tc.name, got, tc.wantDone)
		}
	}
}
