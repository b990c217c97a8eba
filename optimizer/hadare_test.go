package optimizer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// withCopies sets the copy limit of every job of the snapshot.
func withCopies(s *Snapshot, limit int) *Snapshot {
	for i := range s.Jobs {
		s.Jobs[i].MaxCopies = limit
	}
	return s
}

// jobRemaining sets a job's remaining steps.
func jobRemaining(s *Snapshot, id string, steps float64) *Snapshot {
	for i := range s.Jobs {
		if s.Jobs[i].ID == id {
			s.Jobs[i].RemainingSteps = steps
		}
	}
	return s
}

func planHadarE(t *testing.T, s *Snapshot, opts Options) *Plan {
	t.Helper()
	p, err := New("hadare", opts)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(s)
	if err != nil {
		t.Fatalf("hadare.Plan: %v", err)
	}
	if err := Check(s, plan); err != nil {
		t.Fatalf("hadare: %v", err)
	}
	return plan
}

func TestHadarEHandChecked(t *testing.T) {
	// One 1-worker job, rates 3, 2, 1 steps/s on v100, p100, k80; three
	// nodes of 2 GPUs, one per type.
	threeTypes := func() *snapshotBuilder {
		return newSnapshot().node("v", "v100", 2).node("p", "p100", 2).node("k", "k80", 2).
			job("a", 1, 1e6, map[string]float64{"v100": 3, "p100": 2, "k80": 1})
	}
	// An 8-worker job on 4-GPU v100 nodes: 8 GPUs run 16 steps/s, a 4-GPU
	// copy 10, a 2-GPU copy 6, a 1-GPU copy 4.
	eightWorkers := func() *Snapshot {
		s := newSnapshot().node("v0", "v100", 4).node("v1", "v100", 4).node("v2", "v100", 4).
			job("a", 8, 1e6, map[string]float64{"v100": 16}).s
		s.Throughput.Set("type-a", "v100", 4, 10)
		s.Throughput.Set("type-a", "v100", 2, 6)
		s.Throughput.Set("type-a", "v100", 1, 4)
		return withCopies(s, 3)
	}
	// Two 1-worker jobs at 1 step/s on three 1-GPU nodes: Hadar runs both,
	// and one node is left for a copy.
	twoJobs := func(a, b float64) *Snapshot {
		s := newSnapshot().node("v1", "v100", 1).node("v2", "v100", 1).node("v3", "v100", 1).
			job("a", 1, a, map[string]float64{"v100": 1}).
			job("b", 1, b, map[string]float64{"v100": 1}).s
		return withCopies(s, 3)
	}
	tests := []struct {
		name string
		snap *Snapshot
		opts Options
		want map[string][]Task
	}{
		{
			// Three copies, one per node; the round's 6 x 360 = 2160
			// steps split 3:2:1.
			name: "one copy per node, steps by throughput",
			snap: withCopies(threeTypes().s, 3),
			want: map[string][]Task{"a": {
				{Node: "v", Type: "v100", GPUs: 1, Copy: 1, Steps: 1080},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 720},
				{Node: "k", Type: "k80", GPUs: 1, Copy: 3, Steps: 360},
			}},
		},
		{
			// 600 steps left: they split 3:2:1 and sum to 600.
			name: "last steps split by throughput",
			snap: jobRemaining(withCopies(threeTypes().s, 3), "a", 600),
			want: map[string][]Task{"a": {
				{Node: "v", Type: "v100", GPUs: 1, Copy: 1, Steps: 300},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 200},
				{Node: "k", Type: "k80", GPUs: 1, Copy: 3, Steps: 100},
			}},
		},
		{
			// The job's limit of 2 keeps it on the two fastest nodes.
			name: "job limit",
			snap: withCopies(threeTypes().s, 2),
			want: map[string][]Task{"a": {
				{Node: "v", Type: "v100", GPUs: 1, Copy: 1, Steps: 1080},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 720},
			}},
		},
		{
			// The job's own limit wins over the policy's default.
			name: "job limit over the option",
			snap: withCopies(threeTypes().s, 2),
			opts: Options{MaxCopies: 3},
			want: map[string][]Task{"a": {
				{Node: "v", Type: "v100", GPUs: 1, Copy: 1, Steps: 1080},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 720},
			}},
		},
		{
			// Efficiency 0.9: the job progresses at 0.9 x 6 steps/s, and
			// the shares, still 3:2:1, sum to 0.9 x 2160.
			name: "efficiency scales the round's steps",
			snap: withCopies(threeTypes().s, 3),
			opts: Options{CopyEfficiency: CopyEfficiency{Constant: 0.9}},
			want: map[string][]Task{"a": {
				{Node: "v", Type: "v100", GPUs: 1, Copy: 1, Steps: 972},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 648},
				{Node: "k", Type: "k80", GPUs: 1, Copy: 3, Steps: 324},
			}},
		},
		{
			// The measured curve: 2 copies run at 0.63 x (3+2) = 3.15
			// steps/s, a third at 0.437 x 6 = 2.62 (speed-up 1.31, halfway
			// between 2's 1.26 and 4's 1.36): the k80 copy does not pay, and
			// the job runs 2 copies whose shares sum to 3.15 x 360.
			name: "the measured curve stops where a copy does not pay",
			snap: withCopies(threeTypes().s, 3),
			opts: Options{CopyEfficiency: MeasuredCopyEfficiency()},
			want: map[string][]Task{"a": {
				{Node: "v", Type: "v100", GPUs: 1, Copy: 1, Steps: 680.4},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 453.6},
			}},
		},
		{
			// The same curve with three equal nodes: a third copy adds
			// (1.31 - 1.26) of a copy's rate, so it runs; shares 1.31 x 3 x
			// 360 / 3 each. (Hadar's gang is on k, its tie-break among equal
			// types: that task is copy 1.)
			name: "the measured curve takes a copy that pays",
			snap: withCopies(newSnapshot().node("v", "v100", 2).node("p", "p100", 2).node("k", "k80", 2).
				job("a", 1, 1e6, map[string]float64{"v100": 3, "p100": 3, "k80": 3}).s, 3),
			opts: Options{CopyEfficiency: MeasuredCopyEfficiency()},
			want: map[string][]Task{"a": {
				{Node: "k", Type: "k80", GPUs: 1, Copy: 1, Steps: 471.6},
				{Node: "p", Type: "p100", GPUs: 1, Copy: 2, Steps: 471.6},
				{Node: "v", Type: "v100", GPUs: 1, Copy: 3, Steps: 471.6},
			}},
		},
		{
			// Node n1 holds a v100 and a k80: one copy only there.
			name: "two GPU types of one node hold one copy",
			snap: withCopies(newSnapshot().node("n1", "v100", 1).node("n1", "k80", 1).node("n2", "p100", 1).
				job("a", 1, 1e6, map[string]float64{"v100": 3, "p100": 2, "k80": 1}).s, 3),
			want: map[string][]Task{"a": {
				{Node: "n1", Type: "v100", GPUs: 1, Copy: 1, Steps: 1080},
				{Node: "n2", Type: "p100", GPUs: 1, Copy: 2, Steps: 720},
			}},
		},
		{
			// Hadar's 8-GPU gang over v0 and v1 (16 steps/s) becomes two
			// 4-GPU copies (20 steps/s), and v2 takes a third.
			name: "a gang over two nodes becomes copies",
			snap: eightWorkers(),
			want: map[string][]Task{"a": {
				{Node: "v0", Type: "v100", GPUs: 4, Copy: 1, Steps: 3600},
				{Node: "v1", Type: "v100", GPUs: 4, Copy: 2, Steps: 3600},
				{Node: "v2", Type: "v100", GPUs: 4, Copy: 3, Steps: 3600},
			}},
		},
		{
			// A 4-worker job on a node of 2 GPUs: Hadar cannot run it; a
			// 2-GPU copy can (5 steps/s).
			name: "a job Hadar cannot place runs a smaller copy",
			snap: func() *Snapshot {
				s := newSnapshot().node("v", "v100", 2).job("a", 4, 1e6, map[string]float64{"v100": 8}).s
				s.Throughput.Set("type-a", "v100", 2, 5)
				s.Throughput.Set("type-a", "v100", 1, 3)
				return withCopies(s, 2)
			}(),
			want: map[string][]Task{"a": {{Node: "v", Type: "v100", GPUs: 2, Copy: 1, Steps: 1800}}},
		},
		{
			// a needs 100000 s, b 3000 s; a alone on all three nodes
			// would need 33333 s of a fluid horizon of 34333 s: a is
			// critical and takes the free node (b is not short enough,
			// 5% of the horizon, to go before it).
			name: "critical job first",
			snap: twoJobs(100000, 3000),
			want: map[string][]Task{
				"a": {{Node: "v2", Type: "v100", GPUs: 1, Copy: 1, Steps: 360}, {Node: "v3", Type: "v100", GPUs: 1, Copy: 2, Steps: 360}},
				"b": {{Node: "v1", Type: "v100", GPUs: 1}},
			},
		},
		{
			// Neither is critical (667 s and 333 s at best, horizon 1000 s):
			// the shorter job, b, takes the free node.
			name: "then shortest time left first",
			snap: twoJobs(2000, 1000),
			want: map[string][]Task{
				"a": {{Node: "v1", Type: "v100", GPUs: 1}},
				"b": {{Node: "v2", Type: "v100", GPUs: 1, Copy: 1, Steps: 360}, {Node: "v3", Type: "v100", GPUs: 1, Copy: 2, Steps: 360}},
			},
		},
		{
			// b finishes within the round anyway (300 s): a gets the node.
			name: "no copies for a job that finishes this round",
			snap: twoJobs(2000, 300),
			want: map[string][]Task{
				"a": {{Node: "v1", Type: "v100", GPUs: 1, Copy: 1, Steps: 360}, {Node: "v3", Type: "v100", GPUs: 1, Copy: 2, Steps: 360}},
				"b": {{Node: "v2", Type: "v100", GPUs: 1}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planHadarE(t, tc.snap, tc.opts)
			if diff := cmp.Diff(tc.want, got.Assignments, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHadarEGangStaysWhenCopiesLose: at efficiency 0.9 a job running at 10
// steps/s on a v100 forks onto a free k80 only if the k80 adds more than the
// 10% it costs: 0.9 x (10+1) < 10 stays a gang, 0.9 x (10+2) > 10 forks.
func TestHadarEGangStaysWhenCopiesLose(t *testing.T) {
	for _, k80 := range []float64{1, 2} {
		s := withCopies(newSnapshot().node("v", "v100", 1).node("k", "k80", 1).
			job("a", 1, 1e6, map[string]float64{"v100": 10, "k80": k80}).s, 2)
		got := planHadarE(t, s, Options{CopyEfficiency: CopyEfficiency{Constant: 0.9}})
		copies := len(got.Assignments["a"]) > 0 && got.Assignments["a"][0].Copy > 0
		if want := k80 == 2; copies != want {
			t.Errorf("k80 at %g steps/s: copies = %v, want %v (plan %v)", k80, copies, want, got.Assignments)
		}
	}
}

// TestHadarEWithoutLimitIsHadar: a job that allows no copies (MaxCopies 0
// or 1, as Check reads it) runs exactly as Hadar places it, whatever the
// policy's default limit.
func TestHadarEWithoutLimitIsHadar(t *testing.T) {
	for _, limit := range []int{0, 1} {
		for seed := int64(0); seed < 3; seed++ {
			s := withCopies(SyntheticSnapshot(10, 48, 3, seed), limit)
			want := planOrFail(t, "hadar", s)
			got := planHadarE(t, s, Options{MaxCopies: 4})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("limit %d seed %d: hadare differs from hadar (-hadar +hadare):\n%s", limit, seed, diff)
			}
		}
	}
}

func TestHadarECopyLimit(t *testing.T) {
	s := newSnapshot().node("n1", "v100", 1).node("n1", "k80", 1).node("n2", "p100", 1).s
	for _, tc := range []struct {
		job, opt, want int
	}{{0, 0, 2}, {0, 5, 5}, {3, 5, 3}, {1, 5, 1}} {
		p := NewHadarE(Options{MaxCopies: tc.opt})
		if got := p.CopyLimit(s, &Job{MaxCopies: tc.job}); got != tc.want {
			t.Errorf("job limit %d, option %d: CopyLimit = %d, want %d (nodes count by name)", tc.job, tc.opt, got, tc.want)
		}
	}
}

// TestHadarERandomSnapshots checks HadarE's own promises on random
// snapshots, busy and idle, at efficiencies 1 and 0.9 and the measured
// curve: every plan passes
// Check and is deterministic; a job that allows no copies runs as Hadar
// places it; a job Hadar runs is never slowed down; copies stay within the
// job's limit, on distinct nodes, each of at most the job's workers, numbered
// 1..k, with step shares proportional to their rates that sum to
// min(remaining, efficiency(k) x summed rate x round); and no GPU Hadar used
// is left idle.
func TestHadarERandomSnapshots(t *testing.T) {
	forked := 0
	for _, eff := range []CopyEfficiency{{}, {Constant: 0.9}, MeasuredCopyEfficiency()} {
		for seed := int64(0); seed < 40; seed++ {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			jobs := []int{3, 8, 20, 60}[seed%4]
			s := SyntheticSnapshot(jobs, 8+rng.IntN(60), 1+rng.IntN(3), seed)
			prev := planOrFail(t, "hadar", s)
			for i := range s.Jobs {
				j := &s.Jobs[i]
				j.MaxCopies = []int{0, 1, 2, 3, 8, 100}[rng.IntN(6)]
				if rng.IntN(3) == 0 {
					j.RemainingSteps = j.TotalSteps * rng.Float64() / 50
				}
				if rng.IntN(2) == 0 {
					j.Current = prev.Assignments[j.ID]
				}
			}
			name := fmt.Sprintf("eff %v seed %d", eff, seed)
			opts := Options{CopyEfficiency: eff}
			hadar := planOrFail(t, "hadar", s)
			got := planHadarE(t, s, opts)
			if again := planHadarE(t, s, opts); !cmp.Equal(got, again) {
				t.Errorf("%s: two plans of one snapshot differ", name)
			}
			if u, h := usedGPUs(got), usedGPUs(hadar); u < h {
				t.Errorf("%s: hadare uses %d GPUs, hadar %d", name, u, h)
			}
			for i := range s.Jobs {
				j := &s.Jobs[i]
				tasks, hTasks := got.Assignments[j.ID], hadar.Assignments[j.ID]
				if j.MaxCopies < 2 {
					if !cmp.Equal(tasks, hTasks) {
						t.Errorf("%s: job %s allows no copies but differs from hadar: %v vs %v", name, j.ID, tasks, hTasks)
					}
					continue
				}
				if len(tasks) == 0 || tasks[0].Copy == 0 {
					if !cmp.Equal(tasks, hTasks) {
						t.Errorf("%s: gang of job %s differs from hadar: %v vs %v", name, j.ID, tasks, hTasks)
					}
					continue
				}
				forked++
				rate := s.Throughput.CopiesRate(j.Type, tasks, eff.At(len(tasks)))
				if hr := s.Throughput.PlacementRate(j.Type, j.Workers, hTasks); rate < hr*(1-1e-12) {
					t.Errorf("%s: job %s runs at %g as copies, %g under hadar", name, j.ID, rate, hr)
				}
				if len(tasks) > j.MaxCopies {
					t.Errorf("%s: job %s runs %d copies, allows %d", name, j.ID, len(tasks), j.MaxCopies)
				}
				nodes := map[string]bool{}
				raw, steps := 0.0, 0.0
				for k, c := range tasks {
					if c.Copy != k+1 {
						t.Errorf("%s: job %s copy %d numbered %d", name, j.ID, k+1, c.Copy)
					}
					if nodes[c.Node] {
						t.Errorf("%s: job %s has two copies on %s", name, j.ID, c.Node)
					}
					nodes[c.Node] = true
					if c.GPUs < 1 || c.GPUs > j.Workers {
						t.Errorf("%s: job %s copy of %d GPUs, workers %d", name, j.ID, c.GPUs, j.Workers)
					}
					raw += s.Throughput.Rate(j.Type, c.Type, c.GPUs)
					steps += c.Steps
				}
				want := math.Min(j.RemainingSteps, eff.At(len(tasks))*raw*s.Round.Seconds())
				if math.Abs(steps-want) > 1e-9*want {
					t.Errorf("%s: job %s shares sum to %g, want %g", name, j.ID, steps, want)
				}
				for _, c := range tasks {
					share := want * s.Throughput.Rate(j.Type, c.Type, c.GPUs) / raw
					if math.Abs(c.Steps-share) > 1e-9*want {
						t.Errorf("%s: job %s copy %d has %g steps, want %g (proportional to its rate)", name, j.ID, c.Copy, c.Steps, share)
					}
				}
			}
		}
	}
	t.Logf("%d forked jobs", forked)
	if forked < 20 {
		t.Errorf("only %d jobs ran copies over all snapshots: the test exercises too little", forked)
	}
}
