package bridge

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// siteFake is the fake with a site's accounting limits and reservations.
type siteFake struct {
	*fakeCluster
	limits slurm.Limits
	res    []slurm.Reservation
}

func (s siteFake) Limits(context.Context) (slurm.Limits, error) { return s.limits, nil }
func (s siteFake) Reservations(context.Context) ([]slurm.Reservation, error) {
	return s.res, nil
}

// accountingLimits are the limits of the accounting test cluster, parsed
// from its verbatim sacctmgr output: QOS gpu4 (MaxTRESPerUser gres/gpu=4)
// for bob.
func accountingLimits(t *testing.T) slurm.Limits {
	t.Helper()
	read := func(rel string) slurm.Fixture {
		fx, err := slurm.LoadFixture(filepath.Join("..", "slurm", "testdata", rel))
		if err != nil {
			t.Fatal(err)
		}
		return fx
	}
	assocs, errs := slurm.ParseAssociations(strings.NewReader(string(read("sacctmgr-show-assoc/22.05-site.txt").Output)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	qos, errs := slurm.ParseQOS(strings.NewReader(string(read("sacctmgr-show-qos/22.05-site.txt").Output)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return slurm.Limits{Associations: assocs, QOS: qos}
}

func TestLimitBudgets(t *testing.T) {
	lim := accountingLimits(t)
	v := &View{Now: t0, Jobs: []*JobView{
		{ID: "1", State: "RUNNING", Class: ClassRunning, Tagged: true, Workers: 1},
		{ID: "2", State: "RUNNING", Class: ClassUntagged},
		{ID: "3", State: "PENDING", Class: ClassWaiting, Tagged: true, Workers: 1},
		{ID: "4", State: "PENDING", Class: ClassWaiting, Tagged: true, Workers: 1},
	}}
	scopes := map[string]jobScope{
		"1": {user: "bob", account: "acct_b", qos: "gpu4", gpus: 1},
		"2": {user: "bob", account: "acct_b", qos: "gpu4", gpus: 2},
		"3": {user: "bob", account: "acct_b", qos: "gpu4"},
		"4": {user: "alice", account: "acct_a", qos: "normal"},
	}
	budgets, jobs := limitBudgets(&lim, v, scopes)
	want := map[string]optimizer.Limit{"qos gpu4 user bob": {GPUs: 1, Jobs: -1, Reason: "QOSMaxGRESPerUser"}}
	if diff := cmp.Diff(want, budgets); diff != "" {
		t.Errorf("budgets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"3": {"qos gpu4 user bob"}, "4": nil}, jobs); diff != "" {
		t.Errorf("job limits (-want +got):\n%s", diff)
	}
}

func TestReservedNodes(t *testing.T) {
	fx, err := slurm.LoadFixture(filepath.Join("..", "slurm", "testdata", "scontrol-show-reservation", "22.05-three.txt"))
	if err != nil {
		t.Fatal(err)
	}
	res, errs := slurm.ParseReservations(strings.NewReader(string(fx.Output)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// The capture's reservations: maint1 on node1 from 15:23:34 (inactive),
	// team_a on node3 (active), bob_short on node4-5 from 14:33:35.
	now := time.Date(2026, 12, 7, 14, 23, 40, 0, time.Local)
	for _, tc := range []struct {
		name    string
		job     string
		d       time.Duration
		exclude []string
		only    []string
	}{
		{"a 5-minute job: only the active reservation is in its way", "", 5 * time.Minute, []string{"node3"}, nil},
		{"a 20-minute job runs into bob_short", "", 20 * time.Minute, []string{"node3", "node4", "node5"}, nil},
		{"no time limit: every reservation is in its way", "", 0, []string{"node1", "node3", "node4", "node5"}, nil},
		{"a job of team_a runs only on its nodes", "team_a", 5 * time.Minute, nil, []string{"node3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, only := reservedNodes(res, tc.job, now, tc.d)
			var gotEx, gotOnly []string
			for n := range ex {
				gotEx = append(gotEx, n)
			}
			for n := range only {
				gotOnly = append(gotOnly, n)
			}
			sortStrings := cmpopts.SortSlices(func(a, b string) bool { return a < b })
			if diff := cmp.Diff(tc.exclude, gotEx, sortStrings); diff != "" {
				t.Errorf("excluded (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.only, gotOnly, sortStrings); diff != "" {
				t.Errorf("only (-want +got):\n%s", diff)
			}
		})
	}
}

// The live test's QOS limit: bob may hold 4 GPUs (QOS gpu4), he submits
// eight 1-GPU jobs first, alice fourteen. Slurm alone runs 18 at once; so
// must hadar, with bob's other four waiting for his limit and no GPU held
// for them (before: all eight placed, four pending QOSMaxGRESPerUser on
// pinned GPUs while alice's waited).
func TestQOSLimitPredicted(t *testing.T) {
	h := newHarness(t, nil)
	site := siteFake{fakeCluster: h.fc, limits: accountingLimits(t)}
	var bob, alice []string
	for i := range 8 {
		bob = append(bob, h.fc.submit(resnet, 1, 1, t0.Add(time.Duration(i-60)*time.Second)))
	}
	for i := range 14 {
		alice = append(alice, h.fc.submit(resnet, 1, 1, t0.Add(time.Duration(i-40)*time.Second)))
	}
	h.fc.mu.Lock()
	for _, id := range bob {
		j := h.fc.jobs[id]
		j.user, j.account, j.qos, j.prio = "bob", "acct_b", "gpu4", 3000-int64(len(id))
	}
	for _, id := range alice {
		j := h.fc.jobs[id]
		j.account, j.qos, j.prio = "acct_a", "normal", 2000
	}
	h.fc.mu.Unlock()
	b, err := New(h.cfg, Deps{Cluster: site, Store: h.store, Clock: h.clock, Metrics: NewMetrics(),
		LookupUID: func(string) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.awaitInterval = time.Millisecond
	rep, err := b.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]int{}
	for _, id := range append(append([]string(nil), bob...), alice...) {
		if j := h.fc.job(id); j.state == "RUNNING" {
			running[j.user]++
		}
	}
	if diff := cmp.Diff(map[string]int{"bob": 4, "alice": 14}, running); diff != "" {
		t.Errorf("running after one round (-want +got):\n%s", diff)
	}
	for _, d := range rep.Decisions {
		if h.fc.job(d.JobID).user == "bob" && d.Kind == DecideWait && !strings.Contains(d.Reason, "QOSMaxGRESPerUser") {
			t.Errorf("bob's job %s waits for %q, want his QOS limit", d.JobID, d.Reason)
		}
	}
}

// The live test's maintenance reservation: node1 and node2 (the v100s) go
// into maintenance in a minute; a tagged job with --time=5 must not be
// pinned there (Slurm would not start it: before, hadar pinned it there
// round after round while other GPUs idled). A job without a time limit
// keeps off them too; a job of the reservation goes only there.
func TestReservationKeepsJobsOff(t *testing.T) {
	h := newHarness(t, nil)
	maint := slurm.Reservation{Name: "maint1", Start: t0.Add(time.Minute), End: t0.Add(time.Hour),
		Nodes: []string{"node1", "node2"}, Flags: []string{"MAINT", "SPEC_NODES"}, State: "INACTIVE"}
	site := siteFake{fakeCluster: h.fc, res: []slurm.Reservation{maint}}
	timed := h.fc.submit(resnet, 1, 1, t0)
	open := h.fc.submit(resnet, 1, 1, t0)
	h.fc.mu.Lock()
	h.fc.jobs[timed].timeLimit = 5 * time.Minute
	h.fc.mu.Unlock()
	b, err := New(h.cfg, Deps{Cluster: site, Store: h.store, Clock: h.clock, Metrics: NewMetrics(),
		LookupUID: func(string) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.awaitInterval = time.Millisecond
	if _, err := b.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{timed, open} {
		j := h.fc.job(id)
		if j.state != "RUNNING" || j.nodes[0] == "node1" || j.nodes[0] == "node2" {
			t.Errorf("job %s: %s on %v, want running off the reserved v100 nodes", id, j.state, j.nodes)
		}
	}
}
