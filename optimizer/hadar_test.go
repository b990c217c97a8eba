package optimizer

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// snapshotBuilder builds small hand-checkable snapshots.
type snapshotBuilder struct{ s *Snapshot }

func newSnapshot() *snapshotBuilder {
	return &snapshotBuilder{s: &Snapshot{Now: t0, Round: 360 * time.Second, Throughput: Throughputs{}}}
}

func (b *snapshotBuilder) node(name, gpuType string, gpus int) *snapshotBuilder {
	b.s.Nodes = append(b.s.Nodes, Node{Name: name, Type: gpuType, GPUs: gpus})
	return b
}

// job adds a job whose whole-job rate on each type is given as type=rate
// pairs, and whose remaining work is steps.
func (b *snapshotBuilder) job(id string, workers int, steps float64, rates map[string]float64) *snapshotBuilder {
	for h, r := range rates {
		b.s.Throughput.Set("type-"+id, h, workers, r)
	}
	b.s.Jobs = append(b.s.Jobs, Job{ID: id, Type: "type-" + id, Workers: workers, Arrival: t0, TotalSteps: steps, RemainingSteps: steps, Weight: 1})
	return b
}

// placedTypes summarises a plan as job -> sorted GPU types of its tasks.
func placedTypes(p *Plan) map[string]string {
	return summarizePlan(p, func(t Task) string { return fmt.Sprintf("%s:%d", t.Type, t.GPUs) })
}

// summarizePlan is job -> the sorted labels of its tasks.
func summarizePlan(p *Plan, label func(Task) string) map[string]string {
	out := map[string]string{}
	for id, tasks := range p.Assignments {
		var ts []string
		for _, t := range tasks {
			ts = append(ts, label(t))
		}
		sort.Strings(ts)
		out[id] = fmt.Sprint(ts)
	}
	return out
}

func planOrFail(t *testing.T, name string, s *Snapshot) *Plan {
	t.Helper()
	p, err := New(name, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(s)
	if err != nil {
		t.Fatalf("%s.Plan: %v", name, err)
	}
	if err := Check(s, plan); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return plan
}

func TestHadarHandChecked(t *testing.T) {
	tests := []struct {
		name string
		snap *Snapshot
		want map[string]string
	}{
		{
			// A gains 3x from a v100, B only 1.2x: comparative advantage
			// puts A on the v100 and B on the k80.
			name: "comparative advantage",
			snap: newSnapshot().node("v", "v100", 1).node("k", "k80", 1).
				job("a", 1, 3600*30, map[string]float64{"v100": 3, "k80": 1}).
				job("b", 1, 3600*12, map[string]float64{"v100": 1.2, "k80": 1}).s,
			want: map[string]string{"a": "[v100:1]", "b": "[k80:1]"},
		},
		{
			// One free v100 and one free k80: a job-level scheduler cannot
			// run the 2-GPU job; Hadar's task-level placement spans both.
			name: "gang spans GPU types",
			snap: newSnapshot().node("v", "v100", 1).node("k", "k80", 1).
				job("a", 2, 1000, map[string]float64{"v100": 4, "k80": 2}).s,
			want: map[string]string{"a": "[k80:1 v100:1]"},
		},
		{
			// The 10 h job sets the makespan and runs; the other GPU goes
			// to the shorter of the rest (shortest remaining first).
			name: "critical job first, then shortest remaining",
			snap: newSnapshot().node("n", "v100", 2).
				job("long", 1, 10*3600, map[string]float64{"v100": 1}).
				job("medium", 1, 2*3600, map[string]float64{"v100": 1}).
				job("short", 1, 1*3600, map[string]float64{"v100": 1}).s,
			want: map[string]string{"long": "[v100:1]", "short": "[v100:1]"},
		},
		{
			// A job no GPU type here can run is left out, not an error.
			name: "unrunnable job is skipped",
			snap: newSnapshot().node("n", "v100", 2).
				job("a", 1, 100, map[string]float64{"k80": 1}).
				job("b", 1, 100, map[string]float64{"v100": 1}).s,
			want: map[string]string{"b": "[v100:1]"},
		},
		{
			name: "idle GPUs are backfilled by the next jobs",
			snap: newSnapshot().node("v", "v100", 4).node("k", "k80", 4).
				job("a", 4, 1e6, map[string]float64{"v100": 40, "k80": 4}).
				job("b", 4, 1e6, map[string]float64{"v100": 40, "k80": 4}).s,
			want: map[string]string{"a": "[v100:4]", "b": "[k80:4]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planOrFail(t, "hadar", tc.snap)
			if diff := cmp.Diff(tc.want, placedTypes(plan)); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHadarKeepsNodesOfRunningJobs(t *testing.T) {
	s := newSnapshot().node("v1", "v100", 2).node("v2", "v100", 2).
		job("a", 2, 1e6, map[string]float64{"v100": 1}).s
	s.Jobs[0].Current = []Task{{Node: "v2", Type: "v100", GPUs: 2}}
	plan := planOrFail(t, "hadar", s)
	if diff := cmp.Diff([]Task{{Node: "v2", Type: "v100", GPUs: 2}}, plan.Assignments["a"]); diff != "" {
		t.Errorf("running job moved (-want +got):\n%s", diff)
	}
}

func TestHadarMigrationPenalty(t *testing.T) {
	// b runs on the k80; moving it to the now-free v100 saves 100 s of a
	// 1000 s remainder. With a 600 s penalty it stays; without, it moves.
	build := func() *Snapshot {
		s := newSnapshot().node("v", "v100", 1).node("k", "k80", 1).
			job("b", 1, 1000, map[string]float64{"v100": 1.0 / 0.9, "k80": 1}).s
		s.Jobs[0].Current = []Task{{Node: "k", Type: "k80", GPUs: 1}}
		return s
	}
	for _, tc := range []struct {
		penalty time.Duration
		want    string
	}{{0, "v100"}, {600 * time.Second, "k80"}} {
		p, _ := New("hadar", Options{MigrationPenalty: tc.penalty})
		plan, err := p.Plan(build())
		if err != nil {
			t.Fatal(err)
		}
		if got := plan.Assignments["b"][0].Type; got != tc.want {
			t.Errorf("penalty %s: job on %s, want %s", tc.penalty, got, tc.want)
		}
	}
}

// TestPoliciesOnRandomSnapshots runs every policy on random snapshots: every
// plan must pass Check, and the same snapshot must give the same plan.
func TestPoliciesOnRandomSnapshots(t *testing.T) {
	for _, name := range Names() {
		for seed := int64(0); seed < 5; seed++ {
			s := SyntheticSnapshot(60, 48, 3, seed)
			// Some jobs already run where a previous round put them.
			prev := planOrFail(t, "hadar", s)
			for i := range s.Jobs {
				if i%2 == 0 {
					s.Jobs[i].Current = prev.Assignments[s.Jobs[i].ID]
				}
			}
			a := planOrFail(t, name, s)
			b := planOrFail(t, name, s)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("%s seed %d: two fresh instances planned differently (-first +second):\n%s", name, seed, diff)
			}
			if len(a.Assignments) == 0 {
				t.Errorf("%s seed %d: nothing placed on an idle cluster", name, seed)
			}
		}
	}
}

// TestHadarFluidPlanCadence checks when Hadar solves its fluid LP again:
// on the first round, after FluidEvery rounds, and as soon as a job is new
// to it; never with FluidEvery 0.
func TestHadarFluidPlanCadence(t *testing.T) {
	build := func(ids ...string) *Snapshot {
		b := newSnapshot().node("a", "v100", 4).node("b", "k80", 4)
		for _, id := range ids {
			b.job(id, 1, 36000, map[string]float64{"v100": 2, "k80": 1})
		}
		return b.s
	}
	p := NewHadar(Options{Hadar: HadarOptions{FluidEvery: 3}})
	plan := func(s *Snapshot, round int) {
		t.Helper()
		s.Now = t0.Add(time.Duration(round) * s.Round)
		out, err := p.Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(s, out); err != nil {
			t.Fatal(err)
		}
	}
	// solvedAt is the round whose Now the current fluid plan was solved
	// at: end - now - T is constant between solves, so compare ends.
	s := build("j1", "j2")
	plan(s, 0)
	if p.fluid.share == nil {
		t.Fatal("no fluid plan after the first round")
	}
	end0 := p.fluid.end
	plan(s, 1)
	plan(s, 2)
	if !p.fluid.end.Equal(end0) {
		t.Errorf("fluid plan re-solved before FluidEvery rounds: end %v, was %v", p.fluid.end, end0)
	}
	plan(s, 3)
	if p.fluid.end.Equal(end0) {
		t.Errorf("fluid plan not re-solved after FluidEvery rounds")
	}
	end3 := p.fluid.end
	s = build("j1", "j2", "j3")
	plan(s, 4)
	if p.fluid.end.Equal(end3) || p.fluid.share["j3"] == nil {
		t.Errorf("fluid plan not re-solved for a new job: end %v (was %v), share %v", p.fluid.end, end3, p.fluid.share["j3"])
	}
	// A job that left keeps nothing stale in the plan's decisions: the
	// next solve (by age) forgets it.
	s = build("j2", "j3")
	for r := 5; r <= 7; r++ {
		plan(s, r)
	}
	if _, ok := p.fluid.share["j1"]; ok {
		t.Errorf("fluid plan still holds a share for j1 after a re-solve without it")
	}

	off := NewHadar(Options{Hadar: HadarOptions{FluidEvery: -1}})
	if _, err := off.Plan(build("j1")); err != nil {
		t.Fatal(err)
	}
	if off.fluid.share != nil {
		t.Errorf("FluidEvery 0 solved the fluid LP")
	}
}

// TestHadarFluidPlanSetsHorizon checks the fluid LP's optimum by hand: two
// 1-GPU jobs of 36,000 steps, one v100 GPU (2 steps/s) and one k80 GPU
// (1 step/s). With both GPUs busy the pair does 3 steps/s, and each job can
// take half the time on each type (2 x 12,000 + 12,000 steps), so the fluid
// makespan is 72,000 / 3 = 24,000 s; a job alone on the v100 would need
// 18,000 s, so the LP, not the longest job, sets the horizon.
func TestHadarFluidPlanSetsHorizon(t *testing.T) {
	s := newSnapshot().node("a", "v100", 1).node("b", "k80", 1).
		job("j1", 1, 36000, map[string]float64{"v100": 2, "k80": 1}).
		job("j2", 1, 36000, map[string]float64{"v100": 2, "k80": 1}).s
	p := NewHadar(Options{})
	out, err := p.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(s, out); err != nil {
		t.Fatal(err)
	}
	got := p.fluid.end.Sub(s.Now).Seconds()
	if math.Abs(got-24000) > 24 {
		t.Errorf("fluid horizon %.0f s, want 24000 s", got)
	}
	if diff := cmp.Diff(map[string]string{"j1": "[v100:1]", "j2": "[k80:1]"}, placedTypes(out)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestHadarUncontendedTakesFastestType: when every job's gang fits at once
// no GPU type is scarce, so each job runs on its fastest type even where
// balancing the work over the types (prices, the fluid LP) would send one
// of them to the slow one.
func TestHadarUncontendedTakesFastestType(t *testing.T) {
	s := newSnapshot().node("a", "v100", 4).node("b", "k80", 4).
		job("long", 1, 720000, map[string]float64{"v100": 2, "k80": 1}).
		job("short", 1, 3600, map[string]float64{"v100": 2, "k80": 1.5}).s
	got := placedTypes(planOrFail(t, "hadar", s))
	want := map[string]string{"long": "[v100:1]", "short": "[v100:1]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestHadarQuickAndStarvation checks the two exceptions to Hadar's order
// (docs/policies.md): a job short against the horizon goes before the
// critical ones (QuickShare), and a job past its starvation bound goes
// before everyone (Starvation). Each case has the option turned off too.
func TestHadarQuickAndStarvation(t *testing.T) {
	// One 8-GPU v100 node: only one of two 8-GPU gangs fits. "long" (1000 s)
	// sets the horizon (1010 s) and is critical; "quick" needs 10 s, within
	// 5% of it.
	gangs := func() *Snapshot {
		return newSnapshot().node("v", "v100", 8).
			job("long", 8, 1000, map[string]float64{"v100": 1}).
			job("quick", 8, 10, map[string]float64{"v100": 1}).s
	}
	// Two GPUs, four jobs. "old" (100 s of work, 200 s on its fair quarter
	// of the GPUs) arrived 2000 s ago, past 6x its fair share; the others
	// have less left, so shortest-remaining-first alone would run "b" and
	// "c". None is critical (horizon 125 s) or short enough to be quick.
	starved := func() *Snapshot {
		s := newSnapshot().node("v", "v100", 2).
			job("old", 1, 100, map[string]float64{"v100": 1}).
			job("a", 1, 60, map[string]float64{"v100": 1}).
			job("b", 1, 50, map[string]float64{"v100": 1}).
			job("c", 1, 40, map[string]float64{"v100": 1}).s
		s.Jobs[0].Arrival = t0.Add(-2000 * time.Second)
		return s
	}
	tests := []placementCase{
		{name: "quick gang before the critical one", snap: gangs(), want: map[string]string{"quick": "[v100:8]"}},
		{name: "quick share off: critical first", opts: HadarOptions{QuickShare: -1}, snap: gangs(), want: map[string]string{"long": "[v100:8]"}},
		{name: "quick share below the job's share of the horizon", opts: HadarOptions{QuickShare: 0.005}, snap: gangs(), want: map[string]string{"long": "[v100:8]"}},
		{name: "starving job first", snap: starved(), want: map[string]string{"old": "[v100:1]", "c": "[v100:1]"}},
		{name: "bound not reached at 12x", opts: HadarOptions{Starvation: 12}, snap: starved(), want: map[string]string{"b": "[v100:1]", "c": "[v100:1]"}},
		{name: "starvation bound off", opts: HadarOptions{Starvation: -1}, snap: starved(), want: map[string]string{"b": "[v100:1]", "c": "[v100:1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkPricesOnlyPlan(t, tc.opts, tc.snap, tc.want) })
	}
}

// placementCase is a hand-made snapshot, Hadar's knobs, and the GPU types
// the plan should give each placed job (checkPricesOnlyPlan).
type placementCase struct {
	name string
	opts HadarOptions
	snap *Snapshot
	want map[string]string
}

// checkPricesOnlyPlan plans snap with Hadar by prices alone (no fluid LP, so
// that the horizons of hand-made snapshots are exact), checks the plan and
// compares its placed types with want.
func checkPricesOnlyPlan(t *testing.T, opts HadarOptions, snap *Snapshot, want map[string]string) {
	t.Helper()
	opts.FluidEvery = -1
	plan, err := NewHadar(Options{Hadar: opts}).Plan(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(snap, plan); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, placedTypes(plan)); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
}

// checkWithoutQuickOrFair runs placement cases with quick jobs and fair
// deadlines off, so that only the rules a case is about order the jobs.
func checkWithoutQuickOrFair(t *testing.T, tests []placementCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.QuickShare, opts.FairDeadline = -1, -1
			checkPricesOnlyPlan(t, opts, tc.snap, tc.want)
		})
	}
}

// TestHadarFairDeadline: a long job that the horizon rule leaves waiting
// becomes critical once it has fallen behind fair sharing. One 4-GPU v100
// node: a 4-GPU gang of 30 h and four 1-GPU jobs of 20 h (horizon 50 h:
// the gang is long, at least half of it, but not critical, under 0.9 of
// it). Shortest remaining area first runs the four small jobs. Planned
// again 40 h later with the same work left, the small jobs would have
// ended under fair sharing (25 h each on 4/5 of a GPU) and the gang, on a
// fifth of the node, has 110 h of fair-share time left, which the four
// ended jobs leave it alone for: 22 h to its fair end, under its 30 h.
func TestHadarFairDeadline(t *testing.T) {
	const hour = 3600.0
	snap := func(now time.Time) *Snapshot {
		b := newSnapshot().node("v", "v100", 4).job("gang", 4, 30*hour, map[string]float64{"v100": 1})
		for _, id := range []string{"a", "b", "c", "d"} {
			b.job(id, 1, 20*hour, map[string]float64{"v100": 1})
		}
		b.s.Now = now
		return b.s
	}
	small := map[string]string{"a": "[v100:1]", "b": "[v100:1]", "c": "[v100:1]", "d": "[v100:1]"}
	tests := []struct {
		name        string
		opts        HadarOptions
		first, then map[string]string
	}{
		{name: "behind fair sharing: critical", first: small, then: map[string]string{"gang": "[v100:4]"}},
		{name: "fair deadline off", opts: HadarOptions{FairDeadline: -1}, first: small, then: small},
		{name: "not long enough (lead_remaining 0.7 of the horizon)", opts: HadarOptions{LeadRemaining: 0.7}, first: small, then: small},
		{name: "a lower fraction: critical at once", opts: HadarOptions{FairDeadline: 0.5}, first: map[string]string{"gang": "[v100:4]"}, then: map[string]string{"gang": "[v100:4]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.FluidEvery = -1 // prices only: the horizon above is exact
			policy := NewHadar(Options{Hadar: opts})
			for i, round := range []struct {
				at   time.Time
				want map[string]string
			}{{t0, tc.first}, {t0.Add(40 * time.Hour), tc.then}} {
				s := snap(round.at)
				plan, err := policy.Plan(s)
				if err != nil {
					t.Fatal(err)
				}
				if err := Check(s, plan); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(round.want, placedTypes(plan)); diff != "" {
					t.Errorf("round %d: placement (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}

// TestHadarIncumbency: a waiting job that is only a little smaller (or, among
// the critical jobs, a little longer) than a running one does not displace
// it; one that is clearly so does. Without the rule, two equal jobs take
// turns every round.
func TestHadarIncumbency(t *testing.T) {
	// Two v100 GPUs. "long" (1000 s) sets the horizon and is critical;
	// "running" (105 s, running) and "waiting" compete for the other GPU.
	small := func(waiting float64) *Snapshot {
		s := newSnapshot().node("v1", "v100", 2).
			job("long", 1, 1000, map[string]float64{"v100": 1}).
			job("running", 1, 105, map[string]float64{"v100": 1}).
			job("waiting", 1, waiting, map[string]float64{"v100": 1}).s
		s.Jobs[0].Current = []Task{{Node: "v1", Type: "v100", GPUs: 1}}
		s.Jobs[1].Current = []Task{{Node: "v1", Type: "v100", GPUs: 1}}
		return s
	}
	// One 8-GPU node and two 8-GPU gangs: they cannot run side by side,
	// so the longer of the two is critical (the whole-type gang chain) and runs.
	gangs := func(waiting float64) *Snapshot {
		s := newSnapshot().node("v1", "v100", 8).
			job("running", 8, 1000, map[string]float64{"v100": 1}).
			job("waiting", 8, waiting, map[string]float64{"v100": 1}).s
		s.Jobs[0].Current = []Task{{Node: "v1", Type: "v100", GPUs: 8}}
		return s
	}
	tests := []placementCase{
		{name: "a little smaller: the running job stays", snap: small(100), want: map[string]string{"long": "[v100:1]", "running": "[v100:1]"}},
		{name: "off: the smaller job takes its GPU", opts: HadarOptions{Incumbency: -1}, snap: small(100), want: map[string]string{"long": "[v100:1]", "waiting": "[v100:1]"}},
		{name: "clearly smaller: it takes the GPU", snap: small(80), want: map[string]string{"long": "[v100:1]", "waiting": "[v100:1]"}},
		{name: "a little longer gang: the running one stays", snap: gangs(1005), want: map[string]string{"running": "[v100:8]"}},
		{name: "off: the longer gang takes the node", opts: HadarOptions{Incumbency: -1}, snap: gangs(1005), want: map[string]string{"waiting": "[v100:8]"}},
		// 1,300 s: the running gang holds its preferred type, so its time
		// counts Incumbency more twice (1,000 s as 1,235 s).
		{name: "clearly longer gang: it takes the node", snap: gangs(1300), want: map[string]string{"waiting": "[v100:8]"}},
	}
	checkWithoutQuickOrFair(t, tests)
}

// TestHadarWholeTypeChain: gangs that need every GPU of a type cannot
// overlap anything there, so their times add up: as a chain near the
// horizon, the longest is critical and runs before shorter jobs. Gangs that
// leave GPUs beside them are not chained and wait their turn by area. Each
// case: two 8-GPU gangs of 500 s (no gang alone near the horizon, the two
// together are) and 1-GPU jobs of 200 s, quick jobs and fair deadlines off.
func TestHadarWholeTypeChain(t *testing.T) {
	snap := func(nodes, small int) *Snapshot {
		b := newSnapshot()
		for i := 0; i < nodes; i++ {
			b.node(fmt.Sprintf("v%d", i), "v100", 4)
		}
		b.job("a", 8, 500, map[string]float64{"v100": 1}).job("b", 8, 490, map[string]float64{"v100": 1})
		for i := 0; i < small; i++ {
			b.job(fmt.Sprintf("s%d", i), 1, 200, map[string]float64{"v100": 1})
		}
		return b.s
	}
	tests := []placementCase{
		{name: "8 GPUs: the longer gang is critical and runs", snap: snap(2, 4), want: map[string]string{"a": "[v100:4 v100:4]"}},
		{name: "12 GPUs: the small jobs run first", snap: snap(3, 5),
			want: map[string]string{"s0": "[v100:1]", "s1": "[v100:1]", "s2": "[v100:1]", "s3": "[v100:1]", "s4": "[v100:1]"}},
	}
	checkWithoutQuickOrFair(t, tests)
}

// TestHadarIncumbencyOnPreferredType: two running whole-type gangs that both
// prefer the V100s, one on them and one on the K80s (a tenth as fast). After
// a round the one on the K80s is the longer; it takes the V100s only when
// clearly longer. Before the rule the two traded types every round.
func TestHadarIncumbencyOnPreferredType(t *testing.T) {
	snap := func(onK80 float64) *Snapshot {
		rates := map[string]float64{"v100": 1, "k80": 0.1}
		s := newSnapshot().node("v1", "v100", 8).node("k1", "k80", 8).
			job("fast", 8, 1000, rates).job("slow", 8, onK80, rates).s
		s.Jobs[0].Current = []Task{{Node: "v1", Type: "v100", GPUs: 8}}
		s.Jobs[1].Current = []Task{{Node: "k1", Type: "k80", GPUs: 8}}
		return s
	}
	tests := []placementCase{
		{name: "a little longer: both keep their types", snap: snap(1010), want: map[string]string{"fast": "[v100:8]", "slow": "[k80:8]"}},
		{name: "clearly longer: they trade", snap: snap(1300), want: map[string]string{"fast": "[k80:8]", "slow": "[v100:8]"}},
		{name: "off: they trade", opts: HadarOptions{Incumbency: -1}, snap: snap(1010), want: map[string]string{"fast": "[k80:8]", "slow": "[v100:8]"}},
	}
	checkWithoutQuickOrFair(t, tests)
}

// TestHadarFairDeadlineIncumbency: a running job just under the
// lead_remaining line still counts as long (its time counts Incumbency more),
// a waiting one does not. Without it a job on the line crossed it every
// round, running then stopped (Philly week 3 draw 3 on 12:12:12: 19,612 stops
// for 62 jobs).
func TestHadarFairDeadlineIncumbency(t *testing.T) {
	const load = 1000.0 // s; the lead_remaining line is at 500 s
	job := func(id string, running bool) *hadarJob {
		j := &Job{ID: id, Workers: 1, Weight: 1, Arrival: t0, TotalSteps: 480, RemainingSteps: 480}
		if running {
			j.Current = []Task{{Node: "v1", Type: "v100", GPUs: 1}}
		}
		// 480 s on its fastest type, 500 s of fair-share time left: it
		// ends under fair sharing soon after, so a long job is critical.
		return &hadarJob{Job: j, fastest: 480, fairTime: 500}
	}
	for _, tc := range []struct {
		name       string
		incumbency float64
		want       map[string]bool
	}{
		{name: "default", incumbency: 0.1, want: map[string]bool{"running": true, "waiting": false}},
		{name: "off", incumbency: 0, want: map[string]bool{"running": false, "waiting": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Hadar{LeadRemaining: 0.5, FairDeadline: 0.9, Incumbency: tc.incumbency}
			hj := []*hadarJob{job("running", true), job("waiting", false)}
			p.fairDeadlines(&Snapshot{Now: t0}, hj, load)
			got := map[string]bool{}
			for _, h := range hj {
				got[h.ID] = h.critical
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("critical (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHadarBefore is Hadar's priority order on hand-made jobs.
func TestHadarBefore(t *testing.T) {
	job := func(id string, workers int, remaining float64, arrival time.Duration, critical, quick, starving bool) *hadarJob {
		return &hadarJob{Job: &Job{ID: id, Workers: workers, Weight: 1, Arrival: t0.Add(arrival)},
			remaining: remaining, area: float64(workers) * remaining, longest: remaining, critical: critical, quick: quick, starving: starving}
	}
	tests := []struct {
		name string
		jobs []*hadarJob
		want []string
	}{
		{
			name: "starving, quick, critical, rest",
			jobs: []*hadarJob{
				job("rest", 1, 50, 0, false, false, false),
				job("critical", 1, 900, 0, true, false, false),
				job("quick", 8, 10, 0, false, true, false),
				job("starving", 1, 500, 0, false, false, true),
			},
			want: []string{"starving", "quick", "critical", "rest"},
		},
		{
			name: "starving: oldest first, whatever is left",
			jobs: []*hadarJob{
				job("young", 1, 1, -100*time.Second, false, false, true),
				job("old", 1, 1000, -900*time.Second, true, false, true),
			},
			want: []string{"old", "young"},
		},
		{
			name: "critical longest first, the others by remaining area",
			jobs: []*hadarJob{
				job("c-short", 1, 800, 0, true, false, false),
				job("c-long", 1, 900, 0, true, false, false),
				job("wide", 4, 30, 0, false, false, false),
				job("narrow", 1, 100, 0, false, false, false),
				job("q-wide", 8, 10, 0, false, true, false),
				job("q-narrow", 1, 20, 0, false, true, false),
			},
			want: []string{"q-narrow", "q-wide", "c-long", "c-short", "narrow", "wide"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs := append([]*hadarJob(nil), tc.jobs...)
			sort.SliceStable(jobs, func(a, b int) bool { return hadarBefore(jobs[a], jobs[b]) })
			var got []string
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFairShareTime: a job's steps alone on 1/n of every GPU type.
func TestFairShareTime(t *testing.T) {
	capacity := map[string]int{"v100": 4, "k80": 4}
	types := []string{"v100", "k80"}
	tests := []struct {
		name    string
		workers int
		rates   []float64 // by type, as types
		n       int
		want    float64
	}{
		// 1/2 of 4 v100s and 4 k80s is more than a 1-GPU job can use: its
		// time is split 1:1 over the types, rate (2+1)/2.
		{name: "share larger than the gang", workers: 1, rates: []float64{2, 1}, n: 2, want: 600 / 1.5},
		// 1/8 of each: 0.5 GPU of each type for a 1-GPU job, rate 1.5.
		{name: "share equal to the gang", workers: 1, rates: []float64{2, 1}, n: 8, want: 600 / 1.5},
		// 1/16 of each: a quarter of the time on each type, rate 0.75.
		{name: "share smaller than the gang", workers: 1, rates: []float64{2, 1}, n: 16, want: 600 / 0.75},
		// A 4-GPU gang on 1/4 of each: a quarter of the time on each type.
		{name: "gang", workers: 4, rates: []float64{8, 4}, n: 4, want: 600 / 3},
		{name: "runs nowhere", workers: 1, rates: []float64{0, 0}, n: 2, want: math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &hadarJob{Job: &Job{Workers: tc.workers, TotalSteps: 600}, rate: tc.rates}
			got := fairShareTime(h, types, capacity, tc.n)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("fair-share time (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHadarWithoutPreemption: a running job that may not be stopped keeps
// its GPUs in Hadar's own plan (pass 0), so the guard has nothing to give
// back and no GPUs stay idle where the plan had moved it; it moves, in its
// turn, only onto free GPUs and only where that saves more than the
// migration penalty; and a waiting gang is not started across types.
func TestHadarWithoutPreemption(t *testing.T) {
	// run: 1 GPU on the k80, 1000 steps left; v100 runs it 10x faster.
	// wait: a waiting 1-GPU job that prefers the v100 too.
	build := func(v100s int) *Snapshot {
		b := newSnapshot().node("k", "k80", 1).
			job("run", 1, 1000, map[string]float64{"v100": 10, "k80": 1}).
			job("wait", 1, 500, map[string]float64{"v100": 10, "k80": 1})
		if v100s > 0 {
			b.node("v", "v100", v100s)
		}
		s := b.s
		s.NoPreemption = true
		s.Jobs[0].Current = []Task{{Node: "k", Type: "k80", GPUs: 1}}
		s.Jobs[0].NoStop = true
		return s
	}
	for _, tc := range []struct {
		name    string
		v100s   int
		penalty time.Duration
		want    map[string]string
	}{
		// Before pass 0 the plan gave the k80 to "wait" (shorter first) and
		// dropped "run"; the guard put "run" back and "wait" did not run.
		{"no faster GPU free: it stays, the other waits", 0, 0, map[string]string{"run": "[k80:1]"}},
		{"a v100 free, the move saves 900 s > 60 s", 1, time.Minute, map[string]string{"run": "[v100:1]", "wait": "[k80:1]"}},
		{"a v100 free, the move saves 900 s < 1000 s", 1, 1000 * time.Second, map[string]string{"run": "[k80:1]", "wait": "[v100:1]"}},
		{"two v100s free", 2, time.Minute, map[string]string{"run": "[v100:1]", "wait": "[v100:1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New("hadar", Options{MigrationPenalty: tc.penalty})
			if err != nil {
				t.Fatal(err)
			}
			s := build(tc.v100s)
			plan, err := p.Plan(s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, placedTypes(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			guarded := KeepNoStop(s, clonePlan(plan), tc.penalty)
			if diff := cmp.Diff(plan, guarded); diff != "" {
				t.Errorf("the guard changed Hadar's plan (-plan +guarded):\n%s", diff)
			}
		})
	}

	t.Run("a waiting gang waits for one type", func(t *testing.T) {
		s := newSnapshot().node("v", "v100", 2).node("k", "k80", 2).
			job("gang", 4, 1000, map[string]float64{"v100": 10, "k80": 1}).s
		s.Throughput.Set("type-gang", "v100", 2, 5)
		s.Throughput.Set("type-gang", "k80", 2, 0.5)
		for _, noPreemption := range []bool{false, true} {
			s.NoPreemption = noPreemption
			plan := planOrFail(t, "hadar", s)
			if got, want := len(plan.Assignments["gang"]) > 0, !noPreemption; got != want {
				t.Errorf("NoPreemption %v: gang across v100 and k80 placed %v, want %v", noPreemption, got, want)
			}
		}
	})
}

// TestHadarPlanNeedsNoGuard: on random snapshots without preemption, where
// half the jobs run and may not be stopped, the guard (KeepNoStop) finds
// nothing to change in Hadar's plan.
func TestHadarPlanNeedsNoGuard(t *testing.T) {
	for seed := int64(0); seed < 8; seed++ {
		s := SyntheticSnapshot(120, 48, 3, seed)
		// Jobs run where another policy put them, so Hadar would rather
		// move many of them.
		prev := planOrFail(t, "yarn-cs", s)
		for i := range s.Jobs {
			if i%2 == 0 && len(prev.Assignments[s.Jobs[i].ID]) > 0 {
				s.Jobs[i].Current = prev.Assignments[s.Jobs[i].ID]
				s.Jobs[i].NoStop = true
				s.Jobs[i].RemainingSteps *= 0.7
			}
		}
		s.NoPreemption = true
		s.Now = s.Now.Add(s.Round)
		p, err := New("hadar", Options{MigrationPenalty: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := p.Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(plan, KeepNoStop(s, clonePlan(plan), 10*time.Minute)); diff != "" {
			t.Errorf("seed %d: the guard changed Hadar's plan (-plan +guarded):\n%s", seed, diff)
		}
	}
}

func clonePlan(p *Plan) *Plan {
	out := NewPlan()
	for id, tasks := range p.Assignments {
		out.Assign(id, append([]Task(nil), tasks...)...)
	}
	return out
}

// TestHadarDefragment: a waiting one-node gang whose type has the free GPUs
// but not on one node (two small running jobs kept a node each) is placed
// by moving a small job, with preemption; without it nothing moves.
func TestHadarDefragment(t *testing.T) {
	snap := func(noPreemption bool) *Snapshot {
		b := newSnapshot().node("v1", "v100", 4).node("v2", "v100", 4).
			job("a", 1, 10, map[string]float64{"v100": 1}).
			job("b", 2, 10, map[string]float64{"v100": 1}).
			job("gang", 4, 1000, map[string]float64{"v100": 1})
		b.s.Jobs[0].Current = []Task{{Node: "v1", Type: "v100", GPUs: 1}}
		b.s.Jobs[1].Current = []Task{{Node: "v2", Type: "v100", GPUs: 2}}
		b.s.Jobs[2].Shape = Shape{Nodes: 1, GPUsPerNode: 4}
		b.s.NoPreemption = noPreemption
		return b.s
	}
	tests := []struct {
		name         string
		noPreemption bool
		want         map[string]string
	}{
		{name: "packed around the gang", want: map[string]string{"a": "[v2:1]", "b": "[v2:2]", "gang": "[v1:4]"}},
		{name: "no preemption: kept where they run", noPreemption: true, want: map[string]string{"a": "[v1:1]", "b": "[v2:2]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := snap(tc.noPreemption)
			plan := planOrFail(t, "hadar", s)
			got := summarizePlan(plan, func(t Task) string { return fmt.Sprintf("%s:%d", t.Node, t.GPUs) })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHadarProbe: a critical running job whose rate on a type with free
// GPUs this cluster has not measured, and might be the better one within
// the probe bonus, tries that type once; measured, or out of reach of the
// bonus, or without preemption, it stays.
func TestHadarProbe(t *testing.T) {
	// One job alone (so critical) running on its p100 node; a free v100
	// node. Its p100 rate is measured; v100 is at v100Rate, measured or not.
	snap := func(v100Rate float64, v100Measured bool) *Snapshot {
		s := newSnapshot().node("p1", "p100", 4).node("v1", "v100", 4).
			job("long", 4, 1e6, map[string]float64{"p100": 10, "v100": v100Rate}).s
		s.Jobs[0].Current = []Task{{Node: "p1", Type: "p100", GPUs: 4}}
		s.Confirmed = Throughputs{}
		s.Confirmed.Set("type-long", "p100", 4, 10)
		if v100Measured {
			s.Confirmed.Set("type-long", "v100", 4, v100Rate)
		}
		return s
	}
	noConfirmed := snap(9, false)
	noConfirmed.Confirmed = nil
	noPreemption := snap(9, false)
	noPreemption.NoPreemption = true
	noPreemption.Jobs[0].NoStop = true
	tests := []placementCase{
		{name: "unmeasured and within the bonus: it tries the v100s", snap: snap(9, false), want: map[string]string{"long": "[v100:4]"}},
		{name: "measured slower: it stays", snap: snap(9, true), want: map[string]string{"long": "[p100:4]"}},
		{name: "beyond the bonus: it stays", snap: snap(7, false), want: map[string]string{"long": "[p100:4]"}},
		{name: "off", opts: HadarOptions{Probe: -1}, snap: snap(9, false), want: map[string]string{"long": "[p100:4]"}},
		{name: "the driver does not say what is measured", snap: noConfirmed, want: map[string]string{"long": "[p100:4]"}},
		{name: "without preemption", snap: noPreemption, want: map[string]string{"long": "[p100:4]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkPricesOnlyPlan(t, tc.opts, tc.snap, tc.want)
		})
	}
}

// TestHadarProbeRounds: a probe holds the job's GPUs until the tried rate is
// measured (a waiting job does not take them), survives a restart of the
// policy (its state), and once measured slower the job goes back and does
// not try again.
func TestHadarProbeRounds(t *testing.T) {
	s := newSnapshot().node("p1", "p100", 4).node("v1", "v100", 4).
		job("long", 4, 1e6, map[string]float64{"p100": 10, "v100": 9}).s
	s.Jobs[0].Current = []Task{{Node: "p1", Type: "p100", GPUs: 4}}
	s.Confirmed = Throughputs{}
	s.Confirmed.Set("type-long", "p100", 4, 10)
	p := NewHadar(Options{Hadar: HadarOptions{FluidEvery: -1}})
	plan := func(s *Snapshot) map[string]string {
		t.Helper()
		got, err := p.Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(s, got); err != nil {
			t.Fatal(err)
		}
		return placedTypes(got)
	}
	if diff := cmp.Diff(map[string]string{"long": "[v100:4]"}, plan(s)); diff != "" {
		t.Fatalf("round 1 (-want +got):\n%s", diff)
	}

	// Round 2, after a restart: the job runs on the v100s, not yet measured
	// there; a short 4-GPU job arrives and would take the p100 node.
	saved, err := p.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	p = NewHadar(Options{Hadar: HadarOptions{FluidEvery: -1}})
	if err := p.LoadState(saved); err != nil {
		t.Fatal(err)
	}
	s.Now = s.Now.Add(s.Round)
	s.Jobs[0].Current = []Task{{Node: "v1", Type: "v100", GPUs: 4}}
	s.Throughput.Set("type-short", "p100", 4, 10)
	s.Jobs = append(s.Jobs, Job{ID: "short", Type: "type-short", Workers: 4, Arrival: s.Now, TotalSteps: 100, RemainingSteps: 100, Weight: 1})
	if diff := cmp.Diff(map[string]string{"long": "[v100:4]"}, plan(s)); diff != "" {
		t.Errorf("round 2: the p100 node is held for the job under a probe (-want +got):\n%s", diff)
	}

	// Round 3: measured at 8 on the v100s; the short job has left. The job
	// goes back, and stays there in round 4.
	s.Jobs = s.Jobs[:1]
	s.Now = s.Now.Add(s.Round)
	s.Throughput.Set("type-long", "v100", 4, 8)
	s.Confirmed.Set("type-long", "v100", 4, 8)
	if diff := cmp.Diff(map[string]string{"long": "[p100:4]"}, plan(s)); diff != "" {
		t.Errorf("round 3 (-want +got):\n%s", diff)
	}
	s.Now = s.Now.Add(s.Round)
	s.Jobs[0].Current = []Task{{Node: "p1", Type: "p100", GPUs: 4}}
	if diff := cmp.Diff(map[string]string{"long": "[p100:4]"}, plan(s)); diff != "" {
		t.Errorf("round 4 (-want +got):\n%s", diff)
	}
}
