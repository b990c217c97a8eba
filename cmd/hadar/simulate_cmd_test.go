package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
)

func runSimulateCLI(t *testing.T, args ...string) simulateOutput {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Name: "hadar", Commands: []*cli.Command{simulateCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run(append([]string{"hadar", "simulate", "--json", "--progress=false"}, args...)); err != nil {
		t.Fatalf("simulate %v: %v\n%s", args, err, out.String())
	}
	var res simulateOutput
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("simulate %v: %v\n%s", args, err, out.String())
	}
	return res
}

// writeTraceFile writes jobs to path as a Gavel-format trace.
func writeTraceFile(t *testing.T, path string, jobs []sim.TraceJob) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := sim.WriteTrace(f, jobs); err != nil {
		t.Fatal(err)
	}
}

// writeGavelFile writes thr in Gavel's throughput format.
func writeGavelFile(t *testing.T, path string, thr optimizer.Throughputs) {
	t.Helper()
	raw := map[string]map[string]map[string]float64{}
	for jt, byType := range thr {
		for gt, byW := range byType {
			if raw[gt] == nil {
				raw[gt] = map[string]map[string]float64{}
			}
			for w, r := range byW {
				raw[gt][fmt.Sprintf("('%s', %d)", jt, w)] = map[string]float64{"null": r}
			}
		}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSimulateLearnsForgottenType is issue 12's learning acceptance, on one
// trace: hadar planning with Lambda's matrix less its a100 column (a file;
// the prior fills the column) while jobs progress at Lambda's rates learns
// the a100 cells as jobs run there, and ends within 10% of hadar planning
// with the truth. The bounds are those measured in docs/learning.md.
func TestSimulateLearnsForgottenType(t *testing.T) {
	dir := t.TempDir()
	tracePath := filepath.Join(dir, "t.trace")
	jobs, err := sim.Generate(sim.GenerateOptions{Jobs: 200, Seed: 1, MultiGPU: true, ReferenceType: "a100", Throughputs: profiles.Lambda()})
	if err != nil {
		t.Fatal(err)
	}
	writeTraceFile(t, tracePath, jobs)
	planPath := filepath.Join(dir, "lambda-less-a100.json")
	writeGavelFile(t, planPath, forgetTypes(profiles.Lambda(), []string{"a100"}))

	common := []string{"--trace", tracePath, "--cluster", "h100=8,a100=8,a10=8,v100=8", "--policies", "hadar"}
	truth := runSimulateCLI(t, append([]string{"--throughputs", "lambda"}, common...)...).Policies["hadar"]
	learned := runSimulateCLI(t, append([]string{"--throughputs", planPath, "--truth", "lambda"}, common...)...).Policies["hadar"]
	frozen := runSimulateCLI(t, append([]string{"--throughputs", planPath, "--truth", "lambda", "--no-learning"}, common...)...).Policies["hadar"]

	if learned.Completed != 200 || truth.Completed != 200 {
		t.Fatalf("completed %d and %d of 200 jobs", learned.Completed, truth.Completed)
	}
	if r := learned.MakespanS / truth.MakespanS; r > 1.10 {
		t.Errorf("makespan learning / with the truth = %.3f, want at most 1.10", r)
	}
	if r := learned.AvgJCTS / truth.AvgJCTS; r > 1.10 {
		t.Errorf("avg JCT learning / with the truth = %.3f, want at most 1.10", r)
	}
	if len(learned.Learning) != len(sim.LearningFractions) || len(frozen.Learning) != len(sim.LearningFractions) {
		t.Fatalf("learning points: %d and %d, want %d", len(learned.Learning), len(frozen.Learning), len(sim.LearningFractions))
	}
	at := func(m sim.Metrics, i int) float64 { return m.Learning[i].TypeMedianError["a100"] }
	// The prior alone is off on a100 (18.9% measured) and stays so without
	// learning; learning brings it under 12% by half the jobs (8.4%
	// measured) and to 2% at the end (0.0% measured).
	if e := at(learned, 0); e < 0.10 {
		t.Errorf("a100 median error of the prior = %.3f, want at least 0.10 (else this test shows nothing)", e)
	}
	if e := at(frozen, len(frozen.Learning)-1); e < 0.10 {
		t.Errorf("a100 median error with --no-learning at the end = %.3f, want the prior's (at least 0.10)", e)
	}
	if e := at(learned, 2); e > 0.12 {
		t.Errorf("a100 median error at 50%% of jobs = %.3f, want at most 0.12", e)
	}
	if e := at(learned, len(learned.Learning)-1); e > 0.02 {
		t.Errorf("a100 median error at the end = %.3f, want at most 0.02", e)
	}
	if got := learned.Learning[len(learned.Learning)-1].Learned; got < 20 {
		t.Errorf("%d cells learned, want at least 20", got)
	}
	// --forget a100 is the same experiment as the file.
	forgot := runSimulateCLI(t, append([]string{"--throughputs", "lambda", "--forget", "a100", "--truth", "lambda"}, common...)...).Policies["hadar"]
	if forgot.MakespanS != learned.MakespanS || forgot.AvgJCTS != learned.AvgJCTS {
		t.Errorf("--forget a100: makespan %v, avg JCT %v; the file: %v, %v", forgot.MakespanS, forgot.AvgJCTS, learned.MakespanS, learned.AvgJCTS)
	}
}

// TestSimulateTypeUtilization: the per-type utilizations weigh up to the
// cluster's.
func TestSimulateTypeUtilization(t *testing.T) {
	out := runSimulateCLI(t, "--throughputs", "lambda", "--cluster", "h100=8,a10=8", "--policies", "hadar,gavel")
	for _, name := range out.Order {
		m := out.Policies[name]
		if len(m.TypeUtilization) != 2 {
			t.Fatalf("%s: type utilization %v, want h100 and a10", name, m.TypeUtilization)
		}
		sum := 0.0
		for gt, u := range m.TypeUtilization {
			if u <= 0 || u > 1+1e-9 {
				t.Errorf("%s: %s utilization %v", name, gt, u)
			}
			sum += u * 8
		}
		if got := sum / 16; got < m.Utilization-1e-9 || got > m.Utilization+1e-9 {
			t.Errorf("%s: per-type utilizations average to %v, cluster's is %v", name, got, m.Utilization)
		}
	}
}

func TestSimulateFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--explore", "0.2"},
		{"--no-learning"},
		{"--truth", "lambda", "--explore", "-1"},
		{"--truth", "nope.json"},
		{"--config", writeSimConfig(t, "[policies.hadar]\ncritical = -7\n")}, // read, and refused, on the fast path too
	} {
		var out bytes.Buffer
		app := &cli.App{Name: "hadar", Commands: []*cli.Command{simulateCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		if err := app.Run(append([]string{"hadar", "simulate", "--throughputs", "lambda", "--cluster", "a100=4"}, args...)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestSimulateTruthDeterministic: the same flags give the same plan and
// the same learning log, bit for bit (the prior is refitted many times).
func TestSimulateTruthDeterministic(t *testing.T) {
	args := []string{"--throughputs", "lambda", "--truth", "gavel", "--explore", "0.2", "--cluster", "v100=8,p100=8,k80=8", "--policies", "hadar"}
	first := runSimulateCLI(t, args...).Policies["hadar"]
	for i := 0; i < 2; i++ {
		again := runSimulateCLI(t, args...).Policies["hadar"]
		if diff := cmp.Diff(first.Learning, again.Learning); diff != "" {
			t.Fatalf("run %d: learning log differs (-first +again):\n%s", i+2, diff)
		}
		if again.MakespanS != first.MakespanS || again.AvgJCTS != first.AvgJCTS {
			t.Fatalf("run %d: makespan %v, avg JCT %v; first %v, %v", i+2, again.MakespanS, again.AvgJCTS, first.MakespanS, first.AvgJCTS)
		}
	}
}

func writeSimConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hadar.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSimulateConfigKnobs: --config's [policies.hadar] reaches the policy
// of the fast path (turning hadar's quick, lead and starvation rules off
// changes its plan on the default trace).
func TestSimulateConfigKnobs(t *testing.T) {
	base := runSimulateCLI(t, "--policies", "hadar")
	off := runSimulateCLI(t, "--policies", "hadar", "--config",
		writeSimConfig(t, "[policies.hadar]\nquick_share = -1\nlead_remaining = -1\nstarvation = -1\n"))
	if base.Policies["hadar"].AvgJCTS == off.Policies["hadar"].AvgJCTS && base.Policies["hadar"].MakespanS == off.Policies["hadar"].MakespanS {
		t.Errorf("the config's knobs changed nothing: %+v", off.Policies["hadar"])
	}
}

// TestSimulateConfigExplore: the --config file's explore plans the fast
// path's unconfirmed cells as the daemon does, as --explore would, and the
// flag overrides it.
func TestSimulateConfigExplore(t *testing.T) {
	args := []string{"--throughputs", "lambda", "--truth", "gavel", "--cluster", "v100=8,p100=8,k80=8", "--policies", "hadar"}
	none := runSimulateCLI(t, args...).Policies["hadar"]
	flag := runSimulateCLI(t, append(args, "--explore", "0.5")...).Policies["hadar"]
	conf := writeSimConfig(t, "explore = 0.5\n")
	file := runSimulateCLI(t, append(args, "--config", conf)...).Policies["hadar"]
	over := runSimulateCLI(t, append(args, "--config", conf, "--explore", "0")...).Policies["hadar"]
	if flag.AvgJCTS == none.AvgJCTS && flag.MakespanS == none.MakespanS {
		t.Fatalf("--explore 0.5 changed nothing on this trace: %+v", flag)
	}
	if file.AvgJCTS != flag.AvgJCTS || file.MakespanS != flag.MakespanS {
		t.Errorf("explore = 0.5 in --config: avg JCT %v, makespan %v; --explore 0.5: %v, %v", file.AvgJCTS, file.MakespanS, flag.AvgJCTS, flag.MakespanS)
	}
	if over.AvgJCTS != none.AvgJCTS || over.MakespanS != none.MakespanS {
		t.Errorf("--explore 0 over the file's 0.5: avg JCT %v, makespan %v; without exploring: %v, %v", over.AvgJCTS, over.MakespanS, none.AvgJCTS, none.MakespanS)
	}
}

// TestSimulateDaemonRules: --daemon-rules plans under the daemon's rules,
// read from --config: without preemption (the daemon's default) LAS cannot
// stop the job it started, with preemption it time-shares again, and
// without the flag neither setting matters (Gavel's model). The flag is
// refused where the daemon's own round runs.
func TestSimulateDaemonRules(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "two.trace")
	job := sim.TraceJob{JobType: "resnet50", Command: "python3 train.py", WorkingDir: "resnet50", NumStepsArg: "--steps", TotalSteps: 20000, ScaleFactor: 1, PriorityWeight: 1, SLO: -1}
	writeTraceFile(t, trace, []sim.TraceJob{job, job})
	preempt := writeSimConfig(t, "preemption = true\n")
	run := func(args ...string) sim.Metrics {
		return runSimulateCLI(t, append([]string{"--throughputs", "lambda", "--cluster", "a100=1", "--gpus-per-node", "1", "--trace", trace, "--policies", "las"}, args...)...).Policies["las"]
	}
	// The toy job's start-up: ResNet-50's published 250 s would make each
	// turn cost more than Gavel's model, where starts are free.
	gavelModel, noStop, preempting := run(), run("--daemon-rules"), run("--daemon-rules", "--config", preempt, "--startup", "1s")
	if noStop.AvgJCTS >= gavelModel.AvgJCTS {
		t.Errorf("without preemption the first job should end first and lower the average JCT: %.0f s, Gavel's model %.0f s", noStop.AvgJCTS, gavelModel.AvgJCTS)
	}
	// Within 3%: each of the turns costs Slurm's start (1.5 s).
	if d := math.Abs(preempting.AvgJCTS/gavelModel.AvgJCTS - 1); d > 0.03 {
		t.Errorf("with preemption LAS should time-share as in Gavel's model: average JCT %.0f s against %.0f s", preempting.AvgJCTS, gavelModel.AvgJCTS)
	}

	var out bytes.Buffer
	app := &cli.App{Name: "hadar", Commands: []*cli.Command{simulateCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run([]string{"hadar", "simulate", "--daemon", "--daemon-rules", "--cluster", "v100=4"}); err == nil || !strings.Contains(err.Error(), "fast path") {
		t.Errorf("--daemon --daemon-rules: got %v, want an error that says the flag is for the fast path", err)
	}
}

// TestSimulateStartup: --startup is what every start costs a job on top of
// Slurm's pass, by its model (by default Sia's published restart times), so
// one job alone ends later by the difference; it is refused where starts
// cost nothing (Gavel's model), when negative, and when it does not parse.
func TestSimulateStartup(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "one.trace")
	job := sim.TraceJob{JobType: "resnet50", Command: "python3 train.py", WorkingDir: "resnet50", NumStepsArg: "--steps", TotalSteps: 20000, ScaleFactor: 1, PriorityWeight: 1, SLO: -1}
	writeTraceFile(t, trace, []sim.TraceJob{job})
	run := func(args ...string) sim.Metrics {
		return runSimulateCLI(t, append([]string{"--throughputs", "lambda", "--cluster", "a100=1", "--gpus-per-node", "1", "--trace", trace, "--policies", "yarn-cs", "--daemon-rules"}, args...)...).Policies["yarn-cs"]
	}
	toy := run("--startup", "1s")
	for _, tc := range []struct {
		startup []string
		later   time.Duration // than with the toy job's 1 s
	}{
		{nil, 250*time.Second - time.Second}, // the default: Sia's ResNet-50 restart
		{[]string{"--startup", "10m"}, 10*time.Minute - time.Second},
		{[]string{"--startup", "ResNet-50=2m,*=5s"}, 2*time.Minute - time.Second},
		{[]string{"--startup", "bert=2m,*=5s"}, 4 * time.Second},
	} {
		got := run(tc.startup...).AvgJCTS - toy.AvgJCTS
		if math.Abs(got-tc.later.Seconds()) > 1 {
			t.Errorf("%v: the job ends %.0f s later than with the toy job's 1 s start-up, want %.0f s", tc.startup, got, tc.later.Seconds())
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--startup", "1m"}, "--daemon-rules"},
		{[]string{"--daemon-rules", "--startup", "-1s"}, "negative"},
		{[]string{"--daemon", "--startup", "-1s"}, "negative"},
		{[]string{"--daemon-rules", "--startup", "resnet50=soon"}, "resnet50"},
		{[]string{"--daemon-rules", "--startup", "resnet50=1s,ResNet-50=2s"}, "twice"},
	} {
		var out bytes.Buffer
		app := &cli.App{Name: "hadar", Commands: []*cli.Command{simulateCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		args := append([]string{"hadar", "simulate", "--cluster", "v100=4", "--trace", trace}, tc.args...)
		if err := app.Run(args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error that says %q", tc.args, err, tc.want)
		}
	}
}

// TestSimulateModernClusterEveryTypeBusy is issue 12's first acceptance
// line, through the CLI as docs/learning.md runs it: on a static 200-job
// multi-GPU lambda trace (the command's own draw, seed 0, and seed 2, whose
// tail left the V100s idle before Hadar's fair deadlines) on
// h100=8,a100=8,a10=8,v100=8, every GPU type is at least 0.85 busy under
// hadar, and its makespan and average JCT are no worse than gavel's.
func TestSimulateModernClusterEveryTypeBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates two 200-job traces")
	}
	for _, seed := range []string{"0", "2"} {
		trace := filepath.Join(t.TempDir(), "t.trace")
		if out, err := runHadar(t, "trace", "generate", "--throughputs", "lambda", "--reference-type", "a100", "--multi-gpu",
			"--jobs", "200", "--seed", seed, "--out", trace); err != nil {
			t.Fatalf("trace generate: %v\n%s", err, out)
		}
		res := runSimulateCLI(t, "--throughputs", "lambda", "--cluster", "h100=8,a100=8,a10=8,v100=8", "--trace", trace, "--policies", "hadar,gavel")
		h, g := res.Policies["hadar"], res.Policies["gavel"]
		for _, gt := range []string{"h100", "a100", "a10", "v100"} {
			if u := h.TypeUtilization[gt]; u < 0.85 {
				t.Errorf("seed %s: %s utilization %.3f, want at least 0.85 (all: %v)", seed, gt, u, h.TypeUtilization)
			}
		}
		if h.MakespanS > g.MakespanS || h.AvgJCTS > g.AvgJCTS {
			t.Errorf("seed %s: hadar makespan %.1f h, avg JCT %.2f h; gavel %.1f h, %.2f h", seed, h.MakespanS/3600, h.AvgJCTS/3600, g.MakespanS/3600, g.AvgJCTS/3600)
		}
	}
}
