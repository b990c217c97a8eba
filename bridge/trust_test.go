package bridge

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// TestPoisonedReportsMoveNoOtherJob is the security review's H1 against
// the loop: mallory's job reports absurd progress (1e298 steps, 1e-11
// steps, an overflowing number, reports 1 ns apart or a minute ahead, and
// the largest lie the bound lets in) while bob's and carol's jobs of the
// same model report the truth. The learned cell stays within 2x of the
// truth, no job of bob's or carol's is moved, stopped or kept waiting, and
// a job of another model submitted later is placed at once, under hadar
// and under gavel (whose LP failed on 1.7e308 and then kept every job
// waiting). The reports are hand-written.
func TestPoisonedReportsMoveNoOtherJob(t *testing.T) {
	const model = "ResNet-50 (batch size 64)"
	for _, policy := range []string{"hadar", "gavel"} {
		t.Run(policy, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, func(c *config.Config) { c.Policy = policy; c.Preemption = true; c.MoveWithoutProgress = true })
			imported, err := h.store.Throughputs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			typeOf := map[string]string{}
			for _, n := range h.fc.nodes {
				typeOf[n.name] = n.gtype
			}
			// The truth is the imported rate (10% slower), so that learning
			// it gives no honest reason to move a job.
			truth := func(gpu string) float64 { return 0.9 * imported.Rate(model, gpu, 1) }
			owners := map[string]string{}
			submit := func(user, comment string) string {
				id := h.fc.submit(comment, 1, 1, t0)
				h.fc.mu.Lock()
				h.fc.jobs[id].user = user
				h.fc.mu.Unlock()
				owners[id] = user
				return id
			}
			attacker := submit("mallory", "hadar model=resnet50-bs64 steps=1e9")
			var victims []string
			for _, user := range []string{"bob", "carol", "bob", "carol"} {
				victims = append(victims, submit(user, "hadar model=resnet50-bs64 steps=1e9"))
			}
			b := h.bridge()
			h.cycle(b)
			for _, id := range append([]string{attacker}, victims...) {
				if j := h.fc.job(id); j.state != "RUNNING" {
					t.Fatalf("job %s of %s: %s %s, want it running", id, owners[id], j.state, j.reason)
				}
			}
			lieAt := h.clock.Now()
			for round := range 24 {
				h.clock.advance(time.Minute)
				now := h.clock.Now()
				for _, id := range victims {
					j := h.fc.job(id)
					steps := truth(typeOf[j.nodes[0]]) * now.Sub(j.started).Seconds()
					if err := jobproto.WriteProgress(h.cfg.SpoolDir, id, steps, now.Add(-time.Second)); err != nil {
						t.Fatal(err)
					}
				}
				j := h.fc.job(attacker)
				v100 := imported.Rate(model, "v100", 1)
				switch round % 5 {
				case 0:
					lieAt = lieAt.Add(time.Nanosecond)
					err = jobproto.WriteProgress(h.cfg.SpoolDir, attacker, 1.46e298*float64(round+1), lieAt)
				case 1:
					lieAt = now.Add(59 * time.Second)
					err = jobproto.WriteProgress(h.cfg.SpoolDir, attacker, 1.7e299*float64(round+1), lieAt)
				case 2:
					lieAt = now
					err = jobproto.WriteProgress(h.cfg.SpoolDir, attacker, 1e-11*float64(round), lieAt)
				case 3: // not a number JSON can hold: the report is unreadable
					err = os.WriteFile(filepath.Join(h.cfg.SpoolDir, jobproto.ProgressSubdir, attacker+".json"),
						[]byte(`{"job_id":"`+attacker+`","steps":1e999,"at":"`+now.Format(time.RFC3339Nano)+`"}`), 0o644)
				case 4: // the largest lie within the bound, sustained
					lieAt = now
					err = jobproto.WriteProgress(h.cfg.SpoolDir, attacker, 7.9*v100*now.Sub(j.started).Seconds(), lieAt)
				}
				if err != nil {
					t.Fatal(err)
				}
				rep := h.cycle(b)
				if rep.PlanError != nil {
					t.Fatalf("round %d: plan error %v", round, rep.PlanError)
				}
				for _, d := range rep.Decisions {
					if owners[d.JobID] != "" && owners[d.JobID] != "mallory" && d.Kind != DecideKeep {
						t.Errorf("round %d: %s's job %s: %s (%s), want keep", round, owners[d.JobID], d.JobID, d.Kind, d.Reason)
					}
				}
			}
			for _, id := range victims {
				if j := h.fc.job(id); j.state != "RUNNING" || j.restarts != 0 {
					t.Errorf("%s's job %s: %s, %d restarts; want running, never restarted", owners[id], id, j.state, j.restarts)
				}
			}
			rows, err := h.store.Show(ctx, model)
			if err != nil {
				t.Fatal(err)
			}
			var learned *profiles.Row
			for i, r := range rows {
				if r.Source == profiles.SourceLearned && r.GPUType == "v100" && r.Workers == 1 {
					learned = &rows[i]
				}
			}
			if want := truth("v100"); learned == nil || !learned.InUse || learned.StepsPerSecond < want/2 || learned.StepsPerSecond > 2*want {
				t.Errorf("learned v100 cell %+v, want it in use within 2x of the truth %.3f", learned, want)
			}
			// A job of another model, submitted now, is placed at once.
			late := submit("carol", "hadar model=a3c steps=1000")
			h.clock.advance(time.Minute)
			h.cycle(b)
			if j := h.fc.job(late); j.state != "RUNNING" {
				t.Errorf("carol's late job: %s %s, want it placed", j.state, j.reason)
			}
		})
	}
}

// TestReportsCannotShrinkWork is the review's H2: a steps=1 job that
// reports no progress after 1,440 s of running is planned with at least
// the work its run time implies at the matrix rate (it kept "1 step
// remaining" and so stayed first in line and safe from preemption).
func TestReportsCannotShrinkWork(t *testing.T) {
	tp := testMatrix()
	nodes := []slurm.Node{sNode("node1", "v100", 4, 1)}
	liar := sJob("7", "hadar model=m steps=1", "R", 1, 1, "node1")
	v := BuildView(ViewInput{Now: t0, Jobs: []slurm.Job{liar}, Nodes: nodes,
		ResolveGPU: func(s string) (string, error) { return s, nil },
		Models:     jobproto.NewModelResolver(tp.JobTypes(), nil), Throughput: tp})
	jv := v.Job("7")
	jv.TimeUsed = 1440 * time.Second
	rate := tp.Rate("m", "v100", 1)
	for _, tc := range []struct {
		name string
		done float64
	}{
		{"reports nothing done", 0},
		{"reports all but one step done", 0.95},
		{"reports exactly its steps", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := BuildSnapshot(v, tp, map[string]JobProgress{"7": {Done: tc.done, Reported: true}},
				SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour, Preemption: true})
			j := snap.Jobs[0]
			if want := rate*1440 - 1; j.RemainingSteps < want {
				t.Errorf("remaining %v steps, want at least the %v its run time implies", j.RemainingSteps, want)
			}
		})
	}
	// Nor is a report of more progress than the run implies: the work left
	// is at least steps= less what the run did at the matrix rate.
	long := sJob("8", "hadar model=m steps=100000", "R", 1, 1, "node1")
	v = BuildView(ViewInput{Now: t0, Jobs: []slurm.Job{long}, Nodes: nodes,
		ResolveGPU: func(s string) (string, error) { return s, nil },
		Models:     jobproto.NewModelResolver(tp.JobTypes(), nil), Throughput: tp})
	v.Job("8").TimeUsed = 100 * time.Second
	snap := BuildSnapshot(v, tp, map[string]JobProgress{"8": {Done: 99999, Reported: true}},
		SnapshotParams{Round: time.Minute, DefaultDuration: time.Hour})
	if want := 100000 - rate*100; math.Abs(snap.Jobs[0].RemainingSteps-want) > 1e-6 {
		t.Errorf("remaining %v steps, want %v (steps= less what 100 s at the matrix rate did)", snap.Jobs[0].RemainingSteps, want)
	}
}

// TestSiteWeights: a job weighs its account's weight times its QOS's times
// its tag's weight= (at most 1), and the policy gets it.
func TestSiteWeights(t *testing.T) {
	w := config.WeightsConfig{Accounts: map[string]float64{"acct_a": 2, "acct_b": 0.5}, QOS: map[string]float64{"high": 4}}
	details := map[string]slurm.JobDetail{
		"1": {Account: "acct_a", QOS: "normal"},
		"2": {Account: "acct_a", QOS: "high"},
		"3": {Account: "other", QOS: "normal"},
		"4": {Account: "acct_b"},
	}
	got := siteWeights(w, details)
	want := map[string]float64{"1": 2, "2": 8, "4": 0.5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("siteWeights (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		id  string
		tag float64
		w   float64
	}{
		{"2", 0, 8}, {"2", 0.5, 4}, {"3", 0, 1}, {"3", 0.25, 0.25}, {"absent", 0, 1},
	} {
		if got := jobWeight(got, tc.id, tc.tag); got != tc.w {
			t.Errorf("jobWeight(%s, tag %v) = %v, want %v", tc.id, tc.tag, got, tc.w)
		}
	}
	if siteWeights(config.WeightsConfig{}, details) != nil {
		t.Error("no [weights]: want no site weights")
	}
}

// A [weights] entry reaches the policy through the loop: the job's account
// comes from scontrol's record.
func TestSiteWeightsInSnapshot(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Weights.Accounts = map[string]float64{"acct_a": 3}
	})
	a := h.fc.submit("hadar model=resnet50-bs64 steps=1000", 1, 1, t0)
	o := h.fc.submit("hadar model=resnet50-bs64 steps=1000 weight=0.5", 1, 1, t0)
	h.fc.mu.Lock()
	h.fc.jobs[a].account = "acct_a"
	h.fc.mu.Unlock()
	rep := h.cycle(h.bridge())
	got := map[string]float64{}
	for _, j := range rep.Snapshot.Jobs {
		got[j.ID] = j.Weight
	}
	if diff := cmp.Diff(map[string]float64{a: 3, o: 0.5}, got); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
}

// A rate out of range in the matrix (a database written before the
// bounds, or by hand) is dropped with a log line, never given to a policy.
func TestSaneThroughputs(t *testing.T) {
	tp := optimizer.Throughputs{}
	tp.Set("m", "v100", 1, 1.7e308)
	tp.Set("m", "k80", 1, 2)
	tp.Set("m", "p100", 1, 0)
	tp.Set("m", "a100", 1, math.Inf(1))
	got := saneThroughputs(slog.New(slog.NewTextHandler(io.Discard, nil)), tp)
	want := optimizer.Throughputs{}
	want.Set("m", "k80", 1, 2)
	want.Set("m", "p100", 1, 0)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A model no matrix knows is planned with the prior, whose steps/s are the
// median model's: its own rate, 1000x slower, is learned all the same (the
// e2e modern site's models are 20-50x off the prior), from one user's jobs.
func TestUnknownModelLearnedFarFromThePrior(t *testing.T) {
	h := newHarness(t, nil)
	id := h.fc.submit("hadar model=my-new-llm steps=100000", 1, 1, t0)
	h.fc.mu.Lock()
	j := h.fc.jobs[id]
	j.begin, j.state, j.reason, j.nodes, j.got, j.started = time.Time{}, "RUNNING", "None", []string{"node1"}, "v100", t0
	h.fc.mu.Unlock()
	b := h.bridge()
	for i := range 6 {
		if err := jobproto.WriteProgress(h.cfg.SpoolDir, id, 0.01*float64(60*i), h.clock.Now()); err != nil {
			t.Fatal(err)
		}
		h.cycle(b)
		h.clock.advance(time.Minute)
	}
	tp, err := h.store.Throughputs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	jt := jobproto.UnknownModelType("my-new-llm")
	if r := tp.Rate(jt, "v100", 1); r < 0.005 || r > 0.02 {
		t.Errorf("learned rate of %s on v100 = %v steps/s, want about 0.01", jt, r)
	}
}
