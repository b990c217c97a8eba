package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/slurm"
)

// TestCycleHonoursRequests runs the daemon's round on the fake cluster with
// jobs in every request form of issue 13's live test: each runs where its
// own request allows, or is passed through in its first round with the
// reason; none is pinned where Slurm would refuse it (BadConstraints).
func TestCycleHonoursRequests(t *testing.T) {
	type job struct {
		name       string
		gpus, k    int
		typed      string
		gpusPerJob int
		features   string
		exclude    string
		cpus       int
		mem        int64
	}
	cases := []struct {
		name string
		jobs []job
		// drain drains these nodes first.
		drain []string
		// want is, per job: "run@NODES" or "pass: <part of the reason>".
		want map[string]string
	}{{
		name: "8 GPUs of a type whose nodes have 4",
		jobs: []job{{name: "a", gpus: 8, k: 1, typed: "v100"}},
		want: map[string]string{"a": "pass: no live node hadar uses can hold 1 node(s) x 8 GPUs"},
	}, {
		name: "2 x 4 GPUs of a type with one node",
		jobs: []job{{name: "a", gpus: 4, k: 2, typed: "p100"}},
		want: map[string]string{"a": "pass: no live node hadar uses can hold 2 node(s) x 4 GPUs"},
	}, {
		name:  "its only type is drained",
		drain: []string{"node3"},
		jobs:  []job{{name: "a", gpus: 1, k: 1, typed: "p100"}},
		want:  map[string]string{"a": "pass: no live node hadar uses has GPU type p100"},
	}, {
		name: "a feature only one node has",
		jobs: []job{{name: "a", gpus: 2, k: 1, features: "ib"}},
		want: map[string]string{"a": "run@node4"},
	}, {
		name: "--exclude of every node but one",
		jobs: []job{{name: "a", gpus: 1, k: 1, exclude: "node1,node2,node3,node4"}},
		want: map[string]string{"a": "run@node5"},
	}, {
		name: "two jobs that each need a whole node's CPUs and memory",
		jobs: []job{{name: "a", gpus: 1, k: 1, typed: "v100", cpus: 8, mem: 3900}, {name: "b", gpus: 1, k: 1, typed: "v100", cpus: 8, mem: 3900}},
		want: map[string]string{"a": "run@node1|node2", "b": "run@node1|node2"},
	}, {
		name: "--gpus=2",
		jobs: []job{{name: "a", gpus: 2, k: 1, gpusPerJob: 2}},
		want: map[string]string{"a": "run@node1|node2"},
	}, {
		name: "--gres=gpu:k80:1",
		jobs: []job{{name: "a", gpus: 1, k: 1, typed: "k80"}},
		want: map[string]string{"a": "run@node4|node5"},
	}, {
		name: "a feature no node has",
		jobs: []job{{name: "a", gpus: 1, k: 1, features: "nvlink"}},
		want: map[string]string{"a": "pass: no live node hadar uses can hold 1 node(s) x 1 GPUs"},
	}, {
		name: "a constraint hadar does not evaluate",
		jobs: []job{{name: "a", gpus: 1, k: 1, features: "[ib*2]"}},
		want: map[string]string{"a": "pass: its --constraint \"[ib*2]\" uses operators hadar does not evaluate"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fc.mu.Lock()
			for _, n := range h.fc.nodes {
				n.cpus, n.mem = 8, 4000
				if n.name == "node4" {
					n.features = []string{"ib"}
				}
				for _, d := range tc.drain {
					if n.name == d {
						n.state = "IDLE+DRAIN"
					}
				}
			}
			h.fc.mu.Unlock()
			ids := map[string]string{}
			for i, j := range tc.jobs {
				id := h.fc.submit(resnet, j.gpus, j.k, t0.Add(time.Duration(i)*time.Second))
				h.fc.mu.Lock()
				fj := h.fc.jobs[id]
				fj.typed, fj.gpusPerJob, fj.features, fj.exclude, fj.cpus, fj.mem = j.typed, j.gpusPerJob, j.features, j.exclude, j.cpus, j.mem
				h.fc.mu.Unlock()
				ids[j.name] = id
			}
			b := h.bridge()
			h.cycle(b)
			got := map[string]string{}
			var runNodes []string
			for name, id := range ids {
				j := h.fc.job(id)
				if j.reason == "BadConstraints" {
					t.Errorf("job %s pinned where its own request rules out: %v", name, j.reqNodes)
				}
				switch {
				case j.state == "RUNNING":
					got[name] = "run@" + strings.Join(j.nodes, ",")
					runNodes = append(runNodes, j.nodes...)
				case strings.Contains(j.admin, "released to Slurm's scheduler"):
					got[name] = "pass: " + j.admin
				default:
					got[name] = fmt.Sprintf("%s %s held=%v", j.state, j.reason, j.held)
				}
			}
			for name, want := range tc.want {
				g := got[name]
				if rest, ok := strings.CutPrefix(want, "pass: "); ok {
					if !strings.Contains(g, rest) {
						t.Errorf("job %s: got %q, want passed through with %q", name, g, rest)
					}
					continue
				}
				ok := false
				for _, n := range strings.Split(strings.TrimPrefix(want, "run@"), "|") {
					ok = ok || g == "run@"+n
				}
				if !ok {
					t.Errorf("job %s: got %q, want %s", name, g, want)
				}
			}
			if len(tc.jobs) == 2 && len(runNodes) == 2 && runNodes[0] == runNodes[1] {
				t.Errorf("both jobs on %s, which has CPUs and memory for one", runNodes[0])
			}
		})
	}
}

func TestFeatureMatch(t *testing.T) {
	have := map[string]bool{"ib": true, "a100": true}
	for _, tc := range []struct {
		expr      string
		match, ok bool
	}{
		{"ib", true, true}, {"nvlink", false, true}, {"ib&a100", true, true}, {"ib&nvlink", false, true},
		{"nvlink|a100", true, true}, {"nvlink|x&ib", false, true}, {"[ib|a100]", false, false},
		{"ib*2", false, false}, {"ib&", false, false}, {"!ib", false, false},
	} {
		m, ok := featureMatch(tc.expr, have)
		if diff := cmp.Diff([2]bool{tc.match, tc.ok}, [2]bool{m, ok}); diff != "" {
			t.Errorf("featureMatch(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}

func TestGPURequest(t *testing.T) {
	g := func(typ string, n int) []slurm.GRES { return []slurm.GRES{{Name: "gpu", Type: typ, Count: n}} }
	for _, tc := range []struct {
		name     string
		job      slurm.Job
		detail   *slurm.JobDetail
		nodes    int
		perNode  int
		site     string
		form     string
		wantsErr bool
	}{
		{"--gres", slurm.Job{Gres: g("", 2)}, nil, 1, 2, "", "--gres=gpu:2", false},
		{"typed --gres", slurm.Job{Gres: g("a100", 1)}, nil, 1, 1, "a100", "--gres=gpu:a100:1", false},
		{"--gpus-per-node", slurm.Job{GresRaw: "N/A"}, &slurm.JobDetail{TresPerNode: g("", 4)}, 2, 4, "", "--gpus-per-node=4", false},
		{"--gpus over 2 nodes", slurm.Job{GresRaw: "N/A"}, &slurm.JobDetail{TresPerJob: g("h100", 8)}, 2, 4, "h100", "--gpus=h100:8", false},
		{"--gpus uneven", slurm.Job{GresRaw: "N/A"}, &slurm.JobDetail{TresPerJob: g("", 3)}, 2, 0, "", "", true},
		{"--gpus-per-task", slurm.Job{GresRaw: "N/A"}, &slurm.JobDetail{TresPerTask: g("", 1), NumTasks: 4}, 2, 2, "", "--gpus-per-task=1", false},
		{"no GPUs", slurm.Job{}, &slurm.JobDetail{}, 1, 0, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perNode, site, form, err := gpuRequest(&tc.job, tc.detail, tc.nodes)
			if (err != nil) != tc.wantsErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff([]any{tc.perNode, tc.site, tc.form}, []any{perNode, site, form}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoStepsNoModel: a job may leave out steps= (its --time, else
// default_duration, sets its work) and model= (its job name names it).
func TestNoStepsNoModel(t *testing.T) {
	h := newHarness(t, nil)
	withTime := h.fc.submit("hadar", 1, 1, t0)
	without := h.fc.submit("hadar", 1, 1, t0.Add(time.Second))
	year := h.fc.submit("hadar", 1, 1, t0.Add(2*time.Second))
	h.fc.mu.Lock()
	for id, limit := range map[string]time.Duration{withTime: 2 * time.Hour, without: 0, year: 365 * 24 * time.Hour} {
		h.fc.jobs[id].name, h.fc.jobs[id].timeLimit = "resnet50-bs64", limit
	}
	h.fc.mu.Unlock()
	b := h.bridge()
	rep := h.cycle(b)
	tp, err := h.store.Throughputs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	best := tp.Rate("ResNet-50 (batch size 64)", "v100", 1)
	if best <= 0 {
		t.Fatal("no v100 rate for ResNet-50 (batch size 64)")
	}
	want := map[string]float64{withTime: best * 7200, without: best * 3600, year: best * 3600}
	got := map[string]float64{}
	for _, jv := range rep.View.Jobs {
		if jv.Model != "ResNet-50 (batch size 64)" {
			t.Errorf("job %s: model %q (problem %q), want the job name's", jv.ID, jv.Model, jv.Problem)
		}
	}
	snap := BuildSnapshot(rep.View, tp, nil, SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
	for _, j := range snap.Jobs {
		got[j.ID] = j.TotalSteps
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-9, 0)); diff != "" {
		t.Errorf("total steps (-want +got):\n%s", diff)
	}
}
