package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "time one planning round of a policy on a synthetic cluster and job mix",
		Description: "Builds a reproducible synthetic snapshot (GPUs split evenly over --types GPU types,\n" +
			"jobs with Gavel-like gang sizes and speed-ups) and times --repeat planning rounds of a\n" +
			"fresh policy instance, checking every plan against the invariants.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "policy", Value: "hadar", Usage: "policy to time"},
			&cli.IntFlag{Name: "jobs", Value: 1000, Usage: "jobs in the snapshot"},
			&cli.IntFlag{Name: "gpus", Value: 1024, Usage: "GPUs in the cluster"},
			&cli.IntFlag{Name: "types", Value: 3, Usage: "GPU types"},
			&cli.IntFlag{Name: "repeat", Value: 10, Usage: "planning rounds to time"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed of the synthetic snapshot"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			jobs, gpus, types, repeat := c.Int("jobs"), c.Int("gpus"), c.Int("types"), c.Int("repeat")
			if jobs < 1 || gpus < 1 || types < 1 || repeat < 1 || types > gpus {
				return fmt.Errorf("--jobs, --gpus, --types and --repeat must be positive, with --types <= --gpus")
			}
			snap := optimizer.SyntheticSnapshot(jobs, gpus, types, c.Int64("seed"))
			var times []float64
			for i := 0; i < repeat; i++ {
				policy, err := optimizer.New(c.String("policy"), optimizer.Options{Seed: c.Int64("seed")})
				if err != nil {
					return err
				}
				start := time.Now()
				plan, err := policy.Plan(snap)
				times = append(times, time.Since(start).Seconds())
				if err != nil {
					return err
				}
				if err := optimizer.Check(snap, plan); err != nil {
					return err
				}
			}
			sort.Float64s(times)
			mean := 0.0
			for _, t := range times {
				mean += t
			}
			mean /= float64(len(times))
			p99 := times[min(len(times)-1, int(float64(len(times))*0.99))]
			out := map[string]any{
				"policy": c.String("policy"), "jobs": jobs, "gpus": gpus, "types": types, "repeat": repeat,
				"allocate_s": map[string]float64{"mean": mean, "p99": p99, "max": times[len(times)-1]},
			}
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(out)
			}
			fmt.Fprintf(c.App.Writer, "%s: %d jobs, %d GPUs, %d types: plan mean %.2f ms, p99 %.2f ms over %d rounds\n",
				c.String("policy"), jobs, gpus, types, mean*1000, p99*1000, repeat)
			return nil
		},
	}
}
