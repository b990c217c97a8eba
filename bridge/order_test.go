package bridge

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
)

// The site's fairshare as the live test on an accounting cluster measured
// it: bob (priority 3333) submits ten 1-GPU jobs, then alice (6666) ten,
// with 8 GPUs free. Slurm alone starts alice's 8 first; so must hadar. With
// order = "policy" hadar's own order decides (bob's, submitted first).
func TestSiteOrderKeepsFairshare(t *testing.T) {
	for _, tc := range []struct {
		order     string
		wantAlice int
	}{
		{config.OrderSite, 8},
		{config.OrderPolicy, 0},
	} {
		t.Run(tc.order, func(t *testing.T) {
			h := newHarness(t, func(c *config.Config) { c.Order = tc.order })
			h.fc = newFakeCluster("node1:v100:4", "node2:v100:4")
			var bob, alice []string
			for i := range 10 {
				bob = append(bob, h.fc.submit(resnet, 1, 1, t0.Add(time.Duration(i-30)*time.Second)))
			}
			for i := range 10 {
				alice = append(alice, h.fc.submit(resnet, 1, 1, t0.Add(time.Duration(i-20)*time.Second)))
			}
			h.fc.mu.Lock()
			for _, id := range bob {
				h.fc.jobs[id].user, h.fc.jobs[id].prio = "bob", 3333
			}
			for _, id := range alice {
				h.fc.jobs[id].prio = 6666
			}
			h.fc.mu.Unlock()
			b := h.bridge()
			rep := h.cycle(b)
			running := map[string]int{}
			for _, id := range append(append([]string(nil), bob...), alice...) {
				if j := h.fc.job(id); j.state == "RUNNING" {
					running[j.user]++
				}
			}
			want := map[string]int{"alice": tc.wantAlice, "bob": 8 - tc.wantAlice}
			for k, v := range want {
				if v == 0 {
					delete(want, k)
				}
			}
			if diff := cmp.Diff(want, running); diff != "" {
				t.Errorf("running by user after one round (-want +got):\n%s", diff)
			}
			if tc.order == config.OrderSite {
				for _, d := range rep.Decisions {
					if h.fc.job(d.JobID).user == "bob" && (d.Kind != DecideWait || d.Reason == "") {
						t.Errorf("bob's job %s: %+v, want a wait behind higher priority", d.JobID, d)
					}
				}
			}
		})
	}
}
