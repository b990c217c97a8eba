package profiles

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3" // also registers the "sqlite3" driver

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
)

var (
	// ErrNotFound reports an unknown job type or GPU type name.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous reports a GPU type name that matches several types.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrInvalid reports an argument out of range: an empty name, a
	// worker count below 1, a negative, infinite or NaN rate or observation,
	// a rate outside [MinRate, MaxRate].
	ErrInvalid = errors.New("invalid argument")
	// ErrOutlier reports an observation whose rate is too far from its
	// cell's imported or expected value to be learned from (see the package
	// doc, "Learning").
	ErrOutlier = errors.New("outlier")
)

// Source says where a throughput came from.
type Source string

const (
	// SourceImported is a published matrix such as Gavel's.
	SourceImported Source = "imported"
	// SourceLearned is the robust aggregate of observed rates (see the
	// package doc, "Learning").
	SourceLearned Source = "learned"
	// SourceMeasured is a value an administrator set.
	SourceMeasured Source = "measured"
	// SourcePrior is the prior's estimate for a cell with no stored value
	// in use (see WithPrior). It is computed, never stored: ListWithPrior
	// shows it.
	SourcePrior Source = "prior"
)

// Row is one stored throughput: one source's value for one cell.
type Row struct {
	JobType string `json:"job_type"`
	GPUType string `json:"gpu_type"`
	Workers int    `json:"workers"`
	// StepsPerSecond is the rate of the whole job.
	StepsPerSecond float64 `json:"steps_per_s"`
	Source         Source  `json:"source"`
	// Samples counts the observations behind a learned value; 0 otherwise.
	Samples int `json:"samples"`
	// Users counts the users those observations came from.
	Users     int       `json:"users"`
	UpdatedAt time.Time `json:"updated_at"`
	// InUse is true for the row Throughputs takes for its cell.
	InUse bool `json:"in_use"`
}

// Observation is the progress of one job over an interval, as the daemon
// measures it.
type Observation struct {
	JobType string
	// GPUType should be canonical (see ResolveGPUType); an unknown name
	// becomes a new GPU type.
	GPUType string
	Workers int
	// Steps progressed in Seconds of wall time; both must be positive.
	Steps   float64
	Seconds float64
	// At is the end of the interval; the zero time means now.
	At time.Time
	// JobID and User are the job that showed the rate and its owner: a
	// cell keeps a bounded number of samples of each (see the package doc),
	// and PurgeUser removes one user's.
	JobID, User string
	// Expected is the cell's rate the daemon planned with (the prior's when
	// the store has no value): with no imported value, the rate must lie
	// within a factor MaxSampleRatio of it. 0: no relative bound.
	Expected float64
}

// Option configures a Store.
type Option func(*options)

type options struct {
	minLearnedSamples int
	minLearnedUsers   int
	learningWindow    int
	perJob, perUser   int
	now               func() time.Time
	busyTimeout       time.Duration
	seed              optimizer.Throughputs
}

// WithMinLearnedSamples sets how many observations a learned value needs
// before it overrides an imported one (default 3; minimum 1).
func WithMinLearnedSamples(n int) Option { return func(o *options) { o.minLearnedSamples = n } }

// WithMinLearnedUsers sets how many users' observations a learned value
// needs before it is used instead of an imported one or the prior (default
// 2; minimum 1).
func WithMinLearnedUsers(n int) Option { return func(o *options) { o.minLearnedUsers = n } }

// WithLearningWindow sets N in the learning rule, the samples a cell keeps
// (see the package doc; default 20, minimum 1).
func WithLearningWindow(n int) Option { return func(o *options) { o.learningWindow = n } }

// WithSampleCaps sets how many samples a cell keeps of one job and of one
// user (see the package doc; defaults 4 and 8, minimum 1).
func WithSampleCaps(perJob, perUser int) Option {
	return func(o *options) { o.perJob, o.perUser = perJob, perUser }
}

// WithClock sets the clock used for updated_at (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSeedMatrix sets the matrix a new database is seeded with as imported
// rates (default Default(), Gavel's; see Matrix for the others). It has no
// effect on an existing database: import into one with ImportGavel.
func WithSeedMatrix(t optimizer.Throughputs) Option { return func(o *options) { o.seed = t } }

// Store is the throughput database. It is safe for concurrent use.
type Store struct {
	db    *sql.DB
	opts  options
	cache readCache
}

// readCache keeps what the daemon reads every round (the whole matrix, the
// GPU type names it resolved) for as long as the database is unchanged:
// PRAGMA data_version, asked on a connection of the cache's own, changes
// whenever any other connection commits (this Store's writes, or `hadar
// profiles set` in another process).
type readCache struct {
	mu       sync.Mutex
	conn     *sql.Conn
	version  int64
	valid    bool
	rows     []Row
	resolved map[string]string
}

// updateLearned sets the cached learned row of a cell, reporting false if
// the cache has no such row.
func (c *readCache) updateLearned(l learned, o options) bool {
	jobType, gpuType, workers := l.jobType, l.gpuType, l.workers
	if c.rows == nil {
		return true // nothing cached to go stale
	}
	// rows are in List's order: job type, GPU type, workers, source.
	i, found := slices.BinarySearchFunc(c.rows, Row{JobType: jobType, GPUType: gpuType, Workers: workers, Source: SourceLearned},
		func(a, b Row) int {
			return cmp.Or(strings.Compare(a.JobType, b.JobType), strings.Compare(a.GPUType, b.GPUType),
				cmp.Compare(a.Workers, b.Workers), strings.Compare(string(a.Source), string(b.Source)))
		})
	if !found {
		return false
	}
	r := &c.rows[i]
	r.StepsPerSecond, r.Samples, r.Users, r.UpdatedAt = l.rate, l.samples, l.users, l.at.UTC()
	markCellInUse(c.rows, i, o)
	return true
}

// current reports whether the cache still holds the database as it is,
// emptying it if not. The caller holds c.mu.
func (c *readCache) current(ctx context.Context) bool {
	var v int64
	if err := c.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		c.valid = false
		return false
	}
	if c.valid && v == c.version {
		return true
	}
	c.version, c.valid, c.rows, c.resolved = v, true, nil, map[string]string{}
	return false
}

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Open opens the database at path, creating it (mode 0600, parent
// directories 0750) if missing, applies pending migrations and, for a new
// database, seeds it with Default() (or WithSeedMatrix's) as imported rates,
// the catalogue's GPU types and DefaultAliases().
// An existing file keeps its mode.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{minLearnedSamples: 3, minLearnedUsers: 2, learningWindow: 20, perJob: 4, perUser: 8,
		now: time.Now, busyTimeout: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.seed == nil {
		o.seed = Default()
	}
	if o.minLearnedSamples < 1 || o.minLearnedUsers < 1 || o.learningWindow < 1 || o.perJob < 1 || o.perUser < 1 ||
		o.now == nil || o.busyTimeout < 0 {
		return nil, fmt.Errorf("open profiles: %w: bad option", ErrInvalid)
	}
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("open profiles: %w: database path %q", ErrInvalid, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open profiles: %w", err)
	}
	// SQLite would create the file with 0644 less umask; create it first so
	// it holds 0600 (the -wal and -shm files copy the main file's mode).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open profiles: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open profiles: %w", err)
	}
	dsn := fmt.Sprintf("%s?_journal_mode=WAL&_busy_timeout=%d&_foreign_keys=on&_txlock=immediate&_synchronous=NORMAL&_stmt_cache_size=64",
		path, o.busyTimeout.Milliseconds())
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open profiles %s: %w", path, err)
	}
	s := &Store{db: db, opts: o}
	ms, err := loadMigrations(migrationFS)
	if err == nil {
		now := o.now()
		err = retryBusy(ctx, o.busyTimeout, func() error {
			_, err := migrate(ctx, db, ms, now, func(ctx context.Context, tx *sql.Tx) error {
				return seed(ctx, tx, now, o.seed)
			})
			return err
		})
	}
	if err == nil {
		s.cache.conn, err = db.Conn(ctx)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open profiles %s: %w", path, err)
	}
	return s, nil
}

// retryBusy runs f until it does not fail with SQLITE_BUSY, for at most
// timeout. SQLite's busy handler covers most contention, but not all: while
// processes race to create a database, switching it to WAL can fail at once.
func retryBusy(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := f()
		var se sqlite3.Error
		if !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Close closes the database.
func (s *Store) Close() error {
	return errors.Join(s.cache.conn.Close(), s.db.Close())
}

func seed(ctx context.Context, tx *sql.Tx, now time.Time, matrix optimizer.Throughputs) error {
	for _, gt := range CatalogTypes() {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO gpu_types (name) VALUES (?)`, gt); err != nil {
			return err
		}
	}
	for _, a := range DefaultAliases() {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO gpu_types (name) VALUES (?)`, a.GPUType); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO gpu_aliases (site_name, gpu_type) VALUES (?, ?)`, a.Site, a.GPUType); err != nil {
			return err
		}
	}
	_, err := importTx(ctx, tx, matrix, now)
	return err
}

// inTx runs f in a write transaction on the cache's connection, so that
// the Store's own commits do not move the data_version it watches for other
// writers; after a commit the cache is dropped, unless keep brings it up to
// date and reports true. f and keep run with the cache locked.
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error, keep ...func(*readCache) bool) (err error) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	tx, err := s.cache.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if len(keep) == 0 || !s.cache.valid || !keep[0](&s.cache) {
		s.cache.valid = false
	}
	return nil
}

// ImportGavel stores every rate of t as an imported value, replacing earlier
// imported values of the same cells, and returns how many it stored. GPU
// type names go through the same exact lookups as ResolveGPUType (steps
// 1-3); unknown ones become new types. Nothing is stored if any rate is
// invalid.
func (s *Store) ImportGavel(ctx context.Context, t optimizer.Throughputs) (n int, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		n, err = importTx(ctx, tx, t, s.opts.now())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("import throughputs: %w", err)
	}
	return n, nil
}

func importTx(ctx context.Context, tx *sql.Tx, t optimizer.Throughputs, at time.Time) (int, error) {
	// Validate everything first, in a stable order for the error message.
	for _, jt := range t.JobTypes() {
		for gt, byWorkers := range t[jt] {
			for w, r := range byWorkers {
				if err := validCell(jt, gt, w); err != nil {
					return 0, err
				}
				if err := validRate(r); err != nil {
					return 0, fmt.Errorf("%s on %d x %s: %w", jt, w, gt, err)
				}
			}
		}
	}
	now := formatTime(at)
	n := 0
	for _, key := range t.JobTypes() {
		jt := strings.TrimSpace(key)
		if err := ensureJobType(ctx, tx, jt); err != nil {
			return 0, err
		}
		for gtName, byWorkers := range t[key] {
			gt, err := gpuTypeForWrite(ctx, tx, gtName)
			if err != nil {
				return 0, err
			}
			for w, r := range byWorkers {
				if err := upsert(ctx, tx, jt, gt, w, SourceImported, r, 0, now); err != nil {
					return 0, err
				}
				n++
			}
		}
	}
	return n, nil
}

// Set stores an administrator's measured rate for jobType on workers GPUs of
// gpuType. It overrides learned and imported values until Unset. The GPU
// type is resolved as SetAlias resolves its target: a type of the database
// or of the catalogue, else ErrNotFound (a typo would otherwise become a GPU
// type no node has). A job type new to the database is created, unless its
// name normalises (jobproto.NormalizeModel) to an existing job type's:
// that is ErrAmbiguous, since model= could then no longer tell the two
// apart.
func (s *Store) Set(ctx context.Context, jobType, gpuType string, workers int, stepsPerS float64) error {
	jobType = strings.TrimSpace(jobType)
	err := validCell(jobType, gpuType, workers)
	if err == nil {
		err = validRate(stepsPerS)
	}
	if err == nil {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			if err := checkNewJobType(ctx, tx, jobType); err != nil {
				return err
			}
			if err := ensureJobType(ctx, tx, jobType); err != nil {
				return err
			}
			gt, err := aliasTarget(ctx, tx, gpuType)
			if err != nil {
				return err
			}
			return upsert(ctx, tx, jobType, gt, workers, SourceMeasured, stepsPerS, 0, formatTime(s.opts.now()))
		})
	}
	if err != nil {
		return fmt.Errorf("set %s on %d x %s: %w", jobType, workers, gpuType, err)
	}
	return nil
}

// Unset removes a measured rate, so the cell falls back to learned or
// imported values. A cell with no measured rate is ErrNotFound.
func (s *Store) Unset(ctx context.Context, jobType, gpuType string, workers int) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		gt, err := lookupGPUType(ctx, tx, strings.TrimSpace(gpuType))
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("unknown GPU type: %w", err)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM throughputs
			WHERE job_type = ? AND gpu_type = ? AND workers = ? AND source = ?`,
			strings.TrimSpace(jobType), gt, workers, SourceMeasured)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("no measured rate: %w", ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("unset %s on %d x %s: %w", jobType, workers, gpuType, err)
	}
	return nil
}

// RecordObservation stores one observed rate, o.Steps/o.Seconds, as a
// sample of its cell and recomputes the cell's learned value from its
// samples (see the package doc for the rule). An observation with no
// progress (Steps == 0) is rejected: it says more about startup or
// checkpointing than about throughput. A rate too far from the cell's
// imported or expected value is ErrOutlier and not stored.
func (s *Store) RecordObservation(ctx context.Context, o Observation) error {
	return s.RecordObservations(ctx, []Observation{o})[0]
}

// RecordObservations records each observation as RecordObservation does,
// all in one transaction (the daemon's round has one per running job), and
// returns one error per observation, nil where it was recorded: an invalid
// or outlying observation is skipped, a failed transaction fails them all.
func (s *Store) RecordObservations(ctx context.Context, obs []Observation) []error {
	errs := make([]error, len(obs))
	var done []learned
	var valid []int
	for i, o := range obs {
		err := validCell(strings.TrimSpace(o.JobType), o.GPUType, o.Workers)
		if err == nil {
			err = validObservation(o)
		}
		if err != nil {
			errs[i] = fmt.Errorf("record observation of %s on %d x %s: %w", o.JobType, o.Workers, o.GPUType, err)
		} else {
			valid = append(valid, i)
		}
	}
	if len(valid) == 0 {
		return errs
	}
	var outliers map[int]error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done, outliers = done[:0], map[int]error{}
		jobTypes, gpuTypes := map[string]bool{}, map[string]string{}
		for _, i := range valid {
			o := obs[i]
			c := cellKey{jobType: strings.TrimSpace(o.JobType), workers: o.Workers}
			at := o.At
			if at.IsZero() {
				at = s.opts.now()
			}
			if !jobTypes[c.jobType] {
				if err := ensureJobType(ctx, tx, c.jobType); err != nil {
					return err
				}
				jobTypes[c.jobType] = true
			}
			var err error
			var ok bool
			if c.gpuType, ok = gpuTypes[o.GPUType]; !ok {
				if c.gpuType, err = gpuTypeForWrite(ctx, tx, o.GPUType); err != nil {
					return err
				}
				gpuTypes[o.GPUType] = c.gpuType
			}
			if err := checkBound(ctx, tx, c, o); err != nil {
				outliers[i] = err
				continue
			}
			if err := s.addSample(ctx, tx, c, o, at); err != nil {
				return err
			}
			l, err := s.relearn(ctx, tx, c, at)
			if err != nil {
				return err
			}
			done = append(done, l)
		}
		return nil
	}, func(c *readCache) bool {
		// Observations come every round: update the cached rows in place.
		// A new cell (or a new GPU type) reads afresh.
		if len(outliers) > 0 {
			return false // it may have added a job or GPU type
		}
		for _, l := range done {
			if !l.existed || !c.updateLearned(l, s.opts) {
				return false
			}
		}
		return true
	})
	for _, i := range valid {
		o := obs[i]
		if err == nil {
			err := outliers[i]
			if err == nil {
				continue
			}
			errs[i] = fmt.Errorf("record observation of %s on %d x %s: %w", o.JobType, o.Workers, o.GPUType, err)
			continue
		}
		errs[i] = fmt.Errorf("record observation of %s on %d x %s: %w", o.JobType, o.Workers, o.GPUType, err)
	}
	return errs
}

func validCell(jobType, gpuType string, workers int) error {
	switch {
	case strings.TrimSpace(jobType) == "":
		return fmt.Errorf("%w: empty job type", ErrInvalid)
	case strings.TrimSpace(gpuType) == "":
		return fmt.Errorf("%w: empty GPU type", ErrInvalid)
	case workers < 1:
		return fmt.Errorf("%w: workers %d, want at least 1", ErrInvalid, workers)
	}
	return nil
}

// validRate accepts a stored rate: 0 (the job cannot run there) or one
// within [MinRate, MaxRate].
func validRate(r float64) error {
	if r != 0 && !InRange(r) {
		return fmt.Errorf("%w: steps/s %v, want 0 or a number from %g to %g", ErrInvalid, r, MinRate, MaxRate)
	}
	return nil
}

func validObservation(o Observation) error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 }
	switch {
	case bad(o.Seconds):
		return fmt.Errorf("%w: seconds %v, want a finite number > 0", ErrInvalid, o.Seconds)
	case bad(o.Steps):
		return fmt.Errorf("%w: steps %v, want a finite number > 0", ErrInvalid, o.Steps)
	case !InRange(o.Steps / o.Seconds):
		return fmt.Errorf("%w: rate %v steps/s out of range [%g, %g]", ErrInvalid, o.Steps/o.Seconds, MinRate, MaxRate)
	}
	return nil
}

// checkNewJobType refuses a job type not yet in the database whose name
// normalises to an existing one's ("resnet50-bs64" beside "ResNet-50
// (batch size 64)").
func checkNewJobType(ctx context.Context, tx *sql.Tx, name string) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM job_types`)
	if err != nil {
		return fmt.Errorf("list job types: %w", err)
	}
	defer rows.Close()
	norm := jobproto.NormalizeModel(name)
	var same []string
	for rows.Next() {
		var jt string
		if err := rows.Scan(&jt); err != nil {
			return fmt.Errorf("list job types: %w", err)
		}
		if jt == name {
			return nil
		}
		if jobproto.NormalizeModel(jt) == norm {
			same = append(same, jt)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list job types: %w", err)
	}
	if len(same) > 0 {
		sort.Strings(same)
		return fmt.Errorf("%w: job type %q is another spelling of %q: a second job type of that name would make model=%s match both; use %q",
			ErrAmbiguous, name, strings.Join(same, `", "`), name, same[0])
	}
	return nil
}

func ensureJobType(ctx context.Context, tx *sql.Tx, name string) error {
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO job_types (name) VALUES (?)`, name); err != nil {
		return fmt.Errorf("add job type %q: %w", name, err)
	}
	return nil
}

func upsert(ctx context.Context, tx *sql.Tx, jobType, gpuType string, workers int, src Source, rate float64, samples int, at string) error {
	return upsertUsers(ctx, tx, jobType, gpuType, workers, src, rate, samples, 0, at)
}

func upsertUsers(ctx context.Context, tx *sql.Tx, jobType, gpuType string, workers int, src Source, rate float64, samples, users int, at string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO throughputs
		(job_type, gpu_type, workers, source, steps_per_s, samples, users, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (job_type, gpu_type, workers, source) DO UPDATE SET
			steps_per_s = excluded.steps_per_s,
			samples = excluded.samples,
			users = excluded.users,
			updated_at = excluded.updated_at`,
		jobType, gpuType, workers, src, rate, samples, users, at)
	if err != nil {
		return fmt.Errorf("store %s rate of %s on %d x %s: %w", src, jobType, workers, gpuType, err)
	}
	return nil
}

// Throughputs returns the matrix the optimizer uses: for every cell, the
// value chosen by the precedence rule in the package doc.
func (s *Store) Throughputs(ctx context.Context) (optimizer.Throughputs, error) {
	rows, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("throughputs: %w", err)
	}
	out := optimizer.Throughputs{}
	for _, r := range rows {
		if r.InUse {
			out.Set(r.JobType, r.GPUType, r.Workers, r.StepsPerSecond)
		}
	}
	return out, nil
}

// Confirmed returns the cells whose value in use is this cluster's own: an
// administrator's measurement, or what jobs' progress taught (learned, once
// it outranks an imported value). The other cells (imported from a matrix
// measured elsewhere, or the prior's) are what exploration is optimistic
// about (optimizer.Throughputs.Optimistic).
func (s *Store) Confirmed(ctx context.Context) (optimizer.Throughputs, error) {
	rows, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("confirmed throughputs: %w", err)
	}
	out := optimizer.Throughputs{}
	for _, r := range rows {
		if r.InUse && (r.Source == SourceMeasured || r.Source == SourceLearned) {
			out.Set(r.JobType, r.GPUType, r.Workers, r.StepsPerSecond)
		}
	}
	return out, nil
}

// List returns every stored row, sorted by job type, GPU type, workers and
// source, with InUse set on the rows Throughputs takes.
func (s *Store) List(ctx context.Context) ([]Row, error) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if s.cache.current(ctx) && s.cache.rows != nil {
		return slices.Clone(s.cache.rows), nil
	}
	rows, err := s.rows(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list throughputs: %w", err)
	}
	// A commit between current and rows leaves newer rows under the older
	// version: the next call sees the version move and reads again.
	if s.cache.valid {
		s.cache.rows = slices.Clone(rows)
		if s.cache.rows == nil {
			s.cache.rows = []Row{}
		}
	}
	return rows, nil
}

// ListWithPrior returns List's rows plus, for every cell of the stored job
// types on every GPU type of the database that has no value in use, the
// prior's (Source SourcePrior, InUse true, UpdatedAt zero): the matrix the
// daemon plans with, every value labelled with where it comes from.
func (s *Store) ListWithPrior(ctx context.Context) ([]Row, error) {
	rows, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	types, err := s.GPUTypes(ctx)
	if err != nil {
		return nil, err
	}
	return PriorRows(rows, types), nil
}

// PriorRows adds to rows (as List returns them) a SourcePrior row for every
// cell of rows' job types on gpuTypes that no row in use has, keeping List's
// order (job type, GPU type, workers, source).
func PriorRows(rows []Row, gpuTypes []string) []Row {
	measured := optimizer.Throughputs{}
	for _, r := range rows {
		if r.InUse {
			measured.Set(r.JobType, r.GPUType, r.Workers, r.StepsPerSecond)
		}
	}
	p := FitPrior(measured)
	out := append([]Row(nil), rows...)
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.JobType] {
			continue
		}
		seen[r.JobType] = true
		for gt, byW := range p.Model(r.JobType, gpuTypes) {
			for w, x := range byW {
				if _, ok := measured[r.JobType][gt][w]; !ok {
					out = append(out, Row{JobType: r.JobType, GPUType: gt, Workers: w, StepsPerSecond: x, Source: SourcePrior, InUse: true})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.JobType != b.JobType:
			return a.JobType < b.JobType
		case a.GPUType != b.GPUType:
			return a.GPUType < b.GPUType
		case a.Workers != b.Workers:
			return a.Workers < b.Workers
		}
		return a.Source < b.Source
	})
	return out
}

// Show returns the rows of one job type as List does. An unknown job type
// is ErrNotFound.
func (s *Store) Show(ctx context.Context, jobType string) ([]Row, error) {
	jobType = strings.TrimSpace(jobType)
	var name string
	err := s.db.QueryRowContext(ctx, `SELECT name FROM job_types WHERE name = ?`, jobType).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("show job type %q: %w", jobType, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("show job type %q: %w", jobType, err)
	}
	rows, err := s.rows(ctx, jobType)
	if err != nil {
		return nil, fmt.Errorf("show job type %q: %w", jobType, err)
	}
	return rows, nil
}

func (s *Store) rows(ctx context.Context, jobType string) ([]Row, error) {
	q := `SELECT job_type, gpu_type, workers, source, steps_per_s, samples, users, updated_at FROM throughputs`
	var args []any
	if jobType != "" {
		q += ` WHERE job_type = ?`
		args = append(args, jobType)
	}
	q += ` ORDER BY job_type, gpu_type, workers, source`
	rs, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		var r Row
		var at string
		if err := rs.Scan(&r.JobType, &r.GPUType, &r.Workers, &r.Source, &r.StepsPerSecond, &r.Samples, &r.Users, &at); err != nil {
			return nil, err
		}
		if r.UpdatedAt, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("row %s/%s/%d/%s: updated_at: %w", r.JobType, r.GPUType, r.Workers, r.Source, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	markInUse(out, s.opts)
	return out, nil
}

// markInUse sets InUse on the row of each cell that the precedence rule
// picks: measured, else learned from at least minLearnedSamples samples of
// minLearnedUsers users, else imported, else learned from fewer users. A
// cell with none of these has no row in use (the prior fills it, see
// WithPrior). A rate outside
// [MinRate, MaxRate] (other than a measured or imported 0) is never used.
func markInUse(rows []Row, o options) {
	type cell struct {
		job, gpu string
		workers  int
	}
	best := map[cell]int{}
	for i, r := range rows {
		c := cell{r.JobType, r.GPUType, r.Workers}
		j, ok := best[c]
		if rank(r, o) > 0 && (!ok || rank(r, o) > rank(rows[j], o)) {
			best[c] = i
		}
	}
	for _, i := range best {
		rows[i].InUse = true
	}
}

// rank orders a cell's rows by the precedence rule (0: never in use).
func rank(r Row, o options) int {
	if validRate(r.StepsPerSecond) != nil {
		return 0 // a database written before the bounds, or by hand
	}
	learned := r.Source == SourceLearned && r.Samples >= o.minLearnedSamples && r.StepsPerSecond > 0
	switch {
	case r.Source == SourceMeasured:
		return 4
	case learned && r.Users >= o.minLearnedUsers:
		return 3
	case r.Source == SourceImported:
		return 2
	case learned:
		// One user's samples never replace a value imported or measured
		// elsewhere, but beat the prior's guess (a model only one user
		// runs is learned; its samples stay within the bounds of the
		// prior they were checked against).
		return 1
	}
	return 0
}

// markCellInUse is markInUse for the cell of rows[i] alone, in rows sorted
// as List returns them (a cell's rows side by side).
func markCellInUse(rows []Row, i int, o options) {
	same := func(j int) bool {
		return rows[j].JobType == rows[i].JobType && rows[j].GPUType == rows[i].GPUType && rows[j].Workers == rows[i].Workers
	}
	lo, hi := i, i+1
	for lo > 0 && same(lo-1) {
		lo--
	}
	for hi < len(rows) && same(hi) {
		hi++
	}
	best := -1
	for j := lo; j < hi; j++ {
		rows[j].InUse = false
		if rank(rows[j], o) > 0 && (best < 0 || rank(rows[j], o) > rank(rows[best], o)) {
			best = j
		}
	}
	if best >= 0 {
		rows[best].InUse = true
	}
}

// JobTypes returns every known job type, sorted.
func (s *Store) JobTypes(ctx context.Context) ([]string, error) {
	out, err := s.names(ctx, `SELECT name FROM job_types ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list job types: %w", err)
	}
	return out, nil
}

// GPUTypes returns every canonical GPU type, sorted.
func (s *Store) GPUTypes(ctx context.Context) ([]string, error) {
	out, err := s.names(ctx, `SELECT name FROM gpu_types ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list GPU types: %w", err)
	}
	return out, nil
}

func (s *Store) names(ctx context.Context, q string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
