package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/bridge"
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
			"directory must be the daemon's spool_dir, on a filesystem the compute nodes share.",
		Flags: []cli.Flag{
			&cli.Float64Flag{Name: "steps", Required: true, Usage: "training steps done so far, in total"},
			&cli.StringFlag{Name: "job", EnvVars: []string{"SLURM_JOB_ID"}, Usage: "job id (default: $SLURM_JOB_ID)"},
			&cli.StringFlag{Name: "spool", EnvVars: []string{"HADAR_SPOOL"}, Value: bridge.DefaultSpoolDir, Usage: "hadar-slurmd's spool directory"},
		},
		Action: func(c *cli.Context) error {
			job := c.String("job")
			if job == "" {
				return fmt.Errorf("report: no job id: run it inside a Slurm job or pass --job")
			}
			steps := c.Float64("steps")
			if steps < 0 {
				return fmt.Errorf("report: --steps must be >= 0, got %g", steps)
			}
			if err := bridge.WriteProgress(c.String("spool"), job, steps, time.Now()); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			return nil
		},
	}
}
