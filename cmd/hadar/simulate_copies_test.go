package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

// TestSimulateCopyEfficiency: hadare runs at the measured curve by default,
// at --copy-efficiency when it is given (a curve or one number), and at
// --config's [policies.hadare] copy_efficiency (default 1, the daemon's)
// when only --config is.
func TestSimulateCopyEfficiency(t *testing.T) {
	base := []string{"--trace", "gavel:max_min_fairness", "--cluster", "v100=4,p100=4,k80=4", "--policies", "hadare"}
	run := func(args ...string) [2]float64 {
		m := runSimulateCLI(t, append(append([]string{}, base...), args...)...).Policies["hadare"]
		return [2]float64{m.MakespanS, m.AvgJCTS}
	}
	curve, perfect := run(), run("--copy-efficiency", "1")
	if curve == perfect {
		t.Fatalf("the default curve and efficiency 1 give the same run: %v", curve)
	}
	for _, tc := range []struct {
		name string
		args []string
		want [2]float64
	}{
		{"curve written out", []string{"--copy-efficiency", "2:0.63,4:0.34,8:0.18"}, curve},
		{"curve in another order", []string{"--copy-efficiency", "8:0.18,2:0.63,4:0.34"}, curve},
		{"config without the key: the daemon's 1", []string{"--config", writeSimConfig(t, "policy = \"hadare\"\n")}, perfect},
		{"config with the curve", []string{"--config", writeSimConfig(t, "[policies.hadare]\ncopy_efficiency = \"2:0.63,4:0.34,8:0.18\"\n")}, curve},
		{"the flag over the config", []string{"--copy-efficiency", "1", "--config", writeSimConfig(t, "[policies.hadare]\ncopy_efficiency = \"2:0.63,4:0.34,8:0.18\"\n")}, perfect},
	} {
		if diff := cmp.Diff(tc.want, run(tc.args...)); diff != "" {
			t.Errorf("%s: makespan, avg JCT (-want +got):\n%s", tc.name, diff)
		}
	}
	for _, bad := range []string{"0", "1:0.5", "2:0.6,2:0.5", "two"} {
		var out bytes.Buffer
		app := &cli.App{Name: "hadar", Commands: []*cli.Command{simulateCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		if err := app.Run(append([]string{"hadar", "simulate", "--copy-efficiency", bad}, base...)); err == nil {
			t.Errorf("--copy-efficiency %q: no error", bad)
		}
	}
}
