package bridge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/slurm"
)

// A round creates at most NewTypes.PerRound job types for models no matrix
// knows, and at most NewTypes.PerUser for one user's jobs, oldest jobs
// first; a job whose model finds no room is passed through to Slurm. A
// model already learned, or granted to an older job, takes no room.
func TestNewJobTypesBounded(t *testing.T) {
	tp := testMatrix()
	learned := jobproto.UnknownModelType("learned-net")
	tp.Set(learned, "v100", 1, 5)
	prior := map[string]map[int]float64{"v100": {1: 30}}
	var jobs []slurm.Job
	add := func(user, model string) {
		id := fmt.Sprint(len(jobs) + 1)
		j := sJob(id, "hadar model="+model, "PD", 1, 1)
		j.User = user
		j.SubmitTime = t0.Add(-time.Hour + time.Duration(len(jobs))*time.Minute)
		jobs = append(jobs, j)
	}
	// mallory, first in the queue, names five new models; bob and carol
	// come after.
	for i := range 5 {
		add("mallory", fmt.Sprintf("junk-%d", i))
	}
	add("mallory", "learned-net") // learned: no new type
	add("bob", "junk-0")          // mallory's model, already granted
	add("bob", "bob-net")
	add("carol", "carol-net")
	add("carol", "carol-net-2")

	v := BuildView(ViewInput{Now: t0, Jobs: jobs, Nodes: []slurm.Node{sNode("v1", "v100", 4, 0)},
		ResolveGPU: func(s string) (string, error) { return s, nil },
		Models:     jobproto.NewModelResolver(tp.JobTypes(), nil), Throughput: tp,
		PriorFor: func(string) map[string]map[int]float64 { return prior },
		NewTypes: NewTypeLimits{PerRound: 4, PerUser: 2}})
	got := map[string]string{}
	for _, jv := range v.Jobs {
		got[jv.ID] = string(jv.Class)
		if jv.Class == ClassPassThrough && !strings.Contains(jv.Problem, "no new job type may be made for it this round (at most 4 a round, 2 per user)") {
			t.Errorf("job %s passed through for %q", jv.ID, jv.Problem)
		}
	}
	want := map[string]string{
		"1": "waiting", "2": "waiting", // mallory's two
		"3": "pass-through", "4": "pass-through", "5": "pass-through",
		"6":  "waiting", // learned-net
		"7":  "waiting", // junk-0, granted to job 1
		"8":  "waiting", // bob's one
		"9":  "waiting", // carol's one: four new types in the round
		"10": "pass-through",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
	if m := v.Job("7").Model; m != v.Job("1").Model || m != jobproto.UnknownModelType("junk-0") {
		t.Errorf("jobs 1 and 7 (both junk-0) have job types %q and %q", v.Job("1").Model, m)
	}
}
