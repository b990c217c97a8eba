package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "time one planning round of a policy on a synthetic cluster and job mix",
		Description: "Builds a reproducible synthetic snapshot (GPUs split evenly over --types GPU types,\n" +
			"jobs with Gavel-like gang sizes and speed-ups) and times --repeat planning rounds of a\n" +
			"fresh policy instance, checking every plan against the invariants. With --throughputs\n" +
			"the snapshot's GPU types and job types are the matrix's (its --types fastest GPU types;\n" +
			"job types drawn in turn), e.g. --throughputs lambda --types 4.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "policy", Value: "hadar", Usage: "policy to time"},
			&cli.IntFlag{Name: "jobs", Value: 1000, Usage: "jobs in the snapshot"},
			&cli.IntFlag{Name: "gpus", Value: 1024, Usage: "GPUs in the cluster"},
			&cli.IntFlag{Name: "types", Value: 3, Usage: "GPU types"},
			&cli.IntFlag{Name: "repeat", Value: 10, Usage: "planning rounds to time"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed of the synthetic snapshot"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.StringFlag{Name: "throughputs", Usage: "plan with this matrix `NAME|FILE` instead of synthetic rates: " + profiles.MatrixUsage},
		},
		Action: func(c *cli.Context) error {
			jobs, gpus, types, repeat := c.Int("jobs"), c.Int("gpus"), c.Int("types"), c.Int("repeat")
			if jobs < 1 || gpus < 1 || types < 1 || repeat < 1 || types > gpus {
				return fmt.Errorf("--jobs, --gpus, --types and --repeat must be positive, with --types <= --gpus")
			}
			snap := optimizer.SyntheticSnapshot(jobs, gpus, types, c.Int64("seed"))
			if c.IsSet("throughputs") {
				thr, err := profiles.Matrix(c.String("throughputs"))
				if err != nil {
					return err
				}
				if snap, err = benchWithMatrix(snap, thr, types); err != nil {
					return err
				}
			}
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

// benchWithMatrix re-labels a synthetic snapshot with a real matrix: the
// synthetic GPU types gpu0, gpu1, ... (fastest first) become the matrix's
// types fastest first, and job k's type the matrix's k-th job type in turn;
// each job keeps its duration on the first type, so its steps are scaled by
// the ratio of the new rate to the synthetic one. Job types a job's gang
// cannot run on the first type are skipped for the next.
func benchWithMatrix(snap *optimizer.Snapshot, thr optimizer.Throughputs, types int) (*optimizer.Snapshot, error) {
	gts := thr.GPUTypes()
	if types > len(gts) {
		return nil, fmt.Errorf("--types %d: the matrix has only %d GPU types (%v)", types, len(gts), gts)
	}
	sort.SliceStable(gts, func(i, j int) bool { return thr.TypeSpeed(gts[i]) > thr.TypeSpeed(gts[j]) })
	gts = gts[:types]
	rename := map[string]string{}
	for k, gt := range gts {
		rename[fmt.Sprintf("gpu%d", k)] = gt
	}
	jts := thr.JobTypes()
	out := *snap
	out.Throughput = thr
	out.Nodes = append([]optimizer.Node(nil), snap.Nodes...)
	for i := range out.Nodes {
		out.Nodes[i].Type = rename[out.Nodes[i].Type]
	}
	out.Jobs = append([]optimizer.Job(nil), snap.Jobs...)
	for i := range out.Jobs {
		j := &out.Jobs[i]
		old := snap.Throughput.Rate(j.Type, "gpu0", j.Workers)
		for k := 0; k < len(jts); k++ {
			jt := jts[(i+k)%len(jts)]
			if r := thr.Rate(jt, gts[0], j.Workers); r > 0 && old > 0 {
				j.Type = jt
				j.TotalSteps *= r / old
				j.RemainingSteps *= r / old
				break
			}
		}
		if j.Type == snap.Jobs[i].Type {
			return nil, fmt.Errorf("no job type of the matrix runs %d workers on %s", j.Workers, gts[0])
		}
	}
	return &out, nil
}
