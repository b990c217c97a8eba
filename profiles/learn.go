package profiles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Bounds on every rate the store keeps or hands out, in steps per second of
// the whole job. They are wide enough for any training step a person would
// count (one step in 11 days to a billion a second) and keep the policies'
// arithmetic, Gavel's LP included, away from overflow and underflow.
const (
	MinRate = 1e-6
	MaxRate = 1e9
)

// MaxSampleRatio bounds a sample against its cell's anchor, the imported
// value or else the rate the daemon planned with (Observation.Expected): a
// rate outside [anchor/MaxSampleRatio, anchor*MaxSampleRatio] is
// ErrOutlier. Matrices measured elsewhere and the prior are within this
// factor of a cluster's rates in all but broken cases (docs/prior.md).
const MaxSampleRatio = 8

// InRange reports whether r is a rate the store accepts: finite and within
// [MinRate, MaxRate].
func InRange(r float64) bool {
	return !math.IsNaN(r) && r >= MinRate && r <= MaxRate
}

// cellKey names one cell of the matrix (canonical names).
type cellKey struct {
	jobType, gpuType string
	workers          int
}

// learned is a cell's learned value after a sample, for the read cache.
type learned struct {
	cellKey
	rate           float64
	samples, users int
	at             time.Time
	existed        bool
}

// checkBound refuses an observation too far from its cell's anchor: the
// imported value if the cell has one, else o.Expected.
func checkBound(ctx context.Context, tx *sql.Tx, c cellKey, o Observation) error {
	anchor := o.Expected
	var imported float64
	err := tx.QueryRowContext(ctx, `SELECT steps_per_s FROM throughputs
		WHERE job_type = ? AND gpu_type = ? AND workers = ? AND source = ?`,
		c.jobType, c.gpuType, c.workers, SourceImported).Scan(&imported)
	switch {
	case err == nil && imported > 0:
		anchor = imported
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if anchor <= 0 || math.IsNaN(anchor) || math.IsInf(anchor, 0) {
		return nil
	}
	rate := o.Steps / o.Seconds
	if rate < anchor/MaxSampleRatio || rate > anchor*MaxSampleRatio {
		return fmt.Errorf("%w: %.4g steps/s is not within %dx of the cell's %.4g", ErrOutlier, rate, MaxSampleRatio, anchor)
	}
	return nil
}

// addSample stores o's rate as a sample of c and drops the samples the
// caps leave out: beyond the newest perJob of o's job, perUser of its user
// and learningWindow of the cell.
func (s *Store) addSample(ctx context.Context, tx *sql.Tx, c cellKey, o Observation, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO samples (job_type, gpu_type, workers, job_id, user, steps_per_s, at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, c.jobType, c.gpuType, c.workers, o.JobID, o.User, o.Steps/o.Seconds, formatTime(at)); err != nil {
		return fmt.Errorf("store sample of %s on %d x %s: %w", c.jobType, c.workers, c.gpuType, err)
	}
	trims := []struct {
		where string
		args  []any
		keep  int
	}{
		{`AND job_id = ?`, []any{o.JobID}, s.opts.perJob},
		{`AND user = ?`, []any{o.User}, s.opts.perUser},
		{``, nil, s.opts.learningWindow},
	}
	for _, t := range trims {
		args := append([]any{c.jobType, c.gpuType, c.workers}, t.args...)
		args = append(args, t.keep)
		if _, err := tx.ExecContext(ctx, `DELETE FROM samples WHERE id IN (SELECT id FROM samples
			WHERE job_type = ? AND gpu_type = ? AND workers = ? `+t.where+`
			ORDER BY id DESC LIMIT -1 OFFSET ?)`, args...); err != nil {
			return fmt.Errorf("trim samples of %s on %d x %s: %w", c.jobType, c.workers, c.gpuType, err)
		}
	}
	return nil
}

// relearn recomputes c's learned row from its samples (deleting it when
// none are left) and returns it.
func (s *Store) relearn(ctx context.Context, tx *sql.Tx, c cellKey, at time.Time) (learned, error) {
	l := learned{cellKey: c, at: at}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM throughputs
		WHERE job_type = ? AND gpu_type = ? AND workers = ? AND source = ?`,
		c.jobType, c.gpuType, c.workers, SourceLearned).Scan(&n)
	if err != nil {
		return l, err
	}
	l.existed = n > 0
	rows, err := tx.QueryContext(ctx, `SELECT user, steps_per_s FROM samples
		WHERE job_type = ? AND gpu_type = ? AND workers = ? ORDER BY id`, c.jobType, c.gpuType, c.workers)
	if err != nil {
		return l, fmt.Errorf("read samples of %s on %d x %s: %w", c.jobType, c.workers, c.gpuType, err)
	}
	byUser := map[string][]float64{}
	for rows.Next() {
		var user string
		var r float64
		if err := rows.Scan(&user, &r); err != nil {
			rows.Close()
			return l, err
		}
		byUser[user] = append(byUser[user], r)
		l.samples++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return l, err
	}
	if l.samples == 0 {
		_, err := tx.ExecContext(ctx, `DELETE FROM throughputs WHERE job_type = ? AND gpu_type = ? AND workers = ? AND source = ?`,
			c.jobType, c.gpuType, c.workers, SourceLearned)
		l.existed = false // the cache must read afresh
		return l, err
	}
	l.rate, l.users = Aggregate(byUser), len(byUser)
	return l, upsertUsers(ctx, tx, c.jobType, c.gpuType, c.workers, SourceLearned, l.rate, l.samples, l.users, formatTime(at))
}

// Aggregate is the learned value of a cell from its samples by user: the
// median over users of each user's median rate, so every user has one vote
// however many samples his jobs gave. Of an even number of values it takes
// the geometric mean of the middle two (rates are compared by ratio). It
// is 0 for no samples.
func Aggregate(byUser map[string][]float64) float64 {
	var votes []float64
	for _, rs := range byUser {
		if len(rs) > 0 {
			votes = append(votes, ratioMedian(rs))
		}
	}
	if len(votes) == 0 {
		return 0
	}
	return ratioMedian(votes)
}

func ratioMedian(xs []float64) float64 {
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return math.Sqrt(xs[n/2-1] * xs[n/2])
}

// PurgeUser removes every sample of user and recomputes the learned value
// of each cell they were in (a cell left with no sample loses its learned
// row). It returns how many samples and cells it changed; a user with no
// samples is ErrNotFound.
func (s *Store) PurgeUser(ctx context.Context, user string) (samples, cells int, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT job_type, gpu_type, workers, COUNT(*) FROM samples
			WHERE user = ? GROUP BY job_type, gpu_type, workers ORDER BY job_type, gpu_type, workers`, user)
		if err != nil {
			return err
		}
		var touched []cellKey
		for rows.Next() {
			var c cellKey
			var n int
			if err := rows.Scan(&c.jobType, &c.gpuType, &c.workers, &n); err != nil {
				rows.Close()
				return err
			}
			touched = append(touched, c)
			samples += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(touched) == 0 {
			return fmt.Errorf("no samples of user %q: %w", user, ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM samples WHERE user = ?`, user); err != nil {
			return err
		}
		now := s.opts.now()
		for _, c := range touched {
			if _, err := s.relearn(ctx, tx, c, now); err != nil {
				return err
			}
		}
		cells = len(touched)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("purge samples of %q: %w", strings.TrimSpace(user), err)
	}
	return samples, cells, nil
}

// Sample is one stored learned-throughput sample.
type Sample struct {
	JobType string    `json:"job_type"`
	GPUType string    `json:"gpu_type"`
	Workers int       `json:"workers"`
	JobID   string    `json:"job_id"`
	User    string    `json:"user"`
	Rate    float64   `json:"steps_per_s"`
	At      time.Time `json:"at"`
}

// Samples returns the stored samples, by cell and age, of one user ("" for
// every user's).
func (s *Store) Samples(ctx context.Context, user string) ([]Sample, error) {
	q := `SELECT job_type, gpu_type, workers, job_id, user, steps_per_s, at FROM samples`
	var args []any
	if user != "" {
		q += ` WHERE user = ?`
		args = append(args, user)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY job_type, gpu_type, workers, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list samples: %w", err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var x Sample
		var at string
		if err := rows.Scan(&x.JobType, &x.GPUType, &x.Workers, &x.JobID, &x.User, &x.Rate, &at); err != nil {
			return nil, fmt.Errorf("list samples: %w", err)
		}
		if x.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("list samples: at: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list samples: %w", err)
	}
	return out, nil
}
