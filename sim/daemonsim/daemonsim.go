// Package daemonsim runs a trace through hadar-slurmd's own loop
// (bridge.Bridge.Run: observe, plan, check, derive, execute) against an
// in-memory Slurm (slurm/slurmsim) of a test-cluster layout, in virtual
// time, and through Slurm's own scheduling alone (every job untagged, an
// untyped gpu:N request), and measures both as `hadar simulate` measures
// its fast path (sim.Result, sim.Summarize). It is `hadar simulate
// --daemon`.
//
// Each trace job is a training job of slurmsim (toyjob's pace: it reports
// its progress in the spool, which is how the daemon learns its rate): in
// the daemon's run it is tagged `hadar model="JOB TYPE" steps=N` and asks
// for untyped GPUs on one node (--gres=gpu:W), or for a gang wider than a
// node, on W/P nodes of P GPUs, P the most GPUs of any node of the layout.
package daemonsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

var _ bridge.Cluster = (*slurmsim.Cluster)(nil)
var _ bridge.Clock = (*slurmsim.Cluster)(nil)

// SlurmOnly is the name of the Slurm-alone run in results.
const SlurmOnly = "slurm-only"

// Options configure a run.
type Options struct {
	// Layout is the cluster.
	Layout slurmsim.Layout
	// Config is the daemon's configuration (config.Default for
	// none). Its data_dir and spool_dir are replaced by a temporary
	// directory, removed after the run; dry_run and metrics are off.
	Config config.Config
	// Planning is the matrix the daemon's throughput database is seeded
	// with (the config's throughputs key when nil); Truth is what jobs
	// really run at (Planning when nil).
	Planning, Truth optimizer.Throughputs
	// Timing is Slurm's and the jobs' (slurmsim.Measured when zero).
	Timing slurmsim.Timing
	// Startup, if set, is each job's start-up by its model (without
	// Slurm's pass), in place of Timing.StartupDelay.
	Startup *sim.StartCosts
	// Untagged are jobs submitted UntaggedAt after the start of the
	// daemon's run (after the trace's jobs of that time), beside the trace:
	// other users' work. They are not in the metrics.
	Untagged   []slurmsim.JobSpec
	UntaggedAt time.Duration
	// DaemonStart is when the daemon's loop starts, after the start of the
	// trace (0: at once; the demo's daemon comes up a few hundred
	// milliseconds into its burst of submissions).
	DaemonStart time.Duration
	// Horizon bounds the virtual time of a run: jobs not done by then
	// count as not completed. Zero: the trace's own bound (SerialBound),
	// so that a run stops only where every job could have run one after
	// another on the slowest GPUs, twice over.
	Horizon time.Duration
	// Logger receives the daemon's log (default: discarded).
	Logger *slog.Logger
	// Site is the site's policy both runs' Slurm enforces (nil: none):
	// accounting limits, fairshare, reservations, a default time limit.
	// Trace jobs run as their user, account and QOS (sim.TraceJob; user
	// "sim" when the trace has none), which the site must know (CheckTrace).
	Site *slurmsim.Site
}

// traceUser is the user of a trace job without one (sim0..sim2, in turn,
// on a site without accounts).
const traceUser = "sim"

// CheckTrace says which trace job the site refuses (sbatch would): its
// user has no association, or may not use its QOS, or its account is not
// the user's. Without accounts in the site every job runs.
func CheckTrace(site *slurmsim.Site, trace []sim.TraceJob) error {
	if site == nil || !site.Accounting() {
		return nil
	}
	for i, tj := range trace {
		user := tj.User
		if user == "" {
			user = traceUser
		}
		account, _, err := site.Scope(user, tj.QOS)
		if err != nil {
			return fmt.Errorf("trace job %d: %w", i, err)
		}
		if tj.Account != "" && tj.Account != account {
			return fmt.Errorf("trace job %d: user %s is in account %s in the site file, not %s", i, user, account, tj.Account)
		}
	}
	return nil
}

// Result is one run: its metrics' input and every job's record.
type Result struct {
	*sim.Result
	// Jobs are the trace's jobs as Slurm recorded them, in trace order.
	Jobs []slurmsim.Job
	// Types are the canonical GPU type of each trace job's last run ("" if
	// it never ran).
	Types []string
}

// setup is what both runs share.
type setup struct {
	opts     Options
	start    time.Time
	truth    optimizer.Throughputs
	capacity map[string]int // canonical GPU type -> GPUs
	canon    func(site string) string
	rate     slurmsim.RateFunc
}

func newSetup(opts Options) (*setup, error) {
	if len(opts.Layout) == 0 {
		return nil, errors.New("daemonsim: no layout")
	}
	if opts.Config.Policy == "" {
		opts.Config = config.Default()
	}
	if opts.Planning == nil {
		m, err := profiles.Matrix(opts.Config.Throughputs)
		if err != nil {
			return nil, fmt.Errorf("daemonsim: %w", err)
		}
		opts.Planning = m
	}
	if opts.Truth == nil {
		opts.Truth = opts.Planning
	}
	if opts.Timing == (slurmsim.Timing{}) {
		opts.Timing = slurmsim.Measured(2 * time.Second)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &setup{opts: opts, start: time.Now().UTC().Truncate(time.Second), truth: opts.Truth, capacity: map[string]int{}}
	known := map[string]string{}
	s.canon = func(site string) string {
		if t, ok := known[site]; ok {
			return t
		}
		t, ok := opts.Config.GRES.Aliases[site]
		if !ok {
			var err error
			if t, err = profiles.ResolveDefault(site, opts.Truth.GPUTypes()...); err != nil {
				t = site
			}
		}
		known[site] = t
		return t
	}
	for site, n := range opts.Layout.GPUs() {
		s.capacity[s.canon(site)] += n
	}
	models := jobproto.NewModelResolver(opts.Truth.JobTypes(), opts.Config.Models.Aliases)
	jobTypes := map[string]string{}
	s.rate = func(model, site string, workers int) float64 {
		jt, ok := jobTypes[model]
		if !ok {
			jt, _ = models.Resolve(model) // unknown: no rate, the job fails
			jobTypes[model] = jt
		}
		return opts.Truth.Rate(jt, s.canon(site), workers)
	}
	return s, nil
}

// SerialBound is when the trace would end if its jobs ran one after
// another, each on its slowest GPU type of capacity, after the last
// arrival; at least a day. A schedule that keeps any GPU busy ends sooner.
func SerialBound(trace []sim.TraceJob, truth optimizer.Throughputs, capacity map[string]int) time.Duration {
	end := 0.0
	for _, tj := range trace {
		end = math.Max(end, tj.Arrival)
	}
	for _, tj := range trace {
		slowest := math.Inf(1)
		for t, n := range capacity {
			if r := truth.Rate(tj.JobType, t, tj.ScaleFactor); n > 0 && r > 0 {
				slowest = math.Min(slowest, r)
			}
		}
		if !math.IsInf(slowest, 1) {
			end += tj.TotalSteps / slowest
		}
	}
	return max(time.Duration(end*float64(time.Second)), 24*time.Hour)
}

// horizon is the end of a run's virtual time (Options.Horizon).
func (s *setup) horizon(trace []sim.TraceJob) time.Time {
	if s.opts.Horizon > 0 {
		return s.start.Add(s.opts.Horizon)
	}
	return s.start.Add(2 * SerialBound(trace, s.truth, s.capacity))
}

// spec is trace job i as sbatch is given it.
func (s *setup) spec(i int, tj sim.TraceJob, tagged bool) slurmsim.JobSpec {
	nodes, gpn := sim.RequestShape(tj.ScaleFactor, s.opts.Layout.MaxGPUsPerNode())
	user := tj.User
	if user == "" {
		user = traceUser
		if s.opts.Site == nil || !s.opts.Site.Accounting() {
			// Three users, so that the daemon's learning rule (a learned
			// rate needs samples of two users) learns as on a site.
			user = fmt.Sprintf("%s%d", traceUser, i%3)
		}
	}
	sp := slurmsim.JobSpec{Name: traceName(i), User: user, Account: tj.Account, QOS: tj.QOS,
		NumNodes: nodes, GPUsPerNode: gpn, Model: tj.JobType, Steps: tj.TotalSteps}
	if tagged {
		sp.Comment = fmt.Sprintf("hadar model=\"%s\" steps=%s", tj.JobType, strconv.FormatFloat(tj.TotalSteps, 'f', -1, 64))
		// A tag may only lower a job's weight (weights above 1 are the
		// site's: hadar.toml [weights]); a heavier trace job runs at 1.
		if tj.PriorityWeight > 0 && tj.PriorityWeight < 1 {
			sp.Comment += " weight=" + strconv.FormatFloat(tj.PriorityWeight, 'f', -1, 64)
		}
	}
	return sp
}

const tracePrefix = "trace-"

func traceName(i int) string { return tracePrefix + strconv.Itoa(i) }

func (s *setup) cluster(spool string) (*slurmsim.Cluster, error) {
	cfg := slurmsim.Config{Layout: s.opts.Layout, Start: s.start, Spool: spool, Rate: s.rate, Timing: s.opts.Timing}
	// job_submit.lua's lease is the daemon's, as an admin sets them.
	cfg.Lease = s.opts.Config.Lease.Duration
	if s.opts.Startup != nil {
		cfg.Startup = s.opts.Startup.For
	}
	if s.opts.Site != nil {
		if err := s.opts.Site.Apply(&cfg); err != nil {
			return nil, fmt.Errorf("daemonsim: %w", err)
		}
	}
	return slurmsim.New(cfg), nil
}

func (s *setup) submit(c *slurmsim.Cluster, trace []sim.TraceJob, tagged bool) {
	for i, tj := range trace {
		c.SubmitAt(s.start.Add(time.Duration(tj.Arrival*float64(time.Second))), s.spec(i, tj, tagged))
	}
}

// Daemon runs the trace through hadar-slurmd's loop with opts.Config.
func Daemon(ctx context.Context, opts Options, trace []sim.TraceJob) (*Result, error) {
	s, err := newSetup(opts)
	if err != nil {
		return nil, err
	}
	wall := time.Now()
	dir, err := os.MkdirTemp(scratchDir(), "hadar-simulate-")
	if err != nil {
		return nil, fmt.Errorf("daemonsim: %w", err)
	}
	defer os.RemoveAll(dir)
	cfg := s.opts.Config
	cfg.DataDir, cfg.SpoolDir = filepath.Join(dir, "data"), filepath.Join(dir, "spool")
	cfg.DryRun, cfg.Metrics.Listen = false, ""
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("daemonsim: %w", err)
	}
	store, err := profiles.Open(ctx, filepath.Join(cfg.DataDir, profiles.DBFile), profiles.WithSeedMatrix(s.opts.Planning))
	if err != nil {
		return nil, fmt.Errorf("daemonsim: throughput database: %w", err)
	}
	defer store.Close()

	if err := CheckTrace(s.opts.Site, trace); err != nil {
		return nil, fmt.Errorf("daemonsim: %w", err)
	}
	c, err := s.cluster(cfg.SpoolDir)
	if err != nil {
		return nil, err
	}
	s.submit(c, trace, true)
	for _, u := range s.opts.Untagged {
		c.SubmitAt(s.start.Add(s.opts.UntaggedAt), u)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	clock := &stopClock{Cluster: c, cancel: cancel, until: s.horizon(trace)}
	uid := os.Getuid()
	logger := slog.New(virtualTime{Handler: s.opts.Logger.Handler(), now: c.Now})
	b, err := bridge.New(cfg, bridge.Deps{Cluster: c, Store: store, Clock: clock, Logger: logger,
		LookupUID: func(string) (int, error) { return uid, nil }})
	if err != nil {
		return nil, fmt.Errorf("daemonsim: %w", err)
	}
	defer b.Close()
	var rounds int
	var sched []time.Duration
	b.OnCycle = func(rep bridge.RoundReport, err error) {
		rounds++
		sched = append(sched, time.Since(clock.real)) // the clock stands still in a round
	}
	c.AdvanceTo(s.start.Add(s.opts.DaemonStart))
	clock.real = time.Now()
	if err := b.Run(runCtx); err != nil {
		return nil, fmt.Errorf("daemonsim: %w", err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := s.result(cfg.Policy, c, len(trace), trace)
	res.Rounds, res.SchedTimes, res.Wall = rounds, sched, time.Since(wall)
	return res, nil
}

// scratchDir is where a run keeps the daemon's data and spool directories:
// a memory file system when the machine has one (/dev/shm), so that the
// daemon's SQLite databases and the jobs' progress files, written as live,
// cost no disk; the system's temporary directory otherwise.
func scratchDir() string {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp(shm, ".hadar-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return shm
		}
	}
	return ""
}

// SlurmAlone runs the trace through Slurm's own scheduling alone: every job
// untagged, asking for untyped GPUs.
func SlurmAlone(ctx context.Context, opts Options, trace []sim.TraceJob) (*Result, error) {
	s, err := newSetup(opts)
	if err != nil {
		return nil, err
	}
	wall := time.Now()
	if err := CheckTrace(s.opts.Site, trace); err != nil {
		return nil, fmt.Errorf("daemonsim: %w", err)
	}
	c, err := s.cluster("")
	if err != nil {
		return nil, err
	}
	s.submit(c, trace, false)
	until := s.horizon(trace)
	for c.Step() {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if c.Now().After(until) {
			break
		}
	}
	res := s.result(SlurmOnly, c, len(trace), trace)
	res.Wall = time.Since(wall)
	return res, nil
}

// stopClock is the cluster's clock that ends the daemon's loop once every
// job is done (or the horizon is reached).
type stopClock struct {
	*slurmsim.Cluster
	cancel func()
	until  time.Time
	// real is the wall time at which the loop last resumed.
	real time.Time
}

func (k *stopClock) After(d time.Duration) <-chan time.Time {
	ch := k.Cluster.After(d)
	if !k.Busy() || k.Now().After(k.until) {
		k.cancel()
	}
	k.real = time.Now()
	return ch
}

// virtualTime stamps log records with the cluster's time.
type virtualTime struct {
	slog.Handler
	now func() time.Time
}

func (v virtualTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = v.now()
	return v.Handler.Handle(ctx, r)
}

func (v virtualTime) WithAttrs(as []slog.Attr) slog.Handler {
	return virtualTime{Handler: v.Handler.WithAttrs(as), now: v.now}
}

func (v virtualTime) WithGroup(name string) slog.Handler {
	return virtualTime{Handler: v.Handler.WithGroup(name), now: v.now}
}

// result measures a run from the cluster's records.
func (s *setup) result(policy string, c *slurmsim.Cluster, n int, trace []sim.TraceJob) *Result {
	res := &Result{Result: &sim.Result{Policy: policy, Capacity: s.capacity, BusyByType: map[string]float64{}},
		Jobs: make([]slurmsim.Job, n), Types: make([]string, n)}
	for _, g := range s.capacity {
		res.TotalGPUs += g
	}
	secs := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return t.Sub(s.start).Seconds()
	}
	byType := make([]map[string]float64, n) // each trace job's GPU seconds per type
	for _, j := range c.Records() {
		i, err := strconv.Atoi(strings.TrimPrefix(j.Spec.Name, tracePrefix))
		if !strings.HasPrefix(j.Spec.Name, tracePrefix) || err != nil || i < 0 || i >= n {
			continue // not a trace job
		}
		res.Jobs[i] = j
		byType[i] = map[string]float64{}
		for _, r := range j.Runs {
			end := r.End
			if end.IsZero() {
				end = c.Now()
			}
			for site, g := range r.GPUs {
				busy := float64(g) * end.Sub(r.Start).Seconds()
				res.BusyGPUSecs += busy
				res.BusyByType[s.canon(site)] += busy
				byType[i][s.canon(site)] += busy
			}
		}
		if len(j.Runs) > 0 {
			res.Types[i] = s.canon(j.Runs[len(j.Runs)-1].Type)
		}
	}
	// Finish-time fairness: n is the jobs in the system at each arrival.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return trace[order[a]].Arrival < trace[order[b]].Arrival })
	for _, i := range order {
		tj, j := trace[i], res.Jobs[i]
		done := j.State == slurmsim.Completed
		jr := sim.JobResult{ID: strconv.Itoa(i), Type: tj.JobType, Workers: tj.ScaleFactor, Arrival: tj.Arrival,
			FirstStart: secs(j.FirstStart), Completion: -1, GPUSecsByType: byType[i]}
		if done {
			jr.Completion = secs(j.End)
		}
		jr.Stops, jr.Moves = requeues(j)
		inSystem := 0
		for _, k := range order {
			if trace[k].Arrival <= tj.Arrival && (res.Jobs[k].State != slurmsim.Completed || secs(res.Jobs[k].End) > tj.Arrival) {
				inSystem++
			}
		}
		jr.IsolatedJCT = sim.IsolatedJCT(s.truth, tj.JobType, tj.ScaleFactor, tj.TotalSteps, s.capacity, inSystem)
		if best := s.truth.BestRate(tj.JobType, tj.ScaleFactor, s.capacity); best > 0 && done {
			res.IdealGPUSecs += float64(tj.ScaleFactor) * tj.TotalSteps / best
		}
		res.Result.Jobs = append(res.Result.Jobs, jr)
	}
	sort.SliceStable(res.Result.Jobs, func(a, b int) bool {
		x, _ := strconv.Atoi(res.Result.Jobs[a].ID)
		y, _ := strconv.Atoi(res.Result.Jobs[b].ID)
		return x < y
	})
	return res
}

// FastPathRules are the rules a fast-path run (sim.Run) follows of
// hadar-slurmd's round with cfg, all but Slurm itself (and it sets the
// policy's migration penalty in opts): each job planned in
// the shape its sbatch asks for on the layout's nodes, running jobs stopped
// only with cfg.Preemption and moved for more than cfg.MigrationPenalty
// (opts, the policy's), rounds started early by completions and arrivals
// (the daemon sees them at its next poll: half a poll interval later on
// average; Gavel-style policies keep their round's choices then), and
// every start costing Slurm's scheduling pass of t and the job's start-up
// by its model (startup). docs/fidelity.md has how close it comes to the
// daemon path.
func FastPathRules(cfg config.Config, t slurmsim.Timing, startup sim.StartCosts, opts *optimizer.Options) sim.Rules {
	opts.MigrationPenalty = cfg.MigrationPenalty.Duration
	opts.SiteOrder = cfg.Order == config.OrderSite
	return sim.Rules{Shaped: true, NoStop: !cfg.Preemption,
		Events:    &sim.Events{Delay: cfg.PollInterval.Duration / 2},
		StartCost: startup.Plus(t.SchedDelay)}
}

// requeues splits a job's Slurm requeues (every run but its last ended by
// one) as the simulator's stops and moves: a move when its next run is on
// other nodes, a stop otherwise.
func requeues(j slurmsim.Job) (stops, moves int) {
	for k := 0; k < j.Restarts && k < len(j.Runs); k++ {
		if k+1 < len(j.Runs) && !slices.Equal(j.Runs[k].Nodes, j.Runs[k+1].Nodes) {
			moves++
		} else {
			stops++
		}
	}
	return stops, moves
}
