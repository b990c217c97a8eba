package main

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readJobsCSV reads --jobs-csv's file into its header and rows per policy.
func readJobsCSV(t *testing.T, path string) ([]string, map[string][]map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("jobs csv: %v (%d records)", err, len(recs))
	}
	rows := map[string][]map[string]string{}
	for _, r := range recs[1:] {
		row := map[string]string{}
		for i, h := range recs[0] {
			row[h] = r[i]
		}
		rows[row["policy"]] = append(rows[row["policy"]], row)
	}
	return recs[0], rows
}

func hoursCell(t *testing.T, row map[string]string, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(row[key], 64)
	if err != nil {
		t.Fatalf("%s of job %s: %q: %v", key, row["job"], row[key], err)
	}
	return v
}

// TestSimulateJobsCSV: --jobs-csv has one row per job and policy, and its
// columns add up to the summary's figures (average JCT; GPU-hours =
// utilization x makespan x GPUs), on the fast path and on the daemon's.
func TestSimulateJobsCSV(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.csv")
	check := func(name string, out simulateOutput, gpus int) {
		t.Helper()
		header, rows := readJobsCSV(t, path)
		want := []string{"policy", "job", "job_type", "gpus", "arrival_h", "first_start_h", "completion_h", "jct_h", "queue_h", "isolated_jct_h", "stops", "moves",
			"gpu_h_k80", "gpu_h_p100", "gpu_h_v100"}
		if name == "daemon" {
			want = []string{"policy", "job", "job_type", "gpus", "arrival_h", "first_start_h", "completion_h", "jct_h", "queue_h", "isolated_jct_h", "stops", "moves",
				"gpu_h_k80", "gpu_h_v100"}
		}
		if diff := cmp.Diff(want, header); diff != "" {
			t.Errorf("%s: header (-want +got):\n%s", name, diff)
		}
		for _, policy := range out.Order {
			m := out.Policies[policy]
			if len(rows[policy]) != m.Jobs {
				t.Errorf("%s/%s: %d rows, %d jobs", name, policy, len(rows[policy]), m.Jobs)
				continue
			}
			jct, busy := 0.0, 0.0
			for _, r := range rows[policy] {
				jct += hoursCell(t, r, "jct_h")
				for _, h := range header {
					if strings.HasPrefix(h, "gpu_h_") && r[h] != "" {
						busy += hoursCell(t, r, h)
					}
				}
			}
			if got, want := jct/float64(m.Jobs), m.AvgJCTS/3600; math.Abs(got-want) > 0.01*want+0.001 {
				t.Errorf("%s/%s: average JCT from the rows %.3f h, summary %.3f h", name, policy, got, want)
			}
			if got, want := busy, m.Utilization*m.MakespanS/3600*float64(gpus); math.Abs(got-want) > 0.01*want+0.01 {
				t.Errorf("%s/%s: GPU-hours from the rows %.3f, summary %.3f", name, policy, got, want)
			}
		}
	}

	out := runSimulateCLI(t, "--trace", "gavel:max_min_fairness", "--cluster", "v100=4,p100=4,k80=4", "--policies", "hadar,gavel", "--jobs-csv", path)
	check("fast", out, 12)

	trace := filepath.Join(dir, "short.trace")
	lines := []string{
		"Recommendation (batch size 512)\tx\t.\tsteps\t0\t2000\t1\t1\t-1.000000\t0",
		"ResNet-18 (batch size 64)\tx\t.\tsteps\t0\t4000\t1\t1\t-1.000000\t0",
		"LM (batch size 20)\tx\t.\tsteps\t0\t2000\t1\t2\t-1.000000\t0",
	}
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(config, []byte("round = \"30s\"\npoll_interval = \"2s\"\nmin_round_gap = \"2s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = runSimulateCLI(t, "--daemon", "--cluster", "v100=2,k80=2", "--gpus-per-node", "2", "--config", config, "--trace", trace, "--jobs-csv", path)
	check("daemon", out, 4)

	if _, err := runHadar(t, "simulate", "--trace", trace, "--policies", "hadar", "--jobs-csv", filepath.Join(dir, "no", "such", "dir.csv")); err == nil ||
		!strings.Contains(err.Error(), "--jobs-csv") {
		t.Errorf("--jobs-csv into a missing directory: %v, want an error naming the flag", err)
	}
}
