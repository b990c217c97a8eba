package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/sim/daemonsim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// simulateDaemonHelp is the part of simulate's description about --daemon.
const simulateDaemonHelp = "--layout FILE (or --daemon with --cluster) runs hadar-slurmd's own loop instead: the trace's\n" +
	"jobs are submitted, tagged, to an in-memory Slurm of the test-cluster layout FILE\n" +
	"(contrib/testcluster/layouts; --daemon --cluster v100=N,... generates one of\n" +
	"--gpus-per-node-GPU nodes) with Slurm 22.05's measured behaviour (the lease and its start,\n" +
	"NodeList pinning, requeuehold and its 120 s begin time, launch latency, FIFO plus\n" +
	"backfill), the daemon's rounds (config --config, defaults as hadar-slurmd's; the\n" +
	"policy is its policy unless --policies is given) place them, and they run as\n" +
	"contrib/examples/toyjob runs, reporting progress every --tick, at --truth's rates\n" +
	"(default --throughputs, default the config's throughputs). A slurm-only row runs the\n" +
	"same trace through Slurm alone (untagged, untyped gpu:N). Time is virtual: a day of\n" +
	"rounds takes seconds. --untagged N:DURATION[@AT] adds N one-GPU jobs of other users\n" +
	"to the daemon's run (docs/fidelity.md, \"The daemon's round\"). --site FILE gives both runs'\n" +
	"Slurm the site's policy: accounts with shares (fairshare), users with their account\n" +
	"and QOS, QOS and association GPU and job limits, reservations, a default time limit;\n" +
	"the trace's jobs run as their user, account and QOS (docs/fidelity.md, \"The site\")."

// simulateDaemonFlags are the flags of simulate's daemon mode.
func simulateDaemonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "layout", Usage: "run hadar-slurmd's round on an in-memory Slurm of this test-cluster layout `FILE` (implies --daemon)"},
		&cli.BoolFlag{Name: "daemon", Usage: "run hadar-slurmd's round on an in-memory Slurm (with --cluster: a generated layout of --gpus-per-node-GPU nodes), plus a slurm-only run"},
		&cli.StringFlag{Name: "config", Usage: "the daemon's config `FILE` (hadar.toml): the policies' knobs ([policies.*]); with --daemon all of it (default: hadar-slurmd's defaults)"},
		&cli.StringFlag{Name: "startup", Value: sim.PublishedStartup, Usage: "with --daemon-rules or --daemon: what a job loses each time it starts or starts again, before it trains (its framework's start-up, loading its checkpoint, the steps since that checkpoint), on top of Slurm's scheduling pass. `SPEC` is a duration for every job (1s: the toy job's, measured on the test cluster) or MODEL=DURATION,...,*=DURATION, where a MODEL matches the job types it begins (letters and digits, any case: resnet50 matches \"ResNet-50 (batch size 64)\"; the longest such MODEL counts) and * every other; the default is the restart times of Sia's published simulator (docs/fidelity.md)"},
		&cli.DurationFlag{Name: "tick", Value: 2 * time.Second, Usage: "with --daemon: the jobs' progress report interval (toyjob's TOYJOB_TICK)"},
		&cli.DurationFlag{Name: "daemon-start", Usage: "with --daemon: start the daemon's loop this long after the trace's start (a daemon that comes up while jobs are being submitted)"},
		&cli.StringFlag{Name: "log", Usage: "with --daemon: write hadar-slurmd's log (its decisions, round by round, in virtual time) to `FILE`"},
		&cli.StringFlag{Name: "site", Usage: "with --daemon: the site's policy `FILE` (TOML: accounts, users, qos, priority, reservations, default_time; docs/fidelity.md)"},
		&cli.StringFlag{Name: "untagged", Usage: "with --daemon: `N:DURATION[@AT]`, N untagged one-GPU jobs of DURATION submitted AT (default 0s) into the daemon's run"},
	}
}

// daemonMode reports whether simulate runs the daemon's round.
func daemonMode(c *cli.Context) bool { return c.IsSet("layout") || c.Bool("daemon") }

// runSimulateDaemon is `hadar simulate --layout/--daemon`.
func runSimulateDaemon(c *cli.Context) error {
	for _, f := range []string{"explore", "no-learning", "copy-efficiency", "max-copies", "seed", "noise-steps", "noise-rate"} {
		if c.IsSet(f) {
			return fmt.Errorf("--%s does not apply with --daemon (the daemon's config has the policy's knobs)", f)
		}
	}
	cfg := config.Default()
	if p := c.String("config"); p != "" {
		var err error
		if cfg, err = config.Load(p); err != nil {
			return err
		}
	}
	if c.IsSet("round") {
		cfg.Round = config.Duration{Duration: c.Duration("round")}
		if cfg.MinRoundGap.Duration > cfg.Round.Duration {
			cfg.MinRoundGap = cfg.Round
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("--round: %w", err)
		}
	}
	matrix := cfg.Throughputs
	if c.IsSet("throughputs") {
		matrix = c.String("throughputs")
	}
	planning, err := loadThroughputs(matrix)
	if err != nil {
		return err
	}
	var layout slurmsim.Layout
	if p := c.String("layout"); p != "" {
		if layout, err = slurmsim.ReadLayout(p); err != nil {
			return err
		}
	} else {
		gpus, err := parseCluster(c.String("cluster"), planning.GPUTypes())
		if err != nil {
			return err
		}
		layout = slurmsim.GenerateLayout(gpus, c.Int("gpus-per-node"))
	}
	if f := c.String("forget"); f != "" {
		planning = forgetTypes(planning, strings.Split(f, ","))
	}
	truth := planning
	truthName := matrix
	if c.IsSet("truth") {
		if truth, err = loadThroughputs(c.String("truth")); err != nil {
			return fmt.Errorf("--truth: %w", err)
		}
		truthName = c.String("truth")
	}
	layoutTypes, err := layoutGPUTypes(layout, cfg, truth, truthName)
	if err != nil {
		return err
	}
	if c.Bool("prior") {
		truth = profiles.WithPrior(truth, append(truth.GPUTypes(), slices.Collect(maps.Keys(layoutTypes))...))
	}
	// Jobs the daemon places on a type the truth has no rate for would
	// never progress: they run at the prior's rates, as the daemon plans.
	priorFilled := unratedTypes(truth, layoutTypes)
	truth = fillUnratedTypes(truth, priorFilled)
	notePriorFilled(c, truthName, priorFilled)
	if c.Duration("daemon-start") < 0 {
		return fmt.Errorf("--daemon-start must not be negative, got %s", c.Duration("daemon-start"))
	}
	startup, err := startCosts(c)
	if err != nil {
		return err
	}
	if c.Duration("tick") <= 0 {
		return fmt.Errorf("--tick must be positive, got %s", c.Duration("tick"))
	}
	untagged, err := parseUntagged(c.String("untagged"))
	if err != nil {
		return err
	}
	traceName, trace, err := loadOrGenerateTrace(c.String("trace"), truth)
	if err != nil {
		return err
	}
	var site *slurmsim.Site
	if p := c.String("site"); p != "" {
		if site, err = slurmsim.ReadSite(p); err != nil {
			return err
		}
		if err := daemonsim.CheckTrace(site, trace); err != nil {
			return fmt.Errorf("--site %s: %w", p, err)
		}
	}
	names := []string{cfg.Policy}
	if c.IsSet("policies") {
		if names, err = parsePolicies(c.String("policies")); err != nil {
			return err
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if p := c.String("log"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("--log: %w", err)
		}
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	timing := slurmsim.Measured(c.Duration("tick"))
	opts := daemonsim.Options{Layout: layout, Config: cfg, Planning: planning, Truth: truth,
		Timing: timing, Startup: &startup, Untagged: untagged.jobs, UntaggedAt: untagged.at,
		DaemonStart: c.Duration("daemon-start"), Logger: logger, Site: site}
	// The daemon reads a trace job's type as the model= of its tag, as a
	// user writes it ("resnet18-bs64"): check the job type it resolves to.
	models := jobproto.NewModelResolver(truth.JobTypes(), cfg.Models.Aliases)
	resolved := slices.Clone(trace)
	for i := range resolved {
		if jt, err := models.Resolve(resolved[i].JobType); err == nil {
			resolved[i].JobType = jt
		}
	}
	if err := checkClusterRuns(truth, truthName, layoutTypes, resolved); err != nil {
		return err
	}
	out := simulateOutput{Trace: traceName, Truth: c.String("truth"), Cluster: map[string]int{}, RoundS: cfg.Round.Duration.Seconds(), PriorFilled: priorFilled,
		Policies: map[string]sim.Metrics{}, Layout: c.String("layout"), GPUTypes: map[string][]string{}}
	if out.Layout == "" {
		out.Layout = "generated"
	}
	results := map[string]*sim.Result{}
	for _, name := range names {
		opts.Config.Policy = name
		if _, err := optimizer.New(name, cfg.PolicyOptions()); err != nil {
			return err
		}
		res, err := daemonsim.Daemon(c.Context, opts, trace)
		if err != nil {
			return err
		}
		results[name], out.Policies[name], out.GPUTypes[name] = res.Result, sim.Summarize(res.Result), res.Types
		out.Cluster = res.Capacity
	}
	res, err := daemonsim.SlurmAlone(c.Context, opts, trace)
	if err != nil {
		return err
	}
	results[daemonsim.SlurmOnly], out.Policies[daemonsim.SlurmOnly] = res.Result, sim.Summarize(res.Result)
	out.GPUTypes[daemonsim.SlurmOnly] = res.Types
	out.Order = append(names, daemonsim.SlurmOnly)
	if dir := c.String("plot"); dir != "" {
		if err := writePlots(dir, out.Order, results, out.Policies); err != nil {
			return err
		}
	}
	if path := c.String("jobs-csv"); path != "" {
		if err := writeJobsCSV(path, out.Order, results); err != nil {
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
		fmt.Fprintf(c.App.Writer, "\nmakespan s: %s\n", makespans(out))
	}
	return checkComplete(c, out)
}

// layoutGPUTypes is the layout's GPUs by canonical type, each site name
// resolved as the simulated daemon resolves it (the config's [gres]
// aliases, then profiles.ResolveDefault): a name that resolves to no type
// of the matrix or the catalogue is an error, as is a layout with no GPUs.
func layoutGPUTypes(layout slurmsim.Layout, cfg config.Config, truth optimizer.Throughputs, matrix string) (map[string]int, error) {
	out := map[string]int{}
	total := 0
	for site, n := range layout.GPUs() {
		if n == 0 {
			continue
		}
		gt, ok := cfg.GRES.Aliases[site]
		if !ok {
			var err error
			if gt, err = profiles.ResolveDefault(site, truth.GPUTypes()...); err != nil {
				return nil, fmt.Errorf("layout: GPU type %q is neither in the matrix %s nor in the catalogue (hadar profiles gpus): %w", site, matrix, err)
			}
		}
		out[gt] += n
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("layout: no node has a GPU; hadar schedules GPU jobs only")
	}
	return out, nil
}

// makespans is "hadar=X slurm-only=Y".
func makespans(out simulateOutput) string {
	var parts []string
	for _, name := range out.Order {
		parts = append(parts, fmt.Sprintf("%s=%.1f", name, out.Policies[name].MakespanS))
	}
	return strings.Join(parts, " ")
}

type untaggedJobs struct {
	jobs []slurmsim.JobSpec
	at   time.Duration
}

// parseUntagged reads --untagged N:DURATION[@AT].
func parseUntagged(s string) (untaggedJobs, error) {
	var u untaggedJobs
	if s == "" {
		return u, nil
	}
	bad := fmt.Errorf("--untagged: %q is not N:DURATION[@AT] (e.g. 2:15s or 2:15s@1s)", s)
	count, rest, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 0 {
		return u, bad
	}
	dur, at, hasAt := strings.Cut(rest, "@")
	d, err := time.ParseDuration(dur)
	if err != nil || d <= 0 {
		return u, bad
	}
	if hasAt {
		if u.at, err = time.ParseDuration(at); err != nil || u.at < 0 {
			return u, bad
		}
	}
	for i := range n {
		u.jobs = append(u.jobs, slurmsim.JobSpec{Name: fmt.Sprintf("untagged-%d", i), User: "other", GPUsPerNode: 1, Duration: d})
	}
	return u, nil
}

// startCosts reads --startup, and rejects one given where no start costs
// anything (Gavel's model, without --daemon-rules or --daemon).
func startCosts(c *cli.Context) (sim.StartCosts, error) {
	sc, err := sim.ParseStartCosts(c.String("startup"))
	if err != nil {
		return sim.StartCosts{}, fmt.Errorf("--startup: %w", err)
	}
	if c.IsSet("startup") && !daemonMode(c) && !c.Bool("daemon-rules") {
		return sim.StartCosts{}, fmt.Errorf("--startup applies with --daemon-rules or --daemon: without them starts cost nothing, as in Gavel's simulator")
	}
	return sc, nil
}
