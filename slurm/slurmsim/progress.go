package slurmsim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// startTraining starts a run of training job j on GPU type gpuType and
// returns when it ends: toyjob reads its rate, resumes from its last
// report, and ticks until its steps are done.
func (c *Cluster) startTraining(j *Job, gpuType string) time.Time {
	workers := j.gpusPerNode() * j.Spec.NumNodes
	j.rate = 0
	if c.cfg.Rate != nil {
		j.rate = c.cfg.Rate(j.Spec.Model, gpuType, workers)
	}
	j.resume = j.done
	startup := c.cfg.StartupDelay
	if c.cfg.Startup != nil {
		startup = c.cfg.Startup(j.Spec.Model)
	}
	j.tickStart = c.now.Add(startup)
	if j.rate <= 0 {
		return j.tickStart // no rate: toyjob exits with an error
	}
	left := j.Spec.Steps - j.resume
	ticks := math.Max(0, math.Ceil(left/(j.rate*c.period().Seconds())-1e-9))
	return j.tickStart.Add(time.Duration(ticks) * c.period())
}

// period is one tick of toyjob's loop.
func (c *Cluster) period() time.Duration { return c.cfg.Tick + c.cfg.TickOverhead }

// report brings j's last report up to time t (the last tick at or before
// it) and writes it to the spool if it changed.
func (c *Cluster) report(j *Job, t time.Time) {
	if j.State != Running || j.rate <= 0 || t.Before(j.tickStart) {
		return
	}
	k := int64(t.Sub(j.tickStart) / c.period())
	if k < 1 {
		return
	}
	// toyjob credits the time since its start, the tick's own commands
	// included, at its rate.
	steps := math.Min(j.resume+float64(k)*j.rate*c.period().Seconds(), j.Spec.Steps)
	j.done = math.Round(steps*1000) / 1000 // toyjob prints %.3f
	j.doneAt = j.tickStart.Add(time.Duration(k) * c.period())
	if c.cfg.Spool == "" || !j.doneAt.After(j.written) {
		return
	}
	if err := writeReport(c.cfg.Spool, j.reportID(), j.done, j.doneAt); err == nil {
		j.written = j.doneAt
	}
}

// reportID is the id a job knows itself by (SLURM_JOB_ID).
func (j *Job) reportID() string { return j.ID }

// syncReports writes the reports of every running training job up to now.
func (c *Cluster) syncReports() {
	for _, id := range c.liveOrder() {
		if j := c.jobs[id]; j.State == Running && j.Spec.Model != "" {
			c.report(j, c.now)
		}
	}
}

// report is the JSON `hadar report` writes (jobproto.Progress).
type reportFile struct {
	JobID string    `json:"job_id"`
	Steps float64   `json:"steps"`
	At    time.Time `json:"at"`
}

// writeReport writes spool/progress/ID.json as `hadar report` does
// (a temporary file renamed into place).
func writeReport(spool, id string, steps float64, at time.Time) error {
	dir := filepath.Join(spool, "progress")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report of job %s: %w", id, err)
	}
	b, err := json.Marshal(reportFile{JobID: id, Steps: steps, At: at.UTC()})
	if err != nil {
		return fmt.Errorf("report of job %s: %w", id, err)
	}
	tmp := filepath.Join(dir, "."+id+".json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report of job %s: %w", id, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+".json")); err != nil {
		return fmt.Errorf("report of job %s: %w", id, err)
	}
	return nil
}
