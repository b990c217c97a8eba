package optimizer

import (
	"fmt"
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
	// CopyEfficiency scales the summed rate of HadarE copies (default 1.0).
	CopyEfficiency float64
	// MigrationPenalty is the work a running job loses when it moves (its
	// restart cost); Hadar moves a job only when that saves more.
	MigrationPenalty time.Duration
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
	return guard(r.factory(opts)), nil
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
