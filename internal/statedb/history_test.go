package statedb

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// A database of a hadar-slurmd without the history tables still reads.
func TestHistoryOldSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	// What version 1 wrote: its runner's table, then the schema.
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
		INSERT INTO schema_migrations VALUES (1, '2026-11-01T00:00:00Z');` + migrations[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO rounds (number, started_at, policy) VALUES (1, ?, 'hadar')`, formatTime(t0)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	h, err := OpenHistory(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.HasHistory() {
		t.Error("HasHistory on an old schema")
	}
	r, err := h.Rounds(ctx, time.Time{})
	if err != nil || len(r) != 1 || !r[0].Started.Equal(t0) {
		t.Errorf("rounds %+v %v", r, err)
	}
	if g, err := h.GPUs(ctx, time.Time{}); g != nil || err != nil {
		t.Errorf("GPUs on an old schema: %v %v", g, err)
	}
	if _, err := OpenHistory(ctx, filepath.Join(t.TempDir(), "missing.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing database: %v", err)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	db, _ = sql.Open("sqlite3", other)
	db.Exec(`CREATE TABLE x (a)`)
	db.Close()
	if _, err := OpenHistory(ctx, other); err == nil || !strings.Contains(err.Error(), "not a hadar-slurmd state database") {
		t.Errorf("other database: %v", err)
	}
}

// OpenHistory never writes: the file is unchanged, even read-only.
func TestHistoryReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	st, _, err := Open(ctx, path, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteRound(ctx, RoundWrite{Round: Round{Number: 1, Started: t0, Policy: "hadar"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHistory(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if r, err := h.Rounds(ctx, time.Time{}); err != nil || len(r) != 1 {
		t.Errorf("rounds %v %v", r, err)
	}
}
