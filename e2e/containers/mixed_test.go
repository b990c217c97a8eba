package containers

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// allocGRES reads the GPUs a running job was given on its node from
// `scontrol show job -d` ("Nodes=mix1 CPU_IDs=0 Mem=0 GRES=gpu:TYPE:1(IDX:2)").
var allocGRES = regexp.MustCompile(`(?m)^\s+Nodes=\S+ .*GRES=gpu:([^:\s]+):(\d+)\(IDX:([0-9,-]+)\)`)

// TestMixedTypeNode: on Slurm 24.11 hadar uses a node with two GPU types
// per type. Four one-GPU tagged jobs (untyped --gres=gpu:1) on the mixed
// layout's one node, two v100 and two A100 under site names, all run at
// once, two on each type: each job's request was rewritten to the type
// (squeue %b and `scontrol show job -d` show it, with the devices of that
// type), the state database keeps each user's untyped request, and all
// complete. It needs a cluster of the mixed layout (contrib/ci/e2e-containers
// brings one up for it alone) and skips on any other.
func TestMixedTypeNode(t *testing.T) {
	c := need(t)
	l, err := e2eutil.ReadLayout(c.hostPath("/shared/cluster"))
	if err != nil {
		t.Fatal(err)
	}
	var node string
	for _, n := range l.Nodes {
		if len(l.GPUs[n]) == 2 {
			node = n
		}
	}
	if node == "" || len(l.Nodes) != 1 {
		t.Skip("needs a cluster of the mixed layout (one node, two GPU types): contrib/ci/e2e-containers runs this test on one of its own")
	}
	if v := c.must(t, "scontrol", "--version"); !strings.Contains(v, " 24.11") {
		t.Fatalf("want Slurm 24.11, have %q", v)
	}
	// Device indexes per site type, in the layout's order (render numbers
	// a node's devices in the order its types are given).
	sites := slices.Sorted(maps.Keys(l.GPUs[node]))
	start := time.Now()
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	for i, m := range []string{"resnet50-bs64", "resnet18-bs128", "lm-bs20", "a3c"} {
		ids = append(ids, c.sbatch(t, "--job-name=ct-mixed-"+m, fmt.Sprintf("--comment=hadar model=%s steps=1000", m),
			"--gres=gpu:1", "--wrap", fmt.Sprintf("sleep %d", 15+i)))
	}
	c.waitRunning(t, ids, 60*time.Second)
	placed := time.Since(start)

	got := map[string]int{}
	for _, id := range ids {
		b := c.must(t, "squeue", "-h", "-j", id, "-o", "%b")
		d := c.must(t, "scontrol", "show", "job", "-d", id)
		m := allocGRES.FindStringSubmatch(d)
		if m == nil {
			t.Fatalf("job %s: no GRES allocation in scontrol show job -d:\n%s", id, d)
		}
		if want := "gres/gpu:" + m[1] + ":1"; strings.TrimSpace(b) != want {
			t.Errorf("job %s: squeue %%b %q, want the type it runs on: %q", id, strings.TrimSpace(b), want)
		}
		if !strings.Contains(d, "TresPerNode=gres/gpu:"+m[1]+":1") {
			t.Errorf("job %s: TresPerNode is not the type it runs on (%s):\n%s", id, m[1], d)
		}
		got[m[1]]++
		t.Logf("job %s: %%b %s, allocated gpu:%s:%s (IDX:%s)", id, strings.TrimSpace(b), m[1], m[2], m[3])
	}
	want := map[string]int{}
	for _, s := range sites {
		want[s] = 2
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs by allocated GPU type (-want +got):\n%s\n%s", diff, c.squeueDump())
	}
	// Each user's own request is remembered, so hadar's type is not read
	// as a constraint; each job was retyped before it was placed.
	db := c.stateDB(t)
	reqs, err := db.GresRequests()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if reqs[id] != "gpu:1" {
			t.Errorf("job %s: recorded request %q, want gpu:1 (all: %v)", id, reqs[id], reqs)
		}
	}
	acts, err := db.Actions()
	if err != nil {
		t.Fatal(err)
	}
	retyped := map[string]bool{}
	for _, a := range acts {
		if a.Kind == "retype" && a.Done() {
			for _, id := range strings.Split(a.JobIDs, ",") {
				retyped[id] = true
			}
		}
	}
	for _, id := range ids {
		if !retyped[id] {
			t.Errorf("job %s: no retype action done: %+v", id, acts)
		}
	}
	c.waitCompleted(t, ids, 90*time.Second)
	record(t, "4 tagged jobs on %s (%v): all running %.1fs after hadar-slurmd started, by type %v; all COMPLETED %.1fs after it started",
		node, sites, placed.Seconds(), got, time.Since(start).Seconds())
}
