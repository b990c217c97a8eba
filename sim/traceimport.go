package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
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
	// State is the job's end state as sacct prints it, first word only
	// ("CANCELLED by 1000" is CANCELLED); "" when the source has none.
	State string
	// GPUType is the GPU type the source records for all of the job's
	// GPUs (sacct's gres/gpu:TYPE=N, the site's name); "" when untyped or
	// of several types.
	GPUType string
	// Requeued counts the earlier runs of the job merged into this record
	// (sacct -D prints one record per run of a requeued job), and
	// DiscardedGPUSeconds is their GPU time: work thrown away.
	Requeued            int
	DiscardedGPUSeconds float64
	// User, Account and QOS are sacct's (its last record's); "" when the
	// source has none.
	User, Account, QOS string
}

// ImportSource is what a parser read.
type ImportSource struct {
	// Name labels the source (usually its path).
	Name string
	// Records are the jobs kept, in source order.
	Records []ImportRecord
	// Lines counts the data records read (not the header, comments or
	// blank lines; a sacct record a newline in a job name split over
	// several lines counts once): every one is a record, an earlier run
	// merged into one (Merged), or counted in Skipped.
	Lines int
	// Skipped counts the records left out, by reason (the Skip* constants).
	Skipped map[string]int
	// Merged counts the records that are earlier runs of a kept job.
	Merged int
	// Dropped counts the jobs left out, by State ("" without one).
	Dropped map[string]int
	// HasState and HasRestarts say whether the source has sacct's State
	// and Restarts fields.
	HasState, HasRestarts bool
	// Duplicated counts the jobs with more than one record (sacct -D);
	// MissingRuns the jobs whose Restarts count exceeds their earlier
	// records in the file (sacct without -D, or runs before --starttime).
	Duplicated, MissingRuns int
	// FreeText names the header's fields that hold user-set text
	// (JobName, ...); Repaired counts the records with a '|' or a newline
	// in them, read by anchoring the other fields; Warnings describes the
	// first records skipped as SkipUnreadable or SkipCut, of Warned.
	FreeText []string
	Repaired int
	Warnings []string
	Warned   int
}

// Reasons a record is not imported. Every data line of a source is either
// a job of the trace or counted under one of these.
const (
	SkipStep       = "job steps (123.batch, 123.0: part of a job, not a job)"
	SkipRunning    = "still running (End Unknown)"
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
	src := &ImportSource{Name: name, Skipped: map[string]int{}, Dropped: map[string]int{}}
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
			src.Dropped[""]++
		case dur == 0:
			src.Skipped[SkipZero]++
			src.Dropped[""]++
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
	if src.Lines == 0 {
		return nil, &ImportError{Name: name, Line: 1, Err: errors.New("no job records")}
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

// ImportOptions configures Import.
type ImportOptions struct {
	// Throughputs is the matrix job types are drawn from and steps are
	// priced with.
	Throughputs optimizer.Throughputs
	// ReferenceType is the GPU type a recorded duration is taken to have
	// run on (default DefaultReferenceType), for jobs without a recorded
	// GPU type the matrix knows.
	ReferenceType string
	// IgnoreRecordedType prices every job on ReferenceType, even one whose
	// record names a GPU type the matrix has.
	IgnoreRecordedType bool
	// ResolveGPUType maps a recorded GPU type (the site's GRES name) to a
	// GPU type of the matrix; ok is false when it names none. Nil matches
	// the matrix's types ignoring case.
	ResolveGPUType func(recorded string) (gpuType string, ok bool)
	// Seed makes the job-type draw reproducible.
	Seed int64
	// MaxGPUs caps a job's GPUs (0 keeps every count). Gavel's matrix
	// measures at most 8 workers, so `hadar trace import` caps at 8.
	MaxGPUs int
	// From and To keep the jobs submitted in [From, To); a zero time is
	// unbounded.
	From, To time.Time
	// States keeps only the jobs whose State is one of these (upper case);
	// nil keeps every state. The records must have a State.
	States []string
}

// ErrNoJobs is returned by Import when no record makes a job of the trace.
var ErrNoJobs = errors.New("no job to import")

// ImportReport counts what Import did.
type ImportReport struct {
	// Read is the number of data records of the source.
	Read int
	// Jobs is the number of jobs in the trace.
	Jobs int
	// Skipped counts the records not imported, by reason: the parser's,
	// the states' and the window's. Read = Jobs + Merged + the skipped.
	Skipped map[string]int
	// Kept and Dropped count the jobs in the trace and those not in it,
	// by State ("" for a source without one).
	Kept, Dropped map[string]int
	// Merged counts the earlier runs of requeued jobs merged into the
	// trace's jobs (RequeuedJobs of them), DiscardedGPUSeconds their GPU
	// time.
	Merged, RequeuedJobs int
	DiscardedGPUSeconds  float64
	// Capped counts the jobs whose GPUs were capped to MaxGPUs.
	Capped int
	// Start is the submit time of the first job, second 0 of the trace.
	Start time.Time
	// ScaleFactors counts the trace's jobs by GPUs.
	ScaleFactors map[int]int
	// JobTypes counts the trace's jobs by drawn job type.
	JobTypes map[string]int
	// PricedOn counts the trace's jobs by the GPU type their duration was
	// priced on; Unmatched counts the recorded GPU types the matrix has
	// not (their jobs were priced on ReferenceType).
	PricedOn, Unmatched map[string]int
}

// Import converts real job records to a trace in Gavel's format, the way
// Gavel's Philly-derived generator makes a job (Generate), with the
// recorded arrival, GPU count and duration in place of drawn ones:
//
//   - only jobs whose State is in States (if set) and submitted in
//     [From, To) are kept; arrival = submit time minus the first kept
//     job's, so the trace starts at 0;
//   - GPUs above MaxGPUs are capped to MaxGPUs (the job keeps its
//     duration, so its GPU-hours shrink);
//   - the job's pricing type is its recorded GPU type when the matrix has
//     it (ResolveGPUType, measured for some job type at 1 GPU), else the
//     reference type;
//   - the job type is drawn uniformly (seeded PCG, in arrival order) among
//     the matrix's types measured on the pricing type at w GPUs, w being
//     the largest count up to the job's GPUs that any type is measured at,
//     and above 1 for a multi-GPU job: the distributed types, as Gavel's
//     generator draws (on Gavel's matrix ResNet-18/50, Transformer and LM
//     for 2, 4 and 8 GPUs). If the matrix has no multi-GPU measurement on
//     the pricing type, every type measured at 1 GPU is drawn from;
//   - total_steps = duration x the type's throughput on the pricing type
//     at the job's GPU count (optimizer.Throughputs.Rate: the measured
//     value, or linear scaling from the largest count below it), truncated
//     to a whole number, at least 1;
//   - command, working directory and steps argument as Generate writes
//     them; priority weight 1; no SLO; the record's user, account and QOS
//     (sacct's User, Account, QOS) when it has them.
//
// Jobs keep their source order among equal submit times. The same source
// and options always give the same trace. No job kept is an error
// wrapping ErrNoJobs, returned with the report.
func Import(src *ImportSource, opts ImportOptions) ([]TraceJob, ImportReport, error) {
	rep := ImportReport{
		Read: src.Lines, Skipped: map[string]int{}, Kept: map[string]int{}, Dropped: map[string]int{},
		ScaleFactors: map[int]int{}, JobTypes: map[string]int{}, PricedOn: map[string]int{}, Unmatched: map[string]int{},
	}
	maps.Copy(rep.Skipped, src.Skipped)
	maps.Copy(rep.Dropped, src.Dropped)
	if opts.MaxGPUs < 0 {
		return nil, rep, fmt.Errorf("import trace: the GPU cap must not be negative, got %d", opts.MaxGPUs)
	}
	ref := opts.ReferenceType
	if ref == "" {
		ref = DefaultReferenceType
	}
	var states map[string]bool
	if opts.States != nil {
		states = map[string]bool{}
		for _, s := range opts.States {
			states[s] = true
		}
	}
	var kept []ImportRecord
	for _, r := range src.Records {
		switch {
		case states != nil && r.State == "":
			return nil, rep, fmt.Errorf("import trace: %s:%d: job %s has no State to choose by (sacct --format needs State)", src.Name, r.Line, r.ID)
		case states != nil && !states[r.State]:
			rep.Skipped[SkipState] += 1 + r.Requeued
			rep.Dropped[r.State]++
		case (!opts.From.IsZero() && r.Submit.Before(opts.From)) || (!opts.To.IsZero() && !r.Submit.Before(opts.To)):
			rep.Skipped[SkipWindow] += 1 + r.Requeued
			rep.Dropped[r.State]++
		default:
			kept = append(kept, r)
		}
	}
	sort.SliceStable(kept, func(a, b int) bool { return kept[a].Submit.Before(kept[b].Submit) })

	// measured[gt][w] lists the job types (sorted) measured on GPU type gt
	// at w GPUs; counts[gt] the ws, ascending.
	measured := map[string]map[int][]string{}
	counts := map[string][]int{}
	for _, jt := range opts.Throughputs.JobTypes() {
		for gt, byW := range opts.Throughputs[jt] {
			for w, r := range byW {
				if w > 0 && r > 0 && !math.IsInf(r, 0) {
					if measured[gt] == nil {
						measured[gt] = map[int][]string{}
					}
					measured[gt][w] = append(measured[gt][w], jt)
				}
			}
		}
	}
	for gt, byW := range measured {
		for w, types := range byW {
			sort.Strings(types)
			counts[gt] = append(counts[gt], w)
		}
		sort.Ints(counts[gt])
	}
	if len(measured[ref][1]) == 0 && len(kept) > 0 {
		return nil, rep, fmt.Errorf("import trace: no job type of the throughput matrix has a throughput on reference type %q with 1 GPU", ref)
	}
	eligible := func(gt string, gpus int) []string {
		best := 1
		for _, w := range counts[gt] {
			if w <= gpus && (w > 1 || gpus == 1) {
				best = w
			}
		}
		return measured[gt][best]
	}
	resolve := opts.ResolveGPUType
	if resolve == nil {
		resolve = func(recorded string) (string, bool) {
			for gt := range measured {
				if strings.EqualFold(gt, recorded) {
					return gt, true
				}
			}
			return "", false
		}
	}
	pricingType := func(r ImportRecord) string {
		if opts.IgnoreRecordedType || r.GPUType == "" {
			return ref
		}
		if gt, ok := resolve(r.GPUType); ok && len(measured[gt][1]) > 0 {
			return gt
		}
		rep.Unmatched[r.GPUType]++
		return ref
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
		gt := pricingType(r)
		types := eligible(gt, gpus)
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
			TotalSteps:     math.Max(1, math.Floor(r.Duration*opts.Throughputs.Rate(jt, gt, gpus))),
			ScaleFactor:    gpus,
			PriorityWeight: 1,
			SLO:            -1,
			Arrival:        r.Submit.Sub(rep.Start).Seconds(),
			User:           r.User,
			Account:        r.Account,
			QOS:            r.QOS,
		}
		if err := job.Validate(); err != nil {
			return nil, rep, fmt.Errorf("import trace: %s:%d: job %s: %w", src.Name, r.Line, r.ID, err)
		}
		jobs = append(jobs, job)
		rep.ScaleFactors[gpus]++
		rep.JobTypes[jt]++
		rep.PricedOn[gt]++
		rep.Kept[r.State]++
		if r.Requeued > 0 {
			rep.RequeuedJobs++
			rep.Merged += r.Requeued
			rep.DiscardedGPUSeconds += r.DiscardedGPUSeconds
		}
	}
	rep.Jobs = len(jobs)
	if rep.Jobs == 0 {
		why := fmt.Sprintf("none of the %d records of %s makes a job", src.Lines, src.Name)
		if len(src.Records) > 0 {
			why = fmt.Sprintf("none of the %d jobs of %s is kept", len(src.Records), src.Name)
			if !opts.From.IsZero() || !opts.To.IsZero() {
				first, last := src.Records[0].Submit, src.Records[0].Submit
				for _, r := range src.Records {
					if r.Submit.Before(first) {
						first = r.Submit
					}
					if r.Submit.After(last) {
						last = r.Submit
					}
				}
				why += fmt.Sprintf(" (they were submitted from %s to %s)", first.Format(time.DateTime), last.Format(time.DateTime))
			}
		}
		return nil, rep, fmt.Errorf("import trace: %w: %s", ErrNoJobs, why)
	}
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
