package sim

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
)

// restarting is a policy that, before every round, saves its policy's state,
// builds a fresh policy and loads the state into it: what a daemon restarted
// every round, or `hadar plan` beside it, would plan with.
type restarting struct {
	t    *testing.T
	name string
	opts optimizer.Options
	cur  optimizer.Policy
}

func (r *restarting) Name() string { return r.cur.Name() }

func (r *restarting) Plan(s *optimizer.Snapshot) (*optimizer.Plan, error) {
	saved, _, err := optimizer.SaveState(r.cur)
	if err != nil {
		r.t.Fatalf("%s: SaveState: %v", r.name, err)
	}
	fresh, err := optimizer.New(r.name, r.opts)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := optimizer.LoadState(fresh, saved); err != nil {
		r.t.Fatalf("%s: LoadState: %v", r.name, err)
	}
	r.cur = fresh
	return r.cur.Plan(s)
}

// restartingCopies is restarting for a policy that forks copies.
type restartingCopies struct{ *restarting }

func (r restartingCopies) CopyLimit(s *optimizer.Snapshot, j *optimizer.Job) int {
	return r.cur.(optimizer.CopyLimiter).CopyLimit(s, j)
}

// TestPolicyStateIsComplete: every policy restored from its saved state
// before every round (the state round-trips through its stored form) plans
// exactly as the same policy running without a break, on a trace with
// arrivals, completions, preemptions and Gavel's resets. A field a policy
// keeps between rounds but does not save makes the two runs part.
func TestPolicyStateIsComplete(t *testing.T) {
	trace, thr := arrivalsTrace(t)
	for _, name := range optimizer.Names() {
		t.Run(name, func(t *testing.T) {
			opts := optimizer.Options{Seed: 5}
			run := func(p optimizer.Policy) *Result {
				res, err := Run(context.Background(), Config{
					Cluster: Cluster{GPUs: map[string]int{"v100": 4, "p100": 4, "k80": 8}, GPUsPerNode: 4}, Round: 360 * time.Second,
					Throughputs: thr, Policy: p,
				}, trace)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			plain, err := optimizer.New(name, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := run(plain)
			first, _ := optimizer.New(name, opts)
			r := &restarting{t: t, name: name, opts: opts, cur: first}
			var p optimizer.Policy = r
			if _, ok := first.(optimizer.CopyLimiter); ok {
				p = restartingCopies{r}
			}
			got := run(p)
			if diff := cmp.Diff(want.Jobs, got.Jobs); diff != "" {
				t.Errorf("restored every round, %s schedules differently (-uninterrupted +restored):\n%s", name, diff)
			}
			if want.Rounds != got.Rounds {
				t.Errorf("rounds: uninterrupted %d, restored %d", want.Rounds, got.Rounds)
			}
		})
	}
}
