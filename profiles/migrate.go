package profiles

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded schema step, migrations/NNNN_name.sql.
type migration struct {
	Version int
	Name    string
	SQL     string
}

// loadMigrations returns the embedded migrations in version order, checking
// that versions start at 1 and have no gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var out []migration
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".sql")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		out = append(out, migration{Version: v, Name: base, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.Name, i+1)
		}
	}
	return out, nil
}

// migrate brings the schema up to date in one transaction and reports the
// version the database had before (0 for a new database). The transaction
// takes the write lock first (the DSN asks for BEGIN IMMEDIATE), so two
// processes opening a new database at once do not both apply migrations.
// seed runs in the same transaction when the database was empty.
func migrate(ctx context.Context, db *sql.DB, ms []migration, now time.Time, seed func(context.Context, *sql.Tx) error) (before int, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return 0, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&before); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if before > len(ms) {
		return before, fmt.Errorf("migrate: database schema version %d is newer than this hadar knows (%d)", before, len(ms))
	}
	for _, m := range ms[before:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return before, fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, formatTime(now)); err != nil {
			return before, fmt.Errorf("migrate: record %s: %w", m.Name, err)
		}
	}
	if before == 0 && seed != nil {
		if err := seed(ctx, tx); err != nil {
			return before, fmt.Errorf("migrate: seed: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return before, fmt.Errorf("migrate: commit: %w", err)
	}
	return before, nil
}
