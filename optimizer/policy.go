package optimizer

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Policy plans one round. Implementations must be deterministic: the same
// sequence of snapshots yields the same sequence of plans.
type Policy interface {
	Name() string
	Plan(s *Snapshot) (*Plan, error)
}

// Options tune the policies; the zero value means the defaults.
type Options struct {
	// Seed drives the random choices of the heterogeneity-agnostic baselines.
	Seed int64
	// MaxCopies caps HadarE copies per job when the job sets no limit.
	MaxCopies int
	// CopyEfficiency is the combining efficiency of k HadarE copies, by k
	// (the zero value: 1 for every k; MeasuredCopyEfficiency is the measured
	// curve, the default of `hadar simulate` and hadar-slurmd).
	CopyEfficiency CopyEfficiency
	// MigrationPenalty is the work a running job loses when it moves (its
	// restart cost); Hadar moves a job only when that saves more.
	MigrationPenalty time.Duration
	// SiteOrder: the site's priority (Job.Priority) decides which waiting
	// jobs start when GPUs are short, the policy where (SiteOrder).
	SiteOrder bool
	// Hadar tunes hadar and hadare; Tiresias tunes tiresias. Zero fields
	// take the defaults (DefaultHadarOptions, DefaultTiresiasOptions).
	Hadar    HadarOptions
	Tiresias TiresiasOptions
}

// HadarOptions are hadar's knobs (the daemon's [policies.hadar]).
type HadarOptions struct {
	// Critical is the fraction of the fluid horizon above which a job is
	// critical (served first, on its best type). 0 < Critical <= 1.
	Critical float64
	// PriceRounds bounds the tatonnement iterations per round.
	PriceRounds int
	// FluidEvery is the rounds between solves of the fluid LP; -1 turns it
	// off.
	FluidEvery int
	// LeadShare: a job follows the LP's type order only where the LP gives
	// it at least this share of its time somewhere (smaller shares are the
	// interior-point solver's, not a decision); ShareTie: shares closer
	// than this are a tie; MinShare: GPUs left after the first pass go
	// only to jobs with at least this share on the type.
	LeadShare float64
	MinShare  float64
	ShareTie  float64
	// Uncontended: a round whose gangs need at most this share of the GPUs
	// has no scarce type, and every job prefers its fastest type.
	Uncontended float64
	// LeadRemaining: a job follows the LP's type order only when its
	// remaining time on its fastest type is at least this fraction of the
	// horizon (for shorter jobs the makespan LP's choice of type is
	// arbitrary). Negative: every job with a LeadShare follows it.
	LeadRemaining float64
	// QuickShare: a job whose remaining time on its fastest type is at most
	// this fraction of the horizon is served before the critical jobs.
	// Negative: off.
	QuickShare float64
	// Starvation: a job whose time since arrival has reached this multiple
	// of its fair-share time (its steps alone on 1/n of every GPU type, n
	// the jobs in the round) is served before every other job, oldest
	// first, on any type with room. Negative: off.
	Starvation float64
	// FairDeadline: a long job (remaining time on its fastest type at least
	// LeadRemaining of the cluster's load: the remaining work spread over
	// every GPU, which one job's estimate cannot raise as it raises the
	// horizon) is critical once that time reaches this
	// fraction of the time until it would end under fair sharing, or once
	// fair sharing would have ended it: a long job that has fallen behind
	// its fair share (an underestimated one the horizon rule never flags,
	// a gang left alone at the end) is not left to set the makespan.
	// Negative: off.
	FairDeadline float64
	// Incumbency: a running job's remaining area counts this fraction less
	// in the shortest-area order, and its remaining time this fraction more
	// among the critical jobs (longest first) and in the whole-type gang chain
	// rule, twice that if it runs on its preferred type. Without it, two
	// near-equal jobs take turns every round (each start paying the start-up
	// cost; live, each turn is a Slurm requeue): the waiting one, or the one
	// on the slower type, becomes the "longer" or the "smaller" as soon as
	// the other has run a little. Negative: off.
	Incumbency float64
	// Probe: a critical running job whose rate on another GPU type this
	// cluster has not measured, where that rate at (1 + Probe) times its
	// value would beat the measured one of its current type, is moved to
	// GPUs of that type left free in the round, once, until the rate is
	// measured (Snapshot.Confirmed; with preemption only). Negative: off.
	Probe float64
}

// DefaultHadarOptions are hadar's defaults, measured in docs/results.md.
func DefaultHadarOptions() HadarOptions {
	return HadarOptions{Critical: 0.9, PriceRounds: 60, FluidEvery: 10, LeadShare: 0.3, MinShare: 0.05, ShareTie: 0.02, Uncontended: 0.9,
		LeadRemaining: 0.5, QuickShare: 0.05, Starvation: 6, FairDeadline: 0.9, Incumbency: 0.1, Probe: 0.3}
}

// withDefaults fills zero fields.
func (o HadarOptions) withDefaults() HadarOptions {
	d := DefaultHadarOptions()
	if o.Critical <= 0 {
		o.Critical = d.Critical
	}
	if o.PriceRounds <= 0 {
		o.PriceRounds = d.PriceRounds
	}
	for _, f := range []struct {
		v *float64
		d float64
	}{{&o.LeadShare, d.LeadShare}, {&o.MinShare, d.MinShare}, {&o.ShareTie, d.ShareTie}, {&o.Uncontended, d.Uncontended}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
	for _, f := range []struct {
		v *float64
		d float64
	}{{&o.LeadRemaining, d.LeadRemaining}, {&o.QuickShare, d.QuickShare}, {&o.Starvation, d.Starvation}, {&o.FairDeadline, d.FairDeadline}, {&o.Incumbency, d.Incumbency}, {&o.Probe, d.Probe}} {
		switch {
		case *f.v == 0:
			*f.v = f.d
		case *f.v < 0:
			*f.v = 0 // off
		}
	}
	switch {
	case o.FluidEvery == 0:
		o.FluidEvery = d.FluidEvery
	case o.FluidEvery < 0:
		o.FluidEvery = 0
	}
	return o
}

// Validate reports a knob out of range.
func (o HadarOptions) Validate() error {
	if o.Critical < 0 || o.Critical > 1 {
		return fmt.Errorf("critical = %g: want a fraction in (0, 1]", o.Critical)
	}
	if o.PriceRounds < 0 {
		return fmt.Errorf("price_rounds = %d: want > 0", o.PriceRounds)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"lead_share", o.LeadShare}, {"min_share", o.MinShare}, {"share_tie", o.ShareTie}, {"uncontended_share", o.Uncontended}} {
		if f.v < 0 || f.v > 1 {
			return fmt.Errorf("%s = %g: want a fraction in (0, 1]", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"lead_remaining", o.LeadRemaining}, {"quick_share", o.QuickShare}, {"fair_deadline", o.FairDeadline}} {
		if f.v > 1 {
			return fmt.Errorf("%s = %g: want a fraction in (0, 1], or negative for off", f.name, f.v)
		}
	}
	if o.Incumbency >= 1 {
		return fmt.Errorf("incumbency = %g: want a fraction in (0, 1), or negative for off", o.Incumbency)
	}
	if o.Probe > 4 || math.IsNaN(o.Probe) {
		return fmt.Errorf("probe = %g: want a bonus in (0, 4], or negative for off", o.Probe)
	}
	if o.FluidEvery < -1 {
		return fmt.Errorf("fluid_every = %d: want > 0, or -1 for no fluid LP", o.FluidEvery)
	}
	return nil
}

// TiresiasOptions are tiresias's knobs (the config's [policies.tiresias]).
type TiresiasOptions struct {
	// Thresholds are the attained-service (GPU-seconds) bounds of its
	// queues, increasing.
	Thresholds []float64
	// PromoteKnob: a job waiting longer than PromoteKnob times its run time
	// is promoted to the highest queue (starvation guard).
	PromoteKnob float64
}

// DefaultTiresiasOptions are the Tiresias paper's settings as Gavel uses them.
func DefaultTiresiasOptions() TiresiasOptions {
	return TiresiasOptions{Thresholds: []float64{3250, 7200, 18000}, PromoteKnob: 8}
}

func (o TiresiasOptions) withDefaults() TiresiasOptions {
	d := DefaultTiresiasOptions()
	if len(o.Thresholds) == 0 {
		o.Thresholds = d.Thresholds
	}
	if o.PromoteKnob <= 0 {
		o.PromoteKnob = d.PromoteKnob
	}
	return o
}

// Validate reports a knob out of range.
func (o TiresiasOptions) Validate() error {
	for i, th := range o.Thresholds {
		if th <= 0 || (i > 0 && th <= o.Thresholds[i-1]) {
			return fmt.Errorf("thresholds = %v: want positive and increasing", o.Thresholds)
		}
	}
	if o.PromoteKnob < 0 {
		return fmt.Errorf("promote_knob = %g: want > 0", o.PromoteKnob)
	}
	return nil
}

// Factory builds a fresh policy instance; each simulation run or daemon gets
// its own, since some policies keep bookkeeping between rounds.
type Factory func(Options) Policy

var registry = map[string]registered{}

type registered struct {
	factory Factory
	summary string
}

// Register adds a policy to the registry under name. Built-in policies
// register themselves in init.
func Register(name, summary string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("optimizer: policy registered twice: " + name)
	}
	registry[name] = registered{factory: f, summary: summary}
}

// New returns a new instance of the named policy.
func New(name string, opts Options) (Policy, error) {
	r, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	p := r.factory(opts)
	if opts.SiteOrder {
		p = inSiteOrder(p)
	}
	return guard(p, opts.MigrationPenalty), nil
}

// Names lists the registered policies, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Summary returns the one-line description of a registered policy.
func Summary(name string) string { return registry[name].summary }
