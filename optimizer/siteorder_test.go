package optimizer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// SiteOrder: the tiers of higher priority take the free GPUs first; jobs of
// equal priority are the policy's to choose among; a job that fits on none
// of the free GPUs is not behind; a running job keeps its GPUs; a typed job
// counts only on its type.
func TestSiteOrder(t *testing.T) {
	rates := map[string]float64{"v100": 3, "k80": 1}
	for _, tc := range []struct {
		name  string
		build func(b *snapshotBuilder)
		prio  map[string]int64
		want  []string
	}{
		{"higher priority takes the GPUs first", func(b *snapshotBuilder) {
			b.job("lo", 4, 100, rates).job("hi", 4, 100, rates).job("mid", 4, 100, rates)
		}, map[string]int64{"lo": 1, "hi": 9, "mid": 5}, []string{"lo"}},
		{"equal priority: the policy chooses", func(b *snapshotBuilder) {
			b.job("a", 4, 100, rates).job("b", 4, 100, rates).job("c", 4, 100, rates)
		}, map[string]int64{"a": 5, "b": 5, "c": 5}, nil},
		{"too big for the free GPUs: not behind", func(b *snapshotBuilder) {
			b.job("hi", 8, 100, rates).job("lo", 4, 100, rates)
		}, map[string]int64{"hi": 9, "lo": 1}, nil},
		{"a running job keeps its GPUs", func(b *snapshotBuilder) {
			b.job("run", 4, 100, rates).job("hi", 4, 100, rates).job("lo", 4, 100, rates)
			b.s.Jobs[0].Current = []Task{{Node: "v1", Type: "v100", GPUs: 4}}
		}, map[string]int64{"run": 0, "hi": 9, "lo": 1}, []string{"lo"}},
		{"typed: only its type counts", func(b *snapshotBuilder) {
			b.job("hi", 4, 100, rates).job("lo", 4, 100, rates).job("k", 4, 100, rates)
			b.s.Jobs[0].Shape.Types = []string{"v100"}
			b.s.Jobs[1].Shape.Types = []string{"v100"}
		}, map[string]int64{"hi": 9, "lo": 1, "k": 0}, []string{"lo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSnapshot().node("v1", "v100", 4).node("k1", "k80", 4)
			tc.build(b)
			for i := range b.s.Jobs {
				b.s.Jobs[i].Priority = tc.prio[b.s.Jobs[i].ID]
			}
			var got []string
			for id := range SiteOrder(b.s) {
				got = append(got, id)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("behind (-want +got):\n%s", diff)
			}
		})
	}
}

// With Options.SiteOrder every policy plans only the jobs the site's order
// lets start, and its plan says why the others wait.
func TestSiteOrderWrapsEveryPolicy(t *testing.T) {
	rates := map[string]float64{"v100": 3}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot().node("v1", "v100", 4).job("old", 4, 1e6, rates).job("new", 4, 10, rates).s
			s.Jobs[0].Priority, s.Jobs[1].Priority = 2, 1 // "new" is far shorter: size-aware policies prefer it
			p, err := New(name, Options{SiteOrder: true})
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
			if len(plan.Assignments["new"]) != 0 || plan.Waits["new"] == "" {
				t.Errorf("plan %v, waits %v: want the lower-priority job to wait, with a reason", plan.Assignments, plan.Waits)
			}
		})
	}
}

// The live test's QOS limit: bob may run 4 GPUs (MaxTRESPerUser), alice
// has none; bob's jobs come first. Slurm alone runs 4 of bob's and fills
// the rest with alice's: so does the site's order, and a plan made without
// it (order = "policy") is trimmed to the limit (KeepLimits).
func TestSiteOrderLimits(t *testing.T) {
	rates := map[string]float64{"v100": 3}
	build := func() *Snapshot {
		b := newSnapshot().node("v1", "v100", 4).node("v2", "v100", 4).node("v3", "v100", 4)
		for i := range 8 {
			b.job(fmt.Sprintf("bob%d", i), 1, 100, rates)
		}
		for i := range 8 {
			b.job(fmt.Sprintf("alice%d", i), 1, 100, rates)
		}
		s := b.s
		for i := range s.Jobs {
			if strings.HasPrefix(s.Jobs[i].ID, "bob") {
				s.Jobs[i].Priority, s.Jobs[i].Limits = 2, []string{"qos gpu4 user bob"}
			} else {
				s.Jobs[i].Priority = 1
			}
		}
		s.Limits = map[string]Limit{"qos gpu4 user bob": {GPUs: 4, Jobs: -1, Reason: "QOSMaxGRESPerUser"}}
		return s
	}
	count := func(plan *Plan) map[string]int {
		out := map[string]int{}
		for id := range plan.Assignments {
			out[strings.TrimRight(id, "0123456789")]++
		}
		return out
	}
	s := build()
	p, err := New("hadar", Options{SiteOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := count(plan); got["bob"] != 4 || got["alice"] != 8 {
		t.Errorf("plan starts %v, want bob's limit of 4 and alice's 8 (no GPU idle while her jobs wait)", got)
	}
	waits := 0
	for id, why := range plan.Waits {
		if strings.HasPrefix(id, "bob") && strings.Contains(why, "QOSMaxGRESPerUser") {
			waits++
		}
	}
	if waits != 4 {
		t.Errorf("%d of bob's jobs say they wait for his limit, want 4: %v", waits, plan.Waits)
	}

	// A plan made without the site's order (order = "policy") that starts
	// all of bob's jobs is trimmed to his limit, the later ones first.
	s = build()
	all := NewPlan()
	for i := range 8 {
		all.Assign(fmt.Sprintf("bob%d", i), Task{Node: fmt.Sprintf("v%d", 1+i/4), Type: "v100", GPUs: 1})
	}
	if got := count(KeepLimits(s, all)); got["bob"] != 4 || len(all.Waits) != 4 {
		t.Errorf("KeepLimits left %v, waits %v; want 4 of bob's jobs and 4 waits", got, all.Waits)
	}
}
