package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

func runBenchCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Name: "hadar", Commands: []*cli.Command{benchCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"hadar", "bench"}, args...))
	return out.String(), err
}

func TestBenchWithMatrix(t *testing.T) {
	thr := profiles.Lambda()
	snap, err := benchWithMatrix(optimizer.SyntheticSnapshot(200, 64, 4, 1), thr, 4)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, n := range snap.Nodes {
		types[n.Type] += n.GPUs
	}
	// The four fastest of Lambda's types, 16 GPUs each.
	if len(types) != 4 || types["h100"] != 16 || types["v100"] != 0 {
		t.Errorf("node types %v; want Lambda's 4 fastest, h100 first", types)
	}
	for _, j := range snap.Jobs {
		if thr[j.Type] == nil || j.TotalSteps <= 0 || j.RemainingSteps > j.TotalSteps {
			t.Errorf("job %s: type %q, steps %v of %v", j.ID, j.Type, j.RemainingSteps, j.TotalSteps)
		}
	}
	out, err := runBenchCLI(t, "--throughputs", "lambda", "--types", "4", "--jobs", "100", "--gpus", "64", "--repeat", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["types"] != 4.0 {
		t.Errorf("bench --json: %s (%v)", out, err)
	}
	if _, err := runBenchCLI(t, "--throughputs", "lambda", "--types", "12", "--gpus", "64"); err == nil || !strings.Contains(err.Error(), "only 11 GPU types") {
		t.Errorf("--types 12 on lambda: %v", err)
	}
}
