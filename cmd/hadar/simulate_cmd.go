package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/sim/daemonsim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

const defaultPolicies = "hadar,gavel,gavel-makespan,gavel-ftf,las,yarn-cs,tiresias,elas"

// defaultTrace describes the trace `hadar simulate` uses when given none.
var defaultTrace = sim.GenerateOptions{Jobs: 160, Seed: 0, MultiGPU: true, ReferenceType: "v100"}

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "run scheduling policies over a job trace and compare them",
		Description: "Runs each policy over the same trace on a simulated cluster, round by round, with the\n" +
			"same optimizer code hadar-slurmd uses, and reports makespan, JCT, queueing delay,\n" +
			"finish-time fairness, utilization, type efficiency (the GPU time the work would take\n" +
			"with every job on its fastest GPU type, over the GPU time it took), stops and moves\n" +
			"(plans that left a running job out or gave it other GPUs: a requeue each on a live\n" +
			"cluster) and scheduling time. Every plan is checked against the safety invariants. With no flags it runs a\n" +
			"built-in generated trace (160 static multi-GPU jobs, seed 0) on the embedded Gavel\n" +
			"throughput matrix. --throughputs lambda uses Lambda's measurements of 11 current GPU\n" +
			"types (a100, h100, rtx4090, ...; `hadar profiles gpus` lists the catalogue) and its\n" +
			"10 models (resnet50, bert_large_squad, ...); pick --cluster types and a trace's\n" +
			"--reference-type from the same matrix.\n\n" +
			"--truth TRUTH makes --throughputs what hadar knows and TRUTH what is: jobs progress at\n" +
			"TRUTH's rates while the policies plan with --throughputs, every cell it lacks on the\n" +
			"--cluster types filled by the prior (docs/prior.md), and learn as hadar-slurmd does: each\n" +
			"round a job runs on one GPU type, its observed rate becomes the learned value of its\n" +
			"cell (replacing a prior value at once, an imported one after 3 samples), and the prior\n" +
			"is fitted again on what is known. --explore B plans every cell no job has run on yet\n" +
			"(the prior's and the imported ones) at (1+B) times its value, so that a type that may be\n" +
			"faster is tried; --no-learning\n" +
			"plans with the prior throughout. The report adds the planning matrix's error against\n" +
			"TRUTH as jobs complete (docs/learning.md).\n\n" +
			"Traces are Gavel's tab-separated format; `gavel:NAME` names a trace embedded in the\n" +
			"binary (" + strings.Join(sim.EmbeddedTraceNames(), ", ") + ").\n\n" + simulateNoiseHelp + "\n\n" + simulateDaemonHelp,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "trace", Usage: "trace file, or gavel:NAME for an embedded Gavel trace (default: a generated trace)"},
			throughputsFlag(),
			&cli.BoolFlag{Name: "prior", Usage: "fill every cell --throughputs lacks on the --cluster types with the prior (docs/prior.md); without it only a type the matrix has no rate for at all (l40s, b200, ...) is filled, as hadar-slurmd plans it; with --truth, fills the truth's missing cells (the plan is always filled)"},
			&cli.StringFlag{Name: "truth", Usage: "the matrix `NAME|FILE` jobs progress at, while the policies plan with --throughputs, the prior, and what they learn (default: --throughputs, planned with as it is)"},
			&cli.StringFlag{Name: "forget", Usage: "drop these GPU `TYPES` (comma-separated) from --throughputs before planning, as if no one had measured them: with --truth, the learning experiment of docs/learning.md"},
			&cli.Float64Flag{Name: "explore", Value: 0, DefaultText: "the --config file's explore, else 0", Usage: "with --truth or --noise-rate: plan each cell no job has run on yet (the prior's, and the imported matrix's) at (1+`B`) times its value, so the policy tries types that may be faster"},
			&cli.BoolFlag{Name: "no-learning", Usage: "with --truth: plan with --throughputs and the prior throughout, learning nothing"},
			&cli.StringFlag{Name: "cluster", Value: "v100=36,p100=36,k80=36", Usage: "GPUs per type, TYPE=N,... (TYPE in any case, or a Slurm GRES name such as tesla_v100-sxm2-32gb; hadar profiles gpus lists the types), or Gavel's V:P:K for v100, p100 and k80 (36:36:36)"},
			&cli.IntFlag{Name: "gpus-per-node", Value: 4, Usage: "GPUs per simulated node (one GPU type per node)"},
			&cli.BoolFlag{Name: "daemon-rules", Usage: "plan as hadar-slurmd must: each job asks for the shape its sbatch would on --gpus-per-node nodes (one node when its gang fits one, else equal parts on the fewest nodes), and running jobs are stopped and moved by the daemon's preemption and migration_penalty (--config's, else its defaults: no preemption, 10m); without it gangs split over nodes freely and any job stops and moves for free, as in Gavel's simulator (docs/fidelity.md)"},
			&cli.DurationFlag{Name: "round", Value: 360 * time.Second, Usage: "round length"},
			&cli.StringFlag{Name: "policies", Value: defaultPolicies, Usage: "comma-separated policies (see `hadar policies`)"},
			&cli.Int64Flag{Name: "seed", Value: 0, Usage: "seed of the policies' random choices and of the --noise-steps and --noise-rate draws"},
			&cli.StringFlag{Name: "copy-efficiency", Value: optimizer.MeasuredCopyEfficiency().String(), Usage: "HadarE: efficiency of combining K copies, `K:EFF,...` (speed-up interpolated between the points, held beyond the last) or one number for every K (default: measured with the PyTorch example, docs/hadare.md; with --config, the file's [policies.hadare] copy_efficiency)"},
			&cli.IntFlag{Name: "max-copies", Value: 0, Usage: "HadarE: copy limit per job (0 = number of nodes)"},
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON"},
			&cli.BoolFlag{Name: "markdown", Usage: "print the results as a Markdown table (hours)"},
			&cli.StringFlag{Name: "plot", Usage: "write PNG plots (JCT CDF, utilization, metrics) into `DIR`"},
			&cli.StringFlag{Name: "jobs-csv", Usage: "write every job's outcome under every policy to `FILE` (CSV, hours: arrival, first start, completion, JCT, queueing, isolated JCT; stops and moves; GPU-hours on each GPU type)"},
			&cli.BoolFlag{Name: "progress", Usage: "show a progress bar on stderr (default: when stderr is a terminal); not with --daemon"},
			&cli.BoolFlag{Name: "allow-incomplete", Usage: "exit 0 even if a policy leaves jobs unfinished (its metrics are then over the completed jobs only); without it such a run prints its results and exits 1"},
		}, append(simulateNoiseFlags(), simulateDaemonFlags()...)...),
		Action: runSimulate,
	}
}

// simulateOutput is the --json shape.
type simulateOutput struct {
	Trace   string         `json:"trace"`
	Layout  string         `json:"layout,omitempty"`
	Cluster map[string]int `json:"cluster"`
	RoundS  float64        `json:"round_s"`
	Truth   string         `json:"truth,omitempty"`
	// NoiseSteps and NoiseRate are the sigmas of --noise-steps and --noise-rate.
	NoiseSteps float64 `json:"noise_steps,omitempty"`
	NoiseRate  float64 `json:"noise_rate,omitempty"`
	// PriorFilled are the cluster's GPU types the matrix has no rates
	// for, given the prior's (docs/prior.md) as hadar-slurmd plans them.
	PriorFilled []string               `json:"prior_filled,omitempty"`
	Policies    map[string]sim.Metrics `json:"policies"`
	Order       []string               `json:"policy_order"`
	// GPUTypes is, with --daemon, each trace job's GPU type at its end (in
	// trace order; "" if it never ran), per row.
	GPUTypes map[string][]string `json:"gpu_types,omitempty"`
}

func runSimulate(c *cli.Context) error {
	if err := checkSimulateFlags(c); err != nil {
		return err
	}
	if daemonMode(c) {
		if c.Bool("daemon-rules") {
			return fmt.Errorf("--daemon-rules is for the fast path: --daemon and --layout run the daemon's own round, its rules included")
		}
		return runSimulateDaemon(c)
	}
	startup, err := startCosts(c)
	if err != nil {
		return err
	}
	thr, err := loadThroughputs(c.String("throughputs"))
	if err != nil {
		return err
	}
	gpus, err := parseCluster(c.String("cluster"), thr.GPUTypes())
	if err != nil {
		return err
	}
	if f := c.String("forget"); f != "" {
		thr = forgetTypes(thr, strings.Split(f, ","))
	}
	matrixName := c.String("throughputs")
	var truth optimizer.Throughputs
	var learn *sim.Learning
	if c.IsSet("truth") {
		if truth, err = loadThroughputs(c.String("truth")); err != nil {
			return fmt.Errorf("--truth: %w", err)
		}
		learn = &sim.Learning{Prior: fillPrior, Explore: c.Float64("explore"), Frozen: c.Bool("no-learning")}
	} else if (c.IsSet("explore") || c.IsSet("no-learning")) && !c.IsSet("noise-rate") {
		return fmt.Errorf("--explore and --no-learning need --truth or --noise-rate")
	}
	if c.Bool("prior") {
		types := thr.GPUTypes()
		for gt := range gpus {
			types = append(types, gt)
		}
		if truth != nil {
			truth = profiles.WithPrior(truth, append(truth.GPUTypes(), types...))
		} else {
			thr = profiles.WithPrior(thr, types)
		}
	}
	// A cluster type the matrix has no rate for runs at the prior's rates,
	// as hadar-slurmd plans it, rather than standing idle.
	var priorFilled []string
	if truth != nil {
		priorFilled = unratedTypes(truth, gpus)
		truth = fillUnratedTypes(truth, priorFilled)
		matrixName = c.String("truth")
	} else {
		priorFilled = unratedTypes(thr, gpus)
		thr = fillUnratedTypes(thr, priorFilled)
	}
	notePriorFilled(c, matrixName, priorFilled)
	if thr, truth, learn, err = applyRateNoise(c, thr, truth, learn); err != nil {
		return err
	}
	traceThr := thr
	if truth != nil {
		traceThr = truth
	}
	traceName, trace, err := loadOrGenerateTrace(c.String("trace"), traceThr)
	if err != nil {
		return err
	}
	if err := checkClusterRuns(traceThr, matrixName, gpus, trace); err != nil {
		return err
	}
	names, err := parsePolicies(c.String("policies"))
	if err != nil {
		return err
	}
	copyEff, err := optimizer.ParseCopyEfficiency(c.String("copy-efficiency"))
	if err != nil {
		return fmt.Errorf("--copy-efficiency: %w", err)
	}
	opts := optimizer.Options{Seed: c.Int64("seed"), CopyEfficiency: copyEff, MaxCopies: c.Int("max-copies")}
	daemonCfg := config.Default()
	// --config: the policies plan with the daemon's knobs ([policies.*]).
	if p := c.String("config"); p != "" {
		cfg, err := config.Load(p)
		if err != nil {
			return err
		}
		daemonCfg = cfg
		po := cfg.PolicyOptions()
		opts.Hadar, opts.Tiresias = po.Hadar, po.Tiresias
		if !c.IsSet("copy-efficiency") {
			opts.CopyEfficiency = po.CopyEfficiency // the daemon's, as every knob of the file
		}
		if learn != nil && !c.IsSet("explore") {
			learn.Explore = cfg.Explore // the daemon plans unconfirmed cells with it too
		}
	}
	var rules sim.Rules
	if c.Bool("daemon-rules") {
		rules = daemonsim.FastPathRules(daemonCfg, slurmsim.Measured(0), startup, &opts)
	}
	showProgress := c.Bool("progress") || (!c.IsSet("progress") && term.IsTerminal(int(os.Stderr.Fd())))

	out := simulateOutput{Trace: traceName, Truth: c.String("truth"), Cluster: gpus, RoundS: c.Duration("round").Seconds(), Policies: map[string]sim.Metrics{}, Order: names,
		NoiseSteps: c.Float64("noise-steps"), NoiseRate: c.Float64("noise-rate"), PriorFilled: priorFilled}
	if out.Truth == "" && out.NoiseRate > 0 {
		out.Truth = c.String("throughputs")
	}
	results := map[string]*sim.Result{}
	for _, name := range names {
		policy, err := optimizer.New(name, opts)
		if err != nil {
			return err
		}
		cfg := sim.Config{
			Cluster:        sim.Cluster{GPUs: gpus, GPUsPerNode: c.Int("gpus-per-node")},
			Round:          c.Duration("round"),
			Throughputs:    thr,
			Truth:          truth,
			Learn:          learn,
			Policy:         policy,
			CopyEfficiency: opts.CopyEfficiency,
			StepNoise:      c.Float64("noise-steps"),
			NoiseSeed:      c.Int64("seed"),
			Rules:          rules,
		}
		var bar *progressbar.ProgressBar
		if showProgress {
			bar = progressbar.NewOptions(len(trace),
				progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription(fmt.Sprintf("%-15s", name)),
				progressbar.OptionShowCount(),
				progressbar.OptionSetItsString("jobs"),
				progressbar.OptionClearOnFinish())
			cfg.Progress = func(done, _ int) { _ = bar.Set(done) }
		}
		res, err := sim.Run(c.Context, cfg, trace)
		if bar != nil {
			_ = bar.Finish()
		}
		if err != nil {
			return err
		}
		results[name] = res
		out.Policies[name] = sim.Summarize(res)
	}
	if dir := c.String("plot"); dir != "" {
		if err := writePlots(dir, names, results, out.Policies); err != nil {
			return err
		}
	}
	if path := c.String("jobs-csv"); path != "" {
		if err := writeJobsCSV(path, names, results); err != nil {
			return err
		}
	}
	switch {
	case c.Bool("json"):
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	case c.Bool("markdown"):
		printSimulateMarkdown(c.App.Writer, out)
	default:
		printSimulateTable(c.App.Writer, out)
		printTypeUtilization(c.App.Writer, out)
		printLearning(c.App.Writer, out)
		if dir := c.String("plot"); dir != "" {
			fmt.Fprintf(c.App.Writer, "\nplots written to %s\n", dir)
		}
	}
	return checkComplete(c, out)
}

// checkComplete fails a run in which a policy left jobs unfinished: its
// metrics are over the completed jobs only, so they read better than they
// are. --allow-incomplete makes it a warning.
func checkComplete(c *cli.Context, out simulateOutput) error {
	return incomplete(c.App.ErrWriter, out, c.Bool("allow-incomplete"), daemonMode(c))
}

// incomplete is checkComplete's rule: an error naming the policies that left
// jobs unfinished, or with allow a warning on w.
func incomplete(w io.Writer, out simulateOutput, allow, daemon bool) error {
	var short []string
	for _, name := range out.Order {
		if m := out.Policies[name]; m.Completed < m.Jobs {
			short = append(short, fmt.Sprintf("%s completed %d of %d jobs", name, m.Completed, m.Jobs))
		}
	}
	if len(short) == 0 {
		return nil
	}
	msg := strings.Join(short, ", ") + "; the metrics of those rows are over the completed jobs only"
	if allow {
		fmt.Fprintf(w, "hadar simulate: warning: %s\n", msg)
		return nil
	}
	hint := ""
	if daemon {
		hint = " (--log FILE shows the daemon's decisions on each job)"
	}
	return fmt.Errorf("incomplete run: %s%s; pass --allow-incomplete to accept such a run", msg, hint)
}

// notePriorFilled says on stderr which GPU types of the cluster the matrix
// had no rates for, filled with the prior.
func notePriorFilled(c *cli.Context, matrix string, types []string) {
	if len(types) == 0 {
		return
	}
	if matrix == "" {
		matrix = profiles.DefaultMatrix
	}
	fmt.Fprintf(c.App.ErrWriter, "hadar simulate: note: the matrix %s has no rates for %s: jobs run there at the prior's rates (docs/prior.md), as hadar-slurmd plans such a type\n",
		matrix, strings.Join(types, ", "))
}

// checkSimulateFlags refuses flag values out of the config file's ranges
// (hadar.toml(5)) and flags that contradict each other, before any work.
func checkSimulateFlags(c *cli.Context) error {
	for _, f := range []string{"trace", "throughputs", "truth", "layout", "config", "site"} {
		if c.IsSet(f) && strings.TrimSpace(c.String(f)) == "" {
			return usageErrorf(c, "--%s is empty", f)
		}
	}
	if c.Bool("json") && c.Bool("markdown") {
		return usageErrorf(c, "--json and --markdown exclude each other")
	}
	if c.IsSet("layout") {
		for _, f := range []string{"cluster", "gpus-per-node"} {
			if c.IsSet(f) {
				return usageErrorf(c, "--%s and --layout exclude each other: the layout file gives the nodes and their GPUs", f)
			}
		}
	}
	if c.IsSet("site") && !daemonMode(c) {
		return usageErrorf(c, "--site applies with --layout or --daemon: the site's limits, fairshare and reservations are Slurm's, which only the daemon's run has")
	}
	if daemonMode(c) && c.Bool("progress") {
		return usageErrorf(c, "--progress does not apply with --daemon or --layout")
	}
	if e := c.Float64("explore"); e < 0 || e > 4 || math.IsNaN(e) {
		return usageErrorf(c, "--explore %v: want a bonus from 0 to 4 (as explore in hadar.toml)", e)
	}
	for _, f := range []string{"noise-steps", "noise-rate"} {
		if v := c.Float64(f); v < 0 || v > maxNoiseSigma || math.IsNaN(v) {
			return usageErrorf(c, "--%s %v: want a sigma from 0 to %g (0.3 is a spread of about 30%%)", f, v, maxNoiseSigma)
		}
	}
	if r := c.Duration("round"); r < time.Second {
		return usageErrorf(c, "--round %v is below the minimum 1s (as round in hadar.toml)", r)
	}
	if n := c.Int("gpus-per-node"); n < 1 {
		return usageErrorf(c, "--gpus-per-node %d: want at least 1", n)
	}
	if n := c.Int("max-copies"); n < 0 {
		return usageErrorf(c, "--max-copies %d: want 0 (no limit) or more", n)
	}
	return nil
}

// maxNoiseSigma bounds --noise-steps and --noise-rate: a lognormal sigma of
// 3 already spreads a value over a factor of 20 either way at one sigma.
const maxNoiseSigma = 3.0

// jobsCell is the jobs column: the trace's jobs, or "done/all" when some
// did not complete.
func jobsCell(m sim.Metrics) string {
	if m.Completed < m.Jobs {
		return fmt.Sprintf("%d/%d", m.Completed, m.Jobs)
	}
	return strconv.Itoa(m.Jobs)
}

func printSimulateTable(w io.Writer, out simulateOutput) {
	var cl []string
	for _, t := range slices.Sorted(maps.Keys(out.Cluster)) {
		cl = append(cl, fmt.Sprintf("%s=%d", t, out.Cluster[t]))
	}
	layout := ""
	if out.Layout != "" {
		layout = ", layout " + out.Layout + " (hadar-slurmd's round)"
	}
	fmt.Fprintf(w, "trace %s, cluster %s%s, round %.0fs\n", out.Trace, strings.Join(cl, ","), layout, out.RoundS)
	if len(out.PriorFilled) > 0 {
		fmt.Fprintf(w, "no rates in the matrix for %s: the prior's (docs/prior.md)\n", strings.Join(out.PriorFilled, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tmakespan h\tavg JCT h\tp50 JCT h\tp99 JCT h\tavg queue h\tFTF mean\tFTF max\tutil\ttype eff\tstops\tmoves\trounds\tsched mean ms\tsched max ms\twall s\t")
	for _, name := range out.Order {
		m := out.Policies[name]
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t\n",
			name, jobsCell(m), m.MakespanS/3600, m.AvgJCTS/3600, m.P50JCTS/3600, m.P99JCTS/3600, m.AvgQueueS/3600,
			m.FTFMean, m.FTFMax, m.Utilization, m.TypeEfficiency, m.Stops, m.Moves, m.Rounds, m.SchedTimeMeanS*1000, m.SchedTimeMaxS*1000, m.WallS)
	}
	tw.Flush()
}

// throughputsFlag is --throughputs, the same in every command that uses a
// matrix; a fresh value per command, since urfave/cli keeps state in it.
func throughputsFlag() cli.Flag {
	return &cli.StringFlag{
		Name:  "throughputs",
		Value: profiles.DefaultMatrix,
		Usage: "throughput matrix `NAME|FILE`: " + profiles.MatrixUsage,
	}
}

// loadThroughputs resolves --throughputs (see profiles.Matrix).
func loadThroughputs(name string) (optimizer.Throughputs, error) {
	return profiles.Matrix(name)
}

func loadOrGenerateTrace(spec string, thr optimizer.Throughputs) (string, []sim.TraceJob, error) {
	if spec != "" {
		jobs, err := sim.LoadTrace(spec)
		if err == nil && len(jobs) == 0 {
			err = fmt.Errorf("trace %s has no jobs", spec)
		}
		return spec, jobs, err
	}
	opts := defaultTrace
	opts.Throughputs = thr
	jobs, err := sim.Generate(opts)
	if err != nil {
		return "", nil, fmt.Errorf("generate the default trace: %w", err)
	}
	return fmt.Sprintf("generated:static,jobs=%d,multi-gpu,seed=%d", opts.Jobs, opts.Seed), jobs, nil
}

func parsePolicies(s string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		if _, err := optimizer.New(n, optimizer.Options{}); err != nil {
			return nil, fmt.Errorf("--policies: %w", err)
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--policies: no policy given (known: %s)", strings.Join(optimizer.Names(), ", "))
	}
	return names, nil
}

func printSimulateMarkdown(w io.Writer, out simulateOutput) {
	fmt.Fprintln(w, "| policy | makespan h | avg JCT h | p99 JCT h | avg queue h | FTF mean | FTF max | util | type eff | sched mean ms | stops | moves |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, name := range out.Order {
		m := out.Policies[name]
		if m.Completed < m.Jobs {
			name += fmt.Sprintf(" (%s jobs done)", jobsCell(m))
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.2f | %d | %d |\n",
			name, m.MakespanS/3600, m.AvgJCTS/3600, m.P99JCTS/3600, m.AvgQueueS/3600, m.FTFMean, m.FTFMax, m.Utilization, m.TypeEfficiency, m.SchedTimeMeanS*1000, m.Stops, m.Moves)
	}
}

// fillPrior is sim.PriorFunc with profiles' prior: one fit on what is
// known, then every job type's row on the GPU types (the median model for a
// job type the matrix does not know). The prior's values are rounded to 12
// significant digits: FitPrior's sums run in map order, so their last bits
// differ from run to run, and the simulator must give the same plan for the
// same input.
func fillPrior(known optimizer.Throughputs, jobTypes, gpuTypes []string) optimizer.Throughputs {
	p := profiles.FitPrior(known)
	out := optimizer.Throughputs{}
	for jt, byType := range known {
		for gt, byW := range byType {
			for w, r := range byW {
				out.Set(jt, gt, w, r)
			}
		}
	}
	for _, jt := range jobTypes {
		for gt, byW := range p.Model(jt, gpuTypes) {
			for w, r := range byW {
				if _, ok := known[jt][gt][w]; !ok {
					out.Set(jt, gt, w, roundSignificant(r, 12))
				}
			}
		}
	}
	return out
}

// printTypeUtilization prints each policy's utilization per GPU type.
func printTypeUtilization(w io.Writer, out simulateOutput) {
	types := slices.Sorted(maps.Keys(out.Cluster))
	fmt.Fprintln(w, "\nutilization per GPU type")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\t%s\t\n", strings.Join(types, "\t"))
	for _, name := range out.Order {
		m := out.Policies[name]
		row := []string{name}
		for _, t := range types {
			row = append(row, fmt.Sprintf("%.3f", m.TypeUtilization[t]))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	tw.Flush()
}

// printLearning prints, with --truth, the planning matrix's error against
// the truth as jobs complete.
func printLearning(w io.Writer, out simulateOutput) {
	if out.Truth == "" {
		return
	}
	types := slices.Sorted(maps.Keys(out.Cluster))
	fmt.Fprintf(w, "\nplanning matrix vs truth %s: median |plan - truth| / truth of the cells on the cluster's types\n", out.Truth)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tjobs done\tcells\tlearned\tmedian\tp90\t%s\t\n", strings.Join(types, "\t"))
	for _, name := range out.Order {
		for i, p := range out.Policies[name].Learning {
			row := []string{name, fmt.Sprintf("%.0f%% (%d)", 100*sim.LearningFractions[i], p.Completed),
				strconv.Itoa(p.Cells), strconv.Itoa(p.Learned), pct(p.MedianError), pct(p.P90Error)}
			for _, t := range types {
				e, ok := p.TypeMedianError[t]
				if !ok {
					row = append(row, "-")
					continue
				}
				row = append(row, pct(e))
			}
			fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
		}
	}
	tw.Flush()
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// forgetTypes returns thr without the cells of the given GPU types.
func forgetTypes(thr optimizer.Throughputs, types []string) optimizer.Throughputs {
	drop := map[string]bool{}
	for _, t := range types {
		drop[strings.TrimSpace(t)] = true
	}
	out := optimizer.Throughputs{}
	for jt, byType := range thr {
		for gt, byW := range byType {
			if drop[gt] {
				continue
			}
			for w, r := range byW {
				out.Set(jt, gt, w, r)
			}
		}
	}
	return out
}

// roundSignificant rounds x to digits significant digits.
func roundSignificant(x float64, digits int) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	v, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', digits, 64), 64)
	if err != nil {
		return x
	}
	return v
}
