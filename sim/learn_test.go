package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/optimizer"
)

// halfPrior fills every missing cell with half the job type's best known
// rate at that worker count: a stand-in prior that is plainly wrong.
func halfPrior(known optimizer.Throughputs, jobTypes, gpuTypes []string) optimizer.Throughputs {
	out := optimizer.Throughputs{}
	for _, jt := range jobTypes {
		best := map[int]float64{}
		for gt, byW := range known[jt] {
			for w, r := range byW {
				out.Set(jt, gt, w, r)
				best[w] = max(best[w], r)
			}
		}
		for _, gt := range gpuTypes {
			for w, r := range best {
				if _, ok := known[jt][gt][w]; !ok {
					out.Set(jt, gt, w, r/2)
				}
			}
		}
	}
	return out
}

func TestLearnerPrecedence(t *testing.T) {
	imported := optimizer.Throughputs{}
	imported.Set("A", "v100", 1, 2)
	imported.Set("A", "v100", 2, 4)
	truth := optimizer.Throughputs{}
	truth.Set("A", "v100", 1, 3)
	truth.Set("A", "v100", 2, 4)
	truth.Set("A", "k80", 1, 1.5)
	truth.Set("A", "k80", 2, 2.5)
	trace := []TraceJob{{JobType: "A", ScaleFactor: 1}}
	capacity := map[string]int{"v100": 4, "k80": 4}
	type step struct {
		gpu         string
		rate        float64
		wantChanged bool
		want        map[string]float64 // plan rates at 1 worker
	}
	for _, tc := range []struct {
		name    string
		opts    Learning
		initial map[string]float64
		steps   []step
	}{
		{
			name:    "prior cell learned at once, imported after three samples",
			opts:    Learning{Prior: halfPrior},
			initial: map[string]float64{"v100": 2, "k80": 1},
			steps: []step{
				{"k80", 1.5, true, map[string]float64{"v100": 2, "k80": 1.5}},
				{"v100", 3, false, map[string]float64{"v100": 2, "k80": 1.5}},
				{"v100", 3, false, map[string]float64{"v100": 2, "k80": 1.5}},
				{"v100", 3, true, map[string]float64{"v100": 3, "k80": 1.5}},
				{"v100", 3, false, map[string]float64{"v100": 3, "k80": 1.5}},
			},
		},
		{
			// The imported v100 cell is as unconfirmed as the prior's k80
			// one; each keeps the bonus until its learned value takes over
			// (the prior's at the first sample, the imported at the third).
			name:    "exploration bonus until the learned value takes over",
			opts:    Learning{Prior: halfPrior, Explore: 0.5},
			initial: map[string]float64{"v100": 3, "k80": 1.5},
			steps: []step{
				{"k80", 1.2, true, map[string]float64{"v100": 3, "k80": 1.2}},
				{"v100", 2.5, false, map[string]float64{"v100": 3, "k80": 1.2}},
				{"v100", 2.5, false, map[string]float64{"v100": 3, "k80": 1.2}},
				{"v100", 2.5, true, map[string]float64{"v100": 2.5, "k80": 1.2}},
			},
		},
		{
			name:    "frozen never learns",
			opts:    Learning{Prior: halfPrior, Frozen: true},
			initial: map[string]float64{"v100": 2, "k80": 1},
			steps: []step{
				{"k80", 1.5, false, map[string]float64{"v100": 2, "k80": 1}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLearner(tc.opts, imported, truth, trace, capacity)
			rates := func() map[string]float64 {
				return map[string]float64{"v100": l.plan.Rate("A", "v100", 1), "k80": l.plan.Rate("A", "k80", 1)}
			}
			if diff := cmp.Diff(tc.initial, rates()); diff != "" {
				t.Fatalf("initial plan (-want +got):\n%s", diff)
			}
			for i, s := range tc.steps {
				l.observe("A", s.gpu, 1, s.rate)
				if got := l.endRound(0, float64(i), false); got != s.wantChanged {
					t.Errorf("step %d: changed = %v, want %v", i, got, s.wantChanged)
				}
				if diff := cmp.Diff(s.want, rates()); diff != "" {
					t.Errorf("step %d: plan (-want +got):\n%s", i, diff)
				}
			}
			if got := imported.Rate("A", "v100", 1); got != 2 {
				t.Errorf("imported matrix modified: %v", got)
			}
		})
	}
}

func TestLearnerError(t *testing.T) {
	imported := optimizer.Throughputs{}
	imported.Set("A", "v100", 1, 2)
	truth := optimizer.Throughputs{}
	truth.Set("A", "v100", 1, 2)
	truth.Set("A", "k80", 1, 1)
	l := newLearner(Learning{Prior: halfPrior}, imported, truth, []TraceJob{{JobType: "A", ScaleFactor: 1}}, map[string]int{"v100": 1, "k80": 1})
	l.record(0, 0)
	// The prior says k80 = 1 (half of 2): right by luck. Make it wrong.
	truth.Set("A", "k80", 1, 0.5)
	l.record(0, 1)
	l.observe("A", "k80", 1, 0.5)
	l.endRound(1, 2, true)
	want := []LearnPoint{
		{Completed: 0, TimeS: 0, Cells: 2, MedianError: 0, P90Error: 0, TypeMedianError: map[string]float64{"v100": 0, "k80": 0}},
		{Completed: 0, TimeS: 1, Cells: 2, MedianError: 0.5, P90Error: 0.9, TypeMedianError: map[string]float64{"v100": 0, "k80": 1}},
		{Completed: 1, TimeS: 2, Cells: 2, Learned: 1, TypeMedianError: map[string]float64{"v100": 0, "k80": 0}},
	}
	if diff := cmp.Diff(want, l.log); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]LearnPoint{want[0], want[2]}, LearningAt(l.log, 2, 0, 0.5)); diff != "" {
		t.Errorf("LearningAt (-want +got):\n%s", diff)
	}
}
