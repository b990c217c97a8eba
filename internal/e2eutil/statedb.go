package e2eutil

import (
	"database/sql"
	"fmt"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the state database is SQLite
)

// StateDB is hadar-slurmd's state database, opened read-only (the daemon
// may be writing it meanwhile).
type StateDB struct{ db *sql.DB }

// OpenStateDB opens the state database at path.
func OpenStateDB(path string) (*StateDB, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	return &StateDB{db}, nil
}

// Close closes the database.
func (s *StateDB) Close() error { return s.db.Close() }

// Decision is one stored decision about a job.
type Decision struct {
	Round               int64
	Job, Kind, From     string
	To, GPUType, Reason string
}

// Decisions returns the stored decisions, round by round in the order
// they were made.
func (s *StateDB) Decisions() ([]Decision, error) {
	return query(s.db, `SELECT round, job_id, kind, from_pl, to_pl, gpu_type, reason FROM decisions ORDER BY round, rowid`,
		func(rows *sql.Rows, d *Decision) error {
			return rows.Scan(&d.Round, &d.Job, &d.Kind, &d.From, &d.To, &d.GPUType, &d.Reason)
		})
}

// Action is one stored Slurm action of the daemon.
type Action struct {
	Round                        int64
	Kind, JobIDs, Detail, Result string
	Error                        string
}

// Done reports whether the action was carried out, for all its jobs or
// (result "partial") for some.
func (a Action) Done() bool { return a.Result == "ok" || a.Result == "partial" }

// Jobs returns the action's job ids; for a partly done action, only those
// it was done for (its error ends with the list of the others).
func (a Action) Jobs() []string {
	if a.JobIDs == "" {
		return nil
	}
	ids := strings.Split(a.JobIDs, ",")
	if a.Result != "partial" {
		return ids
	}
	_, list, _ := strings.Cut(a.Error, ": ")
	skipped := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		skipped[id] = true
	}
	var done []string
	for _, id := range ids {
		if !skipped[id] {
			done = append(done, id)
		}
	}
	return done
}

// Actions returns the stored actions in the order they were taken.
func (s *StateDB) Actions() ([]Action, error) {
	return query(s.db, `SELECT round, kind, job_ids, detail, result, error FROM actions ORDER BY id`,
		func(rows *sql.Rows, a *Action) error {
			return rows.Scan(&a.Round, &a.Kind, &a.JobIDs, &a.Detail, &a.Result, &a.Error)
		})
}

// Round is one stored round; its phases are in seconds.
type Round struct {
	Number                  int64
	Observe, Solve, Enforce float64
	Jobs, Tagged, Placed    int
	Migrated                int
	Error                   string
}

// Rounds returns the stored rounds in order.
func (s *StateDB) Rounds() ([]Round, error) {
	return query(s.db, `SELECT number, observe_s, solve_s, enforce_s, jobs, tagged, placed, migrated, error FROM rounds ORDER BY number`,
		func(rows *sql.Rows, r *Round) error {
			return rows.Scan(&r.Number, &r.Observe, &r.Solve, &r.Enforce, &r.Jobs, &r.Tagged, &r.Placed, &r.Migrated, &r.Error)
		})
}

// query runs q and scans every row into a T.
func query[T any](db *sql.DB, q string, scan func(*sql.Rows, *T) error) ([]T, error) {
	rows, err := db.Query(q)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, fmt.Errorf("state database: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	return out, nil
}

// Progress returns what the state database holds of a job's progress:
// whether it reported, and the steps of its latest report (ok is false if
// the job has no row).
func (s *StateDB) Progress(jobID string) (reported bool, steps float64, ok bool, err error) {
	rows, err := s.db.Query(`SELECT reported, reported_steps FROM job_progress WHERE job_id = ?`, jobID)
	if err != nil {
		return false, 0, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, 0, false, rows.Err()
	}
	var r int
	if err := rows.Scan(&r, &steps); err != nil {
		return false, 0, false, err
	}
	return r != 0, steps, true, nil
}
