package bridge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// stateMigrations is the state database's schema, one statement list per
// version, applied in order and recorded in schema_migrations.
var stateMigrations = []string{
	// 1: initial schema.
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
	// 2: history of GPUs, queue and job runs, for `hadar history` (history.go).
	historySchema,
	// 3: the policy's bookkeeping between rounds (optimizer.StatefulPolicy),
	// so a restart, hadar plan and hadar explain plan as the daemon does.
	`CREATE TABLE policy_state (
		policy   TEXT PRIMARY KEY,
		round    INTEGER NOT NULL,
		state    BLOB NOT NULL,
		saved_at TEXT NOT NULL
	);`,
}

// PolicyState returns the saved state of the named policy (nil if none).
func (s *State) PolicyState(ctx context.Context, policy string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT state FROM policy_state WHERE policy = ?`, policy).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: policy state: %w", err)
	}
	return b, nil
}

// SavePolicyState stores the named policy's state after round.
func (s *State) SavePolicyState(ctx context.Context, policy string, round int64, state []byte, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO policy_state (policy, round, state, saved_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (policy) DO UPDATE SET round = excluded.round, state = excluded.state, saved_at = excluded.saved_at`,
		policy, round, state, fmtTime(at))
	if err != nil {
		return fmt.Errorf("state database: policy state: %w", err)
	}
	return nil
}

// State is the bridge's SQLite database (state.db in the data dir): the
// history of rounds, decisions and actions, where hadar placed the jobs it
// released, and each job's progress. Everything the bridge must not lose
// on a restart is re-derived from Slurm; the database adds what Slurm does
// not say (placements of released jobs not yet running, progress
// estimates), so losing it loses history, never jobs.
type State struct {
	db   *sql.DB
	path string
}

// OpenState opens (creating, mode 0600) the state database at path. A file
// that is not a valid SQLite database or fails its integrity check is moved
// aside to "<path>.corrupt-<time>" and a new one is created; recovered then
// names the moved file (the caller logs it loudly).
func OpenState(ctx context.Context, path string, now time.Time) (st *State, recovered string, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, "", fmt.Errorf("state database: %w", err)
	}
	st, err = openState(ctx, path)
	if err == nil {
		return st, "", nil
	}
	if !errors.Is(err, errCorrupt) {
		return nil, "", err
	}
	aside := fmt.Sprintf("%s.corrupt-%s", path, now.UTC().Format("20060102T150405Z"))
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, "", fmt.Errorf("state database %s is unusable (%v) and cannot be moved aside: %w", path, err, rerr)
	}
	for _, sfx := range []string{"-wal", "-shm", "-journal"} {
		if _, serr := os.Stat(path + sfx); serr == nil {
			_ = os.Rename(path+sfx, aside+sfx)
		}
	}
	st, err2 := openState(ctx, path)
	if err2 != nil {
		return nil, "", fmt.Errorf("state database %s: recreating after corruption (%v): %w", path, err, err2)
	}
	return st, aside + " (" + err.Error() + ")", nil
}

var errCorrupt = errors.New("corrupt state database")

func openState(ctx context.Context, path string) (*State, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	f.Close()
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_busy_timeout=5000&_synchronous=NORMAL&_txlock=immediate", path)
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	db.SetMaxOpenConns(1)
	var res string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil || res != "ok" {
		db.Close()
		if err == nil {
			err = errors.New(res)
		}
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	s := &State{db: db, path: path}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: migrating: %v", errCorrupt, err)
	}
	return s, nil
}

func (s *State) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	var have int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return err
	}
	if have > len(stateMigrations) {
		return fmt.Errorf("database schema version %d is newer than this hadar-slurmd (%d)", have, len(stateMigrations))
	}
	for v := have + 1; v <= len(stateMigrations); v++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, stateMigrations[v-1]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v, fmtTime(time.Now())); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database.
func (s *State) Close() error { return s.db.Close() }

// LastRound returns the number of the last recorded round (0 if none).
func (s *State) LastRound(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(number), 0) FROM rounds`).Scan(&n)
	return n, err
}

// Placements returns the jobs hadar released and where.
func (s *State) Placements(ctx context.Context) (map[string]Placed, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, nodes, released_at FROM placements`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Placed{}
	for rows.Next() {
		var id, nodes, at string
		if err := rows.Scan(&id, &nodes, &at); err != nil {
			return nil, err
		}
		out[id] = Placed{Nodes: strings.Split(nodes, ","), ReleasedAt: parseTime(at)}
	}
	return out, rows.Err()
}

// Progress returns the stored progress of every job.
func (s *State) Progress(ctx context.Context) (map[string]JobProgress, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, done, reported, reported_steps, reported_at,
		reported_placement, estimated_at, attained, executed FROM job_progress`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]JobProgress{}
	for rows.Next() {
		var p JobProgress
		var rep int
		var repAt, estAt string
		if err := rows.Scan(&p.JobID, &p.Done, &rep, &p.ReportedSteps, &repAt, &p.ReportedPlacement, &estAt, &p.Attained, &p.Executed); err != nil {
			return nil, err
		}
		p.Reported = rep != 0
		p.ReportedAt, p.EstimatedAt = parseTime(repAt), parseTime(estAt)
		out[p.JobID] = p
	}
	return out, rows.Err()
}

// RoundRecord is one row of rounds.
type RoundRecord struct {
	Number                  int64
	Started                 time.Time
	Observe, Solve, Enforce time.Duration
	Policy                  string
	DryRun                  bool
	Jobs, Tagged            int
	Placed, Migrated        int
	Preempted, PassedThru   int
	Failed                  int
	Error                   string
}

// RoundWrite is everything a round stores, written in one transaction.
type RoundWrite struct {
	Round     RoundRecord
	Decisions []Decision
	Results   []ActionResult
	// Progress to upsert; Forget are jobs gone from the queue.
	Progress map[string]JobProgress
	Models   map[string]string
	Forget   []string
	// Observations are learned-throughput samples recorded this round.
	Observations []ObservationRecord
	// Placed are jobs released this round after a successful place.
	Placed map[string]Placed
	// Unplaced are jobs whose placement record no longer applies (running,
	// held again, gone).
	Unplaced []string
}

// ObservationRecord is one learned-throughput sample.
type ObservationRecord struct {
	JobID, Model, GPUType string
	Workers               int
	Steps, Seconds        float64
	At                    time.Time
}

// WriteRound stores a round.
func (s *State) WriteRound(ctx context.Context, w RoundWrite) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	defer tx.Rollback()
	r := w.Round
	now := fmtTime(r.Started)
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO rounds (number, started_at, observe_s, solve_s, enforce_s,
		policy, dry_run, jobs, tagged, placed, migrated, preempted, passed, failed, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Number, now, r.Observe.Seconds(), r.Solve.Seconds(), r.Enforce.Seconds(), r.Policy, r.DryRun,
		r.Jobs, r.Tagged, r.Placed, r.Migrated, r.Preempted, r.PassedThru, r.Failed, r.Error); err != nil {
		return fmt.Errorf("state database: round: %w", err)
	}
	for _, d := range w.Decisions {
		if d.Kind == DecideWait || d.Kind == DecideKeep && d.From == d.To && strings.HasPrefix(d.Reason, "the policy keeps") {
			continue // the common no-change cases would swamp the history
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (round, job_id, kind, from_pl, to_pl, gpu_type, reason, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.Number, d.JobID, string(d.Kind), d.From, d.To, d.GPUType, d.Reason, now); err != nil {
			return fmt.Errorf("state database: decision: %w", err)
		}
	}
	for _, res := range w.Results {
		result := "ok"
		errText := ""
		switch {
		case res.Err != nil:
			result, errText = "error", res.Err.Error()
		case len(res.Refused) > 0:
			result = "refused"
		case len(res.Sent) == 0 && len(res.Skipped) > 0:
			result = "skipped"
		case len(res.Skipped) > 0:
			// Done for Sent only: the history must not show the skipped
			// jobs as released (or placed) by this action.
			result = "partial"
			errText = "skipped (an earlier step for them failed): " + strings.Join(res.Skipped, ",")
		case w.Round.DryRun:
			result = "dry-run"
		}
		ids := append(append(append([]string(nil), res.Sent...), res.Skipped...), res.Refused...)
		detail := strings.Join(res.Action.Nodes, ",")
		if res.Action.Kind == ActComment {
			detail = res.Action.Text
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO actions (round, kind, job_ids, detail, result, error, at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.Number, string(res.Action.Kind), strings.Join(ids, ","), detail, result, errText, now); err != nil {
			return fmt.Errorf("state database: action: %w", err)
		}
	}
	for id, p := range w.Progress {
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_progress (job_id, model, done, reported, reported_steps,
			reported_at, reported_placement, estimated_at, attained, executed, last_seen)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (job_id) DO UPDATE SET model = excluded.model, done = excluded.done,
			reported = excluded.reported, reported_steps = excluded.reported_steps, reported_at = excluded.reported_at,
			reported_placement = excluded.reported_placement, estimated_at = excluded.estimated_at,
			attained = excluded.attained, executed = excluded.executed, last_seen = excluded.last_seen`,
			id, w.Models[id], p.Done, p.Reported, p.ReportedSteps, fmtTime(p.ReportedAt), p.ReportedPlacement,
			fmtTime(p.EstimatedAt), p.Attained, p.Executed, now); err != nil {
			return fmt.Errorf("state database: progress: %w", err)
		}
	}
	for _, id := range w.Forget {
		if _, err := tx.ExecContext(ctx, `DELETE FROM job_progress WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("state database: forget: %w", err)
		}
	}
	for _, o := range w.Observations {
		if _, err := tx.ExecContext(ctx, `INSERT INTO observations (round, job_id, model, gpu_type, workers, steps, seconds, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.Number, o.JobID, o.Model, o.GPUType, o.Workers, o.Steps, o.Seconds, fmtTime(o.At)); err != nil {
			return fmt.Errorf("state database: observation: %w", err)
		}
	}
	for _, id := range w.Unplaced {
		if _, err := tx.ExecContext(ctx, `DELETE FROM placements WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("state database: placement: %w", err)
		}
	}
	for id, p := range w.Placed {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO placements (job_id, nodes, released_at, round)
			VALUES (?, ?, ?, ?)`, id, strings.Join(p.Nodes, ","), fmtTime(p.ReleasedAt), r.Number); err != nil {
			return fmt.Errorf("state database: placement: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	return nil
}

// ActionRow is one stored action (for tests and `hadar history`).
type ActionRow struct {
	Round  int64
	Kind   string
	JobIDs string
	Result string
	Error  string
}

// Actions returns the stored actions, oldest first.
func (s *State) Actions(ctx context.Context) ([]ActionRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT round, kind, job_ids, result, error FROM actions ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ActionRow
	for rows.Next() {
		var a ActionRow
		if err := rows.Scan(&a.Round, &a.Kind, &a.JobIDs, &a.Result, &a.Error); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
