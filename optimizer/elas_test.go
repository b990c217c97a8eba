package optimizer

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var elasT0 = time.Date(2021, 3, 1, 0, 0, 0, 0, time.UTC)

// elasJob is a job of gpus workers that has run for executed seconds on
// gpus GPUs and done the fraction done of its 1,000 steps.
func elasJob(id string, gpus int, executed, done float64) Job {
	return Job{ID: id, Type: "m", Workers: gpus, Arrival: elasT0, Weight: 1,
		TotalSteps: 1000, RemainingSteps: 1000 * (1 - done),
		Executed: executed, Attained: executed * float64(gpus)}
}

// elasSnapshot is one type ("gpu", every job 1 step/s) on nodes of the given
// GPU counts.
func elasSnapshot(nodeGPUs []int, jobs ...Job) *Snapshot {
	s := &Snapshot{Now: elasT0.Add(time.Hour), Round: 360 * time.Second, Throughput: Throughputs{}, Jobs: jobs}
	for i, g := range nodeGPUs {
		s.Nodes = append(s.Nodes, Node{Name: string(rune('a'+i)) + "1", Type: "gpu", GPUs: g})
	}
	for w := 1; w <= 8; w++ {
		s.Throughput.Set("m", "gpu", w, 1)
	}
	return s
}

func TestELASKey(t *testing.T) {
	scaled := elasJob("s", 2, 1000, 0.5)
	scaled.TotalSteps, scaled.RemainingSteps = 7e6, 3.5e6
	cases := []struct {
		name string
		job  Job
		want float64
	}{
		{"new job: no service, no progress", elasJob("n", 1, 0, 0), 0},
		{"half done after 1000 s on 2 GPUs: as much again", elasJob("h", 2, 1000, 0.5), 2000},
		{"90% done after 9000 s: a ninth of that left", elasJob("a", 1, 9000, 0.9), 1000},
		{"10% done after 1000 s: nine times that left", elasJob("b", 1, 1000, 0.1), 9000},
		{"steps in other units: only the fraction done counts", scaled, 2000},
		{"ran but no progress seen: its attained service (LAS)", elasJob("z", 1, 500, 0), 500},
		{"all steps done", elasJob("d", 4, 300, 1), 0},
		{"no step count: its attained service", func() Job { j := elasJob("u", 1, 700, 0.5); j.TotalSteps = 0; return j }(), 700},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ELASKey(&tc.job), cmpopts.EquateApprox(1e-9, 1e-9)); diff != "" {
				t.Errorf("ELASKey (-want +got):\n%s", diff)
			}
		})
	}
}

// TestELASOrder plans one round and compares the jobs that run.
func TestELASOrder(t *testing.T) {
	later := func(j Job, d time.Duration) Job { j.Arrival = j.Arrival.Add(d); return j }
	cases := []struct {
		name  string
		nodes []int
		jobs  []Job
		want  []string
	}{{
		name:  "nearly finished ahead of a fresh job of equal attained service",
		nodes: []int{1},
		jobs:  []Job{elasJob("fresh", 1, 3600, 0.1), elasJob("nearly", 1, 3600, 0.9)},
		want:  []string{"nearly"},
	}, {
		name:  "least remaining service ahead of least attained service",
		nodes: []int{1},
		// little: 100 GPU-s for 1% (9,900 left); much: 5,000 GPU-s for 50% (5,000 left).
		jobs: []Job{elasJob("little", 1, 100, 0.01), elasJob("much", 1, 5000, 0.5)},
		want: []string{"much"},
	}, {
		name:  "service, not time: a gang's remaining time counts its GPUs",
		nodes: []int{2},
		// gang: 1,000 s left on 2 GPUs (2,000 GPU-s); single: 1,500 s on 1 (1,500).
		jobs: []Job{elasJob("gang", 2, 1000, 0.5), elasJob("single", 1, 1000, 0.4)},
		want: []string{"single"},
	}, {
		name:  "a new job runs first, for a round, to show its progress rate",
		nodes: []int{1},
		jobs:  []Job{elasJob("running", 1, 36000, 0.99), later(elasJob("new", 1, 0, 0), 30*time.Minute)},
		want:  []string{"new"},
	}, {
		name:  "equal estimates: the earlier arrival",
		nodes: []int{1},
		jobs:  []Job{later(elasJob("second", 1, 1000, 0.5), time.Minute), elasJob("first", 1, 1000, 0.5)},
		want:  []string{"first"},
	}, {
		name:  "a gang that does not fit is skipped and smaller jobs backfill",
		nodes: []int{2, 1},
		jobs:  []Job{elasJob("wide", 4, 10, 0.9), elasJob("two", 2, 1000, 0.5), elasJob("one", 1, 5000, 0.5)},
		want:  []string{"one", "two"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := planChecked(t, "elas", elasSnapshot(tc.nodes, tc.jobs...), Options{})
			if diff := cmp.Diff(tc.want, runningIDs(plan)); diff != "" {
				t.Errorf("jobs that run (-want +got):\n%s", diff)
			}
		})
	}
}

// TestELASRounds plays rounds on one GPU: both jobs are new; each runs one
// round to show its progress rate, then the one with less left runs to the
// end, then the other. Tiresias (FIFO until 3,250 GPU-seconds) would run
// long first for nine rounds.
func TestELASRounds(t *testing.T) {
	long, short := elasJob("long", 1, 0, 0), elasJob("short", 1, 0, 0)
	long.TotalSteps, long.RemainingSteps = 3600, 3600   // 10 rounds at 1 step/s
	short.TotalSteps, short.RemainingSteps = 1080, 1080 // 3 rounds
	short.Arrival = short.Arrival.Add(time.Second)
	s := elasSnapshot([]int{1}, long, short)
	s.Now = elasT0
	p, err := New("elas", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for r := 0; r < 13 && len(s.Jobs) > 0; r++ {
		plan, err := p.Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(s, plan); err != nil {
			t.Fatal(err)
		}
		ran := runningIDs(plan)
		got = append(got, ran...)
		var left []Job
		for _, j := range s.Jobs {
			j.Current = plan.Assignments[j.ID]
			if len(j.Current) > 0 {
				j.Executed += s.Round.Seconds()
				j.Attained += s.Round.Seconds() * float64(j.Workers)
				j.RemainingSteps -= s.Round.Seconds()
			}
			if j.RemainingSteps > 1e-9 {
				left = append(left, j)
			}
		}
		s.Jobs = left
		s.Now = s.Now.Add(s.Round)
	}
	want := []string{"long", "short", "short", "short", "long", "long", "long", "long", "long", "long", "long", "long", "long"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job run in each round (-want +got):\n%s", diff)
	}
}

// runningIDs lists the jobs a plan runs, sorted.
func runningIDs(p *Plan) []string {
	var ids []string
	for id, tasks := range p.Assignments {
		if len(tasks) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
