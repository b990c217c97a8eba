package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/jobproto"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "report a job's training progress to hadar (run it from inside the job)",
		ArgsUsage: " ",
		Description: "Records the total number of training steps the job has done so far. hadar-slurmd reads\n" +
			"it each round to know the job's remaining work and to learn its throughput on the GPU\n" +
			"type it runs on. Jobs that never report are estimated from their run time.\n\n" +
			"The report is a small file in <spool>/progress/<jobid>.json, written atomically and\n" +
			"owned by the job's user (hadar ignores a report owned by anyone else). The spool\n" +
			"directory must be the daemon's spool_dir, on a filesystem the compute nodes share.\n" +
			"In a job array task the job id is ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} (28_0), the\n" +
			"id hadar knows the task by.\n\n" +
			"With --follow FILE it is a sidecar instead: it follows the training log FILE (like\n" +
			"tail -F: the file may not exist yet, and may be truncated or rotated), finds the step in\n" +
			"tqdm bars and `step N/M` / `Step N of M` lines (or --pattern), and reports at most every\n" +
			"--interval, until it is stopped: on SIGTERM or SIGINT it reads the log to its end, reports\n" +
			"the last step found and exits 0. Start it in the background in the batch script:\n\n" +
			"   hadar report --follow train.log &\n" +
			"   python train.py > train.log 2>&1\n" +
			"   kill $!; wait $!",
		Flags: []cli.Flag{
			&cli.Float64Flag{Name: "steps", Usage: "training steps done so far, in total"},
			&cli.Float64Flag{Name: "total", Usage: "training steps the job will do in all, if known"},
			&cli.StringFlag{Name: "job", Usage: "job id (default: ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} in an array task, else $SLURM_JOB_ID)"},
			&cli.StringFlag{Name: "spool", EnvVars: []string{"HADAR_SPOOL"}, Value: jobproto.DefaultSpoolDir, Usage: "hadar-slurmd's spool directory"},
			&cli.StringFlag{Name: "follow", Usage: "follow this log `FILE` and report the steps it shows, until stopped"},
			&cli.StringFlag{Name: "pattern", Usage: "with --follow: a `REGEX` whose group \"step\" (or first group) is the step and \"total\" (or second) the total; default: tqdm and step N/M lines"},
			&cli.DurationFlag{Name: "interval", Value: 5 * time.Second, Usage: "with --follow: report at most this often"},
			&cli.DurationFlag{Name: "poll", Value: 500 * time.Millisecond, Usage: "with --follow: how often to read the log"},
		},
		Action: func(c *cli.Context) error {
			job, err := reportJobID(c.String("job"), os.Getenv)
			if err != nil {
				return err
			}
			spool := c.String("spool")
			if c.IsSet("pattern") && !c.IsSet("follow") {
				return fmt.Errorf("report: --pattern needs --follow")
			}
			if f := c.String("follow"); f != "" {
				if c.IsSet("steps") {
					return fmt.Errorf("report: give --steps or --follow, not both")
				}
				parser, err := jobproto.NewLogParser(c.String("pattern"))
				if err != nil {
					return fmt.Errorf("report: %w", err)
				}
				ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
				defer stop()
				s := &sidecar{spool: spool, job: job, parser: parser, interval: c.Duration("interval"), now: time.Now}
				return s.run(ctx, jobproto.NewLogFollower(f), c.Duration("poll"))
			}
			if !c.IsSet("steps") {
				return fmt.Errorf("report: give --steps N (or --follow FILE)")
			}
			steps, total := c.Float64("steps"), c.Float64("total")
			if steps < 0 {
				return fmt.Errorf("report: --steps must be >= 0, got %g", steps)
			}
			if total < 0 {
				return fmt.Errorf("report: --total must be >= 0, got %g", total)
			}
			if err := jobproto.WriteReport(spool, jobproto.Progress{JobID: job, Steps: steps, Total: total, At: time.Now()}); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			return nil
		},
	}
}

var reNumericID = regexp.MustCompile(`^[0-9]+$`)

// reportJobID is the id a report is filed under: --job if given; in a job
// array task, ARRAYJOB_TASK (the id squeue and hadar know the task by,
// not the task's own $SLURM_JOB_ID); else $SLURM_JOB_ID.
func reportJobID(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	array, task := getenv("SLURM_ARRAY_JOB_ID"), getenv("SLURM_ARRAY_TASK_ID")
	if reNumericID.MatchString(array) && reNumericID.MatchString(task) {
		return array + "_" + task, nil
	}
	if id := getenv("SLURM_JOB_ID"); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("report: no job id: run it inside a Slurm job or pass --job")
}

// sidecar turns the lines of a training log into progress reports.
type sidecar struct {
	spool, job string
	parser     *jobproto.LogParser
	interval   time.Duration
	now        func() time.Time

	steps, total float64
	found, dirty bool
	written      time.Time
}

// run reads the log every poll until ctx ends, then reads it to its end
// and writes the last progress it found.
func (s *sidecar) run(ctx context.Context, fl *jobproto.LogFollower, poll time.Duration) error {
	defer fl.Close()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		final := ctx.Err() != nil
		lines, err := fl.Lines(final)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		s.consume(lines)
		if err := s.maybeWrite(final); err != nil {
			if final {
				return err
			}
			fmt.Fprintln(os.Stderr, "hadar report:", err) // a transient spool error must not end the sidecar
		}
		if final {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// consume keeps the last step found in lines.
func (s *sidecar) consume(lines []string) {
	for _, l := range lines {
		step, total, ok := s.parser.Parse(l)
		if !ok {
			continue
		}
		if !s.found || step != s.steps || (total > 0 && total != s.total) {
			s.dirty = true
		}
		s.found, s.steps = true, step
		if total > 0 {
			s.total = total
		}
	}
}

// maybeWrite writes the latest progress if it changed and the last write
// is at least interval old (or force).
func (s *sidecar) maybeWrite(force bool) error {
	if !s.dirty {
		return nil
	}
	now := s.now()
	if !force && !s.written.IsZero() && now.Sub(s.written) < s.interval {
		return nil
	}
	if err := jobproto.WriteReport(s.spool, jobproto.Progress{JobID: s.job, Steps: s.steps, Total: s.total, At: now}); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	s.dirty, s.written = false, now
	return nil
}
