package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/profiles"
)

// Bad inputs to the commands: missing, empty, malformed, out of range and
// conflicting. Each fails, with the exit status of its kind (2 for a
// usage error, 1 for a bad file or name), and a message naming the
// problem. The files are hand-written for the test.
func TestBadInputs(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	dir := t.TempDir()
	t.Setenv("HADAR_DB", filepath.Join(dir, "hadar.db"))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.trace", "")
	cpuOnly := write("cpu.layout", "node1\n")
	zeroGPUs := write("zero.layout", "node1 v100 0\n")
	unknownType := write("foo.layout", "node1 v100 4\nnode2 foo 4\n")
	badConfig := write("bad.toml", "round = \"6 minutes\"\n")
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		// simulate: ranges as in hadar.toml(5), conflicts, names, inputs.
		{"explore negative", []string{"simulate", "--explore", "-5"}, exitUsage, "--explore -5: want a bonus from 0 to 4"},
		{"explore too big", []string{"simulate", "--explore", "5", "--truth", "gavel"}, exitUsage, "--explore 5"},
		{"explore not a number", []string{"simulate", "--explore", "x"}, exitUsage, `invalid value "x" for flag -explore`},
		{"noise-rate too big", []string{"simulate", "--noise-rate", "100"}, exitUsage, "--noise-rate 100: want a sigma from 0 to 3"},
		{"noise-steps negative", []string{"simulate", "--noise-steps", "-1"}, exitUsage, "--noise-steps -1"},
		{"round negative", []string{"simulate", "--round", "-5s"}, exitUsage, "--round -5s is below the minimum 1s"},
		{"round negative, daemon", []string{"simulate", "--daemon", "--round", "-5s"}, exitUsage, "--round -5s is below the minimum 1s"},
		{"gpus-per-node zero", []string{"simulate", "--gpus-per-node", "0"}, exitUsage, "--gpus-per-node 0"},
		{"max-copies negative", []string{"simulate", "--max-copies", "-1"}, exitUsage, "--max-copies -1"},
		{"json and markdown", []string{"simulate", "--json", "--markdown"}, exitUsage, "--json and --markdown exclude each other"},
		{"layout and cluster", []string{"simulate", "--layout", zeroGPUs, "--cluster", "v100=4"}, exitUsage, "--cluster and --layout exclude each other"},
		{"layout and gpus-per-node", []string{"simulate", "--layout", zeroGPUs, "--gpus-per-node", "2"}, exitUsage, "--gpus-per-node and --layout exclude each other"},
		{"progress on the daemon path", []string{"simulate", "--daemon", "--progress"}, exitUsage, "--progress does not apply with --daemon"},
		{"cluster empty", []string{"simulate", "--cluster", ""}, exitRuntime, "--cluster: no GPU types given"},
		{"cluster malformed", []string{"simulate", "--cluster", "v100:4,p100"}, exitRuntime, "is not Gavel's V:P:K"},
		{"cluster no count", []string{"simulate", "--cluster", "v100"}, exitRuntime, `"v100" is not TYPE=COUNT`},
		{"cluster negative", []string{"simulate", "--cluster", "v100=-4"}, exitRuntime, `"v100=-4" is not TYPE=COUNT`},
		{"cluster no GPUs", []string{"simulate", "--cluster", "v100=0"}, exitRuntime, "no GPUs"},
		{"cluster unknown type", []string{"simulate", "--cluster", "foo=4"}, exitRuntime, `resolve GPU type "foo": not found`},
		{"cluster type twice", []string{"simulate", "--cluster", "v100=4,V100=4"}, exitRuntime, "GPU type v100 given twice"},
		{"cluster too small", []string{"simulate", "--cluster", "v100=1", "--trace", "gavel:small_test"}, exitRuntime, "needs 2 GPUs; the cluster has 1"},
		{"trace missing", []string{"simulate", "--trace", filepath.Join(dir, "missing.trace")}, exitRuntime, "missing.trace"},
		{"trace empty", []string{"simulate", "--trace", empty}, exitRuntime, "has no jobs"},
		{"trace of another matrix", []string{"simulate", "--throughputs", "lambda", "--cluster", "h100=8", "--trace", "gavel:small_test"}, exitRuntime, `is not in the matrix lambda`},
		{"layout CPU only", []string{"simulate", "--layout", cpuOnly, "--trace", "gavel:small_test"}, exitRuntime, "no node has a GPU"},
		{"layout zero GPUs", []string{"simulate", "--layout", zeroGPUs, "--trace", "gavel:small_test"}, exitRuntime, "no node has a GPU"},
		{"layout unknown type", []string{"simulate", "--layout", unknownType, "--trace", "gavel:small_test"}, exitRuntime, `GPU type "foo" is neither in the matrix gavel nor in the catalogue`},
		{"unknown policy", []string{"simulate", "--policies", "nosuch"}, exitRuntime, "nosuch"},
		// profiles set: job and GPU type names.
		{"set unknown job type", []string{"profiles", "set", "--job-type", "nosuch", "--gpu-type", "v100", "--steps-per-s", "7"}, exitRuntime, "pass --new to create it"},
		{"set ambiguous job type", []string{"profiles", "set", "--job-type", "resnet50", "--gpu-type", "v100", "--steps-per-s", "7"}, exitRuntime, "ambiguous"},
		{"set unknown GPU type", []string{"profiles", "set", "--job-type", "A3C", "--gpu-type", "nosuchgpu", "--steps-per-s", "7"}, exitRuntime, `unknown canonical GPU type "nosuchgpu"`},
		{"set --new existing", []string{"profiles", "set", "--new", "--job-type", "resnet50-bs64", "--gpu-type", "v100", "--steps-per-s", "7"}, exitRuntime, `is the existing job type "ResNet-50 (batch size 64)"`},
		{"set negative rate", []string{"profiles", "set", "--job-type", "A3C", "--gpu-type", "v100", "--steps-per-s", "-1"}, exitRuntime, "-1"},
		{"set zero workers", []string{"profiles", "set", "--job-type", "A3C", "--gpu-type", "v100", "--steps-per-s", "1", "--workers", "0"}, exitRuntime, "workers"},
		{"set no rate", []string{"profiles", "set", "--job-type", "A3C", "--gpu-type", "v100"}, exitUsage, "missing --steps-per-s"},
		{"resolve h800", []string{"profiles", "alias", "resolve", "nvidia_h800"}, exitRuntime, "closest known names: h100, h200"},
		// status, config, trace show.
		{"status unknown state", []string{"status", "-t", "XX"}, exitUsage, `--states: unknown job state "XX"`},
		{"config malformed", []string{"config", "check", badConfig}, exitRuntime, `"round"`},
		{"config missing", []string{"config", "check", filepath.Join(dir, "missing.toml")}, exitRuntime, "missing.toml"},
		{"trace show empty name", []string{"trace", "show", ""}, exitUsage, "empty trace name"},
		{"simulate empty trace name", []string{"simulate", "--trace", ""}, exitUsage, "--trace is empty"},
		{"simulate empty matrix name", []string{"simulate", "--throughputs", " "}, exitUsage, "--throughputs is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, status := runMain(t, tc.args...)
			if status != tc.status {
				t.Errorf("exit status %d, want %d\nstdout: %s\nstderr: %s", status, tc.status, stdout, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not name the problem (%q)", stderr, tc.want)
			}
		})
	}
}

// profiles set resolves a short model name to the job type it means, as
// hadar-slurmd does, instead of creating a job type that would make the
// name ambiguous for everyone; --new creates a job type.
func TestProfilesSetResolvesJobType(t *testing.T) {
	noEnvDB(t)
	t.Setenv("HADAR_DB", filepath.Join(t.TempDir(), "hadar.db"))
	const full = "ResNet-50 (batch size 64)"
	out := mustRun(t, "set", "--job-type", "resnet50-bs64", "--gpu-type", "tesla_v100-sxm2-32gb", "--steps-per-s", "7")
	if want := full + " on 1 x v100: 7 steps/s (measured)\n"; out != want {
		t.Errorf("set printed %q, want %q", out, want)
	}
	for _, model := range []string{full, "resnet50-bs64"} {
		if got := strings.TrimSpace(mustRun(t, "rate", "--model", model, "--gpu-type", "v100")); got != "7" {
			t.Errorf("rate --model %q = %q, want 7", model, got)
		}
	}
	rows := decodeRows(t, mustRun(t, "list", "--json"))
	for _, r := range rows {
		if r.JobType == "resnet50-bs64" {
			t.Fatalf("set created job type %q", r.JobType)
		}
	}

	out = mustRun(t, "set", "--new", "--job-type", "MyModel", "--gpu-type", "h100", "--steps-per-s", "3")
	if want := "new job type \"MyModel\"\nMyModel on 1 x h100: 3 steps/s (measured)\n"; out != want {
		t.Errorf("set --new printed %q, want %q", out, want)
	}
	if got := strings.TrimSpace(mustRun(t, "rate", "--model", "mymodel", "--gpu-type", "h100")); got != "3" {
		t.Errorf("rate of the new job type = %q, want 3", got)
	}
	// Set again without --new: it exists now.
	mustRun(t, "set", "--job-type", "my-model", "--gpu-type", "h100", "--steps-per-s", "4")
	show := decodeRows(t, mustRun(t, "show", "--json", "MyModel"))
	var got []float64
	for _, r := range show {
		got = append(got, r.StepsPerSecond)
	}
	if diff := cmp.Diff([]float64{4}, got); diff != "" {
		t.Errorf("MyModel's rates (-want +got):\n%s", diff)
	}
	if _, err := runProfiles(t, "", "set", "--job-type", "nosuch", "--gpu-type", "v100", "--steps-per-s", "7"); err == nil {
		t.Error("set of an unknown job type without --new succeeded")
	}
}

// --cluster resolves GPU type names as every other hadar command does, and
// takes Gavel's V:P:K.
func TestParseCluster(t *testing.T) {
	gavel := profiles.Default().GPUTypes()
	for in, want := range map[string]map[string]int{
		"v100=36,p100=36,k80=36":              {"v100": 36, "p100": 36, "k80": 36},
		"36:36:36":                            {"v100": 36, "p100": 36, "k80": 36},
		"12:0:4":                              {"v100": 12, "p100": 0, "k80": 4},
		"V100=4":                              {"v100": 4},
		"tesla_v100-sxm2-32gb=8,K80=2":        {"v100": 8, "k80": 2},
		"h100=8":                              {"h100": 8},
		"nvidia_h100_pcie_80gb=4":             {"h100-pcie": 4},
		" l40s = 8 , nvidia_a100-sxm4-80gb=4": {"l40s": 8, "a100": 4},
	} {
		got, err := parseCluster(in, gavel)
		if err != nil {
			t.Errorf("parseCluster(%q): %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parseCluster(%q) (-want +got):\n%s", in, diff)
		}
	}
}

// A --cluster type the matrix has no rate for runs jobs at the prior's
// rates, as hadar-slurmd plans it, and the output says so; before, it
// stood idle (or every job was refused) without a word.
func TestSimulateFillsUnratedClusterTypes(t *testing.T) {
	stdout, stderr, status := runMain(t, "simulate", "--json", "--progress=false", "--cluster", "H100=8", "--trace", "gavel:small_test", "--policies", "hadar")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var out simulateOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"h100"}, out.PriorFilled); diff != "" {
		t.Errorf("prior_filled (-want +got):\n%s", diff)
	}
	m := out.Policies["hadar"]
	if m.Completed != m.Jobs || m.TypeUtilization["h100"] <= 0 {
		t.Errorf("hadar on h100: %d of %d jobs, h100 utilization %v", m.Completed, m.Jobs, m.TypeUtilization["h100"])
	}
	if !strings.Contains(stderr, "the matrix gavel has no rates for h100") {
		t.Errorf("stderr does not say h100 was filled: %q", stderr)
	}

	// A type the matrix rates is left as it is.
	stdout, _, status = runMain(t, "simulate", "--json", "--throughputs", "lambda", "--cluster", "h100=8,l40s=8", "--policies", "hadar")
	if status != 0 {
		t.Fatalf("lambda h100+l40s: status %d", status)
	}
	out = simulateOutput{}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"l40s"}, out.PriorFilled); diff != "" {
		t.Errorf("lambda: prior_filled (-want +got):\n%s", diff)
	}
	if u := out.Policies["hadar"].TypeUtilization["l40s"]; u <= 0 {
		t.Errorf("l40s utilization %v, want > 0", u)
	}
}
