package optimizer

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nodesOf summarises a plan as job -> its sorted "node:gpus" tasks.
func nodesOf(p *Plan) map[string]string {
	return summarizePlan(p, func(t Task) string { return fmt.Sprintf("%s:%d", t.Node, t.GPUs) })
}

// planChecked plans s with a fresh instance of the named policy and fails
// the test if the plan breaks an invariant.
func planChecked(t *testing.T, name string, s *Snapshot, o Options) *Plan {
	t.Helper()
	p, err := New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(s, plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestShapeHonouredByEveryPolicy builds each case for every registered
// policy: whatever the policy prefers, a job's request shape decides where
// it may run, and a job no node can hold does not run at all.
func TestShapeHonouredByEveryPolicy(t *testing.T) {
	rates := map[string]float64{"fast": 4, "slow": 1}
	cases := []struct {
		name  string
		build func() *Snapshot
		// want is the plan as job -> nodes, the same for every policy.
		want map[string]string
	}{{
		name: "8 GPUs on one node, nodes have 4: never placed",
		build: func() *Snapshot {
			s := newSnapshot().node("f1", "fast", 4).node("f2", "fast", 4).job("a", 8, 1000, rates).s
			s.Jobs[0].Shape = Shape{Nodes: 1, GPUsPerNode: 8}
			return s
		},
		want: map[string]string{},
	}, {
		name: "2 x 4 GPUs: the type with one 4-GPU node cannot hold it, the slow type can",
		build: func() *Snapshot {
			s := newSnapshot().node("f1", "fast", 4).node("f2", "fast", 2).node("s1", "slow", 4).node("s2", "slow", 4).
				job("a", 8, 1000, rates).s
			s.Jobs[0].Shape = Shape{Nodes: 2, GPUsPerNode: 4}
			return s
		},
		want: map[string]string{"a": "[s1:4 s2:4]"},
	}, {
		name: "excluded and featureless nodes are not used",
		build: func() *Snapshot {
			s := newSnapshot().node("f1", "fast", 4).node("f2", "fast", 4).node("s1", "slow", 4).job("a", 2, 1000, rates).s
			s.Jobs[0].Shape = Shape{Nodes: 1, GPUsPerNode: 2, Eligible: map[string]bool{"f2": true}}
			return s
		},
		want: map[string]string{"a": "[f2:2]"},
	}, {
		name: "a typed request runs only on its type",
		build: func() *Snapshot {
			s := newSnapshot().node("f1", "fast", 4).node("s1", "slow", 4).job("a", 1, 1000, rates).s
			s.Jobs[0].Shape = Shape{Nodes: 1, GPUsPerNode: 1, Types: []string{"slow"}}
			return s
		},
		want: map[string]string{"a": "[s1:1]"},
	}, {
		name: "CPUs: two 8-CPU jobs do not share a node with 8 CPUs",
		build: func() *Snapshot {
			s := newSnapshot().node("f1", "fast", 4).node("f2", "fast", 4).
				job("a", 1, 1000, rates).job("b", 1, 1000, rates).s
			for i := range s.Nodes {
				s.Nodes[i].CPUs, s.Nodes[i].MemMB = 8, 4000
			}
			for i := range s.Jobs {
				s.Jobs[i].Shape = Shape{Nodes: 1, GPUsPerNode: 1, CPUsPerNode: 8, MemMBPerNode: 3900}
			}
			return s
		},
		want: map[string]string{"a": "one node", "b": "the other"},
	}}
	for _, name := range Names() {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				s := tc.build()
				plan := planChecked(t, name, s, Options{Seed: 1})
				got := nodesOf(plan)
				if name == "hadare" {
					// Copies may add nodes; compare the nodes of gangs only.
					for id, tasks := range plan.Assignments {
						if len(tasks) > 0 && tasks[0].Copy > 0 {
							delete(got, id)
						}
					}
					for id := range tc.want {
						if _, ok := got[id]; !ok {
							return // ran as copies: Check above covered its shape
						}
					}
				}
				if tc.want["b"] == "the other" {
					if got["a"] == "" || got["b"] == "" || got["a"] == got["b"] {
						t.Errorf("plan %v: want a and b on different nodes", got)
					}
					return
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("plan (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestShapeRandom plans random shaped workloads with every policy and checks
// every plan, so no policy's placement path can bypass a shape.
func TestShapeRandom(t *testing.T) {
	types := []string{"a", "b", "c"}
	for _, name := range Names() {
		p, err := New(name, Options{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(7))
		for round := 0; round < 30; round++ {
			s := &Snapshot{Now: t0.Add(time.Duration(round) * time.Hour), Round: time.Hour, Throughput: Throughputs{}}
			for i := 0; i < 9; i++ {
				s.Nodes = append(s.Nodes, Node{Name: fmt.Sprintf("n%d", i), Type: types[i%3], GPUs: []int{2, 4, 8}[rng.Intn(3)], CPUs: 16, MemMB: 64000})
			}
			for i := 0; i < 14; i++ {
				id := fmt.Sprintf("r%dj%d", round, i)
				k, g := 1+rng.Intn(2), []int{1, 2, 4, 8}[rng.Intn(4)]
				j := Job{ID: id, Type: "m" + id, Workers: k * g, Arrival: s.Now, TotalSteps: 1e4, RemainingSteps: 1e4, Weight: 1,
					Shape: Shape{Nodes: k, GPUsPerNode: g, CPUsPerNode: 4 * rng.Intn(3), MemMBPerNode: int64(16000 * rng.Intn(3))}}
				if rng.Intn(3) == 0 {
					j.Shape.Types = []string{types[rng.Intn(3)]}
				}
				if rng.Intn(3) == 0 {
					j.Shape.Eligible = map[string]bool{}
					for _, n := range s.Nodes {
						if rng.Intn(2) == 0 {
							j.Shape.Eligible[n.Name] = true
						}
					}
				}
				for _, h := range types {
					s.Throughput.Set(j.Type, h, j.Workers, 1+rng.Float64())
				}
				s.Jobs = append(s.Jobs, j)
			}
			plan, err := p.Plan(s)
			if err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
			if err := Check(s, plan); err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
		}
	}
}

func TestCheckRejectsShapeViolations(t *testing.T) {
	base := func() *Snapshot {
		s := newSnapshot().node("f1", "fast", 4).node("f2", "fast", 4).job("a", 4, 1, map[string]float64{"fast": 1}).s
		s.Jobs[0].Shape = Shape{Nodes: 1, GPUsPerNode: 4, Eligible: map[string]bool{"f1": true}}
		return s
	}
	for _, tc := range []struct {
		name  string
		tasks []Task
	}{
		{"excluded node", []Task{{Node: "f2", Type: "fast", GPUs: 4}}},
		{"split over two nodes", []Task{{Node: "f1", Type: "fast", GPUs: 2}, {Node: "f2", Type: "fast", GPUs: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			s.Jobs[0].Shape.Eligible = nil
			if tc.name == "excluded node" {
				s.Jobs[0].Shape.Eligible = map[string]bool{"f1": true}
			}
			p := NewPlan()
			p.Assign("a", tc.tasks...)
			if err := Check(s, p); !errors.Is(err, ErrInvariant) {
				t.Fatalf("Check = %v, want ErrInvariant", err)
			}
		})
	}
}

// TestKeepNoStop: a running job that may not be stopped keeps its GPUs in
// every policy's plan, even when the policy would rather run another job.
func TestKeepNoStop(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			// a runs on the only node; b is far shorter, so every
			// size-aware policy prefers it.
			s := newSnapshot().node("f1", "fast", 4).
				job("a", 4, 1e6, map[string]float64{"fast": 1}).job("b", 4, 10, map[string]float64{"fast": 1}).s
			s.Jobs[0].Current = []Task{{Node: "f1", Type: "fast", GPUs: 4}}
			s.Jobs[0].Attained = 1e9
			s.Jobs[0].NoStop = true
			plan := planChecked(t, name, s, Options{})
			if diff := cmp.Diff(map[string]string{"a": "[f1:4]"}, nodesOf(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKeepNoStopMoves: a running job that may not be stopped moves only
// where that saves more than the migration penalty; a job the plan had put
// on the GPUs it keeps takes what the plan left free instead.
func TestKeepNoStopMoves(t *testing.T) {
	// a runs on s1 (rate 1 on slow, 2 on fast): 3600 steps left, so a move
	// to fast saves 1800 s.
	tests := []struct {
		name    string
		noStop  bool
		noMove  bool
		penalty time.Duration
		planned map[string][]Task
		want    map[string]string
	}{
		{name: "a move that saves more than the penalty stays", noStop: true, penalty: time.Minute,
			planned: map[string][]Task{"a": {{Node: "f1", Type: "fast", GPUs: 1}}},
			want:    map[string]string{"a": "[f1:1]"}},
		{name: "a move that saves less is undone", noStop: true, penalty: time.Hour,
			planned: map[string][]Task{"a": {{Node: "f1", Type: "fast", GPUs: 1}}},
			want:    map[string]string{"a": "[s1:1]"}},
		{name: "a move to a slower node is undone, and the job planned on its GPUs takes the freed ones", noStop: true, penalty: time.Minute,
			planned: map[string][]Task{"a": {{Node: "s2", Type: "slow", GPUs: 1}}, "b": {{Node: "s1", Type: "slow", GPUs: 1}}},
			want:    map[string]string{"a": "[s1:1]", "b": "[s2:1]"}},
		{name: "a job that may be stopped moves as planned", penalty: time.Hour,
			planned: map[string][]Task{"a": {{Node: "s2", Type: "slow", GPUs: 1}}, "b": {{Node: "s1", Type: "slow", GPUs: 1}}},
			want:    map[string]string{"a": "[s2:1]", "b": "[s1:1]"}},
		{name: "a job that cannot resume stays, whatever the move saves", noStop: true, noMove: true, penalty: time.Minute,
			planned: map[string][]Task{"a": {{Node: "f1", Type: "fast", GPUs: 1}}},
			want:    map[string]string{"a": "[s1:1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshot().node("s1", "slow", 1).node("s2", "slow", 1).node("f1", "fast", 1).
				job("a", 1, 3600, map[string]float64{"slow": 1, "fast": 2}).
				job("b", 1, 3600, map[string]float64{"slow": 1, "fast": 2}).s
			s.Jobs[0].Current = []Task{{Node: "s1", Type: "slow", GPUs: 1}}
			s.Jobs[0].NoStop, s.Jobs[0].NoMove = tc.noStop, tc.noMove
			plan := NewPlan()
			for id, tasks := range tc.planned {
				plan.Assign(id, tasks...)
			}
			got := KeepNoStop(s, plan, tc.penalty)
			if err := Check(s, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, nodesOf(got)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKeepNoStopUndoesChains: a job that may not be stopped, kept where it
// runs, finds its GPUs planned to another such job's move: that move is
// undone too, so the plan stays within capacity.
func TestKeepNoStopUndoesChains(t *testing.T) {
	// a runs on f1 and is planned onto the slower s2 (undone); b runs on s1
	// and is planned onto f1 (saves 1800 s, more than the penalty, but f1
	// is a's again).
	s := newSnapshot().node("s1", "slow", 1).node("s2", "slow", 1).node("f1", "fast", 1).
		job("a", 1, 3600, map[string]float64{"slow": 1, "fast": 2}).
		job("b", 1, 3600, map[string]float64{"slow": 1, "fast": 2}).s
	s.Jobs[0].Current = []Task{{Node: "f1", Type: "fast", GPUs: 1}}
	s.Jobs[1].Current = []Task{{Node: "s1", Type: "slow", GPUs: 1}}
	s.Jobs[0].NoStop, s.Jobs[1].NoStop = true, true
	plan := NewPlan()
	plan.Assign("a", Task{Node: "s2", Type: "slow", GPUs: 1})
	plan.Assign("b", Task{Node: "f1", Type: "fast", GPUs: 1})
	got := KeepNoStop(s, plan, time.Minute)
	if err := Check(s, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "[f1:1]", "b": "[s1:1]"}, nodesOf(got)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
