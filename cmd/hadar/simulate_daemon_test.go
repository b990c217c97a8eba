package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/sim"
	"github.com/hadar-sched/hadar/slurm/slurmsim"
)

// A short trace through hadar-slurmd's round on the demo layout and through
// Slurm alone: both complete every job, and hadar, which gives the v100s to
// the jobs that gain most from them, finishes sooner.
func TestSimulateLayout(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	trace := filepath.Join(dir, "short.trace")
	// Recommendation runs about as fast on every type; ResNet-18 and the LM
	// gain 5-10x from a v100.
	lines := []string{
		"Recommendation (batch size 512)\tx\t.\tsteps\t0\t2000\t1\t1\t-1.000000\t0",
		"Recommendation (batch size 1024)\tx\t.\tsteps\t0\t2000\t1\t1\t-1.000000\t0",
		"ResNet-18 (batch size 64)\tx\t.\tsteps\t0\t4000\t1\t1\t-1.000000\t0",
		"LM (batch size 20)\tx\t.\tsteps\t0\t2000\t1\t1\t-1.000000\t0",
	}
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(dir, "small.layout")
	if err := os.WriteFile(layout, []byte("fast v100 2\nslow k80 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(config, []byte("round = \"30s\"\npoll_interval = \"2s\"\nmin_round_gap = \"2s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runHadar(t, "simulate", "--layout", layout, "--config", config, "--trace", trace, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got simulateOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff([]string{"hadar", "slurm-only"}, got.Order); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"v100": 2, "k80": 2}, got.Cluster); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
	h, s := got.Policies["hadar"], got.Policies["slurm-only"]
	if h.Completed != 4 || s.Completed != 4 {
		t.Fatalf("completed: hadar %d, slurm-only %d, want 4 each\n%s", h.Completed, s.Completed, out)
	}
	if h.MakespanS >= s.MakespanS || h.Rounds == 0 {
		t.Errorf("hadar's makespan %.0f s (%d rounds), Slurm alone %.0f s: want hadar's shorter", h.MakespanS, h.Rounds, s.MakespanS)
	}

	// The text report ends with both makespans; --daemon --cluster runs on
	// a generated layout.
	out, err = runHadar(t, "simulate", "--daemon", "--cluster", "v100=2,k80=2", "--gpus-per-node", "2", "--config", config, "--trace", trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "layout generated (hadar-slurmd's round)") || !strings.Contains(out, "makespan s: hadar=") {
		t.Errorf("text report:\n%s", out)
	}
	if _, err := runHadar(t, "simulate", "--layout", layout, "--explore", "0.1"); err == nil {
		t.Error("--explore with --layout: no error")
	}
}

// The daemon path takes a trace's job types as tags give them: a model as
// users write it ("resnet18-bs64", contrib/demo's workload) resolves to the
// matrix's job type, as hadar-slurmd resolves model=; a model no name
// resolves is an error before the run.
func TestSimulateLayoutTagModels(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	layout := filepath.Join(dir, "small.layout")
	if err := os.WriteFile(layout, []byte("fast v100 2\nslow k80 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(config, []byte("round = \"30s\"\npoll_interval = \"2s\"\nmin_round_gap = \"2s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		models  []string
		wantErr string
	}{
		{"tag names", []string{"recommendation-bs1024", "resnet18-bs64", "lm-bs20"}, ""},
		{"unknown model", []string{"resnet18-bs64", "nosuchmodel"}, `job type "nosuchmodel" is not in the matrix`},
	} {
		trace := filepath.Join(dir, "tags.trace")
		var lines []string
		for _, m := range tc.models {
			lines = append(lines, m+"\tx\t.\tsteps\t0\t2000\t1\t1\t-1.000000\t0")
		}
		if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runHadar(t, "simulate", "--layout", layout, "--config", config, "--trace", trace, "--json")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(out+err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q\n%s", tc.name, err, tc.wantErr, out)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		var got simulateOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		if h := got.Policies["hadar"]; h.Completed != len(tc.models) {
			t.Errorf("%s: hadar completed %d of %d jobs\n%s", tc.name, h.Completed, len(tc.models), out)
		}
	}
}

func TestParseUntagged(t *testing.T) {
	for _, tc := range []struct {
		in      string
		n       int
		d, at   time.Duration
		wantErr bool
	}{
		{in: ""},
		{in: "2:15s", n: 2, d: 15 * time.Second},
		{in: "1:1m@2s", n: 1, d: time.Minute, at: 2 * time.Second},
		{in: "x:15s", wantErr: true},
		{in: "2", wantErr: true},
		{in: "2:0s", wantErr: true},
		{in: "2:15s@-1s", wantErr: true},
	} {
		got, err := parseUntagged(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if len(got.jobs) != tc.n || got.at != tc.at {
			t.Errorf("%q: %d jobs at %v, want %d at %v", tc.in, len(got.jobs), got.at, tc.n, tc.at)
		}
		for _, j := range got.jobs {
			if diff := cmp.Diff(slurmsim.JobSpec{Name: j.Name, User: "other", GPUsPerNode: 1, Duration: tc.d}, j); diff != "" {
				t.Errorf("%q: job (-want +got):\n%s", tc.in, diff)
			}
		}
	}
}

// A policy that left jobs unfinished says so: the run fails (a warning
// on stderr with --allow-incomplete), and the jobs column and the Markdown
// row mark it, since its metrics cover the completed jobs only.
func TestIncompleteRunsAreMarked(t *testing.T) {
	out := simulateOutput{Order: []string{"hadar", "gavel"}, Policies: map[string]sim.Metrics{
		"hadar": {Jobs: 111, Completed: 111}, "gavel": {Jobs: 111, Completed: 98}}}
	var warn, table, md strings.Builder
	err := incomplete(&warn, out, false, true)
	if err == nil || !strings.Contains(err.Error(), "gavel completed 98 of 111 jobs") || !strings.Contains(err.Error(), "--allow-incomplete") {
		t.Errorf("incomplete run: error %v, want one naming gavel's 98 of 111 jobs and --allow-incomplete", err)
	}
	if warn.Len() != 0 {
		t.Errorf("incomplete run that fails also warned: %q", warn.String())
	}
	if err := incomplete(&warn, out, true, false); err != nil {
		t.Errorf("--allow-incomplete: %v", err)
	}
	if want := "hadar simulate: warning: gavel completed 98 of 111 jobs; the metrics of those rows are over the completed jobs only\n"; warn.String() != want {
		t.Errorf("warning %q, want %q", warn.String(), want)
	}
	full := simulateOutput{Order: []string{"hadar"}, Policies: map[string]sim.Metrics{"hadar": {Jobs: 3, Completed: 3}}}
	if err := incomplete(&warn, full, false, false); err != nil {
		t.Errorf("complete run: %v", err)
	}
	printSimulateTable(&table, out)
	if !strings.Contains(table.String(), " 98/111 ") || strings.Contains(table.String(), "111/111") {
		t.Errorf("table:\n%s", table.String())
	}
	printSimulateMarkdown(&md, out)
	if !strings.Contains(md.String(), "| gavel (98/111 jobs done) |") || !strings.Contains(md.String(), "| hadar |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
