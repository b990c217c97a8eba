package daemonsim

import (
	"bufio"
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// sbatchS is the time one sbatch takes on the test cluster (its
// slurmctld.log in a demo run), as contrib/demo/run writes the trace.
const sbatchS = 0.06

// demoTrace is contrib/demo/workload as contrib/demo/run submits it: each
// job's steps are its seconds on its fastest type times its rate there,
// one sbatch after the other.
func demoTrace(t *testing.T) []sim.TraceJob {
	t.Helper()
	thr, err := profiles.Matrix("gavel")
	if err != nil {
		t.Fatal(err)
	}
	models := jobproto.NewModelResolver(thr.JobTypes(), nil)
	f, err := os.Open("../../contrib/demo/workload")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var trace []sim.TraceJob
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 3 || strings.HasPrefix(w[0], "#") {
			continue
		}
		gpus, _ := strconv.Atoi(w[1])
		secs, _ := strconv.ParseFloat(w[2], 64)
		jt, err := models.Resolve(w[0])
		if err != nil {
			t.Fatal(err)
		}
		best := 0.0
		for _, gt := range []string{"v100", "p100", "k80"} {
			best = math.Max(best, thr.Rate(jt, gt, gpus))
		}
		trace = append(trace, sim.TraceJob{JobType: w[0], TotalSteps: math.Round(best * secs), ScaleFactor: gpus, PriorityWeight: 1, SLO: -1,
			Arrival: sbatchS * float64(len(trace))})
	}
	return trace
}

func demoOptions(t *testing.T) Options {
	t.Helper()
	l, err := slurmsim.ReadLayout("../../contrib/testcluster/layouts/demo.layout")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Round = config.Duration{Duration: 10 * time.Second}
	cfg.PollInterval = config.Duration{Duration: 2 * time.Second}
	cfg.MinRoundGap = config.Duration{Duration: 2 * time.Second}
	cfg.MigrationPenalty = config.Duration{Duration: 5 * time.Second}
	return Options{Layout: l, Config: cfg, Timing: slurmsim.Measured(time.Second),
		Untagged: []slurmsim.JobSpec{{Name: "untagged-0", GPUsPerNode: 1, Duration: 15 * time.Second},
			{Name: "untagged-1", GPUsPerNode: 1, Duration: 15 * time.Second}},
		UntaggedAt: time.Duration(14 * sbatchS * float64(time.Second)), DaemonStart: 300 * time.Millisecond}
}

// TestDemo is the acceptance of issue 14: make demo's measured makespans
// are within 25% of the prediction (docs/fidelity.md: hadar 59, 62 and 56 s
// in the runs of the current daemon, CI's e2e TestWorkload at commits
// 94aee7a and 4fe1e67, the last on Slurm 24.11; Slurm alone, which no change
// to hadar moves, 243-271 s in every run recorded).
func TestDemo(t *testing.T) {
	ctx := context.Background()
	trace := demoTrace(t)
	opts := demoOptions(t)
	d, err := Daemon(ctx, opts, trace)
	if err != nil {
		t.Fatal(err)
	}
	s, err := SlurmAlone(ctx, opts, trace)
	if err != nil {
		t.Fatal(err)
	}
	md, ms := sim.Summarize(d.Result), sim.Summarize(s.Result)
	t.Logf("hadar %.1f s (%d/%d, %d rounds, wall %.2fs), slurm-only %.1f s (%d)", md.MakespanS, md.Completed, md.Jobs, md.Rounds, md.WallS, ms.MakespanS, ms.Completed)
	for i := range d.Jobs {
		t.Logf("%-22s hadar %-5s runs %d end %6.1f | slurm %-5s end %6.1f", trace[i].JobType, d.Types[i], len(d.Jobs[i].Runs),
			d.Result.Jobs[i].Completion, s.Types[i], s.Result.Jobs[i].Completion)
	}
	if md.Completed != len(trace) || ms.Completed != len(trace) {
		t.Fatalf("completed: hadar %d, slurm-only %d of %d", md.Completed, ms.Completed, len(trace))
	}
	for _, c := range []struct {
		name      string
		predicted float64
		measured  []float64
	}{
		{"hadar", md.MakespanS, []float64{59, 62, 56}},
		{"slurm-only", ms.MakespanS, []float64{245, 264, 271, 250, 246, 243, 244}},
	} {
		for _, m := range c.measured {
			if math.Abs(m-c.predicted) > 0.25*c.predicted {
				t.Errorf("%s: measured %.0f s is not within 25%% of the predicted %.1f s", c.name, m, c.predicted)
			}
		}
	}
	// Slurm alone gives each job the GPU type the live run gave it (node
	// order, best fit): three recommendation jobs and ResNet-18 (bs 128,
	// 4 GPUs, on a k80: the makespan) as in the demo's report.
	want := []string{"v100", "v100", "v100", "v100", "v100", "v100", "p100", "v100", "p100", "p100", "k80", "k80", "k80", "v100"}
	if diff := cmp.Diff(want, s.Types); diff != "" {
		t.Errorf("slurm-only GPU types (-want +got):\n%s", diff)
	}
}

func TestSerialBound(t *testing.T) {
	thr := optimizer.Throughputs{}
	thr.Set("a", "v100", 1, 4)
	thr.Set("a", "k80", 1, 1)
	thr.Set("a", "k80", 2, 1.5)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name     string
		trace    []sim.TraceJob
		capacity map[string]int
		want     time.Duration
	}{
		{"each job on its slowest type after the last arrival",
			[]sim.TraceJob{{JobType: "a", ScaleFactor: 1, TotalSteps: 86400 * 3}, {JobType: "a", ScaleFactor: 2, Arrival: 3600, TotalSteps: 1.5 * 86400}},
			map[string]int{"v100": 4, "k80": 4}, time.Hour + 4*day},
		{"a type the cluster lacks does not count",
			[]sim.TraceJob{{JobType: "a", ScaleFactor: 1, TotalSteps: 4 * 86400 * 2}},
			map[string]int{"v100": 4, "k80": 0}, 2 * day},
		{"a job with no rate adds nothing; at least a day",
			[]sim.TraceJob{{JobType: "unknown", ScaleFactor: 1, TotalSteps: 1e12}},
			map[string]int{"v100": 4}, day},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SerialBound(tc.trace, thr, tc.capacity); got != tc.want {
				t.Errorf("SerialBound = %s, want %s", got, tc.want)
			}
		})
	}
}

// A trace longer than 30 days (the horizon used to be fixed there, and runs
// past it reported the jobs done by then as if they were all) completes on
// the daemon's round and on Slurm alone.
func TestDaemonRunsPastThirtyDays(t *testing.T) {
	thr, err := profiles.Matrix("gavel")
	if err != nil {
		t.Fatal(err)
	}
	const jobType = "ResNet-18 (batch size 64)"
	steps := 40 * 86400 * thr.Rate(jobType, "k80", 1) // 40 days on the k80
	trace := []sim.TraceJob{{JobType: jobType, ScaleFactor: 1, TotalSteps: steps}, {JobType: jobType, ScaleFactor: 1, TotalSteps: steps}}
	cfg := config.Default()
	cfg.Round = config.Duration{Duration: 6 * time.Hour}
	cfg.PollInterval = config.Duration{Duration: time.Hour}
	cfg.Lease = config.Duration{Duration: 4 * time.Hour}
	opts := Options{Layout: slurmsim.GenerateLayout(map[string]int{"k80": 2}, 2), Config: cfg, Planning: thr,
		Timing: slurmsim.Measured(time.Minute)}
	for name, run := range map[string]func(context.Context, Options, []sim.TraceJob) (*Result, error){"daemon": Daemon, "slurm alone": SlurmAlone} {
		res, err := run(context.Background(), opts, trace)
		if err != nil {
			t.Fatal(err)
		}
		if m := sim.Summarize(res.Result); m.Completed != 2 || m.MakespanS < 40*86400 {
			t.Errorf("%s: %d of 2 completed, makespan %.1f days", name, m.Completed, m.MakespanS/86400)
		}
	}
}

// TestRequeues: a job's Slurm requeues as stops (next run on the same nodes,
// or none) and moves (next run on other nodes).
func TestRequeues(t *testing.T) {
	run := func(nodes ...string) slurmsim.Run { return slurmsim.Run{Nodes: nodes} }
	tests := []struct {
		name              string
		job               slurmsim.Job
		wantStop, wantMov int
	}{
		{name: "never requeued", job: slurmsim.Job{Runs: []slurmsim.Run{run("n1")}}},
		{name: "back on its nodes", job: slurmsim.Job{Restarts: 1, Runs: []slurmsim.Run{run("n1"), run("n1")}}, wantStop: 1},
		{name: "moved", job: slurmsim.Job{Restarts: 1, Runs: []slurmsim.Run{run("n1"), run("n2")}}, wantMov: 1},
		{name: "requeued and never ran again", job: slurmsim.Job{Restarts: 1, Runs: []slurmsim.Run{run("n1", "n2")}}, wantStop: 1},
		{name: "moved, then stopped", job: slurmsim.Job{Restarts: 2, Runs: []slurmsim.Run{run("n1"), run("n2", "n3"), run("n2", "n3")}}, wantStop: 1, wantMov: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stops, moves := requeues(tc.job)
			if diff := cmp.Diff([2]int{tc.wantStop, tc.wantMov}, [2]int{stops, moves}); diff != "" {
				t.Errorf("stops, moves (-want +got):\n%s", diff)
			}
		})
	}
}
