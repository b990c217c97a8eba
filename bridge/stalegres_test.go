package bridge

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/slurm"
)

// Slurm 22.05.8 after a slurmctld restart: GresUsed counts the GPUs of jobs
// that ended while it was down (fixture), yet its scheduler starts jobs on
// them. Such GPUs are free to hadar unless a job is on the node or a CPU
// is allocated there.
func TestStaleGresUsedCountedFree(t *testing.T) {
	fx, err := slurm.LoadFixture(filepath.Join("..", "slurm", "testdata", "scontrol-show-node", "22.05-stale-gres-used.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, errs := slurm.ParseNodes(bytes.NewReader(fx.Output))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	type usage struct{ Used, Stale int }
	running := func(node string) slurm.Job {
		return slurm.Job{JobID: "7", ArrayJobID: "7", User: "bob", State: "RUNNING", NumNodes: 1, Nodes: []string{node}}
	}
	tests := []struct {
		name  string
		jobs  []slurm.Job
		alloc map[string]int // CPUAlloc to set on nodes
		want  map[string]usage
	}{
		{
			name: "empty queue: every count is stale",
			want: map[string]usage{"node1": {0, 2}, "node2": {0, 2}, "node3": {0, 2}, "node4": {}, "node5": {}},
		},
		{
			name: "a job on the node: Slurm's count stands",
			jobs: []slurm.Job{running("node2")},
			want: map[string]usage{"node1": {0, 2}, "node2": {2, 0}, "node3": {0, 2}, "node4": {}, "node5": {}},
		},
		{
			name: "a completing job holds its node too",
			jobs: func() []slurm.Job { j := running("node3"); j.State = "COMPLETING"; return []slurm.Job{j} }(),
			want: map[string]usage{"node1": {0, 2}, "node2": {0, 2}, "node3": {2, 0}, "node4": {}, "node5": {}},
		},
		{
			name:  "CPUs allocated (a job squeue did not list yet): Slurm's count stands",
			alloc: map[string]int{"node1": 1},
			want:  map[string]usage{"node1": {2, 0}, "node2": {0, 2}, "node3": {0, 2}, "node4": {}, "node5": {}},
		},
		{
			name: "a pending job pinned to the node does not hold it",
			jobs: func() []slurm.Job { j := running("node1"); j.State = "PENDING"; return []slurm.Job{j} }(),
			want: map[string]usage{"node1": {0, 2}, "node2": {0, 2}, "node3": {0, 2}, "node4": {}, "node5": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := append([]slurm.Node(nil), nodes...)
			for i := range ns {
				ns[i].CPUAlloc += tt.alloc[ns[i].Name]
			}
			v := BuildView(ViewInput{Now: t0, Jobs: tt.jobs, Nodes: ns, ResolveGPU: func(s string) (string, error) { return s, nil }})
			got := map[string]usage{}
			for _, n := range v.Nodes {
				got[n.Name] = usage{n.Used, n.StaleUsed}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("used, stale by node (-want +got):\n%s", d)
			}
		})
	}
}
