package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/sim"
)

// simulateNoiseHelp is the part of `hadar simulate --help` on estimation noise.
const simulateNoiseHelp = "--noise-steps S and --noise-rate S make what the policies see wrong, as real users'\n" +
	"step counts and measured throughputs are: each job's total steps (--noise-steps) and\n" +
	"each throughput cell, job type x GPU type (--noise-rate), are multiplied by lognormal\n" +
	"factors exp(N(0,S^2)) drawn with --seed, while jobs progress at the truth. A job that\n" +
	"runs past its estimate is seen with as many steps left as it has overrun (at least 5% of\n" +
	"the estimate), as hadar-slurmd sees it, and completes at its true steps. --noise-rate\n" +
	"plans with the noisy matrix as the imported one and learns from the simulated progress,\n" +
	"as with --truth (the truth is --truth, or else --throughputs); --no-learning keeps the\n" +
	"noisy matrix throughout."

func simulateNoiseFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "noise-steps", Value: 0, Usage: "sigma `S` of the lognormal factor each job's total steps is seen through (0: exact)"},
		&cli.Float64Flag{Name: "noise-rate", Value: 0, Usage: "sigma `S` of the lognormal factor on each job type x GPU type throughput the policies plan with; learning corrects it (0: exact)"},
	}
}

// applyRateNoise makes, with --noise-rate, the matrix the policies plan
// from a noisy copy of thr and the truth thr (unless --truth gave one),
// and turns learning on as --truth does.
func applyRateNoise(c *cli.Context, thr, truth optimizer.Throughputs, learn *sim.Learning) (optimizer.Throughputs, optimizer.Throughputs, *sim.Learning, error) {
	if c.Float64("noise-steps") < 0 {
		return nil, nil, nil, fmt.Errorf("--noise-steps must be at least 0, got %g", c.Float64("noise-steps"))
	}
	sigma := c.Float64("noise-rate")
	if sigma == 0 {
		return thr, truth, learn, nil
	}
	noisy, err := sim.NoisyThroughputs(thr, sigma, c.Int64("seed"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--noise-rate: %w", err)
	}
	if truth == nil {
		truth = thr
	}
	if learn == nil {
		learn = &sim.Learning{Prior: fillPrior, Explore: c.Float64("explore"), Frozen: c.Bool("no-learning")}
	}
	return noisy, truth, learn, nil
}
