package slurm

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseNodeState(t *testing.T) {
	tests := []struct {
		raw         string
		state       string
		flags       []string
		schedulable bool
	}{
		{"IDLE", "idle", nil, true},
		{"MIXED", "mixed", nil, true},
		{"ALLOCATED", "allocated", nil, true},
		{"IDLE+DYNAMIC_NORM", "idle", []string{"DYNAMIC_NORM"}, true},
		{"IDLE+DRAIN", "drained", []string{"DRAIN"}, false},
		{"MIXED+DRAIN", "draining", []string{"DRAIN"}, false},
		{"ALLOCATED+DRAIN", "draining", []string{"DRAIN"}, false},
		{"IDLE+COMPLETING+DRAIN", "draining", []string{"COMPLETING", "DRAIN"}, false},
		{"DOWN+DRAIN", "drained", []string{"DRAIN"}, false},
		{"DOWN*", "down", []string{"NOT_RESPONDING"}, false},
		{"DOWN+NOT_RESPONDING", "down", []string{"NOT_RESPONDING"}, false},
		{"IDLE+CLOUD+POWERED_DOWN", "idle", []string{"CLOUD", "POWERED_DOWN"}, false},
		{"IDLE+CLOUD", "idle", []string{"CLOUD"}, true},
		{"IDLE+RESERVED", "idle", []string{"RESERVED"}, false},
		{"IDLE+FUTURE_FLAG", "idle", []string{"FUTURE_FLAG"}, false},
		{"drained*", "drained", []string{"NOT_RESPONDING", "DRAIN"}, false},
		{"drained", "drained", []string{"DRAIN"}, false},
		{"draining", "draining", []string{"DRAIN"}, false},
		{"drng", "draining", []string{"DRAIN"}, false},
		{"idle~", "idle", []string{"POWERED_DOWN"}, false},
		{"mix-", "mixed", []string{"PLANNED"}, true},
		{"alloc", "allocated", nil, true},
		{"maint", "maint", []string{"MAINTENANCE"}, false},
		{"inval", "inval", nil, false},
		{"SOMETHING_NEW", "something_new", nil, false},
		{"", "", nil, false},
	}
	for _, tt := range tests {
		state, flags := ParseNodeState(tt.raw)
		if state != tt.state {
			t.Errorf("ParseNodeState(%q) state = %q, want %q", tt.raw, state, tt.state)
		}
		if diff := cmp.Diff(tt.flags, flags); diff != "" {
			t.Errorf("ParseNodeState(%q) flags (-want +got):\n%s", tt.raw, diff)
		}
		n := Node{State: state, Flags: flags}
		if got := n.Schedulable(); got != tt.schedulable {
			t.Errorf("%q: Schedulable() = %v, want %v", tt.raw, got, tt.schedulable)
		}
	}
	if (Node{State: "idle", Incomplete: true}).Schedulable() {
		t.Error("an Incomplete node must not be schedulable")
	}
}

// node builds a realistic scontrol show node -o -d line (22.05 layout).
func nodeLine(name, state, gres, used, extra string) string {
	return "NodeName=" + name + " Arch=x86_64 CoresPerSocket=1  CPUAlloc=3 CPUEfctv=8 CPUTot=8 CPULoad=1.82 " +
		"AvailableFeatures=v100 ActiveFeatures=v100 Gres=" + gres + " GresDrain=N/A GresUsed=" + used +
		" NodeAddr=127.0.0.1 NodeHostName=vm Port=17001 Version=22.05.8 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  " +
		"RealMemory=4000 AllocMem=0 FreeMem=23117 Sockets=8 Boards=1 State=" + state +
		" ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu,debug  " +
		"BootTime=2026-11-29T14:28:19 SlurmdStartTime=2026-11-29T14:40:49 LastBusyTime=2026-11-29T14:40:49 " +
		"CfgTRES=cpu=8,mem=4000M,billing=8 AllocTRES=cpu=3 CapWatts=n/a CurrentWatts=0 AveWatts=0 " +
		"ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s" + extra + "\n"
}

func TestParseNodes(t *testing.T) {
	v100 := func(n int, idx ...int) GRES {
		g := GRES{Name: "gpu", Type: "v100", Count: n}
		if len(idx) > 0 {
			g.Indexes = idx
		}
		return g
	}
	base := Node{Name: "node1", State: "mixed", RawState: "MIXED", Gres: []GRES{v100(4)},
		GresUsed: []GRES{v100(2, 0, 1)}, Partitions: []string{"gpu", "debug"}, Features: []string{"v100"},
		CPUTot: 8, CPUAlloc: 3, RealMemory: 4000}
	with := func(f func(*Node)) Node { n := base; f(&n); return n }

	tests := []struct {
		name     string
		in       string
		want     []Node
		wantErrs []error
	}{
		{"plain", nodeLine("node1", "MIXED", "gpu:v100:4", "gpu:v100:2(IDX:0-1)", ""),
			[]Node{base}, nil},
		{"reason with spaces and lookalike keys cannot change the state",
			nodeLine("node1", "MIXED", "gpu:v100:4", "gpu:v100:2(IDX:0-1)",
				" Reason=bad gpu State=IDLE GresUsed=gpu:v100:0 [root@2026-11-29T14:40:56]"),
			[]Node{with(func(n *Node) {
				n.Reason = "bad gpu State=IDLE GresUsed=gpu:v100:0 [root@2026-11-29T14:40:56]"
			})}, nil},
		{"comment with a newline continues the record",
			nodeLine("node1", "MIXED", "gpu:v100:4", "gpu:v100:2(IDX:0-1)", " Reason=x\nNodeName node9 State=IDLE"),
			[]Node{with(func(n *Node) { n.Reason = "x\nNodeName node9 State=IDLE" })}, nil},
		{"drained with flag", nodeLine("node1", "IDLE+DRAIN", "gpu:v100:4", "gpu:v100:0(IDX:N/A)", " Reason=test [root@2026-11-29T14:40:56]"),
			[]Node{with(func(n *Node) {
				n.State, n.RawState, n.Flags, n.GresUsed = "drained", "IDLE+DRAIN", []string{"DRAIN"}, []GRES{v100(0)}
				n.Reason = "test [root@2026-11-29T14:40:56]"
			})}, nil},
		{"bad GresUsed marks the node incomplete", nodeLine("node1", "MIXED", "gpu:v100:4", "gpu:v100:2(IDX:0-1),gpu:v100:x", ""),
			[]Node{with(func(n *Node) { n.Incomplete = true })}, []error{ErrMalformed}},
		{"no state: skipped", "NodeName=node1 Gres=gpu:1\n", nil, []error{ErrMalformed}},
		{"bad name: skipped", "NodeName=no/de State=IDLE\n", nil, []error{ErrMalformed}},
		{"duplicate", nodeLine("node1", "MIXED", "gpu:v100:4", "gpu:v100:2(IDX:0-1)", "") +
			nodeLine("node1", "IDLE", "gpu:v100:4", "gpu:v100:0", ""), []Node{base}, []error{ErrDuplicate}},
		{"junk before the first record", "garbage\n" + nodeLine("node1", "MIXED", "gpu:v100:4", "gpu:v100:2(IDX:0-1)", ""),
			[]Node{base}, []error{ErrMalformed}},
		{"no nodes", "No nodes in the system\n", nil, nil},
		{"empty", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseNodes(strings.NewReader(tt.in))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			checkErrs(t, errs, tt.wantErrs)
		})
	}
}

// checkErrs wants one error per entry of want, each matching with errors.Is
// (nil entries match anything).
func checkErrs(t *testing.T, got []error, want []error) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d errors %v, want %d", len(got), got, len(want))
		return
	}
	for i := range want {
		if want[i] != nil && !errors.Is(got[i], want[i]) {
			t.Errorf("error %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestParseSinfo(t *testing.T) {
	// SinfoFormat rows: one per node and partition.
	in := "node1|gpu*|mixed|3/5/0/8|gpu:v100:4|gpu:v100:2(IDX:0-1)|v100,nvlink\n" +
		"node1|debug|mixed|3/5/0/8|gpu:v100:4|gpu:v100:2(IDX:0-1)|v100,nvlink\n" +
		"node2|gpu*|drained*|0/8/0/8|gpu:k80:4|gpu:k80:0(IDX:N/A)|k80\n" +
		"cpu1|cpu|idle|0/8/0/8|(null)|(null)|(null)\n"
	got, errs := ParseSinfo(strings.NewReader(in))
	want := []Node{
		{Name: "node1", State: "mixed", RawState: "mixed", Partitions: []string{"gpu", "debug"}, CPUAlloc: 3, CPUTot: 8,
			Gres: []GRES{{Name: "gpu", Type: "v100", Count: 4}}, GresUsed: []GRES{{Name: "gpu", Type: "v100", Count: 2, Indexes: []int{0, 1}}},
			Features: []string{"v100", "nvlink"}},
		{Name: "node2", State: "drained", RawState: "drained*", Flags: []string{"NOT_RESPONDING", "DRAIN"}, Partitions: []string{"gpu"},
			CPUTot: 8, Gres: []GRES{{Name: "gpu", Type: "k80", Count: 4}}, GresUsed: []GRES{{Name: "gpu", Type: "k80"}},
			Features: []string{"k80"}},
		{Name: "cpu1", State: "idle", RawState: "idle", Partitions: []string{"cpu"}, CPUTot: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSinfo (-want +got):\n%s", diff)
	}
	checkErrs(t, errs, nil)
	if got[0].Schedulable() != true || got[1].Schedulable() != false {
		t.Errorf("Schedulable: node1 %v, node2 %v", got[0].Schedulable(), got[1].Schedulable())
	}

	// A row that lost a column is reported, the others still parse.
	_, errs = ParseSinfo(strings.NewReader("node1|gpu|idle|0/8/0/8|gpu:1\nnode2|gpu|idle|0/8/0/8|gpu:1|gpu:0|x\n"))
	checkErrs(t, errs, []error{ErrMalformed})
}

func TestParseSinfoFormatFixedWidth(t *testing.T) {
	// sinfo cuts at the width and runs into the next column: the cut value
	// must not be read as a smaller GPU count.
	pad := func(s string, w int) string { return (s + strings.Repeat(" ", w))[:w] }
	row := pad("gpu-mix-01", 16) + pad("gpu:a:2,gpu:b:2", 16) + pad("gpu:a:2(IDX:0-1),gpu:b:1(IDX:2)", 16) + pad("mixed", 8) + "\n"
	got, errs := ParseSinfoFormat(strings.NewReader(row), "NodeList:16,Gres:16,GresUsed:16,StateLong:8")
	checkErrs(t, errs, []error{ErrMalformed})
	if len(got) != 1 || !got[0].Incomplete || got[0].Schedulable() {
		t.Fatalf("want one Incomplete node, got %+v", got)
	}
	if got[0].State != "mixed" {
		t.Errorf("state %q, want mixed (the column after the cut value)", got[0].State)
	}

	// Header rows (no -h) are skipped.
	in := "NODELIST  GRES                GRES_USED\nnode0     gpu:4,shard:20      gpu:1(IDX:0),shard:8(-/5,5/5,3/5,0/5)\n"
	got, errs = ParseSinfoFormat(strings.NewReader(in), "NodeList:10,Gres:20,GresUsed:0")
	checkErrs(t, errs, nil)
	if len(got) != 1 || got[0].Name != "node0" || GPUsByType(got[0].Gres)[""] != 4 {
		t.Errorf("got %+v", got)
	}

	if _, errs := ParseSinfoFormat(strings.NewReader(""), "Nodes: ,Gres:"); len(errs) != 1 {
		t.Errorf("a format without node names must be refused, got %v", errs)
	}
	if _, errs := ParseSinfoFormat(strings.NewReader(""), "NodeList:,Gres:"); len(errs) != 1 {
		t.Errorf("a width-0 field without separator before the last must be refused, got %v", errs)
	}
}
