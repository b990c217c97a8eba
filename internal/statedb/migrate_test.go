package statedb

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// loadDump creates a database at path from a SQL dump (sqlite3 .dump).
func loadDump(t *testing.T, dump, path string) {
	t.Helper()
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(string(b)); err != nil {
		t.Fatalf("loading %s: %v", dump, err)
	}
}

// everything is what OpenHistory reads of a database.
type everything struct {
	Rounds     []Round
	Decisions  []Decision
	Actions    []Action
	Placements map[string]Placement
	Progress   map[string]JobProgress
	GPUs       []GPUSample
	Queue      []QueueSample
	Spans      []JobSpan
}

func readEverything(t *testing.T, path string) everything {
	t.Helper()
	ctx := context.Background()
	h, err := OpenHistory(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var e everything
	var errs [8]error
	e.Rounds, errs[0] = h.Rounds(ctx, time.Time{})
	e.Decisions, errs[1] = h.Decisions(ctx, 0)
	e.Actions, errs[2] = h.Actions(ctx, 0)
	e.Placements, errs[3] = h.Placements(ctx)
	e.Progress, errs[4] = h.Progress(ctx)
	e.GPUs, errs[5] = h.GPUs(ctx, time.Time{})
	e.Queue, errs[6] = h.Queue(ctx, time.Time{})
	e.Spans, errs[7] = h.Spans(ctx, time.Time{})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestMigrateVersion3: a state.db written before this package (schema
// version 3, times of variable width) opens, is migrated to one time
// format, and reads exactly as before; the daemon goes on writing to it.
func TestMigrateVersion3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), File)
	loadDump(t, filepath.Join("testdata", "v3.sql"), path)
	before := readEverything(t, path)
	if len(before.Rounds) != 37 || len(before.Spans) == 0 || len(before.Progress) != 2 || len(before.Placements) != 1 {
		t.Fatalf("the dump reads as %d rounds, %d spans, %d progress, %d placements", len(before.Rounds),
			len(before.Spans), len(before.Progress), len(before.Placements))
	}

	now := time.Date(2026, 11, 30, 12, 10, 0, 0, time.UTC)
	db, recovered, err := Open(ctx, path, now)
	if err != nil || recovered != "" {
		t.Fatalf("Open: %v (recovered %q)", err, recovered)
	}
	defer db.Close()
	if v, err := schemaVersion(ctx, db.db); err != nil || v != len(migrations) {
		t.Errorf("schema version %d (%v), want %d", v, err, len(migrations))
	}
	for _, tc := range timeColumns {
		for _, c := range tc[1:] {
			var bad int
			if err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+tc[0]+` WHERE `+c+` != '' AND length(`+c+`) != ?`,
				len(TimeFormat)).Scan(&bad); err != nil || bad > 0 {
				t.Errorf("%s.%s: %d values not in TimeFormat (%v)", tc[0], c, bad, err)
			}
		}
	}
	if diff := cmp.Diff(before, readEverything(t, path)); diff != "" {
		t.Errorf("the migrated database reads differently (-before +after):\n%s", diff)
	}
	if got := before.Progress["202"].ReportedAt; !got.Equal(time.Date(2026, 11, 30, 12, 3, 30, 123456789, time.UTC)) {
		t.Errorf("a report's time lost its precision: %v", got)
	}
	if st, err := db.PolicyState(ctx, "hadar"); err != nil || string(st) != `{"prices":{"v100":1.5}}` {
		t.Errorf("policy state %q %v", st, err)
	}

	// The next round continues the round numbering and the running job's
	// span (its last sighting was written in the old format).
	last, err := db.LastRound(ctx)
	if err != nil || last != 100 {
		t.Fatalf("last round %d %v", last, err)
	}
	var span JobSpan
	for _, s := range before.Spans {
		if s.LastSeen.Equal(before.Spans[len(before.Spans)-1].LastSeen) {
			span = s
		}
	}
	at := span.LastSeen.Add(10 * time.Minute)
	if err := db.WriteRound(ctx, RoundWrite{Round: Round{Number: last + 1, Started: at, Policy: "hadar"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordHistory(ctx, HistoryRecord{Round: last + 1, At: at, Running: []RunningJob{{JobID: span.JobID,
		Tagged: span.Tagged, Nodes: span.Nodes, RunTime: at.Sub(span.Started)}}}); err != nil {
		t.Fatal(err)
	}
	after := readEverything(t, path)
	if len(after.Spans) != len(before.Spans) {
		t.Errorf("%d spans after one more round, want %d (the job's span continues)", len(after.Spans), len(before.Spans))
	}
}

func TestRetime(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2026-11-30T12:05:00Z", "2026-11-30T12:05:00.000000000Z"},
		{"2026-11-30T12:05:00.25Z", "2026-11-30T12:05:00.250000000Z"},
		{"2026-11-30T06:00:00.000Z", "2026-11-30T06:00:00.000000000Z"},
		{"2026-11-30T12:03:30.123456789Z", "2026-11-30T12:03:30.123456789Z"},
		{"", ""},
		{"not a time", "not a time"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			db, err := sql.Open("sqlite3", ":memory:")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(`CREATE TABLE t (at TEXT); INSERT INTO t VALUES (?)`, tc.in); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(retime([][]string{{"t", "at"}})); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := db.QueryRow(`SELECT at FROM t`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("retime(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if tc.want != "" && tc.want != tc.in && !parseTime(got).Equal(parseTime(tc.in)) {
				t.Errorf("retime(%q) = %q: another time", tc.in, got)
			}
		})
	}
}

// TestNewerSchemaRefused: a database of a newer hadar-slurmd is not
// migrated backwards: Open moves it aside and starts a new one.
func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), File)
	db, _, err := Open(ctx, path, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Exec(`INSERT INTO schema_migrations VALUES (?, '')`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, recovered, err := Open(ctx, path, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if recovered == "" {
		t.Error("a newer schema was opened as is")
	}
}
