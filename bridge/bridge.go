package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// Deps are the bridge's connections to the outside world.
type Deps struct {
	// Cluster is Slurm (NewSlurmCluster) or a fake.
	Cluster Cluster
	// Store is the throughput database (*profiles.Store).
	Store Profiles
	// Clock defaults to SystemClock.
	Clock Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// LookupUID maps a user name to its uid (for progress file ownership);
	// defaults to os/user.Lookup.
	LookupUID func(name string) (int, error)
	// Metrics, if set, is updated every round (see NewMetrics).
	Metrics *Metrics
}

// RoundReport is what one round observed, decided and did.
type RoundReport struct {
	Number  int64
	Started time.Time
	// Observe, Solve and Enforce are the durations of the round's phases.
	Observe, Solve, Enforce time.Duration
	DryRun                  bool
	Policy                  string
	// Jobs is the number of jobs in the queue; Tagged of them tagged.
	Jobs, Tagged int
	View         *View
	Snapshot     *optimizer.Snapshot
	// Measured is the matrix before the prior filled it (what was
	// imported, measured or learned); Snapshot.Throughput is the filled one.
	Measured  optimizer.Throughputs
	Decisions []Decision
	Actions   []Action
	// Results has one entry per action (none in a dry run).
	Results []ActionResult
	// PlanError is set when the policy failed or its plan broke an
	// invariant; the round then only passed jobs through and re-held.
	PlanError error
	// HeldBack is set when the round ignored the plan so that an overdue
	// pass-through job could go first (Derivation.HeldBack).
	HeldBack bool
	// MidRound is set for a round Run started early, within the last full
	// round (optimizer.Snapshot.MidRound).
	MidRound bool
}

// Failed counts the actions that did not fully succeed.
func (r RoundReport) Failed() int {
	n := 0
	for _, res := range r.Results {
		if !res.OK() {
			n++
		}
	}
	return n
}

// Count returns the number of decisions of kind k.
func (r RoundReport) Count(k DecisionKind) int {
	n := 0
	for _, d := range r.Decisions {
		if d.Kind == k {
			n++
		}
	}
	return n
}

// PassedThrough counts the pass-through jobs the round released: those
// it decided to pass through, less those whose release did not run (an
// await-start saw jobs hadar released still pending). In a dry run, the
// decisions.
func (r RoundReport) PassedThrough() int {
	if r.DryRun {
		return r.Count(DecidePassThrough)
	}
	// Handed over: its lease ended (StartTime=now) or hadar's hold released.
	released := map[string]bool{}
	for _, res := range r.Results {
		switch res.Action.Kind {
		case ActRelease, ActStartNow:
			if res.Err == nil {
				for _, id := range res.Sent {
					released[id] = true
				}
			}
		}
	}
	n := 0
	for _, d := range r.Decisions {
		if d.Kind == DecidePassThrough && released[d.JobID] {
			n++
		}
	}
	return n
}

// Bridge runs hadar's rounds against Slurm.
type Bridge struct {
	deps  Deps
	log   *slog.Logger
	state *statedb.DB

	mu     sync.Mutex // guards cfg and policy
	cfg    config.Config
	policy optimizer.Policy

	cycleMu sync.Mutex // one round at a time
	round   int64
	uids    map[string]int
	// distrusted remembers report files already warned about.
	distrusted map[string]time.Time
	// sampleBases are the starts of the jobs' next throughput samples
	// (advanceProgress).
	sampleBases map[string]sampleBase
	lastSeen    map[string]string // tagged jobs in the queue at the last look -> state
	// lastQueue is the queue of the last poll, nil once a round has acted
	// since: what fail-open releases first, without another squeue.
	lastQueue []slurm.Job
	nodesSeen map[string]string // nodes at the last look -> raw state
	// limits are the site's accounting limits as last read (nil: none),
	// at limitsRead; limitsErr the last failure to read them, logged once.
	limits     *slurm.Limits
	limitsRead time.Time
	limitsErr  string
	// leased are the jobs the last round left waiting for hadar (waiting
	// and not placed, held by their owner, waiting for a dependency):
	// the polls between rounds renew their leases.
	leased    map[string]bool
	tick      atomic.Int64 // unix ns of Run's last loop turn (Alive)
	started   time.Time
	ranOn     map[string][]string // tagged jobs -> nodes they were last seen running on
	staleGres map[string]int      // nodes whose GresUsed counts GPUs no job holds -> count warned about
	// slurmVersion is the Slurm release, once read (version.go).
	slurmVersion *slurm.Version

	// backoff of the loop when slurmctld is unreachable.
	backoffBase, backoffMax time.Duration
	// awaitInterval and awaitTries bound the Executor's await-start (zero:
	// its defaults); tests shorten them.
	awaitInterval time.Duration
	awaitTries    int
	// OnCycle, if set, is called after every round of Run (a test hook).
	OnCycle func(RoundReport, error)
}

// New validates cfg, opens the state database (DataDir/state.db; a
// corrupt one is moved aside and replaced, see statedb.Open) and returns a
// Bridge ready to Run.
func New(cfg config.Config, deps Deps) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Cluster == nil || deps.Store == nil {
		return nil, errors.New("bridge: Deps.Cluster and Deps.Store are required")
	}
	if deps.Clock == nil {
		deps.Clock = SystemClock{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.LookupUID == nil {
		deps.LookupUID = lookupUID
	}
	b := &Bridge{deps: deps, log: deps.Logger.With("component", "bridge"), cfg: cfg,
		uids: map[string]int{}, distrusted: map[string]time.Time{}, sampleBases: map[string]sampleBase{}, backoffBase: time.Second, backoffMax: 2 * time.Minute}
	pol, err := newPolicy(cfg)
	if err != nil {
		return nil, err
	}
	b.policy = pol
	ctx := context.Background()
	st, recovered, err := statedb.Open(ctx, filepath.Join(cfg.DataDir, statedb.File), deps.Clock.Now())
	if err != nil {
		return nil, err
	}
	if recovered != "" {
		b.log.Error("STATE DATABASE WAS CORRUPT: moved it aside and started a new one; round history and progress estimates are lost, jobs are not (they are rebuilt from Slurm)",
			"moved_to", recovered)
	}
	b.state = st
	b.started = deps.Clock.Now()
	if b.round, err = st.LastRound(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("state database: %w", err)
	}
	b.loadPolicyState(ctx, cfg.Policy, b.policy)
	return b, nil
}

func newPolicy(cfg config.Config) (optimizer.Policy, error) {
	return optimizer.New(cfg.Policy, cfg.PolicyOptions())
}

func lookupUID(name string) (int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Uid)
}

// Close closes the state database.
func (b *Bridge) Close() error { return b.state.Close() }

// confirmedRates is implemented by a throughput store that knows which
// cells this cluster confirmed (*profiles.Store).
type confirmedRates interface {
	Confirmed(ctx context.Context) (optimizer.Throughputs, error)
}

// confirmed returns the cells exploration leaves alone: those the store
// says this cluster confirmed, or, from a store that cannot say or fails
// to, every stored cell (only the prior's are then explored).
func (b *Bridge) confirmed(ctx context.Context, log *slog.Logger, stored optimizer.Throughputs) optimizer.Throughputs {
	cr, ok := b.deps.Store.(confirmedRates)
	if !ok {
		return stored
	}
	c, err := cr.Confirmed(ctx)
	if err != nil {
		log.Warn("could not read which rates this cluster confirmed; exploring only the prior's cells this round", "err", err)
		return stored
	}
	return c
}

// loadPolicyState restores the policy's bookkeeping from the state
// database (a fresh policy if there is none or it does not load).
func (b *Bridge) loadPolicyState(ctx context.Context, name string, pol optimizer.Policy) {
	saved, err := b.state.PolicyState(ctx, name)
	if err == nil {
		err = optimizer.LoadState(pol, saved)
	}
	if err != nil {
		b.log.Warn("policy state not restored; the policy starts afresh", "policy", name, "err", err)
	} else if saved != nil {
		b.log.Info("policy state restored", "policy", name, "bytes", len(saved))
	}
}

// savePolicyState stores the policy's bookkeeping after a round.
func (b *Bridge) savePolicyState(ctx context.Context, log *slog.Logger, name string, pol optimizer.Policy, round int64) {
	st, ok, err := optimizer.SaveState(pol)
	if err == nil && ok {
		err = b.state.SavePolicyState(ctx, name, round, st, b.deps.Clock.Now())
	}
	if err != nil {
		log.Warn("could not save the policy's state", "policy", name, "err", err)
	}
}

// status is the daemon's identity for StatusFile.
func (b *Bridge) status(cfg config.Config) DaemonStatus {
	host, _ := os.Hostname()
	return DaemonStatus{PID: os.Getpid(), Host: host, SlurmConf: os.Getenv("SLURM_CONF"), Started: b.started,
		RoundSeconds: cfg.Round.Duration.Seconds()}
}

// MarkStopped records a clean stop in the status file, so users' tools say
// the daemon is stopped rather than late.
func (b *Bridge) MarkStopped() error {
	cfg, _ := b.current()
	if cfg.DryRun {
		return nil
	}
	st, err := ReadStatus(cfg.SpoolDir)
	if err != nil {
		st = b.status(cfg)
	}
	st.Stopped = b.deps.Clock.Now()
	return WriteStatus(cfg.SpoolDir, st)
}

// State is the bridge's state database.
func (b *Bridge) State() *statedb.DB { return b.state }

// Reload switches to cfg (SIGHUP) and returns what changed. A new policy
// starts with fresh bookkeeping. data_dir cannot change while running (it
// is kept, and reported as an error) ; everything else applies from the
// next round.
func (b *Bridge) Reload(cfg config.Config) ([]string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	if cfg.DataDir != b.cfg.DataDir {
		err = fmt.Errorf("data_dir cannot change while running (keeping %s; restart to use %s)", b.cfg.DataDir, cfg.DataDir)
		cfg.DataDir = b.cfg.DataDir
	}
	changes := b.cfg.Diff(cfg)
	if cfg.Policy != b.cfg.Policy || !reflect.DeepEqual(cfg.PolicyOptions(), b.cfg.PolicyOptions()) {
		pol, perr := newPolicy(cfg)
		if perr != nil {
			return nil, perr
		}
		b.loadPolicyState(context.Background(), cfg.Policy, pol)
		b.policy = pol
	}
	b.cfg = cfg
	return changes, err
}

func (b *Bridge) current() (config.Config, optimizer.Policy) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg, b.policy
}

// Cycle runs one round: observe (one job query, one node query) -> policy
// -> optimizer.Check -> enforce. It returns an error when the round could
// not observe or plan at all (slurmctld down, database unreadable); then
// nothing was changed. Action failures are not errors of the round: they
// are in the report and re-derived next round. A round Cycle runs is a
// full round.
func (b *Bridge) Cycle(ctx context.Context) (RoundReport, error) {
	return b.cycle(ctx, false)
}

// cycle runs one round; midRound marks one started early, within the last
// full round.
func (b *Bridge) cycle(ctx context.Context, midRound bool) (RoundReport, error) {
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	cfg, policy := b.current()
	clock := b.deps.Clock
	b.round++
	rep := RoundReport{Number: b.round, Started: clock.Now(), DryRun: cfg.DryRun, Policy: policy.Name(), MidRound: midRound}
	log := b.log.With("round", rep.Number)
	now := rep.Started

	// Observe.
	jobs, err := b.deps.Cluster.Jobs(ctx)
	if err != nil {
		return b.failRound(ctx, rep, fmt.Errorf("observe jobs: %w", err))
	}
	nodes, err := b.deps.Cluster.Nodes(ctx)
	if err != nil {
		return b.failRound(ctx, rep, fmt.Errorf("observe nodes: %w", err))
	}
	// Without scontrol's records the round goes on from squeue alone: jobs
	// whose request only scontrol shows wait (see ViewInput.Details).
	var details map[string]slurm.JobDetail
	if ds, err := b.deps.Cluster.JobDetails(ctx); err != nil {
		log.Warn("could not read the jobs' details; requests are read from squeue alone this round", "err", err)
	} else {
		details = slurm.JoinDetails(jobs, ds)
	}
	tp, err := b.deps.Store.Throughputs(ctx)
	if err != nil {
		return b.failRound(ctx, rep, fmt.Errorf("throughputs: %w", err))
	}
	placed, err := b.state.Placements(ctx)
	if err != nil {
		return b.failRound(ctx, rep, fmt.Errorf("state database: %w", err))
	}
	stored, err := b.state.Progress(ctx)
	if err != nil {
		return b.failRound(ctx, rep, fmt.Errorf("state database: %w", err))
	}
	requested, err := b.state.GresRequests(ctx)
	if err != nil {
		return b.failRound(ctx, rep, err)
	}
	resolved := map[string]string{}
	resolve := func(site string) (string, error) {
		if t, ok := resolved[site]; ok {
			return t, nil
		}
		t, err := b.resolveGPU(ctx, cfg, site)
		if err == nil {
			resolved[site] = t
		}
		return t, err
	}
	// Every cell nobody measured on this cluster's GPU types gets the
	// prior (profiles.WithPrior): no job waits or is passed through for want
	// of a matrix row or column; progress reports then replace it.
	types := clusterTypes(nodes, resolve)
	measured := tp
	tp = saneThroughputs(log, profiles.WithPrior(measured, types))
	prior := sync.OnceValue(func() *profiles.Prior { return profiles.FitPrior(measured) })
	view := BuildView(ViewInput{
		Now: now, Jobs: jobs, Nodes: nodes, Details: details, ResolveGPU: resolve,
		Models: jobproto.NewModelResolver(tp.JobTypes(), cfg.Models.Aliases), DefaultModel: cfg.DefaultModel,
		PriorFor: func(jobType string) map[string]map[int]float64 {
			return prior().Model(jobType, types)
		},
		Throughput: tp, Placed: placed, RanOn: b.ranOn,
		Notes:  func(id, msg string) { log.Debug("job note", "job", id, "note", msg) },
		Retype: b.retype(ctx, log), Requested: requested, Lease: cfg.Lease.Duration,
		NewTypes: NewTypeLimits{PerRound: cfg.Models.NewPerRound, PerUser: cfg.Models.NewPerUser},
	})
	limits, reservations := b.site(ctx)
	applyReservations(view, reservations, details)
	budgets, jobLimits := limitBudgets(limits, view, siteScopes(details))
	b.noteRanOn(view)
	b.warnStaleGres(log, view)
	rep.View = view
	rep.Measured = measured
	rep.Jobs = len(view.Jobs)
	tagged := view.TaggedIDs()
	rep.Tagged = len(tagged)
	progress, observations, forget := b.updateProgress(ctx, log, cfg, view, tp, stored, now)
	rep.Observe = clock.Now().Sub(rep.Started)

	// Solve and check.
	solveStart := clock.Now()
	der, err := b.solve(ctx, log, cfg, policy, view, tp, measured, progress, siteLimits{budgets, jobLimits, siteWeights(cfg.Weights, details)}, &rep)
	if err != nil {
		return b.failRound(ctx, rep, err)
	}
	rep.Solve = clock.Now().Sub(solveStart)

	// Enforce. The users' own requests of the jobs about to be retyped
	// are stored first: without them the next round would read the type
	// hadar sets as the user's (then nothing is retyped this round).
	enforceStart := clock.Now()
	if !cfg.DryRun {
		if err := b.state.RememberGresRequests(ctx, rep.Number, der.Requested); err != nil {
			log.Error("could not record the jobs' GPU requests; not retyping them this round", "err", err)
			der.Actions = withoutRetyped(der.Actions, der.Requested)
			rep.Actions = der.Actions
		}
	}
	b.enforce(ctx, log, cfg, der, tagged, &rep)
	rep.Enforce = clock.Now().Sub(enforceStart)
	if len(rep.Results) > 0 {
		b.lastQueue = nil // the queue the last poll saw is no longer Slurm's
	}

	// Remember what was released where, and the round.
	w := roundWrite(cfg, rep, view, progress, placed, forget, observations, now)
	for id := range requested {
		if view.Job(id) == nil {
			w.Unrequested = append(w.Unrequested, id)
		}
	}
	if rep.PlanError != nil {
		w.Round.Error = rep.PlanError.Error()
	}
	if err := b.state.WriteRound(ctx, w); err != nil {
		log.Error("could not record the round", "err", err)
	}
	if !cfg.DryRun {
		b.savePolicyState(ctx, log, cfg.Policy, policy, rep.Number)
	}
	if h, ok := HistoryRecord(rep); ok {
		if err := b.state.RecordHistory(ctx, h); err != nil {
			log.Warn("could not record the round's history", "err", err)
		}
	}
	b.setLastSeen(view)
	if !cfg.DryRun {
		if err := WriteStatus(cfg.SpoolDir, statusFromReport(b.status(cfg), rep)); err != nil {
			log.Warn("could not write the status file users read", "err", err)
		}
	}
	b.deps.Metrics.observeRound(rep, nil)
	log.Info("round", "jobs", rep.Jobs, "tagged", rep.Tagged, "placed", w.Round.Placed, "migrated", w.Round.Migrated,
		"preempted", w.Round.Preempted, "passed_through", w.Round.PassedThru, "failed_actions", w.Round.Failed,
		"observe", rep.Observe, "solve", rep.Solve, "enforce", rep.Enforce, "dry_run", rep.DryRun, "mid_round", rep.MidRound)
	return rep, nil
}

// solve plans the round on view and derives what to enforce: the policy's
// plan, checked, or, when the policy fails or its plan cannot be enforced
// safely, a round that only passes jobs through (rep.PlanError says why).
func (b *Bridge) solve(ctx context.Context, log *slog.Logger, cfg config.Config, policy optimizer.Policy, view *View,
	tp, measured optimizer.Throughputs, progress map[string]JobProgress, limits siteLimits, rep *RoundReport) (Derivation, error) {
	// Exploration (explore): the cells this cluster has not confirmed (the
	// prior's, and imported ones whose learned value has not taken over)
	// are planned optimistically; progress is still measured against tp.
	// Hadar's probes try such cells for critical jobs (Snapshot.Confirmed),
	// only with preemption: without it the store is not read for them.
	var confirmed optimizer.Throughputs
	if cfg.Explore > 0 || cfg.Preemption {
		confirmed = b.confirmed(ctx, log, measured)
	}
	planned := tp
	if cfg.Explore > 0 {
		planned = tp.Optimistic(confirmed, cfg.Explore)
	}
	snap := BuildSnapshot(view, planned, progress, SnapshotParams{Round: cfg.Round.Duration,
		DefaultDuration: cfg.DefaultDuration.Duration, Preemption: cfg.Preemption, MidRound: rep.MidRound,
		MoveWithoutProgress: cfg.MoveWithoutProgress, Limits: limits.budgets, JobLimits: limits.jobs, SiteWeights: limits.weights})
	snap.Confirmed = confirmed
	rep.Snapshot = snap
	plan, perr := policy.Plan(snap)
	if perr == nil {
		if cerr := optimizer.Check(snap, plan); cerr != nil {
			perr = cerr
		}
	}
	if perr != nil {
		rep.PlanError = perr
		log.Error("policy failed; this round only passes jobs through", "policy", policy.Name(), "err", perr)
		plan = nil
	}
	params := DeriveParams{MigrationPenalty: cfg.MigrationPenalty.Duration, Preemption: cfg.Preemption,
		LaunchTimeout: cfg.LaunchTimeout.Duration, Lease: cfg.Lease.Duration}
	der, derr := Derive(view, snap, plan, params)
	if derr != nil {
		rep.PlanError = derr
		log.Error("plan cannot be enforced safely; this round only passes jobs through", "err", derr)
		if der, derr = Derive(view, snap, nil, params); derr != nil {
			return Derivation{}, derr
		}
	}
	rep.Decisions, rep.Actions, rep.HeldBack = der.Decisions, der.Actions, der.HeldBack
	if der.HeldBack {
		log.Info("plan held back: a pass-through job has waited launch_timeout; this round releases no other job", "launch_timeout", cfg.LaunchTimeout.Duration)
	}
	for _, d := range der.Decisions {
		lvl := slog.LevelInfo
		if d.Kind == DecideKeep || d.Kind == DecideWait {
			lvl = slog.LevelDebug
		}
		log.Log(ctx, lvl, "decision", "job", d.JobID, "decision", string(d.Kind), "from", d.From, "to", d.To, "gpu_type", d.GPUType, "reason", d.Reason)
	}
	return der, nil
}

func rehold(ds []Decision, id string) bool {
	for _, d := range ds {
		if d.JobID == id && d.Kind == DecideRehold {
			return true
		}
	}
	return false
}

func (b *Bridge) failRound(ctx context.Context, rep RoundReport, err error) (RoundReport, error) {
	rec := statedb.Round{Number: rep.Number, Started: rep.Started, Policy: rep.Policy, DryRun: rep.DryRun, Error: err.Error()}
	if werr := b.state.WriteRound(ctx, statedb.RoundWrite{Round: rec}); werr != nil {
		b.log.Error("could not record the round", "round", rep.Number, "err", werr)
	}
	b.deps.Metrics.observeRound(rep, err)
	return rep, err
}

// resolveGPU maps a site GRES type to a canonical type: the config's
// [gres] aliases first, then the profiles database.
func (b *Bridge) resolveGPU(ctx context.Context, cfg config.Config, site string) (string, error) {
	if t, ok := cfg.GRES.Aliases[site]; ok {
		return t, nil
	}
	return b.deps.Store.ResolveGPUType(ctx, site)
}

// updateProgress reads the jobs' reports and advances every tagged job's
// progress. It returns the progress to store, the learned-throughput
// samples recorded, and the jobs to forget (gone from the queue).
func (b *Bridge) updateProgress(ctx context.Context, log *slog.Logger, cfg config.Config, v *View, tp optimizer.Throughputs,
	stored map[string]JobProgress, now time.Time) (map[string]JobProgress, []statedb.Observation, []string) {
	reports, errs := jobproto.ReadProgress(cfg.SpoolDir)
	for i, err := range errs {
		if i == 10 {
			log.Warn("more unreadable progress files not logged", "count", len(errs)-i)
			break
		}
		log.Warn("skipping progress file", "err", err)
	}
	out := map[string]JobProgress{}
	var obs, seen []statedb.Observation
	var users []string
	known := map[string]bool{}
	for _, jv := range slices.Concat(v.Jobs, v.copyJobViews()) {
		known[jv.ID] = true
		if !jv.Tagged || jv.Model == "" || jv.CopyOf != "" {
			continue // a copy's progress is its copies job's (copies.go)
		}
		var rp *jobproto.Progress
		r, ok := reports[jv.ID]
		if rawOK := false; jv.RawID != "" && jv.RawID != jv.ID {
			// An array task knows itself as its own SLURM_JOB_ID; hadar
			// addresses it as ARRAY_TASK. Either report counts, the newer.
			var raw jobproto.Progress
			if raw, rawOK = reports[jv.RawID]; rawOK && (!ok || raw.At.After(r.At)) {
				r, ok = raw, true
			}
		}
		if ok {
			if b.trustReport(jv, r) {
				rp = &r
			} else if b.distrusted[jv.ID] != r.At {
				b.distrusted[jv.ID] = r.At // warn once per file version
				log.Warn("ignoring progress file not owned by the job's user", "job", jv.ID, "user", jv.User, "file_uid", r.UID)
			}
		}
		gpuType, rate := "", 0.0
		if len(jv.Nodes) > 0 && (jv.Class == ClassRunning || jv.Class == ClassPinned) {
			var tasks []optimizer.Task
			types := map[string]bool{}
			for _, name := range jv.Nodes {
				if t := v.typeOn(jv, name); t != "" {
					tasks = append(tasks, optimizer.Task{Node: name, Type: t, GPUs: jv.GPUsPerNode})
					types[t] = true
				}
			}
			rate = tp.PlacementRate(jv.Model, jv.Workers, tasks)
			if len(types) == 1 {
				for t := range types {
					gpuType = t
				}
			}
		}
		if g := v.CopyGroup(jv.ID); g != nil {
			gpuType, rate = g.copyRate(v, tp)
		}
		pr, base, smp := advanceProgress(stored[jv.ID], b.sampleBases[jv.ID], jv, gpuType, rate, rp, now, cfg.Learning.MinInterval.Duration)
		out[jv.ID] = pr
		b.sampleBases[jv.ID] = base
		if smp != nil {
			o := statedb.Observation{JobID: jv.ID, Model: jv.Model, GPUType: gpuType, Workers: jv.Workers,
				Steps: smp.steps, Seconds: smp.seconds, At: now}
			if cfg.DryRun {
				log.Debug("dry run: not learning from progress", "job", jv.ID)
			} else {
				seen = append(seen, o)
				users = append(users, jv.User)
			}
		}
	}
	if len(seen) > 0 {
		obs = b.learn(ctx, log, tp, seen, users)
	}
	for id := range b.distrusted {
		if !known[id] {
			delete(b.distrusted, id)
		}
	}
	for id := range b.sampleBases {
		if !known[id] {
			delete(b.sampleBases, id)
		}
	}
	var forget []string
	for id := range stored {
		if !known[id] {
			forget = append(forget, id)
		}
	}
	sort.Strings(forget)
	if !cfg.DryRun {
		jobproto.RemoveStaleProgress(cfg.SpoolDir, known, now, 24*time.Hour)
	}
	return out, obs, forget
}

// trustReport accepts a report file owned by the job's user or by root.
func (b *Bridge) trustReport(jv *JobView, r jobproto.Progress) bool {
	if r.UID == 0 {
		return true
	}
	uid, ok := b.uids[jv.User]
	if !ok {
		var err error
		uid, err = b.deps.LookupUID(jv.User)
		if err != nil {
			return false
		}
		b.uids[jv.User] = uid
	}
	return uid == r.UID
}

// noteRanOn remembers where the view's tagged jobs run (for telling
// hadar's migrations from requeues by others, see Derive).
func (b *Bridge) noteRanOn(v *View) {
	next := map[string][]string{}
	for _, j := range v.Jobs {
		if !j.Tagged {
			continue
		}
		if j.State == "RUNNING" && len(j.Nodes) > 0 {
			next[j.ID] = j.Nodes
		} else if prev, ok := b.ranOn[j.ID]; ok {
			next[j.ID] = prev
		}
	}
	b.ranOn = next
}

// warnStaleGres logs each node whose GresUsed counts GPUs that no job
// holds, once until the count changes: hadar counts them free, and the
// admin learns how to correct Slurm's own figure.
func (b *Bridge) warnStaleGres(log *slog.Logger, v *View) {
	next := map[string]int{}
	for _, n := range v.Nodes {
		if n.StaleUsed == 0 {
			continue
		}
		next[n.Name] = n.StaleUsed
		if b.staleGres[n.Name] != n.StaleUsed {
			log.Warn("Slurm counts GPUs as used on a node that runs no job; hadar counts them free "+
				"(slurmctld 22.05 does this after a restart when jobs ended while it was down; `scontrol reconfigure` corrects it)",
				"node", n.Name, "gpus", n.StaleUsed)
		}
	}
	b.staleGres = next
}

func (b *Bridge) setLastSeen(v *View) {
	seen := map[string]string{}
	for _, j := range v.Jobs {
		if j.Tagged {
			seen[j.ID] = j.State
		}
	}
	b.lastSeen = seen
	b.leased = map[string]bool{}
	for _, j := range v.Jobs {
		switch j.Class {
		case ClassWaiting, ClassHeld, ClassNotReady:
			if !j.PriorityHeld {
				b.leased[j.ID] = true
			}
		}
	}
	nodes := map[string]string{}
	for _, n := range v.Nodes {
		nodes[n.Name] = n.State + "|" + fmt.Sprint(n.Schedulable)
	}
	b.nodesSeen = nodes
}

// Alive returns when Run last turned its loop (zero before it starts): a
// watchdog that sees it stop moving knows the daemon hangs.
func (b *Bridge) Alive() time.Time {
	ns := b.tick.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// poll looks at the queue (one squeue) and the nodes (one scontrol show
// node) and reports whether a tagged job appeared or left since the last
// look, or went back to pending (Slurm requeued it: a node failure), or a
// node changed state (drained, down, resumed).
func (b *Bridge) poll(ctx context.Context) (bool, error) {
	jobs, err := b.deps.Cluster.Jobs(ctx)
	if err != nil {
		return false, err
	}
	nodes, err := b.deps.Cluster.Nodes(ctx)
	if err != nil {
		return false, err
	}
	b.cycleMu.Lock()
	defer b.cycleMu.Unlock()
	seen := map[string]string{}
	changed := false
	if b.nodesSeen != nil {
		for _, n := range nodes {
			if prev, ok := b.nodesSeen[n.Name]; ok && prev != n.State+"|"+fmt.Sprint(n.Schedulable()) {
				changed = true
			}
		}
	}
	for _, j := range jobs {
		if !jobproto.IsTagged(j.Comment) {
			continue
		}
		seen[j.ID()] = j.State
		prev, ok := b.lastSeen[j.ID()]
		if !ok || (prev != "PENDING" && j.State == "PENDING") {
			changed = true
		}
	}
	for id := range b.lastSeen {
		if _, ok := seen[id]; !ok {
			changed = true
		}
	}
	b.lastSeen = seen
	b.lastQueue = jobs
	b.renewLeases(ctx, jobs)
	return changed, nil
}

// renewLeases renews, in one scontrol update, the leases of the jobs the
// last round left waiting for hadar that have less than half a lease left,
// so that none starts under Slurm alone while hadar runs, whatever the
// round's length. A job whose user's own begin time is ahead is left as it
// is. Called by poll, with cycleMu held.
func (b *Bridge) renewLeases(ctx context.Context, jobs []slurm.Job) {
	cfg, _ := b.current()
	if cfg.DryRun || len(b.leased) == 0 {
		return
	}
	lease, now := cfg.Lease.Duration, b.deps.Clock.Now()
	var due []string
	for _, j := range jobs {
		id := j.ID()
		if !b.leased[id] || j.State != "PENDING" || hadarHoldReasons[j.Reason] {
			continue
		}
		l := ReadLease(j, now, lease)
		if l.UserBegin.IsZero() && LeaseDue(l.Until, now, lease) {
			due = append(due, id)
		}
	}
	if len(due) == 0 {
		return
	}
	sort.Strings(due)
	if err := b.deps.Cluster.UpdateJobs(ctx, due, LeaseArg(lease)); err != nil {
		b.log.Warn("could not renew leases; the next poll tries again", "jobs", len(due), "err", err)
		return
	}
	b.log.Debug("renewed leases", "jobs", len(due), "lease", lease)
}

// Run runs rounds until ctx ends: one at once, then every round, and early
// (no sooner than min_round_gap after the last) when a poll sees a tagged
// job arrive or leave. A round that fails (slurmctld unreachable, ...) is
// logged and retried with exponential backoff, capped; nothing is changed
// in Slurm meanwhile. Run returns nil when ctx ends.
func (b *Bridge) Run(ctx context.Context) error {
	clock := b.deps.Clock
	next := clock.Now()
	// A round starts cfg.Round after the last one, or early (after a
	// requeue, on a change in the queue). One that starts within cfg.Round
	// of the last full round is mid-round, so a round-based policy is not
	// rotated by the early ones; full rounds stay less than two rounds
	// apart.
	var lastStart, lastFull time.Time
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		b.tick.Store(time.Now().UnixNano())
		cfg, _ := b.current()
		now := clock.Now()
		if !now.Before(next) {
			lastStart = now
			midRound := !lastFull.IsZero() && now.Before(lastFull.Add(cfg.Round.Duration))
			rep, err := b.cycle(ctx, midRound)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				failures++
				delay := b.backoff(failures)
				lvl := slog.LevelError
				if errors.Is(err, slurm.ErrControllerDown) || errors.Is(err, slurm.ErrTimeout) {
					lvl = slog.LevelWarn
				}
				b.log.Log(ctx, lvl, "round failed; nothing was changed; retrying", "round", rep.Number, "err", err,
					"retry_in", delay, "failures", failures)
				next = lastStart.Add(delay)
			} else {
				if failures > 0 {
					b.log.Info("rounds work again", "after_failures", failures)
				}
				failures = 0
				if !midRound {
					lastFull = lastStart
				}
				next = lastStart.Add(cfg.Round.Duration)
				if rep.Count(DecideMigrate)+rep.Count(DecidePreempt)+rep.Count(DecideStartNow)+rep.Count(DecideRehold) > 0 ||
					(rep.HeldBack && rep.PassedThrough() > 0) {
					// A requeue completes after scontrol returns; look
					// again soon to start what it delayed. Jobs held
					// again are re-placed soon too, and so is the work
					// a round held back for a pass-through job, once
					// that job is released.
					next = lastStart.Add(max(cfg.MinRoundGap.Duration, cfg.PollInterval.Duration))
				}
			}
			if b.OnCycle != nil {
				b.OnCycle(rep, err)
			}
			continue
		}
		wait := next.Sub(now)
		if failures == 0 {
			wait = min(wait, cfg.PollInterval.Duration)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clock.After(wait):
		}
		if failures > 0 || !clock.Now().Before(next) {
			continue
		}
		changed, err := b.poll(ctx)
		if err != nil {
			b.log.Debug("poll failed", "err", err)
			continue
		}
		if changed {
			early := lastStart.Add(cfg.MinRoundGap.Duration)
			if early.Before(next) {
				next = early
			}
		}
	}
}

// backoff is the wait after n consecutive failed rounds: backoffBase
// doubled each time, at most backoffMax.
func (b *Bridge) backoff(n int) time.Duration {
	d := b.backoffBase
	for i := 1; i < n && d < b.backoffMax; i++ {
		d *= 2
	}
	return min(d, b.backoffMax)
}

// ReleaseAll hands every tagged job hadar holds to Slurm's own scheduler
// (fail-open: what the daemon does when it stops, and `hadar-slurmd
// --release-all`): the jobs on hadar's lease get StartTime=now, and those
// in hadar's own hold (a migration cut short) are released too. Holds of
// owners and admins stay. A job whose user's own begin time is ahead keeps
// its begin time (the user's plus the lease): given back the user's alone,
// a restarted hadar-slurmd would read it as a lease on top of a begin time
// one lease earlier, and start the job before its --begin. Without
// ReleaseAll the leases run out by themselves within a lease. In a dry run
// it only logs. It returns the ids it handed over.
//
// A copies job (copies.go) keeps its copies on distinct nodes only under
// hadar: Slurm gets one task of it (failOpen); the others keep their lease
// until it runs out.
func (b *Bridge) ReleaseAll(ctx context.Context) ([]string, error) {
	cfg, _ := b.current()
	b.cycleMu.Lock()
	b.lastQueue = nil
	b.cycleMu.Unlock()
	jobs, err := b.deps.Cluster.Jobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("release all: %w", err)
	}
	actions, ids := failOpenActions(jobs, b.deps.Clock.Now(), cfg.Lease.Duration)
	if len(ids) == 0 {
		b.log.Info("release all: no tagged job waits for hadar")
		return nil, nil
	}
	if cfg.DryRun {
		for _, a := range actions {
			b.log.Info("dry run: would hand the jobs to Slurm", "command", a.String())
		}
		return nil, nil
	}
	var results []ActionResult
	var errs []error
	for _, a := range actions {
		var err error
		switch a.Kind {
		case ActRelease:
			err = b.deps.Cluster.Release(ctx, a.JobIDs...)
		default:
			err = b.deps.Cluster.UpdateJobs(ctx, a.JobIDs, "StartTime=now")
		}
		results = append(results, ActionResult{Action: a, Sent: a.JobIDs, Err: err})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
		}
	}
	b.recordReleaseAll(ctx, results)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("release all (%d jobs): %w", len(ids), err)
	}
	b.log.Info("handed every tagged job hadar held to Slurm's scheduler", "jobs", len(ids), "ids", ids)
	return ids, nil
}

// failOpenActions are ReleaseAll's updates for the queue jobs at now: the
// end of hadar's leases (StartTime=now) and the release of hadar's own
// holds; a job whose user's begin time is ahead keeps its begin time. ids
// are the jobs they hand over.
func failOpenActions(jobs []slurm.Job, now time.Time, lease time.Duration) (actions []Action, ids []string) {
	var candidates []string
	for _, j := range jobs {
		if !jobproto.IsTagged(j.Comment) || j.State != "PENDING" {
			continue
		}
		if hadarHoldReasons[j.Reason] || !ReadLease(j, now, lease).Until.IsZero() {
			candidates = append(candidates, j.ID())
		}
	}
	sort.Strings(candidates)
	keep := map[string]bool{}
	for _, id := range hadarE.failOpen(jobs, candidates) {
		keep[id] = true
	}
	var h handOver
	for _, j := range jobs {
		if id := j.ID(); keep[id] && h.add(id, ReadLease(j, now, lease), hadarHoldReasons[j.Reason]) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return h.actions(), ids
}

// recordReleaseAll stores fail-open's releases as a round of their own.
func (b *Bridge) recordReleaseAll(ctx context.Context, results []ActionResult) {
	if len(results) == 0 {
		return
	}
	b.cycleMu.Lock()
	b.round++
	rec := statedb.Round{Number: b.round, Started: b.deps.Clock.Now(), Policy: "release-all"}
	for _, r := range results {
		if r.Err != nil {
			rec.Error = r.Err.Error()
		}
	}
	if werr := b.state.WriteRound(ctx, statedb.RoundWrite{Round: rec, Actions: storedActions(results, false)}); werr != nil {
		b.log.Error("could not record release-all", "err", werr)
	}
	b.cycleMu.Unlock()
	b.deps.Metrics.observeActions(results)
}

// enforce carries out the round's actions (or, in a dry run, logs them) and
// writes the copies jobs' plans.
func (b *Bridge) enforce(ctx context.Context, log *slog.Logger, cfg config.Config, der Derivation, tagged map[string]bool, rep *RoundReport) {
	if cfg.DryRun {
		for _, a := range der.Actions {
			log.Info("dry run: would run", "command", a.String())
			rep.Results = append(rep.Results, ActionResult{Action: a, Sent: a.JobIDs})
		}
	} else {
		ex := &Executor{Cluster: b.deps.Cluster, Allowed: tagged, Log: log, AwaitInterval: b.awaitInterval, AwaitTries: b.awaitTries,
			Clock: b.deps.Clock, Parallel: updatesParallel}
		rep.Results = ex.Execute(ctx, der.Actions)
		for _, r := range rep.Results {
			switch {
			case r.Err != nil:
				log.Warn("action failed; it is re-derived next round", "command", r.Action.String(), "jobs", r.Sent, "err", r.Err)
			case len(r.Skipped) > 0:
				log.Warn("action skipped for some jobs (an earlier step failed)", "command", r.Action.String(), "skipped", r.Skipped)
			case len(r.Ended) > 0:
				log.Info("not requeued: no longer running (it ended since the round looked)", "jobs", r.Ended, "requeued", r.Sent)
			default:
				log.Debug("action done", "command", r.Action.String(), "duration", r.Duration)
			}
		}
		// Copies jobs: tell their copies what runs where (copies.go).
		for _, err := range b.writeCopyPlans(cfg, rep.Number, der.Copies, rep.Results, b.deps.Clock.Now()) {
			log.Warn("could not write a copies plan", "err", err)
		}
	}
}

// roundWrite is what the state database keeps of a round: decisions,
// results, progress, and which jobs hadar released where (launching jobs).
func roundWrite(cfg config.Config, rep RoundReport, view *View, progress map[string]JobProgress, placed map[string]Placed,
	forget []string, observations []statedb.Observation, now time.Time) statedb.RoundWrite {
	w := statedb.RoundWrite{Decisions: storedDecisions(rep.Decisions), Actions: storedActions(rep.Results, rep.DryRun),
		Progress: progress, Models: map[string]string{}, Forget: forget, Observations: observations, Placed: map[string]statedb.Placement{}}
	for id := range progress {
		if jv := view.Job(id); jv != nil {
			w.Models[id] = jv.Model
		}
	}
	if !cfg.DryRun {
		// A job is placed once its NodeList and its StartTime=now went
		// through (and the release of hadar's own hold, if it had one).
		started, unreleased := map[string]bool{}, map[string]bool{}
		placedOK := map[string][]string{}
		for _, r := range rep.Results {
			switch {
			case r.Action.Kind == ActPlace && r.Err == nil && len(r.Sent) == 1:
				placedOK[r.Sent[0]] = r.Action.Nodes
			case r.Action.Kind == ActStartNow && r.Err == nil:
				for _, id := range r.Sent {
					started[id] = true
				}
			case r.Action.Kind == ActRelease:
				for _, id := range append(slices.Clone(r.Skipped), r.Refused...) {
					unreleased[id] = true
				}
				if r.Err != nil {
					for _, id := range r.Sent {
						unreleased[id] = true
					}
				}
			}
		}
		for id, nodes := range placedOK {
			if started[id] && !unreleased[id] {
				w.Placed[id] = statedb.Placement{Nodes: nodes, ReleasedAt: now}
			}
		}
		for id := range placed {
			if _, again := w.Placed[id]; again {
				continue
			}
			if jv := view.Job(id); jv == nil || jv.Class != ClassLaunching {
				w.Unplaced = append(w.Unplaced, id)
			} else if rehold(rep.Decisions, id) {
				w.Unplaced = append(w.Unplaced, id)
			}
		}
	}
	w.Round = statedb.Round{Number: rep.Number, Started: rep.Started, Observe: rep.Observe, Solve: rep.Solve,
		Enforce: rep.Enforce, Policy: rep.Policy, DryRun: rep.DryRun, Jobs: rep.Jobs, Tagged: rep.Tagged,
		Placed: rep.Count(DecidePlace), Migrated: rep.Count(DecideMigrate), Preempted: rep.Count(DecidePreempt),
		PassedThru: rep.PassedThrough(), Failed: rep.Failed()}
	return w
}

// clusterTypes are the canonical GPU types of the nodes (every type of a
// node with several; types that do not resolve are left out).
func clusterTypes(nodes []slurm.Node, resolve func(string) (string, error)) []string {
	set := map[string]bool{}
	for _, n := range nodes {
		for site := range slurm.GPUsByType(n.Gres) {
			if site == "" {
				continue
			}
			if t, err := resolve(site); err == nil && t != "" {
				set[t] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
