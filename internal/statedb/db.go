package statedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// File is the name of the state database in the daemon's data_dir.
const File = "state.db"

// HistoryRetention is how long the history tables keep their rows.
const HistoryRetention = 90 * 24 * time.Hour

// DB is the state database as the daemon opens it: read-write, migrated.
type DB struct {
	reader
	path string

	// lastSpans remembers, for the jobs running at the last RecordHistory,
	// the span it wrote, so that a round extends the spans of running jobs
	// without reading them back (only this process writes job_spans).
	mu        sync.Mutex
	lastSpans map[string]lastSpan
}

// lastSpan is the job_spans row a job's run was last recorded in.
type lastSpan struct {
	id       int64
	nodes    string
	lastSeen time.Time
}

// Open opens (creating, mode 0600) the state database at path and brings
// its schema up to date. A file that is not a valid SQLite database or
// fails its integrity check (or its migration) is moved aside to
// "<path>.corrupt-<time>" and a new one is created; recovered then names
// the moved file and why (the caller logs it loudly).
func Open(ctx context.Context, path string, now time.Time) (db *DB, recovered string, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, "", fmt.Errorf("state database: %w", err)
	}
	db, err = open(ctx, path, now)
	if err == nil {
		return db, "", nil
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
	db, err2 := open(ctx, path, now)
	if err2 != nil {
		return nil, "", fmt.Errorf("state database %s: recreating after corruption (%v): %w", path, err, err2)
	}
	return db, aside + " (" + err.Error() + ")", nil
}

var errCorrupt = errors.New("corrupt state database")

func open(ctx context.Context, path string, now time.Time) (*DB, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	f.Close()
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_busy_timeout=5000&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=64", path)
	sdb, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	sdb.SetMaxOpenConns(1)
	var res string
	if err := sdb.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil || res != "ok" {
		sdb.Close()
		if err == nil {
			err = errors.New(res)
		}
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	if err := migrate(ctx, sdb, now); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("%w: migrating: %v", errCorrupt, err)
	}
	return &DB{reader: reader{db: sdb, hasHistory: true}, path: path}, nil
}

// Close closes the database.
func (s *DB) Close() error { return s.db.Close() }

// LastRound returns the number of the last recorded round (0 if none).
func (s *DB) LastRound(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(number), 0) FROM rounds`).Scan(&n)
	return n, err
}

// PolicyState returns the saved state of the named policy (nil if none).
func (s *DB) PolicyState(ctx context.Context, policy string) ([]byte, error) {
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
func (s *DB) SavePolicyState(ctx context.Context, policy string, round int64, state []byte, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO policy_state (policy, round, state, saved_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (policy) DO UPDATE SET round = excluded.round, state = excluded.state, saved_at = excluded.saved_at`,
		policy, round, state, formatTime(at))
	if err != nil {
		return fmt.Errorf("state database: policy state: %w", err)
	}
	return nil
}

// RememberGresRequests records the users' own GPU requests of jobs about
// to be retyped (a job's first record is kept). It runs before the
// scontrol update, so that no crash between the two leaves a type hadar
// set looking like the user's.
func (s *DB) RememberGresRequests(ctx context.Context, round int64, requested map[string]string) error {
	if len(requested) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: gres requests: %w", err)
	}
	defer tx.Rollback()
	for _, id := range slices.Sorted(maps.Keys(requested)) {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO gres_requests (job_id, gres, round) VALUES (?, ?, ?)`,
			id, requested[id], round); err != nil {
			return fmt.Errorf("state database: gres requests: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: gres requests: %w", err)
	}
	return nil
}

// RoundWrite is everything a round stores, written in one transaction.
type RoundWrite struct {
	Round Round
	// Decisions and Actions are stored at the round's start time (their At
	// is not read).
	Decisions []Decision
	Actions   []Action
	// Progress to upsert (Models: each job's job type); Forget are jobs
	// gone from the queue.
	Progress map[string]JobProgress
	Models   map[string]string
	Forget   []string
	// Observations are learned-throughput samples recorded this round.
	Observations []Observation
	// Placed are jobs released this round after a successful place;
	// Unplaced those whose placement record no longer applies (running,
	// held again, gone).
	Placed   map[string]Placement
	Unplaced []string
	// Unrequested are jobs gone from the queue whose record of their
	// user's GPU request (RememberGresRequests) is dropped.
	Unrequested []string
}

// WriteRound stores a round.
func (s *DB) WriteRound(ctx context.Context, w RoundWrite) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	defer tx.Rollback()
	r := w.Round
	now := formatTime(r.Started)
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO rounds (number, started_at, observe_s, solve_s, enforce_s,
		policy, dry_run, jobs, tagged, placed, migrated, preempted, passed, failed, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Number, now, r.Observe.Seconds(), r.Solve.Seconds(), r.Enforce.Seconds(), r.Policy, r.DryRun,
		r.Jobs, r.Tagged, r.Placed, r.Migrated, r.Preempted, r.PassedThru, r.Failed, r.Error); err != nil {
		return fmt.Errorf("state database: round: %w", err)
	}
	for _, d := range w.Decisions {
		if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (round, job_id, kind, from_pl, to_pl, gpu_type, reason, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.Number, d.JobID, d.Kind, d.From, d.To, d.GPUType, d.Reason, now); err != nil {
			return fmt.Errorf("state database: decision: %w", err)
		}
	}
	for _, a := range w.Actions {
		if _, err := tx.ExecContext(ctx, `INSERT INTO actions (round, kind, job_ids, detail, result, error, at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.Number, a.Kind, a.JobIDs, a.Detail, a.Result, a.Error, now); err != nil {
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
			id, w.Models[id], p.Done, p.Reported, p.ReportedSteps, formatTime(p.ReportedAt), p.ReportedPlacement,
			formatTime(p.EstimatedAt), p.Attained, p.Executed, now); err != nil {
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
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.Number, o.JobID, o.Model, o.GPUType, o.Workers, o.Steps, o.Seconds, formatTime(o.At)); err != nil {
			return fmt.Errorf("state database: observation: %w", err)
		}
	}
	for _, id := range w.Unplaced {
		if _, err := tx.ExecContext(ctx, `DELETE FROM placements WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("state database: placement: %w", err)
		}
	}
	for _, id := range w.Unrequested {
		if _, err := tx.ExecContext(ctx, `DELETE FROM gres_requests WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("state database: gres request: %w", err)
		}
	}
	for id, p := range w.Placed {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO placements (job_id, nodes, released_at, round)
			VALUES (?, ?, ?, ?)`, id, strings.Join(p.Nodes, ","), formatTime(p.ReleasedAt), r.Number); err != nil {
			return fmt.Errorf("state database: placement: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	return nil
}

// HistoryRecord is what `hadar history` keeps of one round: the cluster's
// GPUs by type and its queue after the round, and the jobs running.
type HistoryRecord struct {
	Round int64
	At    time.Time
	// GPUs by type (their Round and At are not read).
	GPUs []GPUSample
	// Queue is the number of pending and running jobs (Round, At not read).
	Queue   QueueSample
	Running []RunningJob
}

// RunningJob is a job seen running in a round, for its run span.
type RunningJob struct {
	JobID       string
	Tagged      bool
	Model       string
	Nodes       []string
	GPUType     string
	GPUsPerNode int
	Submitted   time.Time
	// RunTime is how long it has run (squeue's TIME, whole seconds; 0:
	// not known).
	RunTime time.Duration
}

// spanSlack is how far a running job's start, estimated as now minus its
// run time (whole seconds), may lie after the end of its last span and
// still continue it.
const spanSlack = 2 * time.Second

// RecordHistory stores a round's HistoryRecord: one row per GPU type, the
// queue, and the run span of every running job, extended if it continues
// the job's last span (same nodes, started before that span's last
// sighting), opened otherwise. Rows older than HistoryRetention go.
func (s *DB) RecordHistory(ctx context.Context, h HistoryRecord) error {
	at := formatTime(h.At)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: history: %w", err)
	}
	defer tx.Rollback()
	for _, g := range h.GPUs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO gpu_history (round, at, gpu_type, total, used, hadar, reserved, usable)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, h.Round, at, g.Type, g.Total, g.Used, g.Hadar, g.Reserved, g.Usable); err != nil {
			return fmt.Errorf("state database: history: %w", err)
		}
	}
	q := h.Queue
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO queue_history (round, at, pending_tagged, pending_other,
		running_tagged, running_other) VALUES (?, ?, ?, ?, ?, ?)`, h.Round, at, q.PendingTagged, q.PendingOther,
		q.RunningTagged, q.RunningOther); err != nil {
		return fmt.Errorf("state database: history: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	spans := make(map[string]lastSpan, len(h.Running))
	for _, j := range h.Running {
		span, err := recordSpan(ctx, tx, h.Round, h.At, j, s.lastSpans)
		if err != nil {
			s.lastSpans = nil // the transaction rolls back
			return fmt.Errorf("state database: history: %w", err)
		}
		spans[j.JobID] = span
	}
	cutoff := formatTime(h.At.Add(-HistoryRetention))
	for _, q := range []string{`DELETE FROM gpu_history WHERE at < ?`, `DELETE FROM queue_history WHERE at < ?`,
		`DELETE FROM job_spans WHERE last_seen < ?`} {
		if _, err := tx.ExecContext(ctx, q, cutoff); err != nil {
			return fmt.Errorf("state database: history: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		s.lastSpans = nil
		return fmt.Errorf("state database: history: %w", err)
	}
	s.lastSpans = spans
	return nil
}

func recordSpan(ctx context.Context, tx *sql.Tx, round int64, now time.Time, j RunningJob, known map[string]lastSpan) (lastSpan, error) {
	nodes := append([]string(nil), j.Nodes...)
	sort.Strings(nodes)
	nodeList := strings.Join(nodes, ",")
	at := formatTime(now)
	started := now.Add(-j.RunTime).Truncate(time.Second)
	prev, ok := known[j.JobID]
	if !ok {
		var seen string
		err := tx.QueryRowContext(ctx, `SELECT id, nodes, last_seen FROM job_spans WHERE job_id = ? ORDER BY id DESC LIMIT 1`,
			j.JobID).Scan(&prev.id, &prev.nodes, &seen)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return lastSpan{}, err
		}
		ok = err == nil
		prev.lastSeen = parseTime(seen)
	}
	if ok && prev.nodes == nodeList {
		// Same nodes: the same run if it started before the span's last
		// sighting (a run time of 0 says nothing: assume it is).
		if seen := prev.lastSeen; !seen.IsZero() && (j.RunTime == 0 || !started.After(seen.Add(spanSlack))) {
			res, err := tx.ExecContext(ctx, `UPDATE job_spans SET last_seen = ?, last_round = ? WHERE id = ?`, at, round, prev.id)
			if err != nil {
				return lastSpan{}, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				return lastSpan{id: prev.id, nodes: nodeList, lastSeen: now}, err
			}
			// Gone (retention): a new span.
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO job_spans (job_id, tagged, model, nodes, gpu_type, gpus_per_node,
		submitted_at, started_at, last_seen, first_round, last_round) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.JobID, j.Tagged, j.Model, nodeList, j.GPUType, j.GPUsPerNode, formatTime(j.Submitted), formatTime(started),
		at, round, round)
	if err != nil {
		return lastSpan{}, err
	}
	id, err := res.LastInsertId()
	return lastSpan{id: id, nodes: nodeList, lastSeen: now}, err
}
