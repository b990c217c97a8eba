package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestSimulateNoise(t *testing.T) {
	base := []string{"--trace", "gavel:max_min_fairness", "--cluster", "v100=4,p100=4,k80=4", "--policies", "hadar,gavel"}
	exact := runSimulateCLI(t, base...)
	noisy := runSimulateCLI(t, append(base, "--noise-steps", "0.5", "--noise-rate", "0.3", "--seed", "1")...)
	if noisy.NoiseSteps != 0.5 || noisy.NoiseRate != 0.3 || noisy.Truth != "gavel" {
		t.Errorf("noise %v/%v, truth %q; want 0.5/0.3, gavel", noisy.NoiseSteps, noisy.NoiseRate, noisy.Truth)
	}
	for _, p := range []string{"hadar", "gavel"} {
		e, n := exact.Policies[p], noisy.Policies[p]
		if n.Completed != e.Completed || n.AvgJCTS == e.AvgJCTS {
			t.Errorf("%s: completed %d vs %d, avg JCT %v vs %v: noise changed nothing", p, n.Completed, e.Completed, n.AvgJCTS, e.AvgJCTS)
		}
		// The plan starts off the truth and learning brings it closer.
		l := n.Learning
		if len(l) == 0 || l[0].MedianError == 0 || l[len(l)-1].MedianError >= l[0].MedianError {
			t.Errorf("%s: learning %+v", p, l)
		}
	}
	again := runSimulateCLI(t, append(base, "--noise-steps", "0.5", "--noise-rate", "0.3", "--seed", "1")...)
	if again.Policies["hadar"].AvgJCTS != noisy.Policies["hadar"].AvgJCTS {
		t.Error("same seed, different result")
	}
	other := runSimulateCLI(t, append(base, "--noise-steps", "0.5", "--seed", "2")...)
	if other.Policies["hadar"].AvgJCTS == noisy.Policies["hadar"].AvgJCTS || other.Policies["hadar"].Learning != nil {
		t.Error("--noise-steps alone, another seed: same result, or learning on")
	}
}

func TestSimulateNoiseErrors(t *testing.T) {
	for args, want := range map[string]string{
		"--noise-steps -1":  "--noise-steps -1: want a sigma from 0 to 3",
		"--noise-rate -0.5": "--noise-rate -0.5: want a sigma from 0 to 3",
		"--noise-rate 100":  "--noise-rate 100: want a sigma from 0 to 3",
		"--no-learning":     "need --truth or --noise-rate",
	} {
		var out bytes.Buffer
		app := &cli.App{Name: "hadar", Commands: []*cli.Command{simulateCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		err := app.Run(append([]string{"hadar", "simulate", "--trace", "gavel:debug", "--policies", "hadar"}, strings.Fields(args)...))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", args, err, want)
		}
	}
}
