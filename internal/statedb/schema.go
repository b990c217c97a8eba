package statedb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// migrations is the schema, one step per version (version = index + 1),
// applied in order by migrate and recorded in schema_migrations. Steps are
// never edited once released: a change is a new step at the end.
var migrations = []string{
	// 1: rounds, decisions, actions, placements of released jobs, progress,
	// learned-throughput samples.
	`CREATE TABLE rounds (
		number        INTEGER PRIMARY KEY,
		started_at    TEXT NOT NULL,
		observe_s     REAL NOT NULL DEFAULT 0,
		solve_s       REAL NOT NULL DEFAULT 0,
		enforce_s     REAL NOT NULL DEFAULT 0,
		policy        TEXT NOT NULL DEFAULT '',
		dry_run       INTEGER NOT NULL DEFAULT 0,
		jobs          INTEGER NOT NULL DEFAULT 0,
		tagged        INTEGER NOT NULL DEFAULT 0,
		placed        INTEGER NOT NULL DEFAULT 0,
		migrated      INTEGER NOT NULL DEFAULT 0,
		preempted     INTEGER NOT NULL DEFAULT 0,
		passed        INTEGER NOT NULL DEFAULT 0,
		failed        INTEGER NOT NULL DEFAULT 0,
		error         TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE decisions (
		round     INTEGER NOT NULL,
		job_id    TEXT NOT NULL,
		kind      TEXT NOT NULL,
		from_pl   TEXT NOT NULL,
		to_pl     TEXT NOT NULL,
		gpu_type  TEXT NOT NULL DEFAULT '',
		reason    TEXT NOT NULL,
		at        TEXT NOT NULL
	);
	CREATE INDEX decisions_job ON decisions (job_id, round);
	CREATE TABLE actions (
		id        INTEGER PRIMARY KEY AUTOINCREMENT,
		round     INTEGER NOT NULL,
		kind      TEXT NOT NULL,
		job_ids   TEXT NOT NULL,
		detail    TEXT NOT NULL DEFAULT '',
		result    TEXT NOT NULL,
		error     TEXT NOT NULL DEFAULT '',
		at        TEXT NOT NULL
	);
	CREATE INDEX actions_round ON actions (round);
	CREATE TABLE placements (
		job_id       TEXT PRIMARY KEY,
		nodes        TEXT NOT NULL,
		gpu_type     TEXT NOT NULL DEFAULT '',
		released_at  TEXT NOT NULL,
		round        INTEGER NOT NULL
	);
	CREATE TABLE job_progress (
		job_id             TEXT PRIMARY KEY,
		model              TEXT NOT NULL DEFAULT '',
		done               REAL NOT NULL DEFAULT 0,
		reported           INTEGER NOT NULL DEFAULT 0,
		reported_steps     REAL NOT NULL DEFAULT 0,
		reported_at        TEXT NOT NULL DEFAULT '',
		reported_placement TEXT NOT NULL DEFAULT '',
		estimated_at       TEXT NOT NULL DEFAULT '',
		attained           REAL NOT NULL DEFAULT 0,
		executed           REAL NOT NULL DEFAULT 0,
		last_seen          TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE observations (
		id        INTEGER PRIMARY KEY AUTOINCREMENT,
		round     INTEGER NOT NULL,
		job_id    TEXT NOT NULL,
		model     TEXT NOT NULL,
		gpu_type  TEXT NOT NULL,
		workers   INTEGER NOT NULL,
		steps     REAL NOT NULL,
		seconds   REAL NOT NULL,
		at        TEXT NOT NULL
	);`,
	// 2: history of GPUs, queue and job runs, for `hadar history`.
	`CREATE TABLE gpu_history (
		round     INTEGER NOT NULL,
		at        TEXT NOT NULL,
		gpu_type  TEXT NOT NULL,
		total     INTEGER NOT NULL,
		used      INTEGER NOT NULL,
		hadar     INTEGER NOT NULL,
		reserved  INTEGER NOT NULL,
		usable    INTEGER NOT NULL
	);
	CREATE INDEX gpu_history_at ON gpu_history (at);
	CREATE TABLE queue_history (
		round           INTEGER PRIMARY KEY,
		at              TEXT NOT NULL,
		pending_tagged  INTEGER NOT NULL,
		pending_other   INTEGER NOT NULL,
		running_tagged  INTEGER NOT NULL,
		running_other   INTEGER NOT NULL
	);
	CREATE INDEX queue_history_at ON queue_history (at);
	CREATE TABLE job_spans (
		id             INTEGER PRIMARY KEY AUTOINCREMENT,
		job_id         TEXT NOT NULL,
		tagged         INTEGER NOT NULL,
		model          TEXT NOT NULL DEFAULT '',
		nodes          TEXT NOT NULL,
		gpu_type       TEXT NOT NULL DEFAULT '',
		gpus_per_node  INTEGER NOT NULL DEFAULT 0,
		submitted_at   TEXT NOT NULL DEFAULT '',
		started_at     TEXT NOT NULL,
		last_seen      TEXT NOT NULL,
		first_round    INTEGER NOT NULL,
		last_round     INTEGER NOT NULL
	);
	CREATE INDEX job_spans_job ON job_spans (job_id, id);
	CREATE INDEX job_spans_seen ON job_spans (last_seen);`,
	// 3: the policy's bookkeeping between rounds (optimizer.StatefulPolicy),
	// so a restart, hadar plan and hadar explain plan as the daemon does.
	`CREATE TABLE policy_state (
		policy   TEXT PRIMARY KEY,
		round    INTEGER NOT NULL,
		state    BLOB NOT NULL,
		saved_at TEXT NOT NULL
	);`,
	// 4: the users' own GPU requests of the jobs whose Gres hadar rewrote
	// (Slurm 24.11, nodes used per GPU type), so a type hadar set is never
	// read as the user's constraint.
	`CREATE TABLE gres_requests (
		job_id TEXT PRIMARY KEY,
		gres   TEXT NOT NULL,
		round  INTEGER NOT NULL
	);`,
	// 5: one time format. Versions 1-4 wrote RFC 3339 of variable width
	// (the history tables: milliseconds); every time becomes TimeFormat.
	retime(timeColumns),
}

// timeColumns are the timestamp columns of every table, as retime takes
// them.
var timeColumns = [][]string{
	{"schema_migrations", "applied_at"},
	{"rounds", "started_at"},
	{"decisions", "at"},
	{"actions", "at"},
	{"placements", "released_at"},
	{"job_progress", "reported_at", "estimated_at", "last_seen"},
	{"observations", "at"},
	{"gpu_history", "at"},
	{"queue_history", "at"},
	{"job_spans", "submitted_at", "started_at", "last_seen"},
	{"policy_state", "saved_at"},
}

// retime rewrites the UTC RFC 3339 times ("...T12:05:00Z", "...:00.25Z")
// of the given columns (table first, then its columns) in TimeFormat, in
// SQL: the fraction is padded to nine digits. Empty values stay empty.
func retime(tables [][]string) string {
	var b strings.Builder
	for _, t := range tables {
		for _, c := range t[1:] {
			fmt.Fprintf(&b, `UPDATE %[1]s SET %[2]s = CASE WHEN substr(%[2]s, 20, 1) = '.'
				THEN substr(%[2]s, 1, 20) || substr(substr(%[2]s, 21, length(%[2]s) - 21) || '000000000', 1, 9) || 'Z'
				ELSE substr(%[2]s, 1, 19) || '.000000000Z' END
				WHERE %[2]s LIKE '____-__-__T__:__:__%%Z' AND length(%[2]s) != %[3]d;
`, t[0], c, len(TimeFormat))
		}
	}
	return b.String()
}

// migrate brings the schema up to date, one transaction per step (each
// takes the write lock first: the DSN asks for BEGIN IMMEDIATE, so two
// processes opening a new database do not both apply a step).
func migrate(ctx context.Context, db *sql.DB, now time.Time) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	have, err := schemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if have > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this hadar-slurmd (%d)", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		if err := apply(ctx, db, v, now); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, version int, now time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, migrations[version-1]); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		version, formatTime(now)); err != nil {
		return err
	}
	return tx.Commit()
}

// schemaVersion is the last migration applied (0 for a new database).
func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
