package statedb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"
)

// Round is one row of rounds.
type Round struct {
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

// Decision is one stored decision about a job.
type Decision struct {
	Round                                  int64
	At                                     time.Time
	JobID, Kind, From, To, GPUType, Reason string
}

// Action is one stored Slurm action: its job ids (comma-separated), its
// nodes or AdminComment text (Detail), and Result "ok", "error",
// "refused", "skipped", "partial" (done for some jobs; Error lists the
// others) or "dry-run".
type Action struct {
	Round  int64
	At     time.Time
	Kind   string
	JobIDs string
	Detail string
	Result string
	Error  string
}

// JobProgress is what the bridge knows of a job's work, kept across rounds
// and restarts (bridge.JobProgress is this type).
type JobProgress struct {
	JobID string
	// Done is the steps done so far: the latest report, plus an estimate
	// (matrix rate x run time) since then, or only the estimate for a job
	// that never reported.
	Done float64
	// Reported is true once the job has reported progress.
	Reported bool
	// ReportedSteps/ReportedAt are the latest report taken into account;
	// ReportedPlacement is where the job ran when it reported.
	ReportedSteps     float64
	ReportedAt        time.Time
	ReportedPlacement string
	// EstimatedAt is when Done was last advanced.
	EstimatedAt time.Time
	// Attained is the GPU-seconds the job has received so far.
	Attained float64
	// Executed is the run time the job has had so far, in seconds.
	Executed float64
}

// Placement is where hadar released a job and when (bridge.Placed is
// this type).
type Placement struct {
	Nodes      []string
	ReleasedAt time.Time
}

// Observation is one learned-throughput sample.
type Observation struct {
	JobID, Model, GPUType string
	Workers               int
	Steps, Seconds        float64
	At                    time.Time
}

// GPUSample is one round's GPUs of one type: Total configured, Used
// allocated to any job, Hadar allocated to hadar's running jobs, Reserved
// for hadar's launching jobs, Usable on the nodes hadar places work on.
type GPUSample struct {
	Round                                int64
	At                                   time.Time
	Type                                 string
	Total, Used, Hadar, Reserved, Usable int
}

// QueueSample is the number of pending and running jobs at one round.
type QueueSample struct {
	Round                                                    int64
	At                                                       time.Time
	PendingTagged, PendingOther, RunningTagged, RunningOther int
}

// JobSpan is a time a job ran on a set of nodes: from Started (estimated
// from its run time) to at least LastSeen (the last round that saw it
// there). A migrated or requeued job has one span per run.
type JobSpan struct {
	JobID       string
	Tagged      bool
	Model       string
	Nodes       []string
	GPUType     string
	GPUsPerNode int
	Submitted   time.Time
	Started     time.Time
	LastSeen    time.Time
	// First is true for the job's first recorded span: its queueing delay
	// is Started - Submitted.
	First bool
}

// reader holds the queries DB and History share.
type reader struct {
	db *sql.DB
	// hasHistory is false for a database of schema version 1 (written by a
	// hadar-slurmd older than the history tables).
	hasHistory bool
}

// History reads a state database without changing it, while the daemon
// may be writing it (`hadar history`, tests). It does not migrate: a
// database of an older hadar-slurmd is read as it is.
type History struct {
	reader
}

// OpenHistory opens the state database at path read-only. A missing file
// is an error wrapping fs.ErrNotExist.
func OpenHistory(ctx context.Context, path string) (*History, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	db, err := sql.Open("sqlite3", fmt.Sprintf("file:%s?mode=ro&_busy_timeout=5000&_query_only=1", path))
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('schema_migrations', 'rounds')`).Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	if n < 2 {
		db.Close()
		return nil, fmt.Errorf("state database %s: no rounds table: not a hadar-slurmd state database", path)
	}
	v, err := schemaVersion(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	return &History{reader{db: db, hasHistory: v >= 2}}, nil
}

// Close closes the database.
func (h *History) Close() error { return h.db.Close() }

// HasHistory reports whether the database has the history tables (GPUs,
// queue, job spans); without them only rounds, decisions and actions can
// be read.
func (r *reader) HasHistory() bool { return r.hasHistory }

// Rounds returns the rounds started at or after since, oldest first.
func (r *reader) Rounds(ctx context.Context, since time.Time) ([]Round, error) {
	return query(ctx, r.db, `SELECT number, started_at, observe_s, solve_s, enforce_s, policy, dry_run,
		jobs, tagged, placed, migrated, preempted, passed, failed, error FROM rounds ORDER BY number`, nil,
		func(rows *sql.Rows) (Round, bool, error) {
			var rd Round
			var at string
			var o, s, e float64
			err := rows.Scan(&rd.Number, &at, &o, &s, &e, &rd.Policy, &rd.DryRun, &rd.Jobs, &rd.Tagged, &rd.Placed,
				&rd.Migrated, &rd.Preempted, &rd.PassedThru, &rd.Failed, &rd.Error)
			rd.Started = parseTime(at)
			rd.Observe, rd.Solve, rd.Enforce = secs(o), secs(s), secs(e)
			return rd, !rd.Started.Before(since), err
		})
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Decisions returns the decisions of rounds fromRound and later, in the
// order they were made. (The bridge does not store the no-change ones.)
func (r *reader) Decisions(ctx context.Context, fromRound int64) ([]Decision, error) {
	return query(ctx, r.db, `SELECT round, at, job_id, kind, from_pl, to_pl, gpu_type, reason
		FROM decisions WHERE round >= ? ORDER BY round, rowid`, []any{fromRound},
		func(rows *sql.Rows) (Decision, bool, error) {
			var d Decision
			var at string
			err := rows.Scan(&d.Round, &at, &d.JobID, &d.Kind, &d.From, &d.To, &d.GPUType, &d.Reason)
			d.At = parseTime(at)
			return d, true, err
		})
}

// Actions returns the actions of rounds fromRound and later, in the order
// they were taken.
func (r *reader) Actions(ctx context.Context, fromRound int64) ([]Action, error) {
	return query(ctx, r.db, `SELECT round, at, kind, job_ids, detail, result, error FROM actions
		WHERE round >= ? ORDER BY id`, []any{fromRound},
		func(rows *sql.Rows) (Action, bool, error) {
			var a Action
			var at string
			err := rows.Scan(&a.Round, &at, &a.Kind, &a.JobIDs, &a.Detail, &a.Result, &a.Error)
			a.At = parseTime(at)
			return a, true, err
		})
}

// Placements returns the jobs hadar released and not yet seen running,
// and where.
func (r *reader) Placements(ctx context.Context) (map[string]Placement, error) {
	type row struct {
		id string
		p  Placement
	}
	rows, err := query(ctx, r.db, `SELECT job_id, nodes, released_at FROM placements`, nil,
		func(rows *sql.Rows) (row, bool, error) {
			var id, nodes, at string
			err := rows.Scan(&id, &nodes, &at)
			return row{id, Placement{Nodes: strings.Split(nodes, ","), ReleasedAt: parseTime(at)}}, true, err
		})
	if err != nil {
		return nil, err
	}
	out := make(map[string]Placement, len(rows))
	for _, r := range rows {
		out[r.id] = r.p
	}
	return out, nil
}

// GresRequests returns the users' own GPU requests of the jobs hadar
// retyped, by job. A database older than that record has none.
func (r *reader) GresRequests(ctx context.Context) (map[string]string, error) {
	type row struct{ id, gres string }
	rows, err := query(ctx, r.db, `SELECT job_id, gres FROM gres_requests`, nil,
		func(rows *sql.Rows) (row, bool, error) {
			var x row
			err := rows.Scan(&x.id, &x.gres)
			return x, true, err
		})
	if err != nil {
		return nil, fmt.Errorf("gres requests: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, x := range rows {
		out[x.id] = x.gres
	}
	return out, nil
}

// Progress returns the stored progress of every job.
func (r *reader) Progress(ctx context.Context) (map[string]JobProgress, error) {
	rows, err := query(ctx, r.db, `SELECT job_id, done, reported, reported_steps, reported_at,
		reported_placement, estimated_at, attained, executed FROM job_progress`, nil,
		func(rows *sql.Rows) (JobProgress, bool, error) {
			var p JobProgress
			var repAt, estAt string
			err := rows.Scan(&p.JobID, &p.Done, &p.Reported, &p.ReportedSteps, &repAt, &p.ReportedPlacement, &estAt, &p.Attained, &p.Executed)
			p.ReportedAt, p.EstimatedAt = parseTime(repAt), parseTime(estAt)
			return p, true, err
		})
	if err != nil {
		return nil, err
	}
	out := make(map[string]JobProgress, len(rows))
	for _, p := range rows {
		out[p.JobID] = p
	}
	return out, nil
}

// GPUs returns the GPU samples at or after since, oldest first.
func (r *reader) GPUs(ctx context.Context, since time.Time) ([]GPUSample, error) {
	if !r.hasHistory {
		return nil, nil
	}
	return query(ctx, r.db, `SELECT round, at, gpu_type, total, used, hadar, reserved, usable
		FROM gpu_history WHERE at >= ? ORDER BY at, gpu_type`, []any{formatTime(since)},
		func(rows *sql.Rows) (GPUSample, bool, error) {
			var g GPUSample
			var at string
			err := rows.Scan(&g.Round, &at, &g.Type, &g.Total, &g.Used, &g.Hadar, &g.Reserved, &g.Usable)
			g.At = parseTime(at)
			return g, true, err
		})
}

// Queue returns the queue samples at or after since, oldest first.
func (r *reader) Queue(ctx context.Context, since time.Time) ([]QueueSample, error) {
	if !r.hasHistory {
		return nil, nil
	}
	return query(ctx, r.db, `SELECT round, at, pending_tagged, pending_other, running_tagged, running_other
		FROM queue_history WHERE at >= ? ORDER BY at`, []any{formatTime(since)},
		func(rows *sql.Rows) (QueueSample, bool, error) {
			var q QueueSample
			var at string
			err := rows.Scan(&q.Round, &at, &q.PendingTagged, &q.PendingOther, &q.RunningTagged, &q.RunningOther)
			q.At = parseTime(at)
			return q, true, err
		})
}

// Spans returns the job spans that were running at or after since,
// ordered by start.
func (r *reader) Spans(ctx context.Context, since time.Time) ([]JobSpan, error) {
	if !r.hasHistory {
		return nil, nil
	}
	return query(ctx, r.db, `SELECT s.job_id, s.tagged, s.model, s.nodes, s.gpu_type, s.gpus_per_node,
		s.submitted_at, s.started_at, s.last_seen,
		s.id = (SELECT MIN(id) FROM job_spans f WHERE f.job_id = s.job_id)
		FROM job_spans s WHERE s.last_seen >= ? ORDER BY s.started_at, s.id`, []any{formatTime(since)},
		func(rows *sql.Rows) (JobSpan, bool, error) {
			var sp JobSpan
			var nodes, sub, start, seen string
			err := rows.Scan(&sp.JobID, &sp.Tagged, &sp.Model, &nodes, &sp.GPUType, &sp.GPUsPerNode, &sub, &start, &seen, &sp.First)
			sp.Nodes = strings.Split(nodes, ",")
			sp.Submitted, sp.Started, sp.LastSeen = parseTime(sub), parseTime(start), parseTime(seen)
			return sp, true, err
		})
}

// query runs q and scans every row with scan, keeping the rows it says to.
func query[T any](ctx context.Context, db *sql.DB, q string, args []any, scan func(*sql.Rows) (T, bool, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, keep, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("state database: %w", err)
		}
		if keep {
			out = append(out, v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	return out, nil
}
