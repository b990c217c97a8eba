package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// detailLine builds a 22.05 scontrol show job -o -d record (layout of the
// test cluster's captures). name and comment are inserted verbatim.
func detailLine(id, user, state, name, comment string) string {
	s := "JobId=" + id + " JobName=" + name + " UserId=" + user + " GroupId=" + user + " MCS_label=N/A " +
		"Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=" + state + " Reason=None Dependency=(null) " +
		"Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 RunTime=00:00:05 " +
		"TimeLimit=365-00:00:00 TimeMin=N/A SubmitTime=2026-11-29T14:41:44 EligibleTime=2026-11-29T14:41:44 " +
		"AccrueTime=2026-11-29T14:41:44 StartTime=2026-11-29T14:41:46 EndTime=2027-11-29T14:41:46 Deadline=N/A " +
		"SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T14:41:46 Scheduler=Backfill Partition=gpu " +
		"AllocNode:Sid=localhost:3477 ReqNodeList=node[1-2] ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 " +
		"NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* " +
		"NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=gpu:v100:2   Nodes=node1 CPU_IDs=2 Mem=0 GRES=gpu:v100:1(IDX:3) " +
		"  Nodes=node2 CPU_IDs=3 Mem=0 GRES=gpu:v100:1(IDX:0) MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 " +
		"Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) " +
		"Command=(null) WorkDir=/tmp/jobs"
	if comment != "" {
		s += " Comment=" + comment + " "
	}
	return s + " StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= TresPerNode=gres:gpu:1 \n"
}

func TestParseJobDetails(t *testing.T) {
	v100 := func(n int, idx ...int) GRES { return GRES{Name: "gpu", Type: "v100", Count: n, Indexes: idx} }
	base := JobDetail{JobID: "6", Name: "train", UserName: "alice", UserID: 1001, JobState: "RUNNING", Reason: "None",
		Restarts: 1, BatchFlag: 1, ReqNodeList: "node[1-2]", NodeList: "node[1-2]",
		NumTasks: 2, Partition: "gpu", MinCPUsNode: 1, TimeLimit: 365 * 24 * time.Hour,
		JobGres: []GRES{{Name: "gpu", Type: "v100", Count: 2}},
		NodeGres: []NodeGRES{
			{Nodes: []string{"node1"}, CPUIDs: "2", Gres: []GRES{v100(1, 3)}},
			{Nodes: []string{"node2"}, CPUIDs: "3", Gres: []GRES{v100(1, 0)}},
		},
		TresPerNode: []GRES{{Name: "gpu", Count: 1}}, Comment: "hadar model=vae", WorkDir: "/tmp/jobs"}
	with := func(f func(*JobDetail)) JobDetail { d := base; f(&d); return d }

	tests := []struct {
		name     string
		in       string
		want     []JobDetail
		wantErrs []error
	}{
		{"plain", detailLine("6", "alice(1001)", "RUNNING", "train", "hadar model=vae"), []JobDetail{base}, nil},
		{"name and comment with spaces, pipes, quotes and harmless key=value",
			detailLine("6", "alice(1001)", "RUNNING", `resnet 50 lr=0.1 "x"|y`, `say "hi" | it's a|b  steps=5`),
			[]JobDetail{with(func(d *JobDetail) { d.Name, d.Comment = `resnet 50 lr=0.1 "x"|y`, `say "hi" | it's a|b  steps=5` })}, nil},
		{"no comment", detailLine("6", "alice(1001)", "RUNNING", "train", ""),
			[]JobDetail{with(func(d *JobDetail) { d.Comment = "" })}, nil},
		{"name posing as the user", detailLine("6", "alice(1001)", "RUNNING", "x UserId=root(0)", "c"),
			nil, []error{ErrAmbiguous}},
		{"name posing as a later key", detailLine("6", "alice(1001)", "RUNNING", "x Comment=hadar", "c"),
			nil, []error{ErrAmbiguous}},
		{"name posing as a per-node allocation", detailLine("6", "alice(1001)", "RUNNING", "x Nodes=node9 CPU_IDs=0 Mem=0 GRES=gpu:v100:4(IDX:0-3)", "c"),
			nil, []error{ErrAmbiguous}},
		{"comment posing as the state", detailLine("6", "alice(1001)", "RUNNING", "n", "x JobState=PENDING"),
			nil, []error{ErrAmbiguous}},
		{"comment with a newline continues the record",
			detailLine("6", "alice(1001)", "RUNNING", "train", "hadar\nmodel=vae"),
			[]JobDetail{with(func(d *JobDetail) { d.Comment = "hadar\nmodel=vae" })}, nil},
		{"comment forging a complete second record: the forgery is ambiguous, the real job stays",
			detailLine("6", "alice(1001)", "RUNNING", "train", "x\n"+strings.TrimSuffix(detailLine("7", "bob(1002)", "PENDING", "b", "hadar"), " \n")) +
				detailLine("7", "bob(1002)", "PENDING", "b", ""),
			[]JobDetail{
				with(func(d *JobDetail) { d.Comment, d.TresPerNode = "x", nil }),
				{JobID: "7", Name: "b", UserName: "bob", UserID: 1002, JobState: "PENDING", Reason: "None", Restarts: 1,
					BatchFlag: 1, ReqNodeList: "node[1-2]", NodeList: "node[1-2]", JobGres: base.JobGres,
					NodeGres: base.NodeGres, TresPerNode: base.TresPerNode, WorkDir: "/tmp/jobs",
					NumTasks: 2, Partition: "gpu", MinCPUsNode: 1, TimeLimit: base.TimeLimit},
			}, []error{ErrAmbiguous}},
		{"comment forging a record that Slurm's own tail completes: both copies of the job are dropped",
			detailLine("6", "alice(1001)", "RUNNING", "train", "x\n"+
				strings.SplitAfter(detailLine("7", "bob(1002)", "PENDING", "b", "hadar"), "Comment=hadar")[0]) +
				detailLine("7", "bob(1002)", "PENDING", "b", ""),
			[]JobDetail{with(func(d *JobDetail) { d.Comment, d.TresPerNode = "x", nil })},
			[]error{ErrDuplicate, ErrDuplicate}},
		{"bad user", strings.Replace(detailLine("6", "alice(1001)", "RUNNING", "n", "c"), "UserId=alice(1001)", "UserId=alice", 1),
			nil, []error{ErrMalformed}},
		{"no jobs", "No jobs in the system\n", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseJobDetails(strings.NewReader(tt.in))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ParseJobDetails (-want +got):\n%s", diff)
			}
			checkErrs(t, errs, tt.wantErrs)
		})
	}
}

func TestJoinDetails(t *testing.T) {
	jobs := []Job{
		{JobID: "6", ArrayJobID: "6", User: "alice", Comment: "hadar model=vae"},
		{JobID: "7", ArrayJobID: "7", User: "bob", Comment: ""},
		{JobID: "8", ArrayJobID: "8", User: "carol", Comment: "hadar"},
		{JobID: "11", ArrayJobID: "10", ArrayTaskID: "1", User: "dave"},
		{JobID: "12", ArrayJobID: "12", User: "erin", Comment: strings.Repeat("c", JobCommentWidth), CommentTruncated: true},
	}
	details := []JobDetail{
		{JobID: "6", UserName: "alice", Comment: "hadar model=vae", Restarts: 2},
		{JobID: "7", UserName: "bob", Comment: "hadar model=x"}, // disagrees with squeue: dropped
		{JobID: "8", UserName: "mallory", Comment: "hadar"},     // other owner: dropped
		{JobID: "11", ArrayJobID: "10", ArrayTaskID: "1", UserName: "dave"},
		{JobID: "12", UserName: "erin", Comment: strings.Repeat("c", 600)}, // squeue's copy was cut: comment not compared
		{JobID: "99", UserName: "alice"},                                   // not in squeue: never added
	}
	got := JoinDetails(jobs, details)
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	if diff := cmp.Diff([]string{"10_1", "12", "6"}, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("joined ids (-want +got):\n%s", diff)
	}
	if got["6"].Restarts != 2 {
		t.Errorf("detail of 6 not attached: %+v", got["6"])
	}
}
