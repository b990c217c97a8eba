package bridge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// historySchema is migration 2 of the state database: per round, the GPUs
// by type and the queue's size, and per job the spans during which it ran
// on a set of nodes. `hadar history` draws them. Times in these tables are
// fixed-width UTC (historyTimeFormat), so they sort as text.
const historySchema = `CREATE TABLE gpu_history (
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
	CREATE INDEX job_spans_seen ON job_spans (last_seen);`

// historyTimeFormat is RFC 3339 with a fixed width (milliseconds, UTC).
const historyTimeFormat = "2006-01-02T15:04:05.000Z"

// HistoryRetention is how long the history tables keep their rows.
const HistoryRetention = 90 * 24 * time.Hour

func fmtHistTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(historyTimeFormat)
}

// spanSlack is how far a running job's start, estimated as now minus its
// run time (whole seconds), may lie after the end of its last span and
// still continue it.
const spanSlack = 2 * time.Second

// RecordHistory stores what `hadar history` draws from a round: the GPUs
// of every GPU type (total, allocated, allocated to hadar's running jobs,
// reserved for its launching jobs), the number of pending and running
// jobs, and extends or opens the run span of every running job. Rows
// older than HistoryRetention are removed.
func (s *State) RecordHistory(ctx context.Context, rep RoundReport) error {
	v := rep.View
	if v == nil {
		return nil
	}
	now := rep.Started
	at := fmtHistTime(now)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: history: %w", err)
	}
	defer tx.Rollback()

	type agg struct{ total, used, hadar, reserved, usable int }
	byType := map[string]*agg{}
	// The sample is of the cluster after the round: the GPUs it placed
	// (released), moved or stopped, not only what it observed before.
	delta := roundGPUDelta(rep)
	for _, n := range v.Nodes {
		if n.Total == 0 {
			continue
		}
		t := nodeTypeLabel(n)
		a := byType[t]
		if a == nil {
			a = &agg{}
			byType[t] = a
		}
		a.total += n.Total
		a.used += max(0, min(n.Used+delta[n.Name], n.Total))
		a.hadar += max(0, n.Hadar+delta[n.Name])
		a.reserved += n.Reserved
		if n.Usable {
			a.usable += n.Total
		}
	}
	for _, t := range histSortedKeys(byType) {
		a := byType[t]
		if _, err := tx.ExecContext(ctx, `INSERT INTO gpu_history (round, at, gpu_type, total, used, hadar, reserved, usable)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, rep.Number, at, t, a.total, a.used, a.hadar, a.reserved, a.usable); err != nil {
			return fmt.Errorf("state database: history: %w", err)
		}
	}

	var q [4]int // pending tagged, pending other, running tagged, running other
	for _, j := range v.Jobs {
		i := 0
		switch j.State {
		case "PENDING":
		case "RUNNING":
			i = 2
		default:
			continue
		}
		if !j.Tagged {
			i++
		}
		q[i]++
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO queue_history (round, at, pending_tagged, pending_other,
		running_tagged, running_other) VALUES (?, ?, ?, ?, ?, ?)`, rep.Number, at, q[0], q[1], q[2], q[3]); err != nil {
		return fmt.Errorf("state database: history: %w", err)
	}

	for _, j := range v.Jobs {
		if j.State != "RUNNING" || len(j.Nodes) == 0 {
			continue
		}
		nodes := append([]string(nil), j.Nodes...)
		sort.Strings(nodes)
		nodeList := strings.Join(nodes, ",")
		started := now.Add(-j.TimeUsed).Truncate(time.Second)
		var id int64
		var prevNodes, prevSeen string
		err := tx.QueryRowContext(ctx, `SELECT id, nodes, last_seen FROM job_spans WHERE job_id = ? ORDER BY id DESC LIMIT 1`,
			j.ID).Scan(&id, &prevNodes, &prevSeen)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("state database: history: %w", err)
		}
		if err == nil && prevNodes == nodeList {
			// Same nodes: the same run if it started before the span's last
			// sighting (a run time of 0 says nothing: assume it is).
			if seen, perr := time.Parse(time.RFC3339Nano, prevSeen); perr == nil && (j.TimeUsed == 0 || !started.After(seen.Add(spanSlack))) {
				if _, err := tx.ExecContext(ctx, `UPDATE job_spans SET last_seen = ?, last_round = ? WHERE id = ?`,
					at, rep.Number, id); err != nil {
					return fmt.Errorf("state database: history: %w", err)
				}
				continue
			}
		}
		types := map[string]bool{}
		for _, name := range nodes {
			if n := historyNode(v, name); n != nil && n.Total > 0 {
				types[nodeTypeLabel(*n)] = true
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_spans (job_id, tagged, model, nodes, gpu_type, gpus_per_node,
			submitted_at, started_at, last_seen, first_round, last_round) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			j.ID, j.Tagged, j.Model, nodeList, strings.Join(histSortedKeys(types), "+"), j.GPUsPerNode,
			fmtHistTime(j.Submit), fmtHistTime(started), at, rep.Number, rep.Number); err != nil {
			return fmt.Errorf("state database: history: %w", err)
		}
	}

	cutoff := fmtHistTime(now.Add(-HistoryRetention))
	for _, q := range []string{`DELETE FROM gpu_history WHERE at < ?`, `DELETE FROM queue_history WHERE at < ?`,
		`DELETE FROM job_spans WHERE last_seen < ?`} {
		if _, err := tx.ExecContext(ctx, q, cutoff); err != nil {
			return fmt.Errorf("state database: history: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: history: %w", err)
	}
	return nil
}

// historyNode finds a node of v (also in a View not made by BuildView).
func historyNode(v *View, name string) *NodeView {
	if n := v.Node(name); n != nil {
		return n
	}
	for i := range v.Nodes {
		if v.Nodes[i].Name == name {
			return &v.Nodes[i]
		}
	}
	return nil
}

// nodeTypeLabel is the GPU type a node's GPUs are counted under: its
// canonical type, else its site type name(s) ("a+b" for a node with two).
func nodeTypeLabel(n NodeView) string {
	if n.Type != "" {
		return n.Type
	}
	names := make([]string, 0, len(n.SiteTypes))
	for t := range n.SiteTypes {
		if t == "" {
			t = "untyped"
		}
		names = append(names, t)
	}
	sort.Strings(names)
	return strings.Join(names, "+")
}

func histSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// History reads a state database without changing it (for `hadar
// history`, while the daemon runs).
type History struct {
	db   *sql.DB
	path string
	// hasHistory is false for a database written by a hadar-slurmd older
	// than the history tables: only rounds, decisions and actions exist.
	hasHistory bool
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
	h := &History{db: db, path: path}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'rounds'`).Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	if n == 0 {
		db.Close()
		return nil, fmt.Errorf("state database %s: no rounds table: not a hadar-slurmd state database", path)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_spans'`).Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	h.hasHistory = n > 0
	return h, nil
}

// Close closes the database.
func (h *History) Close() error { return h.db.Close() }

// HasHistory reports whether the database has the history tables (GPUs,
// queue, job spans); without them only rounds, decisions and actions can
// be read.
func (h *History) HasHistory() bool { return h.hasHistory }

// Rounds returns the rounds started at or after since, oldest first.
func (h *History) Rounds(ctx context.Context, since time.Time) ([]RoundRecord, error) {
	rows, err := h.db.QueryContext(ctx, `SELECT number, started_at, observe_s, solve_s, enforce_s, policy, dry_run,
		jobs, tagged, placed, migrated, preempted, passed, failed, error FROM rounds ORDER BY number`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RoundRecord
	for rows.Next() {
		var r RoundRecord
		var at string
		var o, s, e float64
		if err := rows.Scan(&r.Number, &at, &o, &s, &e, &r.Policy, &r.DryRun, &r.Jobs, &r.Tagged, &r.Placed,
			&r.Migrated, &r.Preempted, &r.PassedThru, &r.Failed, &r.Error); err != nil {
			return nil, err
		}
		r.Started = parseTime(at)
		if r.Started.Before(since) {
			continue
		}
		r.Observe, r.Solve, r.Enforce = secs(o), secs(s), secs(e)
		out = append(out, r)
	}
	return out, rows.Err()
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// DecisionRow is one stored decision.
type DecisionRow struct {
	Round                                  int64
	At                                     time.Time
	JobID, Kind, From, To, GPUType, Reason string
}

// Decisions returns the decisions of rounds fromRound and later, oldest
// first. (The state database does not store the no-change decisions.)
func (h *History) Decisions(ctx context.Context, fromRound int64) ([]DecisionRow, error) {
	rows, err := h.db.QueryContext(ctx, `SELECT round, at, job_id, kind, from_pl, to_pl, gpu_type, reason
		FROM decisions WHERE round >= ? ORDER BY round, rowid`, fromRound)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []DecisionRow
	for rows.Next() {
		var d DecisionRow
		var at string
		if err := rows.Scan(&d.Round, &at, &d.JobID, &d.Kind, &d.From, &d.To, &d.GPUType, &d.Reason); err != nil {
			return nil, err
		}
		d.At = parseTime(at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// HistoryAction is one stored scontrol action.
type HistoryAction struct {
	ActionRow
	At     time.Time
	Detail string
}

// Actions returns the actions of rounds fromRound and later, oldest first.
func (h *History) Actions(ctx context.Context, fromRound int64) ([]HistoryAction, error) {
	rows, err := h.db.QueryContext(ctx, `SELECT round, kind, job_ids, result, error, at, detail FROM actions
		WHERE round >= ? ORDER BY id`, fromRound)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []HistoryAction
	for rows.Next() {
		var a HistoryAction
		var at string
		if err := rows.Scan(&a.Round, &a.Kind, &a.JobIDs, &a.Result, &a.Error, &at, &a.Detail); err != nil {
			return nil, err
		}
		a.At = parseTime(at)
		out = append(out, a)
	}
	return out, rows.Err()
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

// GPUs returns the GPU samples at or after since, oldest first.
func (h *History) GPUs(ctx context.Context, since time.Time) ([]GPUSample, error) {
	if !h.hasHistory {
		return nil, nil
	}
	rows, err := h.db.QueryContext(ctx, `SELECT round, at, gpu_type, total, used, hadar, reserved, usable
		FROM gpu_history WHERE at >= ? ORDER BY at, gpu_type`, fmtHistTime(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []GPUSample
	for rows.Next() {
		var g GPUSample
		var at string
		if err := rows.Scan(&g.Round, &at, &g.Type, &g.Total, &g.Used, &g.Hadar, &g.Reserved, &g.Usable); err != nil {
			return nil, err
		}
		g.At = parseTime(at)
		out = append(out, g)
	}
	return out, rows.Err()
}

// QueueSample is the number of pending and running jobs at one round.
type QueueSample struct {
	Round                                                    int64
	At                                                       time.Time
	PendingTagged, PendingOther, RunningTagged, RunningOther int
}

// Queue returns the queue samples at or after since, oldest first.
func (h *History) Queue(ctx context.Context, since time.Time) ([]QueueSample, error) {
	if !h.hasHistory {
		return nil, nil
	}
	rows, err := h.db.QueryContext(ctx, `SELECT round, at, pending_tagged, pending_other, running_tagged, running_other
		FROM queue_history WHERE at >= ? ORDER BY at`, fmtHistTime(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []QueueSample
	for rows.Next() {
		var q QueueSample
		var at string
		if err := rows.Scan(&q.Round, &at, &q.PendingTagged, &q.PendingOther, &q.RunningTagged, &q.RunningOther); err != nil {
			return nil, err
		}
		q.At = parseTime(at)
		out = append(out, q)
	}
	return out, rows.Err()
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

// Spans returns the job spans that were running at or after since,
// ordered by start.
func (h *History) Spans(ctx context.Context, since time.Time) ([]JobSpan, error) {
	if !h.hasHistory {
		return nil, nil
	}
	rows, err := h.db.QueryContext(ctx, `SELECT s.job_id, s.tagged, s.model, s.nodes, s.gpu_type, s.gpus_per_node,
		s.submitted_at, s.started_at, s.last_seen,
		s.id = (SELECT MIN(id) FROM job_spans f WHERE f.job_id = s.job_id)
		FROM job_spans s WHERE s.last_seen >= ? ORDER BY s.started_at, s.id`, fmtHistTime(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []JobSpan
	for rows.Next() {
		var sp JobSpan
		var nodes, sub, start, seen string
		if err := rows.Scan(&sp.JobID, &sp.Tagged, &sp.Model, &nodes, &sp.GPUType, &sp.GPUsPerNode, &sub, &start, &seen, &sp.First); err != nil {
			return nil, err
		}
		sp.Nodes = strings.Split(nodes, ",")
		sp.Submitted, sp.Started, sp.LastSeen = parseTime(sub), parseTime(start), parseTime(seen)
		out = append(out, sp)
	}
	return out, rows.Err()
}

// roundGPUDelta is, per node, the GPUs the round's carried-out decisions
// took (a placement or the target of a move, once released) or gave back
// (a preemption, or the source of a move, once requeued).
func roundGPUDelta(rep RoundReport) map[string]int {
	if rep.DryRun {
		return nil
	}
	released, requeued := map[string]bool{}, map[string]bool{}
	for _, r := range rep.Results {
		if r.Err != nil {
			continue
		}
		for _, id := range r.Sent {
			switch r.Action.Kind {
			case ActRelease:
				released[id] = true
			case ActRequeueHold:
				requeued[id] = true
			}
		}
	}
	out := map[string]int{}
	add := func(placement string, sign int) {
		for _, part := range strings.Split(placement, ",") {
			node, gpus, ok := strings.Cut(part, ":")
			if n, err := strconv.Atoi(gpus); ok && err == nil {
				out[node] += sign * n
			}
		}
	}
	for _, d := range rep.Decisions {
		switch d.Kind {
		case DecidePlace:
			if released[d.JobID] {
				add(d.To, +1)
			}
		case DecideMigrate:
			if requeued[d.JobID] {
				add(d.From, -1)
			}
			if released[d.JobID] {
				add(d.To, +1)
			}
		case DecidePreempt:
			if requeued[d.JobID] {
				add(d.From, -1)
			}
		}
	}
	return out
}
