package profiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hadar-sched/hadar/optimizer"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixedClock returns a clock that starts at t0 and advances a second per call.
func fixedClock() func() time.Time {
	var mu sync.Mutex
	now := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

func openTest(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "hadar.db")
	}
	s, err := Open(context.Background(), path, append([]Option{WithClock(fixedClock())}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "hadar")
	path := filepath.Join(dir, "hadar.db")
	s := openTest(t, path)
	if err := s.Set(context.Background(), "A3C", "v100", 1, 2); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("database mode = %v, want 0600", got)
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if st, err := os.Stat(p); err != nil {
			t.Errorf("WAL mode: %v", err)
		} else if got := st.Mode().Perm(); got&^0o600 != 0 {
			t.Errorf("%s mode = %v, want at most 0600", filepath.Base(p), got)
		}
	}
	st, err = os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got&^0o750 != 0 {
		t.Errorf("directory mode = %v, want at most 0750", got)
	}
	var mode string
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
	var timeout int
	if err := s.db.QueryRow(`PRAGMA busy_timeout`).Scan(&timeout); err != nil || timeout != 5000 {
		t.Errorf("busy_timeout = %d (%v), want 5000", timeout, err)
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db", filepath.Join(t.TempDir(), "a?mode=ro")} {
		if s, err := Open(context.Background(), path); !errors.Is(err, ErrInvalid) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalid", path, err)
		}
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hadar.db")
	s := openTest(t, path)
	// Remove part of the seed: a reopen must neither fail nor seed again.
	if _, err := s.db.Exec(`DELETE FROM throughputs WHERE job_type = 'A3C'`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		s = openTest(t, path)
		var n, version int
		if err := s.db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &version); err != nil {
			t.Fatal(err)
		}
		ms, err := loadMigrations(migrationFS)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(ms) || version != len(ms) {
			t.Errorf("reopen %d: %d migrations recorded, version %d; want %d", i, n, version, len(ms))
		}
		tp, err := s.Throughputs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tp["A3C"]; ok {
			t.Errorf("reopen %d seeded the database again", i)
		}
		s.Close()
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hadar.db")
	s := openTest(t, path)
	if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(context.Background(), path); err == nil {
		s.Close()
		t.Fatal("Open of a database from a newer hadar succeeded")
	}
}

func TestConcurrentFirstOpenSeedsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hadar.db")
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), path)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener %d: %v", i, err)
		}
	}
	s := openTest(t, path)
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
		t.Errorf("schema_migrations has %d rows (%v), want %d", n, err, len(ms))
	}
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name    string
		fs      fstest.MapFS
		want    []int
		wantErr bool
	}{
		{name: "ordered", fs: fstest.MapFS{
			"migrations/0002_b.sql": {Data: []byte("B")},
			"migrations/0001_a.sql": {Data: []byte("A")},
		}, want: []int{1, 2}},
		{name: "gap", fs: fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("A")},
			"migrations/0003_c.sql": {Data: []byte("C")},
		}, wantErr: true},
		{name: "duplicate", fs: fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("A")},
			"migrations/0001_b.sql": {Data: []byte("B")},
		}, wantErr: true},
		{name: "unnumbered", fs: fstest.MapFS{"migrations/init.sql": {Data: []byte("A")}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := loadMigrations(tc.fs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if !tc.wantErr {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("versions (-want +got):\n%s", diff)
				}
			}
		})
	}
	if _, err := loadMigrations(migrationFS); err != nil {
		t.Errorf("embedded migrations: %v", err)
	}
}

func TestSeed(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	got, err := s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), got); diff != "" {
		t.Errorf("seeded matrix differs from Default (-want +got):\n%s", diff)
	}
	aliases, err := s.Aliases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultAliases(), aliases, cmpopts.SortSlices(func(a, b Alias) bool { return a.Site < b.Site })); diff != "" {
		t.Errorf("aliases (-want +got):\n%s", diff)
	}
	jobs, err := s.JobTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default().JobTypes(), jobs); diff != "" {
		t.Errorf("job types (-want +got):\n%s", diff)
	}
	rows, err := s.Show(ctx, "A3C")
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{JobType: "A3C", GPUType: "k80", Workers: 1, Source: SourceImported, InUse: true},
		{JobType: "A3C", GPUType: "p100", Workers: 1, Source: SourceImported, InUse: true},
		{JobType: "A3C", GPUType: "v100", Workers: 1, Source: SourceImported, InUse: true},
	}
	if diff := cmp.Diff(want, rows, cmpopts.IgnoreFields(Row{}, "StepsPerSecond", "UpdatedAt")); diff != "" {
		t.Errorf("Show(A3C) (-want +got):\n%s", diff)
	}
	for _, r := range rows {
		if r.StepsPerSecond != Default()["A3C"][r.GPUType][1] || !r.UpdatedAt.Equal(t0.Add(time.Second)) {
			t.Errorf("row %+v: want rate %v at %v", r, Default()["A3C"][r.GPUType][1], t0.Add(time.Second))
		}
	}
}

// op is one step of a precedence scenario.
type op struct {
	imported *float64
	measured *float64
	observe  []float64 // steps per second, one observation each (Seconds 10)
	// user owns every observation of observe; "" gives each its own user.
	user string
}

func ptr(f float64) *float64 { return &f }

func TestPrecedence(t *testing.T) {
	const job, gpu = "Job", "a100"
	tests := []struct {
		name       string
		minSamples int
		minUsers   int
		ops        []op
		wantRate   float64
		wantSource Source // "": no row in use (the prior fills the cell)
		// wantConfirmed: the cell is in Confirmed (its value in use is
		// measured or learned here).
		wantConfirmed bool
	}{
		{name: "imported only", ops: []op{{imported: ptr(10)}}, wantRate: 10, wantSource: SourceImported},
		{name: "learned below min samples loses to imported",
			ops:      []op{{imported: ptr(10)}, {observe: []float64{20, 20}}},
			wantRate: 10, wantSource: SourceImported},
		{name: "learned at min samples beats imported",
			ops:      []op{{imported: ptr(10)}, {observe: []float64{20, 20, 20}}},
			wantRate: 20, wantSource: SourceLearned, wantConfirmed: true},
		{name: "configurable min samples and users",
			minSamples: 1, minUsers: 1,
			ops:      []op{{imported: ptr(10)}, {observe: []float64{30}}},
			wantRate: 30, wantSource: SourceLearned, wantConfirmed: true},
		{name: "learned from one user loses to imported",
			ops:      []op{{imported: ptr(10)}, {observe: []float64{20, 20, 20, 20}, user: "mallory"}},
			wantRate: 10, wantSource: SourceImported},
		{name: "learned from one user is used when nothing else (it beats the prior, never an import)",
			ops:      []op{{observe: []float64{7, 7, 7}, user: "mallory"}},
			wantRate: 7, wantSource: SourceLearned, wantConfirmed: true},
		{name: "learned below min samples is not used when nothing else",
			ops:      []op{{observe: []float64{7, 7}}},
			wantRate: 0},
		{name: "learned of two users is used when nothing else",
			ops:      []op{{observe: []float64{7, 7, 7}}},
			wantRate: 7, wantSource: SourceLearned, wantConfirmed: true},
		{name: "measured beats learned and imported",
			ops:      []op{{imported: ptr(10)}, {observe: []float64{20, 20, 20, 20}}, {measured: ptr(5)}},
			wantRate: 5, wantSource: SourceMeasured, wantConfirmed: true},
		{name: "measured zero means cannot run",
			ops:      []op{{imported: ptr(10)}, {measured: ptr(0)}},
			wantRate: 0, wantSource: SourceMeasured, wantConfirmed: true},
		{name: "reimport after measured keeps measured",
			ops:      []op{{measured: ptr(5)}, {imported: ptr(10)}},
			wantRate: 5, wantSource: SourceMeasured, wantConfirmed: true},
		{name: "reimport replaces imported",
			ops:      []op{{imported: ptr(10)}, {imported: ptr(12)}},
			wantRate: 12, wantSource: SourceImported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var opts []Option
			if tc.minSamples > 0 {
				opts = append(opts, WithMinLearnedSamples(tc.minSamples))
			}
			if tc.minUsers > 0 {
				opts = append(opts, WithMinLearnedUsers(tc.minUsers))
			}
			s := openTest(t, "", opts...)
			for _, o := range tc.ops {
				if o.imported != nil {
					if _, err := s.ImportGavel(ctx, optimizer.Throughputs{job: {gpu: {2: *o.imported}}}); err != nil {
						t.Fatal(err)
					}
				}
				if o.measured != nil {
					if err := s.Set(ctx, job, gpu, 2, *o.measured); err != nil {
						t.Fatal(err)
					}
				}
				for i, r := range o.observe {
					user := o.user
					if user == "" {
						user = fmt.Sprintf("user%d", i)
					}
					if err := s.RecordObservation(ctx, Observation{JobType: job, GPUType: gpu, Workers: 2, Steps: r * 10, Seconds: 10,
						JobID: fmt.Sprint(i), User: user}); err != nil {
						t.Fatal(err)
					}
				}
			}
			tp, err := s.Throughputs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := tp.Rate(job, gpu, 2); math.Abs(got-tc.wantRate) > 1e-9 {
				t.Errorf("Rate = %v, want %v", got, tc.wantRate)
			}
			rows, err := s.Show(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			var inUse, want []Source
			for _, r := range rows {
				if r.InUse {
					inUse = append(inUse, r.Source)
				}
			}
			if tc.wantSource != "" {
				want = []Source{tc.wantSource}
			}
			if diff := cmp.Diff(want, inUse); diff != "" {
				t.Errorf("sources in use (-want +got):\n%s", diff)
			}
			confirmed, err := s.Confirmed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, got := confirmed[job][gpu][2]; got != tc.wantConfirmed {
				t.Errorf("confirmed = %v, want %v", got, tc.wantConfirmed)
			}
		})
	}
}

func TestRecordObservationLearning(t *testing.T) {
	type obs struct {
		job, user string
		rate      float64
	}
	tests := []struct {
		name        string
		window      int
		perJob      int
		perUser     int
		obs         []obs
		want        float64
		wantSamples int
		wantUsers   int
		wantInUse   bool
	}{
		{name: "one sample", obs: []obs{{"1", "ann", 4}}, want: 4, wantSamples: 1, wantUsers: 1},
		{name: "median of one user's samples", obs: []obs{{"1", "ann", 2}, {"1", "ann", 4}, {"1", "ann", 9}},
			want: 4, wantSamples: 3, wantUsers: 1},
		// Three users, one vote each: ann's median 4, bob's 6, carol's 30.
		{name: "median over users", obs: []obs{{"1", "ann", 4}, {"2", "bob", 6}, {"3", "carol", 30}, {"3", "carol", 30}, {"3", "carol", 30}},
			want: 6, wantSamples: 5, wantUsers: 3, wantInUse: true},
		// Two votes: the geometric mean of 4 and 9.
		{name: "geometric mean of two users", obs: []obs{{"1", "ann", 4}, {"2", "bob", 9}, {"2", "bob", 9}},
			want: 6, wantSamples: 3, wantUsers: 2, wantInUse: true},
		{name: "window keeps the newest", window: 2, obs: []obs{{"1", "ann", 2}, {"2", "bob", 4}, {"3", "carol", 16}},
			want: 8, wantSamples: 2, wantUsers: 2},
		{name: "per-job cap keeps a job's newest", perJob: 1, obs: []obs{{"1", "ann", 2}, {"1", "ann", 3}, {"2", "bob", 3}, {"3", "carol", 3}},
			want: 3, wantSamples: 3, wantUsers: 3, wantInUse: true},
		{name: "per-user cap across jobs", perUser: 2, obs: []obs{{"1", "ann", 2}, {"2", "ann", 3}, {"3", "ann", 3}, {"4", "bob", 3}},
			want: 3, wantSamples: 3, wantUsers: 2, wantInUse: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var opts []Option
			if tc.window > 0 {
				opts = append(opts, WithLearningWindow(tc.window))
			}
			if tc.perJob > 0 || tc.perUser > 0 {
				perJob, perUser := tc.perJob, tc.perUser
				if perJob == 0 {
					perJob = 100
				}
				if perUser == 0 {
					perUser = 100
				}
				opts = append(opts, WithSampleCaps(perJob, perUser))
			}
			s := openTest(t, "", opts...)
			at := t0.Add(time.Hour)
			for i, o := range tc.obs {
				// Seconds vary so the test checks the rate is Steps/Seconds.
				secs := float64(i + 1)
				if err := s.RecordObservation(ctx, Observation{JobType: "CycleGAN", GPUType: "V100", Workers: 1,
					Steps: o.rate * secs, Seconds: secs, At: at, JobID: o.job, User: o.user}); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := s.Show(ctx, "CycleGAN")
			if err != nil {
				t.Fatal(err)
			}
			var got *Row
			for i := range rows {
				if rows[i].Source == SourceLearned {
					got = &rows[i]
				}
			}
			if got == nil {
				t.Fatalf("no learned row in %+v", rows)
			}
			want := Row{JobType: "CycleGAN", GPUType: "v100", Workers: 1, StepsPerSecond: tc.want,
				Source: SourceLearned, Samples: tc.wantSamples, Users: tc.wantUsers, UpdatedAt: at, InUse: tc.wantInUse}
			if diff := cmp.Diff(want, *got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("learned row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	before, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obs := func(steps, secs float64) Observation {
		return Observation{JobType: "A3C", GPUType: "v100", Workers: 1, Steps: steps, Seconds: secs}
	}
	tests := []struct {
		name string
		err  error
	}{
		{"set NaN", s.Set(ctx, "A3C", "v100", 1, math.NaN())},
		{"set negative", s.Set(ctx, "A3C", "v100", 1, -3)},
		{"set infinite", s.Set(ctx, "A3C", "v100", 1, math.Inf(1))},
		{"set zero workers", s.Set(ctx, "A3C", "v100", 0, 3)},
		{"set empty job type", s.Set(ctx, " ", "v100", 1, 3)},
		{"set empty GPU type", s.Set(ctx, "A3C", "", 1, 3)},
		{"observe zero seconds", s.RecordObservation(ctx, obs(10, 0))},
		{"observe negative seconds", s.RecordObservation(ctx, obs(10, -1))},
		{"observe NaN seconds", s.RecordObservation(ctx, obs(10, math.NaN()))},
		{"observe negative steps", s.RecordObservation(ctx, obs(-10, 1))},
		{"observe zero steps", s.RecordObservation(ctx, obs(0, 1))},
		{"observe NaN steps", s.RecordObservation(ctx, obs(math.NaN(), 1))},
		{"observe infinite steps", s.RecordObservation(ctx, obs(math.Inf(1), 1))},
		{"observe overflowing rate", s.RecordObservation(ctx, obs(math.MaxFloat64, 1e-300))},
		{"observe zero workers", s.RecordObservation(ctx, Observation{JobType: "A3C", GPUType: "v100", Steps: 1, Seconds: 1})},
		{"import negative", func() error {
			_, err := s.ImportGavel(ctx, optimizer.Throughputs{"A3C": {"v100": {1: 5, 2: -1}}})
			return err
		}()},
		{"import zero workers", func() error {
			_, err := s.ImportGavel(ctx, optimizer.Throughputs{"A3C": {"v100": {0: 5}}})
			return err
		}()},
		{"alias empty site", func() error { _, err := s.SetAlias(ctx, "", "v100"); return err }()},
		{"alias shadows canonical", func() error { _, err := s.SetAlias(ctx, "V100", "a100"); return err }()},
		{"resolve empty", func() error { _, err := s.ResolveGPUType(ctx, " "); return err }()},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tc.name, tc.err)
		}
	}
	after, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("rejected input changed the store (-before +after):\n%s", diff)
	}
	if _, err := s.Show(ctx, "NoSuchJob"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Show(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.Unset(ctx, "A3C", "v100", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Unset with no measured value = %v, want ErrNotFound", err)
	}
}

func TestImportAndUnset(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	n, err := s.ImportGavel(ctx, optimizer.Throughputs{
		"A3C":  {"V100": {1: 1.5}, "h100": {1: 9}},
		"Toy":  {"tesla_v100-sxm2-32gb": {1: 2, 2: 3.5}},
		"Toy2": {"RTX8000": {1: 4}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("imported %d rates, want 5", n)
	}
	tp, err := s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := optimizer.Throughputs{"A3C": {"v100": tp["A3C"]["v100"], "h100": tp["A3C"]["h100"]}, "Toy": tp["Toy"], "Toy2": tp["Toy2"]}
	want := optimizer.Throughputs{
		"A3C":  {"v100": {1: 1.5}, "h100": {1: 9}},
		"Toy":  {"v100": {1: 2, 2: 3.5}},
		"Toy2": {"rtx8000": {1: 4}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after import (-want +got):\n%s", diff)
	}
	types, err := s.GPUTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(types, "rtx8000") || contains(types, "RTX8000") {
		t.Errorf("GPU types %v: want a new lowercase rtx8000", types)
	}

	if err := s.Set(ctx, "A3C", "v100", 1, 99); err != nil {
		t.Fatal(err)
	}
	if err := s.Unset(ctx, "A3C", "V100", 1); err != nil {
		t.Fatal(err)
	}
	tp, err = s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Rate("A3C", "v100", 1); got != 1.5 {
		t.Errorf("after Unset, rate = %v, want the imported 1.5", got)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestResolveGPUType(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	for _, a := range [][2]string{{"gpu_fast", "A100"}, {"MixedCase", "k80"}, {"mixedcase", "k80"}, {"odd", "p100"}, {"ODD", "v100"}, {"a10", "a10"}} {
		if _, err := s.SetAlias(ctx, a[0], a[1]); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		want    string
		wantErr error
	}{
		{name: "tesla_v100-sxm2-32gb", want: "v100"},  // default alias
		{name: "NVlink_A100_40GB", want: "a100-40gb"}, // default alias
		{name: "nvidia_h100_80gb_hbm3", want: "h100"}, // AutoDetect=nvml name
		{name: "nvidia_a100_80gb_pcie", want: "a100-pcie"},
		{name: "a100-sxm4-80gb", want: "a100"},
		{name: "l40s", want: "l40s"}, // catalogue type, seeded
		{name: "amd_instinct_mi300x", want: "mi300x"},
		{name: "v100", want: "v100"},                // canonical
		{name: "V100", want: "v100"},                // canonical, any case
		{name: "gpu_fast", want: "a100"},            // alias to an existing type given in upper case
		{name: "GPU_FAST", want: "a100"},            // alias, any case
		{name: "MIXEDCASE", want: "k80"},            // two aliases differing in case, same type
		{name: "odd", want: "p100"},                 // exact alias beats case-insensitive one
		{name: "Odd", wantErr: ErrAmbiguous},        // two aliases differing in case, two types
		{name: "tesla_v100-pcie-8gb", want: "v100"}, // substring
		{name: "Quadro_P100_x", want: "p100"},       // substring, any case
		{name: "nvidia_a100_x", want: "a100"},       // longest of a10 and a100
		{name: "nvidia_a10", want: "a10"},           // a10 (a new type from SetAlias)
		{name: "rtx_a1000", wantErr: ErrNotFound},   // a100 followed by a digit
		{name: "v1000", wantErr: ErrNotFound},
		{name: "mi250x", want: "mi250x"}, // catalogue type, seeded
		{name: "mi355x", wantErr: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ResolveGPUType(ctx, tc.name)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ResolveGPUType(%q) = %q, %v; want %v", tc.name, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveGPUType(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
			}
		})
	}
}

func TestSetAlias(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	for _, tc := range []struct{ site, canonical, want string }{
		{"my_v100", "V100", "v100"},
		{"my_v100", "tesla_k80", "k80"}, // replaces; target given as an alias
		{"new_gpu", "MI250X", "mi250x"}, // catalogue type, any case
	} {
		got, err := s.SetAlias(ctx, tc.site, tc.canonical)
		if err != nil || got != tc.want {
			t.Errorf("SetAlias(%q, %q) = %q, %v; want %q", tc.site, tc.canonical, got, err, tc.want)
		}
	}
	aliases, err := s.Aliases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, a := range aliases {
		m[a.Site] = a.GPUType
	}
	if diff := cmp.Diff(map[string]string{"my_v100": "k80", "new_gpu": "mi250x"}, map[string]string{"my_v100": m["my_v100"], "new_gpu": m["new_gpu"]}); diff != "" {
		t.Errorf("aliases (-want +got):\n%s", diff)
	}
	if len(aliases) != len(DefaultAliases())+2 {
		t.Errorf("%d aliases, want %d", len(aliases), len(DefaultAliases())+2)
	}
	// An alias to a type neither the database nor the catalogue knows
	// would schedule nothing: refused, and nothing is created.
	if got, err := s.SetAlias(ctx, "site_gpu", "h1OO"); !errors.Is(err, ErrNotFound) || !strings.Contains(fmt.Sprint(err), `unknown canonical GPU type "h1OO"`) {
		t.Errorf("SetAlias to an unknown type = %q, %v; want ErrNotFound naming it", got, err)
	}
	types, err := s.GPUTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, gt := range types {
		if gt == "h1oo" {
			t.Errorf("SetAlias created the unknown type %q", gt)
		}
	}
}

func TestDefaultAliasesTargetCatalogue(t *testing.T) {
	for _, a := range DefaultAliases() {
		if _, ok := LookupGPU(a.GPUType); !ok {
			t.Errorf("default alias %s -> %s: not a catalogue type", a.Site, a.GPUType)
		}
		if _, ok := LookupGPU(a.Site); ok {
			t.Errorf("default alias %s shadows a catalogue type", a.Site)
		}
	}
	// Every catalogue type is reachable from its AutoDetect=nvml name or its
	// own name.
	ctx := context.Background()
	s := openTest(t, "")
	for _, spec := range Catalog() {
		got, err := s.ResolveGPUType(ctx, spec.Type)
		if err != nil || got != spec.Type {
			t.Errorf("ResolveGPUType(%q) = %q, %v", spec.Type, got, err)
		}
	}
}

func TestMatchGPUType(t *testing.T) {
	types := []string{"a10", "a100", "h100", "l4", "l40s", "t4", "v100"}
	tests := []struct {
		name, want string
		err        error
	}{
		{"NVIDIA_A100-SXM4", "a100", nil},
		{"a10", "a10", nil},
		{"nvidia_l40s", "l40s", nil},
		{"nvidia_l4", "l4", nil},
		{"l40", "", ErrNotFound},
		{"h100nvl", "h100", nil},
		{"a100_h100", "", ErrAmbiguous},
		{"tesla_t4", "t4", nil},
		{"rtx4090", "", ErrNotFound},
		{"", "", ErrNotFound},
	}
	for _, tc := range tests {
		got, err := matchGPUType(tc.name, types)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("matchGPUType(%q) = %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestOpenWithSeedMatrix(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hadar.db")
	s, err := Open(ctx, path, WithSeedMatrix(Lambda()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Lambda(), got); diff != "" {
		t.Errorf("seeded matrix (-want +got):\n%s", diff)
	}
	s.Close()
	// An existing database keeps its rates: the seed applies once.
	s, err = Open(ctx, path, WithSeedMatrix(Default()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err = s.Throughputs(ctx); err != nil || got["resnet50"] == nil || got["ResNet-50 (batch size 64)"] != nil {
		t.Errorf("reopened with another seed: %d job types, err %v; want Lambda's only", len(got), err)
	}
}

func TestListWithPrior(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hadar.db"), WithSeedMatrix(Lambda()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Measured: resnet50 does not fit an l4 (say); learned values count as
	// stored once in use.
	if err := s.Set(ctx, "resnet50", "l4", 1, 0); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListWithPrior(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prior := 0
	inUse := map[Cell]Source{}
	for _, r := range rows {
		c := Cell{r.JobType, r.GPUType, r.Workers}
		if r.InUse {
			if src, dup := inUse[c]; dup {
				t.Errorf("%v: two values in use (%s, %s)", c, src, r.Source)
			}
			inUse[c] = r.Source
		}
		if r.Source == SourcePrior {
			prior++
			if !r.InUse || r.StepsPerSecond <= 0 || !r.UpdatedAt.IsZero() {
				t.Errorf("prior row %+v", r)
			}
		}
	}
	types := len(CatalogTypes())
	// Every cell of 10 models on every type at 1-8 GPUs, less Lambda's 300
	// and the l4 column of resnet50 (0 at 1 GPU: none at 2-8 either).
	if want := 10*types*4 - 300 - 4; prior != want || len(rows) != len(stored)+prior {
		t.Errorf("%d prior rows (of %d), want %d", prior, len(rows), want)
	}
	if inUse[Cell{"resnet50", "l4", 1}] != SourceMeasured || inUse[Cell{"resnet50", "l40s", 1}] != SourcePrior || inUse[Cell{"resnet50", "h100", 8}] != SourceImported {
		t.Errorf("sources in use: l4 %s, l40s %s, 8 x h100 %s", inUse[Cell{"resnet50", "l4", 1}], inUse[Cell{"resnet50", "l40s", 1}], inUse[Cell{"resnet50", "h100", 8}])
	}
	if !sort.SliceIsSorted(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		return a.JobType < b.JobType || a.JobType == b.JobType && (a.GPUType < b.GPUType || a.GPUType == b.GPUType && a.Workers < b.Workers)
	}) {
		t.Error("rows not in List's order")
	}
}

func TestResolveDefault(t *testing.T) {
	tests := []struct {
		name, want string
		err        error
	}{
		{"nvidia_h100_80gb_hbm3", "h100", nil},
		{"NVIDIA_L40S", "l40s", nil},
		{"H100-PCIE", "h100-pcie", nil},
		{"tesla_v100-pcie-8gb", "v100", nil}, // substring
		{"gpu_x", "gpu_x", nil},              // an extra type
		{"mi355x", "", ErrNotFound},
	}
	for _, tc := range tests {
		got, err := ResolveDefault(tc.name, "gpu_x")
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ResolveDefault(%q) = %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// The daemon's every-round reads are cached; a write by this Store or by
// another process (`hadar profiles set`, `hadar profiles alias`) must show
// in the next read all the same.
func TestCachedReadsSeeEveryWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hadar.db")
	daemon := openTest(t, path)
	admin := openTest(t, path)
	const job = "ResNet-18 (batch size 128)"
	rate := func() float64 {
		t.Helper()
		tp, err := daemon.Throughputs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tp.Rate(job, "v100", 1)
	}
	before := rate()
	if before <= 0 {
		t.Fatalf("seeded v100 rate of %s = %v", job, before)
	}
	if rate() != before {
		t.Fatal("an unchanged database read differently")
	}
	if err := admin.Set(ctx, job, "v100", 1, 123); err != nil {
		t.Fatal(err)
	}
	if got := rate(); got != 123 {
		t.Errorf("after another connection's Set: %v, want 123", got)
	}
	if err := daemon.Set(ctx, job, "v100", 1, 77); err != nil {
		t.Fatal(err)
	}
	if got := rate(); got != 77 {
		t.Errorf("after the Store's own Set: %v, want 77", got)
	}
	rows, err := daemon.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows[0].StepsPerSecond = -1 // a caller's change must not reach the cache
	again, err := daemon.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].StepsPerSecond == -1 {
		t.Error("List returned the cache itself")
	}

	// Observations update the cached rows in place: they must read as a
	// fresh Store reads the file, learned value and InUse included.
	for i := range 5 {
		for _, gpu := range []string{"k80", "v100"} {
			o := Observation{JobType: job, GPUType: gpu, Workers: 1, Steps: float64(100 + 10*i), Seconds: 10,
				JobID: fmt.Sprint(i), User: fmt.Sprint("user", i)}
			if err := daemon.RecordObservation(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		cached, err := daemon.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := openTest(t, path).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fresh, cached); diff != "" {
			t.Fatalf("after %d observations, cached rows (-fresh +cached):\n%s", i+1, diff)
		}
	}
	tp, err := daemon.Throughputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Rate(job, "k80", 1); got < 10 || got > 14 {
		t.Errorf("learned k80 rate %v, want the median of 10..14 steps/s", got)
	}

	if gt, err := daemon.ResolveGPUType(ctx, "site_gpu_x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ResolveGPUType(site_gpu_x) = %q, %v; want ErrNotFound", gt, err)
	}
	if _, err := admin.SetAlias(ctx, "site_gpu_x", "a100"); err != nil {
		t.Fatal(err)
	}
	if gt, err := daemon.ResolveGPUType(ctx, "site_gpu_x"); err != nil || gt != "a100" {
		t.Errorf("after another connection's SetAlias: %q, %v; want a100", gt, err)
	}
	if _, err := admin.SetAlias(ctx, "site_gpu_x", "h100"); err != nil {
		t.Fatal(err)
	}
	if gt, err := daemon.ResolveGPUType(ctx, "site_gpu_x"); err != nil || gt != "h100" {
		t.Errorf("after the alias changed: %q, %v; want h100", gt, err)
	}
}

func TestRecordObservationsSkipsOnlyTheInvalid(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	obs := []Observation{
		{JobType: "A3C", GPUType: "v100", Workers: 1, Steps: 50, Seconds: 10},
		{JobType: "A3C", GPUType: "v100", Workers: 1, Steps: 0, Seconds: 10}, // no progress
		{JobType: "A3C", GPUType: "k80", Workers: 1, Steps: 20, Seconds: 10},
		{JobType: "A3C", GPUType: "v100", Workers: 1, Steps: 70, Seconds: 10}, // same cell again
	}
	errs := s.RecordObservations(ctx, obs)
	var failed []int
	for i, err := range errs {
		if err != nil {
			failed = append(failed, i)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("observation %d: %v, want ErrInvalid", i, err)
			}
		}
	}
	if diff := cmp.Diff([]int{1}, failed); diff != "" {
		t.Errorf("failed observations (-want +got):\n%s", diff)
	}
	rows, err := s.Show(ctx, "A3C")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{}
	for _, r := range rows {
		if r.Source == SourceLearned {
			got[r.GPUType] = [2]float64{r.StepsPerSecond, float64(r.Samples)}
		}
	}
	// One user's two v100 samples: their median, the geometric mean of 5 and 7.
	if diff := cmp.Diff(map[string][2]float64{"v100": {math.Sqrt(35), 2}, "k80": {2, 1}}, got); diff != "" {
		t.Errorf("learned rows (-want +got):\n%s", diff)
	}
}

// Set resolves the GPU type as SetAlias does (a typo is not a new type) and
// never creates a job type that is another spelling of an existing one.
func TestSetRefusesUnknownGPUAndAmbiguousJobType(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "")
	for _, tc := range []struct {
		name, job, gpu string
		want           error
	}{
		{"unknown GPU type", "A3C", "nosuchgpu", ErrNotFound},
		{"another spelling of a job type", "resnet50-bs64", "v100", ErrAmbiguous},
		{"another spelling, other case", "a3c", "v100", ErrAmbiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Set(ctx, tc.job, tc.gpu, 1, 3); !errors.Is(err, tc.want) {
				t.Errorf("Set(%q, %q) = %v, want %v", tc.job, tc.gpu, err, tc.want)
			}
		})
	}
	jobs, err := s.JobTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j == "resnet50-bs64" || j == "a3c" {
			t.Errorf("a refused Set created job type %q", j)
		}
	}
	gpus, err := s.GPUTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(gpus, "nosuchgpu") {
		t.Error("a refused Set created GPU type nosuchgpu")
	}
	// A catalogue type the database lacks, an alias in any case, and a
	// genuinely new job type are fine.
	for _, gpu := range []string{"l40s", "TESLA_V100-SXM2-32GB", "V100"} {
		if err := s.Set(ctx, "MyModel", gpu, 1, 3); err != nil {
			t.Errorf("Set(MyModel, %s): %v", gpu, err)
		}
	}
}
