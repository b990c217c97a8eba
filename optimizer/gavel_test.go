package optimizer

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Hand-checkable tests of Gavel's round mechanism (gavel.go), its FIFO
// allocator (yarn.go) and the agnostic split (gavel_policies.go). The
// published-figure checks are in sim/fidelity_test.go.

var gavelT0 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// gavelJob is a job of the hand-made scenarios: it arrives at arrive
// seconds, runs at rate steps/s on every type listed in rates, and has
// steps steps of work.
type gavelJob struct {
	id      string
	workers int
	arrive  float64
	steps   float64
	rates   map[string]float64
	current []Task // placement it holds at its first snapshot
}

// gavelRun holds each round's start (seconds) and plan.
type gavelRun struct {
	starts []float64
	plans  []*Plan
}

// driveGavel drives a policy round by round the way the simulator does: each
// running job does whole steps, int(rate x 360), or what it has left, and
// the round ends when the last of them stops (360 s if nothing ran). Every
// plan must pass Check.
func driveGavel(t *testing.T, p Policy, nodes []Node, jobs []gavelJob, rounds int) gavelRun {
	t.Helper()
	thr := Throughputs{}
	for _, j := range jobs {
		for h, r := range j.rates {
			thr.Set("type-"+j.id, h, j.workers, r)
		}
	}
	state := make([]Job, len(jobs))
	for i, j := range jobs {
		state[i] = Job{
			ID: j.id, Type: "type-" + j.id, Workers: j.workers,
			Arrival:    gavelT0.Add(time.Duration(j.arrive * float64(time.Second))),
			TotalSteps: j.steps, RemainingSteps: j.steps, Weight: 1, Current: j.current,
		}
	}
	const round = 360.0
	var run gavelRun
	now := 0.0
	for r := 0; r < rounds; r++ {
		s := &Snapshot{
			Now: gavelT0.Add(time.Duration(now * float64(time.Second))), Round: 360 * time.Second,
			Nodes: nodes, Throughput: thr,
		}
		for i := range state {
			if jobs[i].arrive <= now && state[i].RemainingSteps > 0 {
				s.Jobs = append(s.Jobs, state[i])
			}
		}
		if len(s.Jobs) == 0 {
			break
		}
		plan, err := p.Plan(s)
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		if err := Check(s, plan); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		run.starts = append(run.starts, now)
		run.plans = append(run.plans, plan)
		end, ranAny := now, false
		for i := range state {
			if jobs[i].arrive > now || state[i].RemainingSteps <= 0 {
				continue
			}
			j := &state[i]
			j.Current = plan.Assignments[j.ID]
			if len(j.Current) == 0 {
				continue
			}
			rate := thr.PlacementRate(j.Type, j.Workers, j.Current)
			ran := round
			if steps := wholeRoundSteps(rate, round); j.RemainingSteps <= steps {
				ran = j.RemainingSteps / rate
				j.RemainingSteps = 0
			} else {
				ran = steps / rate
				j.RemainingSteps -= steps
			}
			j.Executed += ran
			end = math.Max(end, now+ran)
			ranAny = true
		}
		if !ranAny {
			end = now + round
		}
		now = end
	}
	return run
}

// running lists the jobs a plan runs, sorted.
func running(p *Plan) []string {
	var ids []string
	for id, tasks := range p.Assignments {
		if len(tasks) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func gavelNodes(gpuType string, n, gpus int) []Node {
	var out []Node
	for i := 0; i < n; i++ {
		out = append(out, Node{Name: fmt.Sprintf("%s-%d", gpuType, i), Type: gpuType, GPUs: gpus})
	}
	return out
}

// fixedAllocator returns a fixed X for the jobs present and records the
// times (seconds since the first plan) at which it was asked.
type fixedAllocator struct {
	x     map[string]map[string]float64
	calls []float64
	clock *gavelRounds
}

func (f *fixedAllocator) allocate(in *gavelInput) (allocation, error) {
	f.calls = append(f.calls, f.clock.clock)
	out := allocation{}
	for _, j := range in.Jobs {
		row := map[string]float64{}
		for _, h := range in.Types {
			row[h] = f.x[j.ID][h]
		}
		out[j.ID] = row
	}
	return out, nil
}

func newFixedRounds(x map[string]map[string]float64) (*gavelRounds, *fixedAllocator) {
	f := &fixedAllocator{x: x}
	g := newGavelRounds("fixed", f, false, false, 0)
	f.clock = g
	return g, f
}

const lots = 1e9 // steps: a job that never finishes in these tests

func TestGavelPriorityRanking(t *testing.T) {
	// Two GPUs, three single-GPU jobs with X = 0.5, 0.25, 0.25. After the
	// reset every job is charged 180 s, the type 540 s:
	//   round 1: a 0.5*540/180 = 1.5, b = c = 0.75 (tie: arrival order) -> a, b
	//   round 2: a 0.5*1260/540 = 1.17, b 0.58, c 0.25*1260/180 = 1.75 -> c, a
	//   round 3: a 0.5*1980/900 = 1.1, b = c = 0.92 (tie)              -> a, b
	//   round 4: a 0.5*2700/1260 = 1.07, b 0.25*2700/900 = 0.75, c 1.25 -> c, a
	g, f := newFixedRounds(map[string]map[string]float64{
		"a": {"v100": 0.5}, "b": {"v100": 0.25}, "c": {"v100": 0.25},
	})
	rate := map[string]float64{"v100": 1}
	run := driveGavel(t, g, gavelNodes("v100", 2, 1), []gavelJob{
		{id: "a", workers: 1, steps: lots, rates: rate},
		{id: "b", workers: 1, steps: lots, rates: rate},
		{id: "c", workers: 1, steps: lots, rates: rate},
	}, 4)
	var got [][]string
	for _, p := range run.plans {
		got = append(got, running(p))
	}
	want := [][]string{{"a", "b"}, {"a", "c"}, {"a", "b"}, {"a", "c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs run per round (-want +got):\n%s", diff)
	}
	if len(f.calls) != 1 {
		t.Errorf("allocation computed %d times, want once (no arrival or completion after t=0)", len(f.calls))
	}
}

func TestGavelDeficitBreaksTies(t *testing.T) {
	g, _ := newFixedRounds(map[string]map[string]float64{"a": {"v100": 0.5}, "b": {"v100": 0.5}})
	g.allocation = allocation{"a": {"v100": 0.5}, "b": {"v100": 0.5}}
	g.jobTime = map[string]map[string]float64{"a": {"v100": 180}, "b": {"v100": 180}}
	g.workerTime = map[string]float64{"v100": 360}
	g.deficits = map[string]map[string]float64{"v100": {"a": -100, "b": 250}}
	g.started = true
	s := &Snapshot{Now: gavelT0, Round: 360 * time.Second, Nodes: gavelNodes("v100", 1, 1), Throughput: Throughputs{}}
	for _, id := range []string{"a", "b"} {
		s.Throughput.Set("m", "v100", 1, 1)
		s.Jobs = append(s.Jobs, Job{ID: id, Type: "m", Workers: 1, Arrival: gavelT0, RemainingSteps: lots})
	}
	plan, err := g.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := running(plan); !cmp.Equal(got, []string{"b"}) {
		t.Errorf("ran %v, want [b]: equal priority, b has the larger deficit", got)
	}
}

func TestGavelLeaseExtensionKeepsNodes(t *testing.T) {
	// a holds v100-2 and v100-3; b is new. Placing afresh would put the
	// first job on v100-0 and v100-1; a must keep its GPUs, round after
	// round, and b must stay where it started.
	g, _ := newFixedRounds(map[string]map[string]float64{"a": {"v100": 1}, "b": {"v100": 1}})
	rate := map[string]float64{"v100": 2}
	aNow := []Task{{Node: "v100-2", Type: "v100", GPUs: 1}, {Node: "v100-3", Type: "v100", GPUs: 1}}
	run := driveGavel(t, g, gavelNodes("v100", 4, 1), []gavelJob{
		{id: "a", workers: 2, steps: lots, rates: rate, current: aNow},
		{id: "b", workers: 2, steps: lots, rates: rate},
	}, 3)
	for r, p := range run.plans {
		if diff := cmp.Diff(aNow, p.Assignments["a"]); diff != "" {
			t.Errorf("round %d: a moved (-held +planned):\n%s", r, diff)
		}
		if diff := cmp.Diff(run.plans[0].Assignments["b"], p.Assignments["b"]); diff != "" || len(p.Assignments["b"]) != 2 {
			t.Errorf("round %d: b moved or lost its GPUs (-first +now):\n%s", r, diff)
		}
	}
}

func TestGavelPlacesMultiGPUJobsOnFewNodes(t *testing.T) {
	// Nodes of 4 GPUs: a 4-GPU job takes one whole node, the 2-GPU jobs
	// share the other.
	g, _ := newFixedRounds(map[string]map[string]float64{
		"a": {"v100": 1}, "b": {"v100": 1}, "c": {"v100": 1},
	})
	run := driveGavel(t, g, gavelNodes("v100", 2, 4), []gavelJob{
		{id: "b", workers: 2, steps: lots, rates: map[string]float64{"v100": 2}},
		{id: "a", workers: 4, steps: lots, rates: map[string]float64{"v100": 4}},
		{id: "c", workers: 2, steps: lots, rates: map[string]float64{"v100": 2}},
	}, 1)
	for id, tasks := range run.plans[0].Assignments {
		if len(tasks) != 1 {
			t.Errorf("%s spread over %d nodes: %v", id, len(tasks), tasks)
		}
	}
}

func TestGavelRecomputesAtMostEvery1920s(t *testing.T) {
	// a arrives at 0, b at 360, c at 720; nothing finishes. Gavel computes
	// X at 0, again at 360 (a reset at time 0 does not start the interval),
	// then not before 360+1920: at the first round from 2280 on (2520).
	// Until then c is not in X: it is picked for the free GPU but gets none.
	x := map[string]map[string]float64{"a": {"v100": 0.5}, "b": {"v100": 0.5}, "c": {"v100": 0.5}}
	g, f := newFixedRounds(x)
	rate := map[string]float64{"v100": 1}
	run := driveGavel(t, g, gavelNodes("v100", 4, 1), []gavelJob{
		{id: "a", workers: 1, arrive: 0, steps: lots, rates: rate},
		{id: "b", workers: 1, arrive: 360, steps: lots, rates: rate},
		{id: "c", workers: 1, arrive: 720, steps: lots, rates: rate},
	}, 20)
	if diff := cmp.Diff([]float64{0, 360, 2520}, f.calls); diff != "" {
		t.Errorf("allocation computed at (-want +got):\n%s", diff)
	}
	for r, p := range run.plans {
		_, ran := p.Assignments["c"]
		if want := run.starts[r] >= 2520; ran != want {
			t.Errorf("t=%.0f: c runs = %v, want %v", run.starts[r], ran, want)
		}
	}
}

func TestGavelRecomputesOnCompletion(t *testing.T) {
	// a finishes in the first round; the next computation waits until 1920 s
	// after the one at 360 (b's arrival).
	x := map[string]map[string]float64{"a": {"v100": 1}, "b": {"v100": 1}}
	g, f := newFixedRounds(x)
	rate := map[string]float64{"v100": 1}
	driveGavel(t, g, gavelNodes("v100", 2, 1), []gavelJob{
		{id: "a", workers: 1, arrive: 0, steps: 500, rates: rate},
		{id: "b", workers: 1, arrive: 360, steps: lots, rates: rate},
	}, 10)
	// Rounds: 0 (a), 360 (b arrives; a finishes at 360+140=500 but the
	// round lasts until b's 360 s end, 720), then every 360 s.
	if diff := cmp.Diff([]float64{0, 360, 2520}, f.calls); diff != "" {
		t.Errorf("allocation computed at (-want +got):\n%s", diff)
	}
}

func TestFIFOHeadOfLineBlocking(t *testing.T) {
	// Four GPUs. j1 (2 GPUs) starts; j2 (4 GPUs) does not fit, and blocks j3
	// (1 GPU) behind it although a GPU would be free. When j1 finishes, j2
	// takes over its type and runs alone.
	for _, quirk := range []bool{false, true} {
		t.Run(fmt.Sprintf("gavelQuirk=%v", quirk), func(t *testing.T) {
			g := newGavelRounds("fifo", newFIFOAllocator(0, quirk), true, true, 0)
			run := driveGavel(t, g, gavelNodes("v100", 4, 1), []gavelJob{
				{id: "j1", workers: 2, steps: 720, rates: map[string]float64{"v100": 1}},
				{id: "j2", workers: 4, steps: lots, rates: map[string]float64{"v100": 1}},
				{id: "j3", workers: 1, steps: lots, rates: map[string]float64{"v100": 1}},
			}, 4)
			var got [][]string
			for _, p := range run.plans {
				got = append(got, running(p))
			}
			want := [][]string{{"j1"}, {"j1"}, {"j2"}, {"j2"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("jobs run per round (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFIFOGavelQuirk(t *testing.T) {
	// k80 and v100, four GPUs each; j1 (1 GPU), j2 (4 GPUs), j3 (1 GPU).
	// Gavel's FIFO puts every job on v100, the last type by name, even j2,
	// which no longer fits there: v100 is over-subscribed and time-shared,
	// k80 stays idle. Without the quirk (seed 0's draws), j1 and j3 go to
	// v100 and j2 to k80.
	jobs := []gavelJob{
		{id: "j1", workers: 1, steps: lots, rates: map[string]float64{"v100": 1, "k80": 1}},
		{id: "j2", workers: 4, steps: lots, rates: map[string]float64{"v100": 1, "k80": 1}},
		{id: "j3", workers: 1, steps: lots, rates: map[string]float64{"v100": 1, "k80": 1}},
	}
	nodes := append(gavelNodes("k80", 4, 1), gavelNodes("v100", 4, 1)...)
	tests := []struct {
		quirk bool
		want  map[string]string
	}{
		{true, map[string]string{"j1": "[v100:1]", "j3": "[v100:1]"}},
		{false, map[string]string{"j1": "[v100:1]", "j2": "[k80:1 k80:1 k80:1 k80:1]", "j3": "[v100:1]"}},
	}
	for _, tc := range tests {
		g := newGavelRounds("fifo", newFIFOAllocator(0, tc.quirk), true, true, 0)
		run := driveGavel(t, g, nodes, jobs, 1)
		got := map[string]string{}
		for id, tasks := range run.plans[0].Assignments {
			var ts []string
			for _, task := range tasks {
				ts = append(ts, fmt.Sprintf("%s:%d", task.Type, task.GPUs))
			}
			sort.Strings(ts)
			got[id] = fmt.Sprint(ts)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("gavelQuirk=%v: placements (-want +got):\n%s", tc.quirk, diff)
		}
	}
}

func TestPyRandomMatchesCPython(t *testing.T) {
	// Values printed by CPython 3.11: random.Random(seed).randrange(n) and
	// .shuffle, the two calls Gavel's simulator makes.
	draws := func(seed int64, ns ...int) []int {
		r := newPyRandom(seed)
		var out []int
		for _, n := range ns {
			out = append(out, r.IntN(n))
		}
		return out
	}
	tests := []struct {
		seed int64
		ns   []int
		want []int
	}{
		{0, []int{3, 3, 3, 3, 3, 3, 3, 3}, []int{1, 1, 0, 1, 2, 1, 1, 1}},
		{1, []int{3, 3, 3, 3, 3, 3, 3, 3}, []int{0, 2, 0, 1, 0, 1, 1, 1}},
		{0, []int{1, 3, 1, 2, 3}, []int{0, 1, 0, 1, 2}},
		{42, []int{1000, 1000, 1000, 1000, 1000}, []int{654, 114, 25, 759, 281}},
		{-3, []int{7, 7, 7, 7, 7}, []int{1, 4, 4, 1, 2}},
		{1<<40 + 5, []int{5, 5, 5, 5, 5}, []int{4, 4, 2, 0, 4}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, draws(tc.seed, tc.ns...)); diff != "" {
			t.Errorf("seed %d randrange%v (-CPython +ours):\n%s", tc.seed, tc.ns, diff)
		}
	}
	r := newPyRandom(5)
	x := []string{"v100", "p100", "k80"}
	var got [][]string
	for i := 0; i < 4; i++ {
		r.Shuffle(len(x), func(a, b int) { x[a], x[b] = x[b], x[a] })
		got = append(got, append([]string(nil), x...))
	}
	want := [][]string{{"v100", "p100", "k80"}, {"v100", "p100", "k80"}, {"p100", "v100", "k80"}, {"k80", "p100", "v100"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seed 5 shuffles (-CPython +ours):\n%s", diff)
	}
}

func TestVertexSplit(t *testing.T) {
	// Row totals 1/3 (scale 1) and 1/12 (scale 4), 12 jobs on 4+4+4 GPUs.
	var X [][]float64
	var scale []float64
	for i := 0; i < 12; i++ {
		s := []float64{1, 4}[i%2]
		scale = append(scale, s)
		tot := 2.0 / 3 / s
		X = append(X, []float64{tot / 3, tot / 3, tot / 3})
	}
	capacity := []float64{4, 4, 4}
	vertexSplit(X, scale, capacity, newPyRandom(7))
	load := make([]float64, 3)
	for i, row := range X {
		sum, used := 0.0, 0
		for k, v := range row {
			if v < 0 {
				t.Fatalf("row %d: negative share %v", i, v)
			}
			sum += v
			load[k] += v * scale[i]
			if v > 0 {
				used++
			}
		}
		if want := 2.0 / 3 / scale[i]; math.Abs(sum-want) > 1e-12 {
			t.Errorf("row %d: total %v, want %v", i, sum, want)
		}
		if used > 2 {
			t.Errorf("row %d spread over %d types: %v", i, used, row)
		}
	}
	for k, l := range load {
		if l > capacity[k]+1e-9 {
			t.Errorf("type %d loaded %v > %v", k, l, capacity[k])
		}
	}
}

func TestGavelPoliciesAreDeterministic(t *testing.T) {
	// Two instances of each Gavel policy fed the same rounds plan the same,
	// on nodes of several GPUs and three types.
	nodes := append(append(gavelNodes("k80", 2, 4), gavelNodes("p100", 2, 4)...), gavelNodes("v100", 2, 4)...)
	var jobs []gavelJob
	for i := 0; i < 14; i++ {
		w := []int{1, 1, 2, 4, 1, 8, 1}[i%7]
		jobs = append(jobs, gavelJob{
			id: fmt.Sprint(i), workers: w, arrive: float64(i%5) * 300, steps: float64(20000 + 7000*i),
			rates: map[string]float64{"k80": 0.5 * float64(w), "p100": float64(1+i%3) * float64(w), "v100": float64(2+i%4) * float64(w)},
		})
	}
	for _, name := range []string{"gavel", "las", "gavel-makespan", "gavel-ftf", "yarn-cs"} {
		t.Run(name, func(t *testing.T) {
			p1, err := New(name, Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			p2, _ := New(name, Options{Seed: 3})
			a := driveGavel(t, p1, nodes, jobs, 40)
			b := driveGavel(t, p2, nodes, jobs, 40)
			if diff := cmp.Diff(a.plans, b.plans); diff != "" {
				t.Errorf("two instances planned differently (-first +second):\n%s", diff)
			}
			ran := 0
			for _, p := range a.plans {
				ran += len(p.Assignments)
			}
			if ran == 0 {
				t.Error("nothing ever ran")
			}
		})
	}
}

func TestGavelMidRoundKeepsTheRound(t *testing.T) {
	// The daemon plans again 10 s into a round (after a requeue) and a job
	// d has arrived: Gavel's round goes on unchanged (a and b run, d waits)
	// and the next full round picks what it would have picked without the
	// early look (c, a: TestGavelPriorityRanking's round 2).
	x := map[string]map[string]float64{"a": {"v100": 0.5}, "b": {"v100": 0.25}, "c": {"v100": 0.25}, "d": {"v100": 0.25}}
	thr := Throughputs{}
	thr.Set("m", "v100", 1, 1)
	snap := func(at float64, mid bool, ids ...string) *Snapshot {
		s := &Snapshot{Now: gavelT0.Add(time.Duration(at) * time.Second), Round: 360 * time.Second,
			Nodes: gavelNodes("v100", 2, 1), Throughput: thr, MidRound: mid}
		for _, id := range ids {
			s.Jobs = append(s.Jobs, Job{ID: id, Type: "m", Workers: 1, Arrival: gavelT0, RemainingSteps: lots, Weight: 1})
		}
		return s
	}
	plan := func(g *gavelRounds, s *Snapshot) *Plan {
		t.Helper()
		p, err := g.Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(s, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	g, _ := newFixedRounds(x)
	first := plan(g, snap(0, false, "a", "b", "c"))
	before, err := g.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	mid := snap(10, true, "a", "b", "c", "d")
	for i := range mid.Jobs[:2] {
		mid.Jobs[i].Current = first.Assignments[mid.Jobs[i].ID]
	}
	p := plan(g, mid)
	if diff := cmp.Diff(first.Assignments, p.Assignments); diff != "" {
		t.Errorf("mid-round plan changed the round (-first +mid):\n%s", diff)
	}
	after, err := g.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(string(before), string(after)) {
		t.Errorf("mid-round plan changed the mechanism's state:\n%s", cmp.Diff(string(before), string(after)))
	}
	if got := running(plan(g, snap(360, false, "a", "b", "c"))); !cmp.Equal(got, []string{"a", "c"}) {
		t.Errorf("next full round ran %v, want [a c]", got)
	}
}
