package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
)

// Importing real job records (`hadar trace import`): a parser turns a source
// (Philly's CSV, a site's `sacct --parsable2` history) into ImportRecords,
// counting every line it does not keep by reason; Import then converts the
// records to a Gavel-format trace. Real records carry no model and no step
// count, so, as Gavel's Philly-derived generator does, Import draws each
// job's type (seeded) and prices its recorded duration in steps on a
// reference GPU type. docs/traces.md states the rules.

// ImportRecord is one job of a real trace.
type ImportRecord struct {
	// ID is the source's job id ("8071", "123_4").
	ID string
	// Line is the 1-based line of the source the job was read from.
	Line int
	// Submit is when the job was submitted, on the source's clock: sacct
	// prints local time without a zone and Philly counts seconds from
	// PhillyEpoch, so both are read as UTC; only differences are used.
	Submit time.Time
	// Duration is how long the job ran, in seconds (end minus start); > 0.
	Duration float64
	// GPUs is how many GPUs the job held; > 0.
	GPUs int
}

// ImportSource is what a parser read.
type ImportSource struct {
	// Name labels the source (usually its path).
	Name string
	// Records are the jobs kept, in source order.
	Records []ImportRecord
	// Lines counts the data lines read (not the header, comments or blank
	// lines): every one is either a record or counted in Skipped.
	Lines int
	// Skipped counts the lines not kept, by reason (the Skip* constants).
	Skipped map[string]int
}

// Reasons a record is not imported. Every data line of a source is either
// a job of the trace or counted under one of these.
const (
	SkipStep       = "job steps (123.batch, 123.0: part of a job, not a job)"
	SkipRunning    = "still running or requeued (no End time)"
	SkipNotStarted = "never started (Start None/Unknown)"
	SkipNoGPU      = "no GPUs allocated"
	SkipZero       = "ran 0 s"
	SkipWindow     = "submitted outside the time window"
)

// PhillyEpoch is second 0 of Philly's arrival times (SOURCE.md of the data):
// 2017-08-14 23:27:00, Microsoft's clock, read as UTC.
var PhillyEpoch = time.Date(2017, 8, 14, 23, 27, 0, 0, time.UTC)

// ImportError locates a malformed line of an imported source.
type ImportError struct {
	// Name is the source's name, Line the 1-based line.
	Name string
	Line int
	// Field names the field at fault ("" for the line as a whole).
	Field string
	Err   error
}

func (e *ImportError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %s: %v", e.Name, e.Line, e.Field, e.Err)
}

func (e *ImportError) Unwrap() error { return e.Err }

// maxImportLine bounds one line of an imported source; sacct's lines with a
// long AllocTRES are well under 1 KiB.
const maxImportLine = 1 << 20

// scanLines calls fn with each line and its 1-based number, stopping at
// fn's first error.
func scanLines(r io.Reader, name string, fn func(line int, text string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxImportLine)
	line := 0
	for sc.Scan() {
		line++
		if err := fn(line, strings.TrimSuffix(sc.Text(), "\r")); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &ImportError{Name: name, Line: line + 1, Err: fmt.Errorf("line longer than %d bytes", maxImportLine)}
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// phillyFields are the columns of Philly's CSV, in order.
var phillyFields = [...]string{"job id", "arrival time", "topology", "shape", "size", "duration"}

// ParsePhilly reads Philly job records in the CSV of
// shared/data/philly (RFold's philly_trace.csv): "job id, arrival time
// (seconds since PhillyEpoch), topology, shape, size (GPUs), duration
// (seconds)", one job a line. Lines starting with '#' (the header) and blank
// lines are skipped; topology and shape are not used (the shape, "4+4", is
// how Philly spread the job over servers; hadar places gangs itself). A job
// of size 0 or duration 0 is counted in Skipped; a line that does not read
// is an *ImportError naming its line and column.
func ParsePhilly(r io.Reader, name string) (*ImportSource, error) {
	src := &ImportSource{Name: name, Skipped: map[string]int{}}
	err := scanLines(r, name, func(line int, text string) error {
		t := strings.TrimSpace(text)
		if t == "" || strings.HasPrefix(t, "#") {
			return nil
		}
		src.Lines++
		f := strings.Split(t, ",")
		if len(f) != len(phillyFields) {
			return &ImportError{Name: name, Line: line, Err: fmt.Errorf("got %d comma-separated fields, want %d (%s)", len(f), len(phillyFields), strings.Join(phillyFields[:], ", "))}
		}
		fieldErr := func(i int, err error) error {
			return &ImportError{Name: name, Line: line, Field: phillyFields[i], Err: err}
		}
		id := strings.TrimSpace(f[0])
		if id == "" {
			return fieldErr(0, errors.New("is empty"))
		}
		arrival, err := parseSeconds(f[1])
		if err != nil {
			return fieldErr(1, err)
		}
		size, err := strconv.Atoi(strings.TrimSpace(f[4]))
		if err != nil || size < 0 {
			return fieldErr(4, fmt.Errorf("%s is not a GPU count", quoteField(f[4])))
		}
		dur, err := parseSeconds(f[5])
		if err != nil {
			return fieldErr(5, err)
		}
		switch {
		case size == 0:
			src.Skipped[SkipNoGPU]++
		case dur == 0:
			src.Skipped[SkipZero]++
		default:
			src.Records = append(src.Records, ImportRecord{
				ID: id, Line: line, Submit: PhillyEpoch.Add(seconds(arrival)), Duration: dur, GPUs: size,
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}

// maxImportSeconds bounds a time in seconds (100 years): beyond it a
// time.Duration overflows.
const maxImportSeconds = 100 * 365 * 24 * 3600

// parseSeconds reads a non-negative, finite number of seconds.
func parseSeconds(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a number of seconds", quoteField(s))
	}
	if math.IsNaN(v) || v < 0 || v > maxImportSeconds {
		return 0, fmt.Errorf("%s is not between 0 and %d seconds", quoteField(s), maxImportSeconds)
	}
	return v, nil
}

// SacctFormat is the --format ParseSacct needs (extra fields are ignored):
//
//	sacct --allusers --parsable2 --starttime 2025-01-01 --endtime 2025-02-01 \
//	    --format=JobID,JobName,Submit,Start,End,AllocTRES
const SacctFormat = "JobID,JobName,Submit,Start,End,AllocTRES"

// sacctTime is the layout of sacct's times (SLURM_TIME_FORMAT's default,
// ISO 8601 without a zone).
const sacctTime = "2006-01-02T15:04:05"

// ParseSacct reads a site's job history as `sacct --parsable2` prints it
// (Slurm 22.05 and later; --parsable's trailing '|' is accepted too): a
// header line naming the fields, then one line per job and per job step,
// fields separated by '|'. It needs the fields JobID, Submit, Start, End and
// AllocTRES (see SacctFormat), in any order. Blank lines and lines starting
// with '#' are skipped. The rules:
//
//   - a job step (JobID with a '.': 123.batch, 123.extern, 123.0, 123_4.0)
//     is counted in Skipped, not read as a job; array tasks (123_4) and
//     heterogeneous job components (123+0) are jobs of their own;
//   - the job's GPUs are AllocTRES's gres/gpu=N, or, if it lists only typed
//     counts, the sum of its gres/gpu:TYPE=N; a job without GPUs is skipped;
//   - its duration is End minus Start; Start None or Unknown (never started:
//     cancelled while pending, or an unstarted array range 123_[5-9]) and
//     End Unknown (still running, or requeued) are skipped, as is a job that
//     ran 0 s; a Submit that does not read, or an End before Start, is an
//     error.
//
// Every error is an *ImportError with the line and field.
func ParseSacct(r io.Reader, name string) (*ImportSource, error) {
	src := &ImportSource{Name: name, Skipped: map[string]int{}}
	var col map[string]int
	var width int
	trailing := false
	err := scanLines(r, name, func(line int, text string) error {
		// sacct prints no '#' lines (and no JobID starts with one): they
		// are notes, such as the producing command on line 1 of a fixture.
		if t := strings.TrimSpace(text); t == "" || strings.HasPrefix(t, "#") {
			return nil
		}
		f := strings.Split(text, "|")
		if col == nil {
			// The header: --parsable ends every line with a '|'.
			if len(f) > 1 && f[len(f)-1] == "" {
				trailing = true
				f = f[:len(f)-1]
			}
			col = map[string]int{}
			for i, h := range f {
				col[strings.ToLower(strings.TrimSpace(h))] = i
			}
			var missing []string
			for _, need := range []string{"JobID", "Submit", "Start", "End", "AllocTRES"} {
				if _, ok := col[strings.ToLower(need)]; !ok {
					missing = append(missing, need)
				}
			}
			if len(missing) > 0 {
				return &ImportError{Name: name, Line: line, Err: fmt.Errorf("the header (first line) has no %s field: run sacct --parsable2 --format=%s (without --noheader)", strings.Join(missing, ", "), SacctFormat)}
			}
			width = len(f)
			return nil
		}
		src.Lines++
		if trailing && len(f) > 1 && f[len(f)-1] == "" {
			f = f[:len(f)-1]
		}
		if len(f) != width {
			return &ImportError{Name: name, Line: line, Err: fmt.Errorf("got %d '|'-separated fields, the header has %d (a '|' in a job name?)", len(f), width)}
		}
		get := func(field string) string { return strings.TrimSpace(f[col[strings.ToLower(field)]]) }
		fieldErr := func(field string, err error) error {
			return &ImportError{Name: name, Line: line, Field: field, Err: err}
		}
		id := get("JobID")
		if id == "" {
			return fieldErr("JobID", errors.New("is empty"))
		}
		if strings.Contains(id, ".") {
			src.Skipped[SkipStep]++
			return nil
		}
		submit, ok, err := parseSacctTime(get("Submit"))
		if err != nil {
			return fieldErr("Submit", err)
		}
		if !ok {
			return fieldErr("Submit", fmt.Errorf("%s: a job always has a submit time", quoteField(get("Submit"))))
		}
		start, started, err := parseSacctTime(get("Start"))
		if err != nil {
			return fieldErr("Start", err)
		}
		end, ended, err := parseSacctTime(get("End"))
		if err != nil {
			return fieldErr("End", err)
		}
		gpus, err := tresGPUs(get("AllocTRES"))
		if err != nil {
			return fieldErr("AllocTRES", err)
		}
		switch {
		case !started:
			src.Skipped[SkipNotStarted]++
		case !ended:
			src.Skipped[SkipRunning]++
		case end.Before(start):
			return fieldErr("End", fmt.Errorf("%s is before Start %s", get("End"), get("Start")))
		case gpus == 0:
			src.Skipped[SkipNoGPU]++
		case end.Equal(start):
			src.Skipped[SkipZero]++
		default:
			src.Records = append(src.Records, ImportRecord{
				ID: id, Line: line, Submit: submit, Duration: end.Sub(start).Seconds(), GPUs: gpus,
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if col == nil {
		return nil, &ImportError{Name: name, Line: 1, Err: fmt.Errorf("empty: want sacct --parsable2 --format=%s output with its header", SacctFormat)}
	}
	return src, nil
}

// parseSacctTime reads one of sacct's times; ok is false for the values
// sacct prints when there is none (Unknown, None, empty).
func parseSacctTime(s string) (t time.Time, ok bool, err error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, false, nil
	}
	t, err = time.Parse(sacctTime, s)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s is not a time like 2022-05-03T10:00:00 (Unknown and None mean none)", quoteField(s))
	}
	return t, true, nil
}

// tresGPUs reads the GPU count of a TRES list such as
// "billing=8,cpu=8,gres/gpu:v100=2,gres/gpu=2,mem=64G,node=1": gres/gpu's
// count, else the sum of the typed gres/gpu:TYPE counts (Slurm lists both
// when a job asked for a type; older accounting only the typed ones).
func tresGPUs(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	total, typed := -1, 0
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" {
			return 0, fmt.Errorf("%s is not KEY=VALUE", quoteField(item))
		}
		if k != "gres/gpu" && !strings.HasPrefix(k, "gres/gpu:") {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return 0, fmt.Errorf("%s: %s is not a GPU count", k, quoteField(v))
		}
		if k == "gres/gpu" {
			total = n
		} else {
			typed += n
		}
	}
	if total >= 0 {
		return total, nil
	}
	return typed, nil
}

// ImportOptions configures Import.
type ImportOptions struct {
	// Throughputs is the matrix job types are drawn from and steps are
	// priced with.
	Throughputs optimizer.Throughputs
	// ReferenceType is the GPU type a recorded duration is taken to have
	// run on (default DefaultReferenceType).
	ReferenceType string
	// Seed makes the job-type draw reproducible.
	Seed int64
	// MaxGPUs caps a job's GPUs (0 keeps every count). Gavel's matrix
	// measures at most 8 workers, so `hadar trace import` caps at 8.
	MaxGPUs int
	// From and To keep the jobs submitted in [From, To); a zero time is
	// unbounded.
	From, To time.Time
}

// ImportReport counts what Import did.
type ImportReport struct {
	// Read is the number of data lines of the source.
	Read int
	// Jobs is the number of jobs in the trace.
	Jobs int
	// Skipped counts the lines not imported, by reason: the parser's and
	// the window's.
	Skipped map[string]int
	// Capped counts the jobs whose GPUs were capped to MaxGPUs.
	Capped int
	// Start is the submit time of the first job, second 0 of the trace.
	Start time.Time
	// ScaleFactors counts the trace's jobs by GPUs.
	ScaleFactors map[int]int
	// JobTypes counts the trace's jobs by drawn job type.
	JobTypes map[string]int
}

// Import converts real job records to a trace in Gavel's format, the way
// Gavel's Philly-derived generator makes a job (Generate), with the
// recorded arrival, GPU count and duration in place of drawn ones:
//
//   - only jobs submitted in [From, To) are kept; arrival = submit time
//     minus the first kept job's, so the trace starts at 0;
//   - GPUs above MaxGPUs are capped to MaxGPUs (the job keeps its
//     duration, so its GPU-hours shrink);
//   - the job type is drawn uniformly (seeded PCG, in arrival order) among
//     the matrix's types measured on the reference type at w GPUs, w being
//     the largest count up to the job's GPUs that any type is measured at,
//     and above 1 for a multi-GPU job: the distributed types, as Gavel's
//     generator draws (on Gavel's matrix ResNet-18/50, Transformer and LM
//     for 2, 4 and 8 GPUs). If the matrix has no multi-GPU measurement on
//     the reference type, every type measured at 1 GPU is drawn from;
//   - total_steps = duration x the type's throughput on the reference type
//     at the job's GPU count (optimizer.Throughputs.Rate: the measured
//     value, or linear scaling from the largest count below it), truncated
//     to a whole number, at least 1;
//   - command, working directory and steps argument as Generate writes
//     them; priority weight 1; no SLO.
//
// Jobs keep their source order among equal submit times. The same source
// and options always give the same trace.
func Import(src *ImportSource, opts ImportOptions) ([]TraceJob, ImportReport, error) {
	rep := ImportReport{Read: src.Lines, Skipped: map[string]int{}, ScaleFactors: map[int]int{}, JobTypes: map[string]int{}}
	for k, v := range src.Skipped {
		rep.Skipped[k] = v
	}
	if opts.MaxGPUs < 0 {
		return nil, rep, fmt.Errorf("import trace: the GPU cap must not be negative, got %d", opts.MaxGPUs)
	}
	ref := opts.ReferenceType
	if ref == "" {
		ref = DefaultReferenceType
	}
	var kept []ImportRecord
	for _, r := range src.Records {
		if (!opts.From.IsZero() && r.Submit.Before(opts.From)) || (!opts.To.IsZero() && !r.Submit.Before(opts.To)) {
			rep.Skipped[SkipWindow]++
			continue
		}
		kept = append(kept, r)
	}
	sort.SliceStable(kept, func(a, b int) bool { return kept[a].Submit.Before(kept[b].Submit) })

	// measured[w] lists the job types (sorted) measured on ref at w GPUs.
	measured := map[int][]string{}
	for _, jt := range opts.Throughputs.JobTypes() {
		for w, r := range opts.Throughputs[jt][ref] {
			if w > 0 && r > 0 && !math.IsInf(r, 0) {
				measured[w] = append(measured[w], jt)
			}
		}
	}
	if len(measured[1]) == 0 && len(kept) > 0 {
		return nil, rep, fmt.Errorf("import trace: no job type of the throughput matrix has a throughput on reference type %q with 1 GPU", ref)
	}
	counts := make([]int, 0, len(measured))
	for w, types := range measured {
		sort.Strings(types)
		counts = append(counts, w)
	}
	sort.Ints(counts)
	eligible := func(gpus int) []string {
		best := 1
		for _, w := range counts {
			if w <= gpus && (w > 1 || gpus == 1) {
				best = w
			}
		}
		return measured[best]
	}

	typeRNG := rand.New(rand.NewPCG(uint64(opts.Seed), streamJobType))
	templates := gavelTemplates()
	jobs := make([]TraceJob, 0, len(kept))
	for _, r := range kept {
		if len(jobs) == 0 {
			rep.Start = r.Submit
		}
		gpus := r.GPUs
		if opts.MaxGPUs > 0 && gpus > opts.MaxGPUs {
			gpus = opts.MaxGPUs
			rep.Capped++
		}
		types := eligible(gpus)
		jt := types[typeRNG.IntN(len(types))]
		tmpl, ok := templates[jt]
		if !ok {
			tmpl = placeholderTemplate(jt)
		}
		job := TraceJob{
			JobType:        jt,
			Command:        tmpl.Command,
			WorkingDir:     tmpl.WorkingDir,
			NumStepsArg:    tmpl.NumStepsArg,
			NeedsDataDir:   tmpl.NeedsDataDir,
			TotalSteps:     math.Max(1, math.Floor(r.Duration*opts.Throughputs.Rate(jt, ref, gpus))),
			ScaleFactor:    gpus,
			PriorityWeight: 1,
			SLO:            -1,
			Arrival:        r.Submit.Sub(rep.Start).Seconds(),
		}
		if err := job.Validate(); err != nil {
			return nil, rep, fmt.Errorf("import trace: %s:%d: job %s: %w", src.Name, r.Line, r.ID, err)
		}
		jobs = append(jobs, job)
		rep.ScaleFactors[gpus]++
		rep.JobTypes[jt]++
	}
	rep.Jobs = len(jobs)
	return jobs, rep, nil
}

// Week returns the window of week n (0-based) of src: seven days from the
// first record's submit time plus n weeks (for Philly, week 0 starts at
// PhillyEpoch, a Monday, 2017-08-14 23:27).
func (src *ImportSource) Week(n int) (from, to time.Time, err error) {
	if n < 0 {
		return from, to, fmt.Errorf("week %d: weeks count from 0", n)
	}
	if len(src.Records) == 0 {
		return from, to, fmt.Errorf("week %d: %s has no jobs to count weeks from", n, src.Name)
	}
	first := src.Records[0].Submit
	for _, r := range src.Records[1:] {
		if r.Submit.Before(first) {
			first = r.Submit
		}
	}
	const week = 7 * 24 * time.Hour
	from = first.Add(time.Duration(n) * week)
	return from, from.Add(week), nil
}
