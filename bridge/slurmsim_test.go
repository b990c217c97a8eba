package bridge

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// TestMigrationOnSimulatedSlurm runs the daemon's loop against slurmsim,
// whose requeue behaves as 22.05's (the old allocation ends a second after
// requeuehold, then a begin time 120 s on overrides the migration's
// StartTime=now): a job placed on the k80 while another user holds the
// v100 moves there when it frees, is started again (start-now) when Slurm
// delays it, resumes from its last progress report and finishes on the
// v100, while the daemon learns its k80 rate from the reports.
func TestMigrationOnSimulatedSlurm(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir, cfg.SpoolDir, cfg.Metrics.Listen = filepath.Join(dir, "data"), filepath.Join(dir, "spool"), ""
	cfg.Round, cfg.PollInterval, cfg.MinRoundGap = config.Duration{Duration: time.Minute}, config.Duration{Duration: 5 * time.Second}, config.Duration{Duration: 2 * time.Second}
	cfg.MigrationPenalty = config.Duration{Duration: 30 * time.Second}
	store := &countingStore{Store: openStore(t)}
	tp, err := store.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const jobType = "ResNet-50 (batch size 64)"
	c := slurmsim.New(slurmsim.Config{Start: t0, Spool: cfg.SpoolDir, Timing: slurmsim.Measured(2 * time.Second),
		Layout: slurmsim.Layout{{Name: "node1", GPUs: []slurmsim.GPUGroup{{Type: "v100", Count: 1}}},
			{Name: "node4", GPUs: []slurmsim.GPUGroup{{Type: "k80", Count: 1}}}},
		Rate: func(model, gpuType string, workers int) float64 { return tp.Rate(jobType, gpuType, workers) }})
	c.Submit(slurmsim.JobSpec{Name: "other", User: "bob", GPUsPerNode: 1, Duration: time.Minute})
	c.AdvanceTo(t0.Add(time.Second)) // it runs on node1
	id := c.Submit(slurmsim.JobSpec{Name: "train", User: "alice", Comment: "hadar model=resnet50-bs64 steps=600",
		GPUsPerNode: 1, Model: jobType, Steps: 600})

	b, err := New(cfg, Deps{Cluster: c, Store: store, Clock: c, LookupUID: func(string) (int, error) { return os.Getuid(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var kinds []DecisionKind
	b.OnCycle = func(rep RoundReport, err error) {
		if err != nil {
			t.Errorf("round %d: %v", rep.Number, err)
		}
		for _, d := range rep.Decisions {
			if d.JobID == id && d.Kind != DecideKeep && d.Kind != DecideWait {
				kinds = append(kinds, d.Kind)
			}
		}
		if !c.Busy() || c.Now().Sub(t0) > time.Hour {
			cancel()
		}
	}
	if err := b.Run(ctx); err != nil {
		t.Fatal(err)
	}

	j := c.Job(id)
	var types []string
	for _, r := range j.Runs {
		types = append(types, r.Type)
	}
	if diff := cmp.Diff([]DecisionKind{DecidePlace, DecideMigrate, DecideStartNow}, kinds); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"k80", "v100"}, types); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	// 600 steps: about 35 on the k80 in its first minute, the rest at 4.4
	// steps/s on the v100 (alone on the k80 it would take 16 minutes).
	if j.State != slurmsim.Completed || j.Restarts != 1 || j.End.Sub(t0) > 4*time.Minute {
		t.Errorf("job %s after %d restarts at %v, want COMPLETED after 1 within 4 minutes", j.State, j.Restarts, j.End.Sub(t0))
	}
	learned := false
	for _, s := range store.samples {
		learned = learned || (s.GPUType == "k80" && s.JobType == jobType)
	}
	if !learned {
		t.Errorf("no k80 sample learned from the progress reports: %+v", store.samples)
	}
}
