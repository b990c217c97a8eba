package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/slurm"
)

func nodesFromFixture(t *testing.T, path string) []slurm.Node {
	t.Helper()
	fx, err := slurm.LoadFixture(path)
	if err != nil {
		t.Fatal(err)
	}
	nodes, errs := slurm.ParseNodes(bytes.NewReader(fx.Output))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", path, errs)
	}
	return nodes
}

// TestStatusSiteLayout checks `hadar status` on the second test-cluster
// layout: site GRES names, a node with two GPU types, a CPU-only node, a
// drained node, GPUs held by untagged jobs.
func TestStatusSiteLayout(t *testing.T) {
	nodes := nodesFromFixture(t, "../../slurm/testdata/scontrol-show-node/22.05-site-alloc.txt")
	jobs := []slurm.Job{
		{JobID: "6", User: "root", State: "PENDING", Reason: "JobHeldUser", Comment: "hadar model=resnet50 steps=100", Gres: mustGRES(t, "gres:gpu:2"), NumNodes: 1},
		{JobID: "1", User: "alice", State: "RUNNING", Comment: "", Gres: mustGRES(t, "gres:gpu:NVlink_A100_40GB:1"), NumNodes: 1, Nodes: []string{"gpu-mix-01"}},
		{JobID: "7", User: "bob", State: "PENDING", Comment: "hadar steps=-5", Gres: mustGRES(t, "gres:gpu:1"), NumNodes: 1},
	}
	out := buildStatus(nodes, jobs, bridge.OccupiedNodes(jobs))
	got := map[string]statusNode{}
	for _, n := range out.Nodes {
		got[n.Name] = n
	}
	if n := got["cpu-01"]; len(n.GPUs) != 0 {
		t.Errorf("cpu-01 is CPU-only, got GPUs %v", n.GPUs)
	}
	if n := got["gpu-a100-01"]; n.Schedulable || n.GPUs["NVlink_A100_40GB"].Total != 4 {
		t.Errorf("gpu-a100-01 (drained, 4 A100) = %+v", n)
	}
	if n := got["gpu-mix-01"]; len(n.GPUs) != 2 {
		t.Errorf("gpu-mix-01 should have two GPU types, got %v", n.GPUs)
	}
	wantJobs := []statusJob{
		{ID: "6", User: "root", State: "PENDING", Reason: "JobHeldUser", Tagged: true, Model: "resnet50", GPUs: 2, Placement: []statusPlacement{}},
		{ID: "1", User: "alice", State: "RUNNING", GPUs: 1, Placement: []statusPlacement{{Node: "gpu-mix-01", GPUs: 1}}},
		{ID: "7", User: "bob", State: "PENDING", Tagged: true, TagError: `bad hadar tag: steps: "-5": want a number > 0`, GPUs: 1, Placement: []statusPlacement{}},
	}
	if diff := cmp.Diff(wantJobs, out.Jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

// TestStatusPublicFixtures runs the node side on verbatim public output.
func TestStatusPublicFixtures(t *testing.T) {
	for path, want := range map[string]statusNode{
		"../../slurm/testdata/scontrol-show-node/24.11.7-gpu-node-dynamic-norm.txt": {Name: "nb5", State: "idle", Schedulable: true, GPUs: map[string]statusGPUs{"model_b": {Total: 4}}},
		"../../slurm/testdata/scontrol-show-node/24.11.7-cpu-node-dynamic-norm.txt": {Name: "na6", State: "idle", Schedulable: true, GPUs: map[string]statusGPUs{}},
	} {
		out := buildStatus(nodesFromFixture(t, path), nil, nil)
		if diff := cmp.Diff([]statusNode{want}, out.Nodes); diff != "" {
			t.Errorf("%s (-want +got):\n%s", path, diff)
		}
	}
}

// TestStatusStaleGresUsed: after a slurmctld 22.05 restart GresUsed still
// counts the GPUs of jobs that ended while it was down (verbatim fixture:
// 2 on each of node1-node3). `hadar status` shows them as stale, not used,
// as hadar-slurmd counts them, unless a job of the queue runs on the node
// (even one the filters leave out of the listing).
func TestStatusStaleGresUsed(t *testing.T) {
	nodes := nodesFromFixture(t, "../../slurm/testdata/scontrol-show-node/22.05-stale-gres-used.txt")
	onNode2 := slurm.Job{JobID: "7", ArrayJobID: "7", User: "bob", State: "RUNNING", NumNodes: 1, Nodes: []string{"node2"}}
	for _, tt := range []struct {
		name  string
		queue []slurm.Job
		want  map[string]statusGPUs // node -> its one GPU type's counts
	}{
		{"empty queue", nil, map[string]statusGPUs{
			"node1": {Total: 4, Stale: 2}, "node2": {Total: 4, Stale: 2}, "node3": {Total: 4, Stale: 2}}},
		{"a job on node2", []slurm.Job{onNode2}, map[string]statusGPUs{
			"node1": {Total: 4, Stale: 2}, "node2": {Total: 4, Used: 2}, "node3": {Total: 4, Stale: 2}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := buildStatus(nodes, nil, bridge.OccupiedNodes(tt.queue))
			got := map[string]statusGPUs{}
			for _, n := range out.Nodes {
				for _, g := range n.GPUs {
					if _, ok := tt.want[n.Name]; ok {
						got[n.Name] = g
					}
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("GPUs by node (-want +got):\n%s", d)
			}
			var buf bytes.Buffer
			printStatus(&buf, out, true)
			if !strings.Contains(buf.String(), "0/4 (2 stale)") || !strings.Contains(buf.String(), "scontrol reconfigure") {
				t.Errorf("text output does not show the stale GPUs and how to correct them:\n%s", buf.String())
			}
		})
	}
}

func mustGRES(t *testing.T, s string) []slurm.GRES {
	t.Helper()
	g, err := slurm.ParseGRES(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStatusFilters: squeue's -u, -j, -t and --noheader select what
// `hadar status` lists; without a status file it says it cannot tell
// whether the daemon runs.
func TestStatusFilters(t *testing.T) {
	isolate(t)
	nodes := demoNodes(t, map[string]int{})
	jobs := []qjob{
		{id: "1", user: "alice", state: "RUNNING", gres: "gres:gpu:1", nodes: "node1"},
		{id: "2", user: "bob", reason: "JobHeldUser", comment: "hadar model=a3c steps=10", gres: "gres:gpu:1"},
		{id: "3", user: "bob", state: "RUNNING", gres: "gres:gpu:1", nodes: "node2"},
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"1", "2", "3"}},
		{[]string{"-u", "bob"}, []string{"2", "3"}},
		{[]string{"--user", "alice,bob", "-t", "PD"}, []string{"2"}},
		{[]string{"-j", "3,1"}, []string{"1", "3"}},
		{[]string{"--states", "running", "-u", "bob"}, []string{"3"}},
	} {
		r := fakeSlurm(nodes, jobs...)
		out, stderr, err := runCLI(t, r, append([]string{"status", "--json", "--spool", t.TempDir()}, tc.args...)...)
		if err != nil {
			t.Fatalf("status %v: %v\n%s", tc.args, err, stderr)
		}
		var st statusOutput
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range st.Jobs {
			got = append(got, j.ID)
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("status %v (-want +got):\n%s", tc.args, diff)
		}
		if st.DaemonAlive || !strings.HasPrefix(st.Daemon, "cannot tell whether hadar-slurmd runs") {
			t.Errorf("daemon = %v %q", st.DaemonAlive, st.Daemon)
		}
	}
	r := fakeSlurm(nodes, jobs...)
	out, _, err := runCLI(t, r, "status", "--noheader", "--spool", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "NODE") || strings.Contains(out, "JOB") || strings.Contains(out, "hadar-slurmd") {
		t.Errorf("--noheader printed headers:\n%s", out)
	}
}

// TestStatusPartitionFilter: -p selects jobs by partition, read from
// scontrol show job (squeue's line has none).
func TestStatusPartitionFilter(t *testing.T) {
	isolate(t)
	nodes := demoNodes(t, map[string]int{})
	jobs := []qjob{
		{id: "1", user: "alice", state: "RUNNING", gres: "gres:gpu:1", nodes: "node1"},
		{id: "2", user: "bob", reason: "JobHeldUser", comment: "hadar model=a3c steps=10", gres: "gres:gpu:1"},
	}
	r := fakeSlurm(nodes, jobs...)
	detail := func(id, user, state, part, comment string) string {
		return "JobId=" + id + " JobName=wrap UserId=" + user + "(1001) GroupId=g(1001) JobState=" + state +
			" Reason=None Partition=" + part + " NumNodes=1 Comment=" + comment + "\n"
	}
	r.Set(slurm.JobDetailQueryArgs, []byte(detail("1", "alice", "RUNNING", "debug", "(null)")+detail("2", "bob", "PENDING", "gpu,big", "hadar model=a3c steps=10")), nil)
	out, stderr, err := runCLI(t, r, "status", "--json", "--spool", t.TempDir(), "-p", "big")
	if err != nil {
		t.Fatalf("status -p: %v\n%s", err, stderr)
	}
	var st statusOutput
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ID != "2" {
		t.Errorf("status -p big: jobs %+v, want only job 2", st.Jobs)
	}
}
