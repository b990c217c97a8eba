package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
)

// siteFile is the accounting test cluster's site file.
var siteFile = readSiteFile()

func readSiteFile() string {
	b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "testcluster", "accounting.site.toml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// qosWorkload is e2e/site's TestQOSLimitPredicted (and the live review's
// section b): bob, in QOS gpu4 (4 GPUs a user), submits eight one-GPU
// jobs, then alice fourteen, all of secs seconds (sleep jobs: as long on
// every GPU type). The trace is built directly: its jobs are "ResNet-50
// (batch size 64)" (their tag on the cluster), with steps for secs
// seconds at the truth's rate, which is the v100's on every type.
func qosWorkload(t *testing.T, dir string, secs float64) (trace, truth string) {
	t.Helper()
	const jobType = "ResNet-50 (batch size 64)"
	thr := profiles.Default()
	flat := optimizer.Throughputs{}
	for jt, byType := range thr {
		for gt, byW := range byType {
			for w, r := range byW {
				flat.Set(jt, gt, w, r)
			}
		}
	}
	rate := thr.Rate(jobType, "v100", 1)
	for _, gt := range []string{"v100", "p100", "k80"} {
		flat.Set(jobType, gt, 1, rate)
	}
	truth = filepath.Join(dir, "sleep.json")
	writeGavelFile(t, truth, flat)
	var jobs []sim.TraceJob
	for i := range 22 {
		j := sim.TraceJob{JobType: jobType, TotalSteps: math.Floor(secs * rate), ScaleFactor: 1, PriorityWeight: 1, SLO: -1,
			User: "alice", Account: "acct_a", QOS: "normal"}
		if i < 8 {
			j.User, j.Account, j.QOS = "bob", "acct_b", "gpu4"
		}
		jobs = append(jobs, j)
	}
	trace = filepath.Join(dir, "qos.trace")
	writeTraceFile(t, trace, jobs)
	return trace, truth
}

// The point of the site: on the accounting test cluster's QOS workload
// the simulator predicts what the live cluster measured. Measured there
// (e2e/site TestQOSLimitPredicted, 40 s jobs): Slurm alone 81 s, hadar
// 86 s; the live review's 45 s jobs: Slurm alone 92 s, 18 jobs running at
// once. Without the site the simulator knew no limit, and predicted
// 324-450 s of an imported trace. The prediction must be within 25% of
// each measurement, and hadar's no worse than Slurm alone's but by a round.
func TestSimulateSiteQOSLimit(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	site := filepath.Join(dir, "site.toml")
	if err := os.WriteFile(site, []byte(siteFile), 0o644); err != nil {
		t.Fatal(err)
	}
	// e2e/site's daemon config.
	config := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(config, []byte("policy = \"hadar\"\nround = \"10s\"\npoll_interval = \"2s\"\nmin_round_gap = \"2s\"\nlaunch_timeout = \"30s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join("..", "..", "contrib", "testcluster", "layouts", "demo.layout")
	for _, tc := range []struct {
		secs           float64
		aloneS, hadarS float64 // measured; 0: not measured
	}{
		{secs: 40, aloneS: 81, hadarS: 86},
		{secs: 45, aloneS: 92},
	} {
		t.Run(strconv.Itoa(int(tc.secs))+"s", func(t *testing.T) {
			trace, truth := qosWorkload(t, t.TempDir(), tc.secs)
			got := runSimulateCLI(t, "--layout", layout, "--site", site, "--config", config, "--trace", trace,
				"--truth", truth, "--startup", "1s")
			alone, hadar := got.Policies["slurm-only"], got.Policies["hadar"]
			if alone.Completed != 22 || hadar.Completed != 22 {
				t.Fatalf("completed: Slurm alone %d, hadar %d; want 22", alone.Completed, hadar.Completed)
			}
			t.Logf("makespan: Slurm alone %.1f s (measured %v), hadar %.1f s (measured %v)", alone.MakespanS, tc.aloneS, hadar.MakespanS, tc.hadarS)
			within := func(what string, got, want float64) {
				if want > 0 && math.Abs(got-want) > 0.25*want {
					t.Errorf("%s: predicted %.1f s, measured %.0f s: more than 25%% apart", what, got, want)
				}
			}
			within("Slurm alone", alone.MakespanS, tc.aloneS)
			within("hadar", hadar.MakespanS, tc.hadarS)
			if hadar.MakespanS > alone.MakespanS+10 {
				t.Errorf("hadar's makespan %.1f s, Slurm alone's %.1f s: want no worse than a round (10 s) more", hadar.MakespanS, alone.MakespanS)
			}
		})
	}
}

// A site file that does not fit the trace is an error naming the job and
// why, before any run; --site needs the daemon's run.
func TestSimulateSiteErrors(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	site := filepath.Join(dir, "site.toml")
	if err := os.WriteFile(site, []byte(siteFile), 0o644); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join("..", "..", "contrib", "testcluster", "layouts", "demo.layout")
	trace, truth := qosWorkload(t, dir, 10)
	b, _ := os.ReadFile(trace)
	for _, tc := range []struct{ name, edit, want string }{
		{"unknown user", strings.Replace(string(b), "\tbob\t", "\tcarol\t", 1), `trace job 0: user "carol" has no association in the site file`},
		{"QOS not the user's", strings.Replace(string(b), "\tgpu4", "\tgold", 1), `trace job 0: user bob may not use QOS "gold"`},
		{"another account", strings.Replace(string(b), "\tacct_b\t", "\tacct_a\t", 1), `trace job 0: user bob is in account acct_b in the site file, not acct_a`},
	} {
		p := filepath.Join(dir, "bad.trace")
		if err := os.WriteFile(p, []byte(tc.edit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runHadar(t, "simulate", "--layout", layout, "--site", site, "--trace", p, "--truth", truth)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q\n%s", tc.name, err, tc.want, out)
		}
	}
	if _, err := runHadar(t, "simulate", "--site", site, "--trace", trace); err == nil || !strings.Contains(fmt.Sprint(err), "--site applies with --layout") {
		t.Errorf("--site without --layout: %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[users.u]\naccount = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runHadar(t, "simulate", "--layout", layout, "--site", bad, "--trace", trace, "--truth", truth); err == nil || !strings.Contains(err.Error(), `users.u: account "x" is not in [accounts]`) {
		t.Errorf("bad site file: %v", err)
	}
}
