package e2eutil

import (
	"context"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/internal/statedb"
)

// StateDB is hadar-slurmd's state database, opened read-only (the daemon
// may be writing it meanwhile), in the shapes the end-to-end tests use.
type StateDB struct{ h *statedb.History }

// OpenStateDB opens the state database at path.
func OpenStateDB(path string) (*StateDB, error) {
	h, err := statedb.OpenHistory(context.Background(), path)
	if err != nil {
		return nil, err
	}
	return &StateDB{h}, nil
}

// Close closes the database.
func (s *StateDB) Close() error { return s.h.Close() }

// Decision is one stored decision about a job.
type Decision struct {
	Round               int64
	Job, Kind, From     string
	To, GPUType, Reason string
}

// Decisions returns the stored decisions, round by round in the order
// they were made.
func (s *StateDB) Decisions() ([]Decision, error) {
	ds, err := s.h.Decisions(context.Background(), 0)
	out := make([]Decision, len(ds))
	for i, d := range ds {
		out[i] = Decision{Round: d.Round, Job: d.JobID, Kind: d.Kind, From: d.From, To: d.To, GPUType: d.GPUType, Reason: d.Reason}
	}
	return out, err
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
	as, err := s.h.Actions(context.Background(), 0)
	out := make([]Action, len(as))
	for i, a := range as {
		out[i] = Action{Round: a.Round, Kind: a.Kind, JobIDs: a.JobIDs, Detail: a.Detail, Result: a.Result, Error: a.Error}
	}
	return out, err
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
	rs, err := s.h.Rounds(context.Background(), time.Time{})
	out := make([]Round, len(rs))
	for i, r := range rs {
		out[i] = Round{Number: r.Number, Observe: r.Observe.Seconds(), Solve: r.Solve.Seconds(), Enforce: r.Enforce.Seconds(),
			Jobs: r.Jobs, Tagged: r.Tagged, Placed: r.Placed, Migrated: r.Migrated, Error: r.Error}
	}
	return out, err
}

// Progress returns what the state database holds of a job's progress:
// whether it reported, and the steps of its latest report (ok is false if
// the job has no row).
func (s *StateDB) Progress(jobID string) (reported bool, steps float64, ok bool, err error) {
	all, err := s.h.Progress(context.Background())
	p, ok := all[jobID]
	return p.Reported, p.ReportedSteps, ok, err
}

// GresRequests returns the users' own GPU requests the daemon recorded for
// the jobs it retyped, by job.
func (s *StateDB) GresRequests() (map[string]string, error) {
	return s.h.GresRequests(context.Background())
}
