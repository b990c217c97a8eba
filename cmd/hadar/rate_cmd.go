package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
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
			"matrix is used and no database is opened; --throughputs NAME|FILE picks another\n" +
			"matrix (lambda, a file) and implies --embedded. With --prior a cell the matrix lacks\n" +
			"(a GPU type or worker count nobody measured) gets the prior's rate (docs/prior.md),\n" +
			"and a model no matrix knows the cross-model prior, as hadar-slurmd plans such a job\n" +
			"until its progress is learned; either is noted on standard error.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "model / job type"},
			&cli.StringFlag{Name: "gpu-type", Required: true, Usage: "GPU type (canonical name or site GRES name)"},
			&cli.IntFlag{Name: "workers", Value: 1, Usage: "GPUs the job runs on"},
			&cli.BoolFlag{Name: "embedded", Usage: "use the embedded Gavel matrix instead of the database"},
			&cli.StringFlag{Name: "throughputs", Usage: "use this matrix `NAME|FILE` instead of the database: " + profiles.MatrixUsage},
			&cli.BoolFlag{Name: "prior", Usage: "fall back to the prior for a cell the matrix lacks, and to the cross-model prior for a model it does not know"},
		},
		Action: func(c *cli.Context) error {
			var thr optimizer.Throughputs
			gpuType := c.String("gpu-type")
			if c.IsSet("throughputs") || c.Bool("embedded") {
				var err error
				if thr, err = profiles.Matrix(c.String("throughputs")); err != nil {
					return err
				}
				if gpuType, err = profiles.ResolveDefault(gpuType, thr.GPUTypes()...); err != nil {
					return err
				}
			} else {
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
			jobType, err := jobproto.NewModelResolver(thr.JobTypes(), nil).Resolve(c.String("model"))
			if err != nil {
				// hadar-slurmd plans a model no matrix knows with the
				// cross-model prior, as a job type of its own name.
				if !c.Bool("prior") || errors.Is(err, jobproto.ErrAmbiguousModel) {
					return err
				}
				if jobType = jobproto.UnknownModelType(c.String("model")); jobType == "" {
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "%v: the cross-model prior, as hadar-slurmd plans it until its progress is learned\n", err)
			}
			r := thr.Rate(jobType, gpuType, c.Int("workers"))
			if _, measured := thr[jobType][gpuType][c.Int("workers")]; !measured && c.Bool("prior") {
				if p, ok := profiles.PriorForModel(thr, jobType, []string{gpuType})[gpuType][c.Int("workers")]; ok {
					r = p
					fmt.Fprintf(c.App.ErrWriter, "%s on %d x %s: not in the matrix; prior estimate\n", jobType, c.Int("workers"), gpuType)
				}
			}
			if r <= 0 {
				return fmt.Errorf("no throughput for %q on %s with %d workers", jobType, gpuType, c.Int("workers"))
			}
			fmt.Fprintf(c.App.Writer, "%g\n", r)
			return nil
		},
	}
}
