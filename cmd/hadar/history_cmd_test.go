package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/histtest"
	"github.com/hadar-sched/hadar/internal/statedb"

	"github.com/google/go-cmp/cmp"
)

func runHadar(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run(append([]string{"hadar"}, args...))
	return out.String(), err
}

func TestHistory(t *testing.T) {
	t.Setenv("HADAR_CONFIG", "")
	t.Setenv("HADAR_STATE_DB", "")
	dir := t.TempDir()
	db := filepath.Join(dir, "data", statedb.File)
	if err := histtest.WriteState(context.Background(), db, time.Now()); err != nil {
		t.Fatal(err)
	}
	out, err := runHadar(t, "history", "--db", db)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"rounds 36 (1 failed), policy hadar 36",
		"round phases observe 0.040s / 0.040s, solve 0.015s / 0.015s, enforce 0.120s / 0.120s (median / max)",
		"decisions place 5, migrate 1",
		"scontrol actions place ok 6",
		"jobs that ran 6 (5 hadar, 1 others)",
		"hadar runs by GPU type k80 2, p100 2, v100 2",
		"queueing delay hadar jobs mean 29m, median 15m, max 1h10m (5 jobs); others mean 0.000s, median 0.000s, max 0.000s (1 jobs)",
		"queue now 0 pending (0 hadar), 1 running (1 hadar)",
		"GPU TYPE GPUS USED BY HADAR JOBS",
		"k80 8 28% 28%",
		"p100 4 62% 62%",
		"v100 8 24% 19%",
		"last errors (1 in the period)",
		"round 25: observe jobs: slurmctld is not responding",
	} {
		if !strings.Contains(squash(out), want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// --since narrows the period.
	out, err = runHadar(t, "history", "--db", db, "--since", "55m")
	if err != nil || !strings.Contains(squash(out), "rounds 5 (0 failed)") || !strings.Contains(squash(out), "decisions none") {
		t.Errorf("--since 55m: %v\n%s", err, out)
	}
	out, err = runHadar(t, "history", "--db", db, "--since", "1s")
	if err != nil || !strings.Contains(out, "no rounds in this period") {
		t.Errorf("--since 1s: %v\n%s", err, out)
	}

	// The database is found through the config's data_dir.
	cfg := filepath.Join(dir, "hadar.toml")
	if err := os.WriteFile(cfg, []byte("data_dir = \""+filepath.Dir(db)+"\"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADAR_CONFIG", cfg)
	plots := filepath.Join(dir, "plots")
	out, err = runHadar(t, "history", "--since", "24h", "--plot", plots)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{"utilization.png", "queue.png", "placement.png"} {
		path := filepath.Join(plots, name)
		if !strings.Contains(out, "wrote "+path) {
			t.Errorf("output does not name %s:\n%s", path, out)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 300 {
			t.Errorf("%s: %v", name, b)
		}
	}

	// Errors: no database; a config that does not load.
	if _, err := runHadar(t, "history", "--db", filepath.Join(dir, "missing.db")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing database: %v", err)
	}
	if err := os.WriteFile(cfg, []byte("data_dri = \"/x\"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := runHadar(t, "history"); err == nil || !strings.Contains(err.Error(), `unknown key "data_dri"`) {
		t.Errorf("bad config: %v", err)
	}
	// --plot of a period with nothing in it says so.
	if out, err := runHadar(t, "history", "--db", db, "--since", "1s", "--plot", filepath.Join(dir, "empty")); err == nil || !strings.Contains(err.Error(), "nothing recorded") {
		t.Errorf("empty --plot: %v\n%s", err, out)
	}
}

// squash collapses runs of spaces (tabwriter's padding).
func squash(s string) string {
	return regexp.MustCompile(` +`).ReplaceAllString(s, " ")
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		12 * time.Millisecond: "0.012s", 1500 * time.Millisecond: "1.5s", 250 * time.Second: "4m10s",
		2*time.Hour + 5*time.Minute + 20*time.Second: "2h5m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestGanttLanes: two jobs running at once on one node get a lane each
// (neither hides the other); a later job reuses the first free lane.
func TestGanttLanes(t *testing.T) {
	spans := []bridgeSpan{
		{id: "1", tagged: true, nodes: []string{"n1"}, x0: 0, x1: 10},
		{id: "2", tagged: true, nodes: []string{"n1"}, x0: 5, x1: 20},
		{id: "3", tagged: true, nodes: []string{"n1"}, x0: 12, x1: 30},
		{id: "4", tagged: false, nodes: []string{"n2"}, x0: 0, x1: 30},
	}
	bars := ganttLayout(spans, map[string]int{"n1": 1, "n2": 0})
	type lane struct{ Lane, Lanes int }
	got := map[string]lane{}
	for i, b := range bars {
		got[spans[i].id] = lane{b.lane, b.lanes}
	}
	want := map[string]lane{"1": {0, 2}, "2": {1, 2}, "3": {0, 2}, "4": {0, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lanes (-want +got):\n%s", diff)
	}
}
