package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/profiles"
)

// runProfiles runs `hadar profiles args...` and returns its standard output.
func runProfiles(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:           "hadar",
		Commands:       []*cli.Command{profilesCommand()},
		Reader:         strings.NewReader(stdin),
		Writer:         &out,
		ErrWriter:      &errOut,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"hadar", "profiles"}, args...))
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runProfiles(t, "", args...)
	if err != nil {
		t.Fatalf("hadar profiles %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func decodeRows(t *testing.T, out string) []profiles.Row {
	t.Helper()
	var rows []profiles.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return rows
}

func noEnvDB(t *testing.T) {
	t.Setenv("HADAR_DB", "")
	os.Unsetenv("HADAR_DB")
}

func TestProfilesListSeeded(t *testing.T) {
	noEnvDB(t)
	db := filepath.Join(t.TempDir(), "state", "hadar.db")
	rows := decodeRows(t, mustRun(t, "--db", db, "list", "--json"))
	if len(rows) != 3*83 {
		t.Errorf("list: %d rows, want %d", len(rows), 3*83)
	}
	for _, r := range rows {
		if r.Source != profiles.SourceImported || !r.InUse {
			t.Fatalf("fresh database has row %+v; want imported and in use", r)
		}
	}
	if st, err := os.Stat(db); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("database file: %v, %v; want mode 0600", st, err)
	}

	table := mustRun(t, "list", "--db", db, "--gpu-type", "tesla_v100-sxm2-32gb")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if got := strings.Fields(lines[0]); !cmp.Equal(got, []string{"JOB", "TYPE", "GPU", "TYPE", "WORKERS", "STEPS/S", "SOURCE", "SAMPLES", "IN", "USE"}) {
		t.Errorf("header = %q", lines[0])
	}
	if len(lines) != 1+83 {
		t.Errorf("list --gpu-type v100: %d lines, want %d", len(lines), 1+83)
	}
	want := []string{"ResNet-18", "(batch", "size", "128)", "v100", "1", "17.995", "imported", "0", "*"}
	found := false
	for _, l := range lines {
		if cmp.Equal(strings.Fields(l), want) {
			found = true
		}
	}
	if !found {
		t.Errorf("no line %q in:\n%s", strings.Join(want, " "), table)
	}
}

func TestProfilesSetShowUnset(t *testing.T) {
	noEnvDB(t)
	t.Setenv("HADAR_DB", filepath.Join(t.TempDir(), "hadar.db"))
	out := mustRun(t, "set", "--job-type", "A3C", "--gpu-type", "V100", "--workers", "2", "--steps-per-s", "12.5")
	if !strings.Contains(out, "12.5 steps/s (measured)") {
		t.Errorf("set printed %q", out)
	}
	rows := decodeRows(t, mustRun(t, "show", "--json", "A3C"))
	want := []profiles.Row{
		{JobType: "A3C", GPUType: "k80", Workers: 1, Source: profiles.SourceImported, InUse: true},
		{JobType: "A3C", GPUType: "p100", Workers: 1, Source: profiles.SourceImported, InUse: true},
		{JobType: "A3C", GPUType: "v100", Workers: 1, Source: profiles.SourceImported, InUse: true},
		{JobType: "A3C", GPUType: "v100", Workers: 2, StepsPerSecond: 12.5, Source: profiles.SourceMeasured, InUse: true},
	}
	ignore := cmpopts.IgnoreFields(profiles.Row{}, "UpdatedAt")
	for i := range want[:3] {
		want[i].StepsPerSecond = profiles.Default()["A3C"][want[i].GPUType][1]
	}
	if diff := cmp.Diff(want, rows, ignore); diff != "" {
		t.Errorf("show A3C (-want +got):\n%s", diff)
	}
	text := mustRun(t, "show", "A3C")
	if !strings.Contains(text, "UPDATED") || !strings.Contains(text, "12.500") {
		t.Errorf("show table:\n%s", text)
	}

	if out := mustRun(t, "unset", "--job-type", "A3C", "--gpu-type", "v100", "--workers", "2"); !strings.Contains(out, "removed") {
		t.Errorf("unset printed %q", out)
	}
	if rows := decodeRows(t, mustRun(t, "show", "--json", "A3C")); len(rows) != 3 {
		t.Errorf("after unset: %d rows, want 3", len(rows))
	}
}

func TestProfilesImportGavel(t *testing.T) {
	noEnvDB(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "hadar.db")
	file := filepath.Join(dir, "t.json")
	if err := os.WriteFile(file, []byte(`{"NVlink_A100_40GB": {"('LM (batch size 20)', 2)": {"null": 7.5}, "('LM (batch size 20)', 1)": {"null": 4}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "--db", db, "import-gavel", file)
	if !strings.Contains(out, "imported 2 rates for 1 job types") {
		t.Errorf("import-gavel printed %q", out)
	}
	rows := decodeRows(t, mustRun(t, "--db", db, "list", "--json", "--gpu-type", "a100-40gb"))
	if len(rows) != 2 || !cmp.Equal([]float64{4, 7.5}, []float64{rows[0].StepsPerSecond, rows[1].StepsPerSecond}) {
		t.Errorf("a100-40gb rows after import: %+v", rows)
	}

	stdin := `{"k80": {"('A3C', 1)": {"null": 0.25}}}`
	if out, err := runProfiles(t, stdin, "--db", db, "import-gavel", "-"); err != nil || !strings.Contains(out, "imported 1 rates") {
		t.Fatalf("import-gavel -: %q, %v", out, err)
	}
	rows = decodeRows(t, mustRun(t, "--db", db, "show", "--json", "A3C"))
	if rows[0].GPUType != "k80" || rows[0].StepsPerSecond != 0.25 {
		t.Errorf("A3C on k80 after stdin import: %+v", rows[0])
	}
}

func TestProfilesImportMatrix(t *testing.T) {
	noEnvDB(t)
	db := filepath.Join(t.TempDir(), "hadar.db")
	out := mustRun(t, "--db", db, "import", "--throughputs", "lambda")
	if !strings.Contains(out, "imported 300 rates for 10 job types from lambda") {
		t.Errorf("import printed %q", out)
	}
	rows := decodeRows(t, mustRun(t, "--db", db, "list", "--json", "--in-use", "--gpu-type", "nvidia_h100_80gb_hbm3"))
	if len(rows) != 40 || rows[0].GPUType != "h100" || rows[0].Source != profiles.SourceImported {
		t.Errorf("h100 rows after importing lambda: %d, first %+v", len(rows), rows[0])
	}
	// --prior adds the cells nobody measured, labelled prior.
	rows = decodeRows(t, mustRun(t, "--db", db, "show", "--json", "--prior", "resnet50"))
	bySource := map[profiles.Source]int{}
	for _, r := range rows {
		bySource[r.Source]++
	}
	if bySource[profiles.SourceImported] != 30 || bySource[profiles.SourcePrior] == 0 {
		t.Errorf("show --prior resnet50: rows by source %v", bySource)
	}
	if text := mustRun(t, "--db", db, "list", "--prior", "--gpu-type", "l40s"); !strings.Contains(text, "prior") {
		t.Errorf("list --prior --gpu-type l40s:\n%s", text)
	}
}

func TestProfilesPriorErrorAndGPUs(t *testing.T) {
	noEnvDB(t)
	out := mustRun(t, "prior-error", "--throughputs", "gavel", "--markdown")
	for _, want := range []string{"| GPU type left out |", "| k80 | 80 | 80 |", "| all | 246 | 246 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("prior-error --markdown lacks %q:\n%s", want, out)
		}
	}
	var rows []profiles.LOOError
	if err := json.Unmarshal([]byte(mustRun(t, "prior-error", "--throughputs", "lambda", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 12 || rows[11].GPUType != "all" || rows[11].Median <= 0 || rows[11].Median > 0.3 {
		t.Errorf("prior-error lambda: %+v", rows)
	}
	var specs []profiles.GPUSpec
	if err := json.Unmarshal([]byte(mustRun(t, "gpus", "--json")), &specs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(profiles.Catalog(), specs); diff != "" {
		t.Errorf("gpus --json (-want +got):\n%s", diff)
	}
	if text := mustRun(t, "gpus"); !strings.Contains(text, "h100-pcie") || !strings.HasPrefix(text, "TYPE") {
		t.Errorf("gpus table:\n%s", text)
	}
}

func TestProfilesAlias(t *testing.T) {
	noEnvDB(t)
	db := filepath.Join(t.TempDir(), "hadar.db")
	if out := mustRun(t, "--db", db, "alias", "set", "gpu_big", "A100"); out != "gpu_big -> a100\n" {
		t.Errorf("alias set printed %q", out)
	}
	var as []profiles.Alias
	if err := json.Unmarshal([]byte(mustRun(t, "alias", "list", "--db", db, "--json")), &as); err != nil {
		t.Fatal(err)
	}
	if len(as) != len(profiles.DefaultAliases())+1 || !sort.SliceIsSorted(as, func(i, j int) bool { return as[i].Site < as[j].Site }) {
		t.Errorf("alias list: %+v", as)
	}
	text := mustRun(t, "--db", db, "alias", "list")
	if !strings.Contains(text, "gpu_big") || !strings.HasPrefix(text, "SITE NAME") {
		t.Errorf("alias list table:\n%s", text)
	}
	for name, want := range map[string]string{"gpu_big": "a100", "Tesla_V100-PCIE-99GB": "v100"} {
		if got := mustRun(t, "--db", db, "alias", "resolve", name); got != want+"\n" {
			t.Errorf("resolve %s = %q, want %q", name, got, want)
		}
	}
}

func TestProfilesErrors(t *testing.T) {
	noEnvDB(t)
	db := filepath.Join(t.TempDir(), "hadar.db")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"show without job type", []string{"show"}, "usage:"},
		{"show two args", []string{"show", "a", "b"}, "want one JOBTYPE"},
		{"show unknown suggests", []string{"show", "resnet-18 (batch size 12"}, "did you mean: ResNet-18 (batch size 128)"},
		{"show unknown", []string{"show", "Nope"}, "not found"},
		{"set missing rate", []string{"set", "--job-type", "A3C", "--gpu-type", "v100"}, "steps-per-s"},
		{"set bad workers", []string{"set", "--job-type", "A3C", "--gpu-type", "v100", "--workers", "0", "--steps-per-s", "1"}, "workers 0"},
		{"set negative", []string{"set", "--job-type", "A3C", "--gpu-type", "v100", "--steps-per-s", "-1"}, "invalid argument"},
		{"set positional", []string{"set", "--job-type", "A3C", "--gpu-type", "v100", "--steps-per-s", "1", "extra"}, "no arguments"},
		{"import no file", []string{"import-gavel"}, "want one FILE"},
		{"import missing file", []string{"import-gavel", "/nonexistent/x.json"}, "no such file"},
		{"alias set one arg", []string{"alias", "set", "x"}, "SITE and CANONICAL"},
		{"alias resolve unknown", []string{"alias", "resolve", "mi355x"}, "not found"},
		{"alias to an unknown type", []string{"alias", "set", "site_gpu", "h1OO"}, `unknown canonical GPU type "h1OO"`},
		{"import unknown matrix", []string{"import", "--throughputs", "lamda"}, "gavel, lambda, lambda-fp16"},
		{"import takes no argument", []string{"import", "lambda"}, "--throughputs"},
		{"unset nothing", []string{"unset", "--job-type", "A3C", "--gpu-type", "v100"}, "no measured rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runProfiles(t, "", append([]string{"--db", db}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// docs/prior.md shows the tables `hadar profiles prior-error` prints, and
// docs/gpus.md every catalogue type: a change to the prior or the
// catalogue that is not carried into the docs fails here.
func TestPriorDocTables(t *testing.T) {
	noEnvDB(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "prior.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range profiles.MatrixNames() {
		table := mustRun(t, "prior-error", "--throughputs", m, "--markdown")
		if !strings.Contains(string(doc), table) {
			t.Errorf("docs/prior.md lacks the %s table; regenerate it with `hadar profiles prior-error --throughputs %s --markdown`:\n%s", m, m, table)
		}
	}
	gpus, err := os.ReadFile(filepath.Join("..", "..", "docs", "gpus.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range profiles.Catalog() {
		if !strings.Contains(string(gpus), "| `"+s.Type+"` | "+s.Name+" |") {
			t.Errorf("docs/gpus.md lacks the catalogue row of %s", s.Type)
		}
	}
}

// TestProfilesRateUnknownModel: with --prior, a model no matrix knows gets
// the cross-model prior hadar-slurmd plans it with; without, or for a
// model that names several job types, the lookup fails.
func TestProfilesRateUnknownModel(t *testing.T) {
	noEnvDB(t)
	lambda, err := profiles.Matrix("lambda")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gpuType string
		workers int
	}{{"v100", 1}, {"h100", 4}, {"l40s", 1}} {
		want, ok := profiles.PriorForModel(lambda, "mistral-7b-qlora", []string{tc.gpuType})[tc.gpuType][tc.workers]
		if !ok || want <= 0 {
			t.Fatalf("no prior for an unknown model on %d x %s", tc.workers, tc.gpuType)
		}
		out := mustRun(t, "rate", "--throughputs", "lambda", "--prior", "--model", "mistral-7b-qlora",
			"--gpu-type", tc.gpuType, "--workers", fmt.Sprint(tc.workers))
		if got := strings.TrimSpace(out); got != fmt.Sprint(want) {
			t.Errorf("rate of an unknown model on %d x %s = %s, want the prior's %v", tc.workers, tc.gpuType, got, want)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown model without --prior", []string{"--throughputs", "lambda", "--model", "mistral-7b-qlora", "--gpu-type", "v100"}, "unknown model"},
		{"ambiguous model with --prior", []string{"--embedded", "--prior", "--model", "resnet50", "--gpu-type", "v100"}, "ambiguous"},
		{"no letters with --prior", []string{"--embedded", "--prior", "--model", " ", "--gpu-type", "v100"}, "no letters or digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runProfiles(t, "", append([]string{"rate"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// purge removes one user's samples and recomputes the cells (security
// review H1: one user's reports bent the matrix and nothing could undo it).
func TestProfilesPurgeUser(t *testing.T) {
	noEnvDB(t)
	db := filepath.Join(t.TempDir(), "hadar.db")
	s, err := profiles.Open(context.Background(), db, profiles.WithMinLearnedSamples(1))
	if err != nil {
		t.Fatal(err)
	}
	v100 := profiles.Default()["A3C"]["v100"][1]
	for i, o := range []struct {
		user string
		rate float64
	}{{"mallory", 7 * v100}, {"mallory", 7 * v100}, {"bob", v100}, {"carol", v100}} {
		if err := s.RecordObservation(context.Background(), profiles.Observation{JobType: "A3C", GPUType: "v100", Workers: 1,
			Steps: o.rate * 60, Seconds: 60, JobID: fmt.Sprint(i), User: o.user}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	out := mustRun(t, "--db", db, "purge", "--user", "mallory")
	if !strings.Contains(out, "removed 2 samples of mallory from 1 cells") {
		t.Errorf("purge printed %q", out)
	}
	for _, r := range decodeRows(t, mustRun(t, "--db", db, "show", "--json", "A3C")) {
		if r.Source == profiles.SourceLearned && (r.Samples != 2 || r.Users != 2 || math.Abs(r.StepsPerSecond-v100) > 1e-9) {
			t.Errorf("learned row after the purge: %+v, want bob's and carol's rate %v", r, v100)
		}
	}
	if _, err := runProfiles(t, "", "--db", db, "purge", "--user", "mallory"); err == nil || !strings.Contains(err.Error(), "no samples") {
		t.Errorf("second purge: %v, want no samples", err)
	}
	if _, err := runProfiles(t, "", "--db", db, "purge"); err == nil {
		t.Error("purge without --user: want an error")
	}
}
