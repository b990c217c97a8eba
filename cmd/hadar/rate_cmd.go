package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/profiles"
)

// profilesRateCommand prints one throughput, resolving the model the way a
// job's tag is resolved; example jobs use it to pace themselves.
func profilesRateCommand() *cli.Command {
	return &cli.Command{
		Name:  "rate",
		Usage: "print the steps/s of a model on a GPU type (as hadar-slurmd would plan with it)",
		Description: "The model is matched like a job's model= tag (case and punctuation ignored,\n" +
			"'batch size' may be written bs: resnet50-bs64). With --embedded the built-in Gavel\n" +
			"matrix is used and no database is opened.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "model / job type"},
			&cli.StringFlag{Name: "gpu-type", Required: true, Usage: "GPU type (canonical name or site GRES name)"},
			&cli.IntFlag{Name: "workers", Value: 1, Usage: "GPUs the job runs on"},
			&cli.BoolFlag{Name: "embedded", Usage: "use the embedded Gavel matrix instead of the database"},
		},
		Action: func(c *cli.Context) error {
			thr := profiles.Default()
			gpuType := c.String("gpu-type")
			if !c.Bool("embedded") {
				path, err := profilesDBPath(c)
				if err != nil {
					return err
				}
				store, err := profiles.Open(c.Context, path)
				if err != nil {
					return err
				}
				defer store.Close()
				if thr, err = store.Throughputs(c.Context); err != nil {
					return err
				}
				if gpuType, err = store.ResolveGPUType(c.Context, gpuType); err != nil {
					return err
				}
			}
			jobType, err := bridge.NewModelResolver(thr.JobTypes(), nil).Resolve(c.String("model"))
			if err != nil {
				return err
			}
			r := thr.Rate(jobType, gpuType, c.Int("workers"))
			if r <= 0 {
				return fmt.Errorf("no throughput for %q on %s with %d workers", jobType, gpuType, c.Int("workers"))
			}
			fmt.Fprintf(c.App.Writer, "%g\n", r)
			return nil
		},
	}
}
