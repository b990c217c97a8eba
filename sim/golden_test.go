package sim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

// updateGolden rewrites testdata/runs.golden from the code as it is:
// `go test ./sim -run TestRunsGolden -update`, only for a change meant to
// alter what a policy decides.
var updateGolden = flag.Bool("update", false, "rewrite testdata/runs.golden")

// TestRunsGolden pins every job's start and completion in fast-path
// simulations of every policy: the static 160-job trace of BenchmarkStatic160
// (docs/results.md) and a 160-job trace with arrivals, on 12:12:12. A
// speed-up of planning must leave them as they are.
func TestRunsGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 18 runs")
	}
	thr, err := profiles.Matrix("gavel")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, rate := range []float64{0, 8} {
		trace, err := Generate(GenerateOptions{Jobs: 160, Seed: 0, MultiGPU: true, ArrivalRate: rate, Throughputs: thr})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range optimizer.Names() {
			policy, err := optimizer.New(name, optimizer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), Config{Cluster: Cluster{GPUs: map[string]int{"v100": 12, "p100": 12, "k80": 12}, GPUsPerNode: 4},
				Round: 360 * time.Second, Throughputs: thr, Policy: policy}, trace)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "== rate %v %s: %d rounds, busy %v GPU-s\n", rate, name, res.Rounds, res.BusyGPUSecs)
			for _, j := range res.Jobs {
				fmt.Fprintf(&b, "%s %v %v %d %d %d\n", j.ID, j.FirstStart, j.Completion, j.MaxCopies, j.CopyRounds, j.CopySum)
			}
		}
	}
	path := filepath.Join("testdata", "runs.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(runsGoldenHeader+b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimPrefix(string(want), runsGoldenHeader), b.String()); diff != "" {
		t.Errorf("simulations differ from %s (-want +got):\n%s", path, diff)
	}
}

const runsGoldenHeader = "# Fast-path simulations of every policy (sim/golden_test.go).\n" +
	"# Produced by `go test ./sim -run TestRunsGolden -update` at commit f6aa8ab\n" +
	"# (before the speed-ups of issue 14, build point 6); a change that only makes\n" +
	"# planning faster must leave it as it is. Hadar's and HadarE's runs were\n" +
	"# regenerated on 2026-12-06 for a change of policy (the whole-type gang chain\n" +
	"# and the incumbency on a job's preferred type).\n"
