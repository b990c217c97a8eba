package sim

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/hadar-sched/hadar/optimizer"
)

// TraceJob is one job of a trace, one line of Gavel's trace format: ten
// tab-separated fields in the order of the struct, then hadar's three
// optional ones (user, account, QOS).
type TraceJob struct {
	// JobType is the row of the throughput matrix ("ResNet-50 (batch size 64)").
	JobType string
	// Command, WorkingDir and NumStepsArg tell a real cluster how to run the
	// job (Gavel leaves a %s in Command for the data directory); the
	// simulator ignores them.
	Command     string
	WorkingDir  string
	NumStepsArg string
	// NeedsDataDir is Gavel's needs_data_dir flag (0 or 1 in the file).
	NeedsDataDir bool
	// TotalSteps is the job's work in training steps; always positive.
	TotalSteps float64
	// ScaleFactor is the number of workers (GPUs) the job asks for; at least 1.
	ScaleFactor int
	// PriorityWeight is the job's weight; positive (Gavel uses 1 or 5).
	PriorityWeight float64
	// SLO is the job's SLO as a multiple of its isolated duration; negative
	// (Gavel writes -1.000000) means none.
	SLO float64
	// Arrival is the arrival time in seconds from the start of the trace.
	Arrival float64
	// User, Account and QOS are who submitted the job and under which
	// account and QOS (sacct's User, Account, QOS; "" when not known):
	// `hadar simulate --layout --site` runs it under them, counting it
	// against the site's limits and fairshare.
	User, Account, QOS string
}

// traceFieldNames are Gavel's names for the ten fields, in file order.
var traceFieldNames = [...]string{
	"job_type", "command", "working_dir", "num_steps_arg", "needs_data_dir",
	"total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time_s",
	"user", "account", "qos",
}

// numTraceFields is the fields of Gavel's format; numSiteTraceFields with
// hadar's user, account and QOS.
const (
	numTraceFields     = 10
	numSiteTraceFields = len(traceFieldNames)
)

// maxTraceLine bounds one line of a trace file (Gavel's lines are < 300 bytes).
const maxTraceLine = 1 << 20

// ErrUnknownTrace is returned by EmbeddedTrace and LoadTrace for a name that
// is not an embedded trace.
var ErrUnknownTrace = errors.New("unknown embedded trace")

// TraceError locates a malformed line of a trace.
type TraceError struct {
	// Name is the trace's name (usually its path), Line the 1-based line.
	Name string
	Line int
	// Field is the 1-based field, or 0 when the line as a whole is wrong.
	Field int
	Err   error
}

func (e *TraceError) Error() string {
	if e.Field == 0 {
		return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: field %d (%s): %v", e.Name, e.Line, e.Field, traceFieldNames[e.Field-1], e.Err)
}

func (e *TraceError) Unwrap() error { return e.Err }

// ParseTrace reads a trace in Gavel's format: one job a line, ten
// tab-separated fields (job_type, command, working_dir, num_steps_arg,
// needs_data_dir, total_steps, scale_factor, priority_weight, SLO,
// arrival_time_s), or thirteen with hadar's user, account and qos (each
// may be empty: not known). Blank lines and lines whose first non-blank character is
// '#' are skipped. Jobs are returned in file order, not sorted by arrival.
// name only labels errors, which are *TraceError values such as
//
//	max_min_fairness.trace:12: field 7 (scale_factor): "x" is not an integer
func ParseTrace(r io.Reader, name string) ([]TraceJob, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxTraceLine)
	var jobs []TraceJob
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		job, field, err := parseTraceLine(text)
		if err != nil {
			return nil, &TraceError{Name: name, Line: line, Field: field, Err: err}
		}
		jobs = append(jobs, job)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &TraceError{Name: name, Line: line + 1, Err: fmt.Errorf("line longer than %d bytes", maxTraceLine)}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return jobs, nil
}

// parseTraceLine parses one job line; on error it returns the 1-based field
// at fault (0 for the line as a whole).
func parseTraceLine(text string) (TraceJob, int, error) {
	f := strings.Split(text, "\t")
	if len(f) != numTraceFields && len(f) != numSiteTraceFields {
		return TraceJob{}, 0, fmt.Errorf("got %d tab-separated fields, want %d (or %d with user, account and qos)", len(f), numTraceFields, numSiteTraceFields)
	}
	for i := 0; i < 4; i++ {
		if reason := checkTraceString(i, f[i]); reason != "" {
			return TraceJob{}, i + 1, errors.New(reason)
		}
	}
	j := TraceJob{JobType: f[0], Command: f[1], WorkingDir: f[2], NumStepsArg: f[3]}
	needs, err := parseTraceInt(f[4])
	if err != nil {
		return TraceJob{}, 5, err
	}
	j.NeedsDataDir = needs != 0
	if j.TotalSteps, err = parseTraceFloat(f[5], checkSteps); err != nil {
		return TraceJob{}, 6, err
	}
	if j.ScaleFactor, err = parseTraceInt(f[6]); err != nil {
		return TraceJob{}, 7, err
	}
	if j.ScaleFactor < 1 {
		return TraceJob{}, 7, fmt.Errorf("%s must be at least 1", quoteField(f[6]))
	}
	if j.PriorityWeight, err = parseTraceFloat(f[7], checkWeight); err != nil {
		return TraceJob{}, 8, err
	}
	if j.SLO, err = parseTraceFloat(f[8], checkFinite); err != nil {
		return TraceJob{}, 9, err
	}
	if j.Arrival, err = parseTraceFloat(f[9], checkArrival); err != nil {
		return TraceJob{}, 10, err
	}
	if len(f) == numSiteTraceFields {
		for i := numTraceFields; i < numSiteTraceFields; i++ {
			if reason := checkTraceString(i, f[i]); reason != "" {
				return TraceJob{}, i + 1, errors.New(reason)
			}
		}
		j.User, j.Account, j.QOS = f[10], f[11], f[12]
	}
	return j, 0, nil
}

func parseTraceInt(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer", quoteField(s))
	}
	return v, nil
}

func parseTraceFloat(s string, check func(float64) string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a number", quoteField(s))
	}
	if reason := check(v); reason != "" {
		return 0, fmt.Errorf("%s %s", quoteField(s), reason)
	}
	return v, nil
}

// quoteField quotes a field's text for an error, shortening long text.
func quoteField(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// checkTraceString validates string field i (0-based): no tab or line break
// anywhere, a job type that is not blank and does not read as a comment,
// and a user, account and QOS without blanks.
func checkTraceString(i int, s string) string {
	if strings.ContainsAny(s, "\t\n\r") {
		return "contains a tab or line break"
	}
	if i >= numTraceFields && strings.ContainsAny(s, " \v\f") {
		return "contains a blank"
	}
	if i == 0 {
		t := strings.TrimSpace(s)
		if t == "" {
			return "is empty"
		}
		if strings.HasPrefix(t, "#") {
			return "starts with '#' (a comment)"
		}
	}
	return ""
}

func checkFinite(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "is not finite"
	}
	return ""
}

func checkSteps(v float64) string {
	if r := checkFinite(v); r != "" {
		return r
	}
	if v <= 0 {
		return "must be positive"
	}
	return ""
}

func checkWeight(v float64) string { return checkSteps(v) }

func checkArrival(v float64) string {
	if r := checkFinite(v); r != "" {
		return r
	}
	if v < 0 {
		return "is negative"
	}
	return ""
}

// Validate reports whether j can be written to a trace and read back: the
// rules ParseTrace enforces.
func (j TraceJob) Validate() error {
	for i, s := range []string{j.JobType, j.Command, j.WorkingDir, j.NumStepsArg} {
		if reason := checkTraceString(i, s); reason != "" {
			return fmt.Errorf("%s %q %s", traceFieldNames[i], s, reason)
		}
	}
	for i, s := range []string{j.User, j.Account, j.QOS} {
		if reason := checkTraceString(numTraceFields+i, s); reason != "" {
			return fmt.Errorf("%s %q %s", traceFieldNames[numTraceFields+i], s, reason)
		}
	}
	checks := []struct {
		field int
		v     float64
		check func(float64) string
	}{
		{5, j.TotalSteps, checkSteps},
		{7, j.PriorityWeight, checkWeight},
		{8, j.SLO, checkFinite},
		{9, j.Arrival, checkArrival},
	}
	for _, c := range checks {
		if reason := c.check(c.v); reason != "" {
			return fmt.Errorf("%s %v %s", traceFieldNames[c.field], c.v, reason)
		}
	}
	if j.ScaleFactor < 1 {
		return fmt.Errorf("scale_factor %d must be at least 1", j.ScaleFactor)
	}
	return nil
}

// ReadTraceFile parses the trace file at path (see ParseTrace); errors name
// the path and line.
func ReadTraceFile(path string) ([]TraceJob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	defer f.Close()
	return ParseTrace(f, path)
}

// WriteTrace writes jobs in Gavel's format, byte for byte as Gavel writes
// them for integral steps and arrivals: whole numbers without a decimal
// point, SLO with six decimals ("-1.000000"). Every value is written so that
// ParseTrace reads back exactly the same jobs. When a job has a user,
// account or QOS, every line gets the three fields after Gavel's ten. A
// job that fails Validate is an error and nothing after it is written.
func WriteTrace(w io.Writer, jobs []TraceJob) error {
	bw := bufio.NewWriter(w)
	site := false
	for _, j := range jobs {
		site = site || j.User != "" || j.Account != "" || j.QOS != ""
	}
	for i, j := range jobs {
		if err := j.Validate(); err != nil {
			return fmt.Errorf("write trace: job %d: %w", i, err)
		}
		needs := "0"
		if j.NeedsDataDir {
			needs = "1"
		}
		fields := []string{
			j.JobType, j.Command, j.WorkingDir, j.NumStepsArg, needs,
			formatTraceFloat(j.TotalSteps), strconv.Itoa(j.ScaleFactor),
			formatTraceFloat(j.PriorityWeight), formatSLO(j.SLO),
			formatTraceFloat(j.Arrival),
		}
		if site {
			fields = append(fields, j.User, j.Account, j.QOS)
		}
		if _, err := bw.WriteString(strings.Join(fields, "\t") + "\n"); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}

// formatTraceFloat writes the shortest exact decimal, without an exponent:
// "925982" for whole numbers, as Gavel's %d does.
func formatTraceFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// formatSLO writes Gavel's %f when that is exact, else the shortest exact
// decimal.
func formatSLO(v float64) string {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	if back, err := strconv.ParseFloat(s, 64); err == nil && back == v {
		return s
	}
	return formatTraceFloat(v)
}

// EmbeddedPrefix marks an embedded trace in LoadTrace's spec:
// "gavel:max_min_fairness".
const EmbeddedPrefix = "gavel:"

// Gavel's public traces (scheduler/traces/physical_cluster at commit
// c4fa400, MIT): see traces/SOURCE.md.
//
//go:embed traces/*.trace
var embeddedTraces embed.FS

// EmbeddedTraceNames lists the embedded Gavel traces, sorted, without the
// ".trace" suffix: artifact_evaluation, debug, max_min_fairness, ...
func EmbeddedTraceNames() []string {
	entries, err := fs.ReadDir(embeddedTraces, "traces")
	if err != nil {
		panic(fmt.Sprintf("sim: embedded traces: %v", err)) // cannot happen: checked at build time
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".trace"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// EmbeddedTrace parses one of the embedded Gavel traces, by name with or
// without the ".trace" suffix ("max_min_fairness").
func EmbeddedTrace(name string) ([]TraceJob, error) {
	base := strings.TrimSuffix(name, ".trace")
	if base == "" || strings.ContainsAny(base, `/\`) {
		return nil, unknownTrace(name)
	}
	data, err := embeddedTraces.Open(path.Join("traces", base+".trace"))
	if err != nil {
		return nil, unknownTrace(name)
	}
	defer data.Close()
	return ParseTrace(data, EmbeddedPrefix+base)
}

func unknownTrace(name string) error {
	return fmt.Errorf("%w %q (embedded: %s)", ErrUnknownTrace, name, strings.Join(EmbeddedTraceNames(), ", "))
}

// LoadTrace reads a trace named the way the CLI's --trace flag names one:
// "gavel:NAME" is an embedded Gavel trace, anything else a file path.
func LoadTrace(spec string) ([]TraceJob, error) {
	if name, ok := strings.CutPrefix(spec, EmbeddedPrefix); ok {
		return EmbeddedTrace(name)
	}
	return ReadTraceFile(spec)
}

// TraceSummary describes a trace at a glance (`hadar trace show`).
type TraceSummary struct {
	Jobs int
	// JobTypes is the number of distinct job types.
	JobTypes int
	// ScaleFactors counts jobs by scale factor.
	ScaleFactors map[int]int
	// FirstArrival and LastArrival are in seconds.
	FirstArrival, LastArrival float64
	// TotalSteps sums the jobs' steps.
	TotalSteps float64
	// ReferenceType is the GPU type GPUHours is measured on.
	ReferenceType string
	// GPUHours is the work of the trace in GPU-hours on ReferenceType: the
	// sum over jobs of scale factor x steps / rate. Jobs whose rate on
	// ReferenceType is unknown are left out and counted in Unpriced.
	GPUHours float64
	Unpriced int
}

// SummarizeTrace summarises jobs; thr and ref price the work in GPU-hours
// (thr may be nil, which leaves every job unpriced).
func SummarizeTrace(jobs []TraceJob, thr optimizer.Throughputs, ref string) TraceSummary {
	s := TraceSummary{Jobs: len(jobs), ScaleFactors: map[int]int{}, ReferenceType: ref}
	types := map[string]bool{}
	for i, j := range jobs {
		types[j.JobType] = true
		s.ScaleFactors[j.ScaleFactor]++
		if i == 0 || j.Arrival < s.FirstArrival {
			s.FirstArrival = j.Arrival
		}
		if i == 0 || j.Arrival > s.LastArrival {
			s.LastArrival = j.Arrival
		}
		s.TotalSteps += j.TotalSteps
		rate := thr.Rate(j.JobType, ref, j.ScaleFactor)
		if rate <= 0 {
			s.Unpriced++
			continue
		}
		s.GPUHours += float64(j.ScaleFactor) * j.TotalSteps / rate / 3600
	}
	s.JobTypes = len(types)
	return s
}
