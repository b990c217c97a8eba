package daemonsim

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// accountingSite is the accounting test cluster's site file.
var accountingSite = readSiteFile()

func readSiteFile() string {
	b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "testcluster", "accounting.site.toml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// maxRunning is the most jobs of the run that ran at once, in all and of
// one user.
func maxRunning(res *Result) (all int, byUser map[string]int) {
	type edge struct {
		at   time.Time
		d    int
		user string
	}
	var edges []edge
	for _, j := range res.Jobs {
		for _, r := range j.Runs {
			edges = append(edges, edge{r.Start, 1, j.Spec.User}, edge{r.End, -1, j.Spec.User})
		}
	}
	sort.SliceStable(edges, func(a, b int) bool {
		if !edges[a].at.Equal(edges[b].at) {
			return edges[a].at.Before(edges[b].at)
		}
		return edges[a].d < edges[b].d
	})
	byUser = map[string]int{}
	now, users := 0, map[string]int{}
	for _, e := range edges {
		now += e.d
		users[e.user] += e.d
		all = max(all, now)
		byUser[e.user] = max(byUser[e.user], users[e.user])
	}
	return all, byUser
}

// bob may hold 4 GPUs (QOS gpu4); his eight jobs and alice's fourteen
// run 18 at once on the demo's 20 GPUs, under Slurm alone and under
// hadar, which plans with the limit (the bridge reads it from the
// simulated Slurm as from sacctmgr) and so neither places bob's other
// four nor requeues anyone (measured on the accounting cluster: 18 at
// once both ways, no requeue). Without the site 20 run at once.
func TestSiteQOSLimit(t *testing.T) {
	site, err := slurmsim.ParseSite(strings.NewReader(accountingSite), "site.toml")
	if err != nil {
		t.Fatal(err)
	}
	const jobType = "ResNet-50 (batch size 64)"
	planning := profiles.Default()
	truth := optimizer.Throughputs{}
	rate := planning.Rate(jobType, "v100", 1)
	for _, gt := range []string{"v100", "p100", "k80"} {
		truth.Set(jobType, gt, 1, rate) // sleep jobs: as long on every type
	}
	var trace []sim.TraceJob
	for i := range 22 {
		j := sim.TraceJob{JobType: jobType, TotalSteps: math.Floor(40 * rate), ScaleFactor: 1, PriorityWeight: 1, SLO: -1, User: "alice"}
		if i < 8 {
			j.User, j.QOS = "bob", "gpu4"
		}
		trace = append(trace, j)
	}
	layout, err := slurmsim.ReadLayout("../../contrib/testcluster/layouts/demo.layout")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Round, cfg.LaunchTimeout = config.Duration{Duration: 10 * time.Second}, config.Duration{Duration: 30 * time.Second}
	startup := sim.StartCosts{Other: time.Second}
	opts := Options{Layout: layout, Config: cfg, Planning: planning, Truth: truth, Startup: &startup, Site: site}
	for _, run := range []struct {
		name string
		fn   func(context.Context, Options, []sim.TraceJob) (*Result, error)
	}{{"Slurm alone", SlurmAlone}, {"hadar", Daemon}} {
		res, err := run.fn(context.Background(), opts, trace)
		if err != nil {
			t.Fatal(err)
		}
		all, byUser := maxRunning(res)
		if all != 18 || byUser["bob"] != 4 {
			t.Errorf("%s: at most %d jobs ran at once, %d of bob's; want 18 and 4", run.name, all, byUser["bob"])
		}
		for i, j := range res.Jobs {
			if j.State != slurmsim.Completed || j.Restarts > 0 {
				t.Errorf("%s: job %d (%s) %s after %d requeues", run.name, i, j.Spec.User, j.State, j.Restarts)
			}
		}
	}
	opts.Site = nil
	res, err := SlurmAlone(context.Background(), opts, trace)
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := maxRunning(res); all != 20 {
		t.Errorf("without the site: at most %d jobs ran at once, want 20", all)
	}
}
