package slurm

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Widths of the two user-controlled fields of JobFormat (%64j, %512k).
// squeue prints a field of width N as exactly N bytes (cut, or padded with
// spaces), so these fields take a fixed number of bytes whatever the user
// put in them.
const (
	JobNameWidth    = 64
	JobCommentWidth = 512
)

// JobFormat is the squeue -o format hadar reads. Slurm-generated fields come
// first, each followed by '|' (none of them can contain '|' or a newline);
// the two fields users control, the job name (%j) and the comment (%k), come
// last and have fixed widths, so a record is
//
//	<14 Slurm fields, each ending in '|'> <64 bytes of name> '|' <512 bytes of comment> '\n'
//
// and its end is found by counting bytes, never by looking at user text:
// '|', quotes, newlines or a whole forged record inside a name or comment
// stay inside that field. Longer names and comments are cut (see
// Job.CommentTruncated).
const JobFormat = "%A|%F|%K|%u|%T|%D|%V|%S|%M|%b|%N|%r|%Q|%E|%64j|%512k"

// JobQueryArgs is the argv of the one command hadar runs to list jobs: every
// partition (-a), one line per array task (-r, so pending tasks can be
// addressed as "<array>_<task>"), the states that hold or wait for
// resources, no header.
var JobQueryArgs = []string{"squeue", "-h", "-a", "-r", "-t", "PD,R,S,CG,CF", "-o", JobFormat}

// Job is one row of squeue.
type Job struct {
	// JobID is the job's own id (%A). Pending array tasks that Slurm has not
	// split off yet share their array's record id.
	JobID string
	// ArrayJobID is the array's id (%F); equal to JobID for other jobs.
	ArrayJobID string
	// ArrayTaskID is the task id (%K); "" for jobs that are not array tasks.
	// Without squeue -r a pending array shows its task list ("0,2").
	ArrayTaskID string
	User        string
	// State is Slurm's long state name: PENDING, RUNNING, SUSPENDED, ...
	State string
	// NumNodes is the number of nodes requested or allocated (%D).
	NumNodes int
	// SubmitTime and StartTime; zero when Slurm prints N/A or Unknown. For
	// a pending job StartTime is its begin time while that is in the future
	// (--begin, scontrol update StartTime=, the lease of job_submit.lua), or
	// the start the backfill scheduler expects.
	SubmitTime time.Time
	StartTime  time.Time
	// TimeUsed is the run time so far (%M).
	TimeUsed time.Duration
	// GresRaw is the requested GRES as squeue prints it (%b), e.g.
	// "gres:gpu:2"; Gres is its parsed form. Jobs that asked with --gpus
	// show N/A here (see JobDetail.TresPerJob).
	GresRaw string
	Gres    []GRES
	// NodeList is the allocated nodes as a host list ("node[1-2]"); Nodes is
	// its expansion. Empty for pending jobs.
	NodeList string
	Nodes    []string
	// Reason is why a pending job waits (JobHeldUser, Resources, ...); None otherwise.
	Reason string
	// Priority is the job's priority as the site's priority plugin computed
	// it (%Q; multifactor: fairshare, age, QOS, partition, nice); 0 for a
	// held job.
	Priority int64
	// Dependency is the job's remaining dependencies (%E, e.g.
	// "afterok:12(unfulfilled)"); "" when it has none left.
	Dependency string
	// Name and Comment are user text, byte for byte (possibly not UTF-8),
	// without squeue's padding. "(null)" (no comment) reads as "".
	Name    string
	Comment string
	// CommentTruncated is true when the comment filled all JobCommentWidth
	// bytes, so it may have been cut.
	CommentTruncated bool
	// Incomplete is set when a field other than the identity failed to
	// parse (the failure is in the []error of ParseJobs); such a job must
	// not be placed.
	Incomplete bool
}

// ID is the id to give scontrol for this job: "<array>_<task>" for an array
// task, the job id otherwise.
func (j Job) ID() string {
	if j.ArrayTaskID != "" && allDigits(j.ArrayTaskID) && j.ArrayJobID != "" {
		return j.ArrayJobID + "_" + j.ArrayTaskID
	}
	return j.JobID
}

// ParseJobs parses the output of JobQueryArgs.
//
// Records that cannot be read are skipped and reported in the []error (as
// *ParseError); the others are returned. A record whose non-identity fields
// fail is returned with Incomplete set, and reported too.
func ParseJobs(r io.Reader) ([]Job, []error) {
	return ParseJobsFormat(r, JobFormat)
}

// ParseJobsFormat parses squeue output produced with -h -o format. It
// understands the letters of JobFormat (others are ignored) and needs %A.
// Formats whose user-controlled fields are not fixed-width and last are read
// the same way, but a '|' or newline in a name or comment then breaks or
// forges records: only JobFormat is safe against hostile jobs.
func ParseJobsFormat(r io.Reader, format string) ([]Job, []error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, []error{fmt.Errorf("reading squeue output: %w", err)}
	}
	l, err := squeueLayout(format)
	if err != nil {
		return nil, []error{err}
	}
	col := map[string]int{}
	for i, f := range l.fields {
		if _, dup := col[f.name]; !dup {
			col[f.name] = i
		}
	}
	if _, ok := col["A"]; !ok {
		return nil, []error{fmt.Errorf("squeue format %q lacks %%A", format)}
	}
	commentWidth := 0
	if i, ok := col["k"]; ok {
		commentWidth = l.fields[i].width
	}

	var jobs []Job
	var errs errCollector
	seen := map[string]int{}
	l.records(b, func(line int, vals []string, _ []bool) {
		get := func(letter string) (string, bool) {
			if i, ok := col[letter]; ok {
				return vals[i], true
			}
			return "", false
		}
		job, jerrs, fatal := buildJob(get, commentWidth)
		for _, e := range jerrs {
			e.Line = line
			errs.add(e)
		}
		if fatal {
			return
		}
		id := job.ID()
		if prev, dup := seen[id]; dup {
			errs.add(&ParseError{Line: line, Record: id,
				Err: fmt.Errorf("%w: job %s already listed on line %d", ErrDuplicate, id, prev)})
			return
		}
		seen[id] = line
		jobs = append(jobs, job)
	}, func(line int, text string, err error) {
		errs.add(&ParseError{Line: line, Input: snippet(text), Err: fmt.Errorf("%w: %v", ErrMalformed, err)})
	})
	return jobs, errs.result()
}

var (
	reJobID    = regexp.MustCompile(`^[0-9]{1,10}$`)
	reTaskList = regexp.MustCompile(`^[0-9][0-9,\-%]*$`)
	reState    = regexp.MustCompile(`^[A-Z][A-Z_]*$`)
)

// buildJob turns one record's fields into a Job. fatal means the identity
// could not be read and the record must be skipped.
func buildJob(get func(string) (string, bool), commentWidth int) (job Job, errs []*ParseError, fatal bool) {
	fail := func(field, input string, err error) {
		errs = append(errs, &ParseError{Record: job.JobID, Field: field, Input: snippet(input), Err: err})
	}
	id, _ := get("A")
	if !reJobID.MatchString(id) {
		fail("%A", id, fmt.Errorf("%w: job id is not a number", ErrMalformed))
		return job, errs, true
	}
	job.JobID = id
	job.ArrayJobID = id
	if v, ok := get("F"); ok {
		if !reJobID.MatchString(v) {
			fail("%F", v, fmt.Errorf("%w: array job id is not a number", ErrMalformed))
			return job, errs, true
		}
		job.ArrayJobID = v
	}
	if v, ok := get("K"); ok && v != "N/A" {
		if !reTaskList.MatchString(v) {
			fail("%K", v, fmt.Errorf("%w: bad array task id", ErrMalformed))
			return job, errs, true
		}
		job.ArrayTaskID = v
	}
	if v, ok := get("T"); ok {
		if !reState.MatchString(v) {
			fail("%T", v, fmt.Errorf("%w: bad state", ErrMalformed))
			return job, errs, true
		}
		job.State = v
	}
	if v, ok := get("u"); ok {
		if v == "" || strings.ContainsAny(v, " \t\n") {
			fail("%u", v, fmt.Errorf("%w: bad user name", ErrMalformed))
			return job, errs, true
		}
		job.User = v
	}

	soft := func(field, input string, err error) {
		fail(field, input, err)
		job.Incomplete = true
	}
	if v, ok := get("D"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			soft("%D", v, fmt.Errorf("node count is not a number"))
		}
		job.NumNodes = n
	}
	if v, ok := get("V"); ok {
		t, err := parseSlurmTime(v)
		if err != nil {
			soft("%V", v, err)
		}
		job.SubmitTime = t
	}
	if v, ok := get("S"); ok {
		t, err := parseSlurmTime(v)
		if err != nil {
			soft("%S", v, err)
		}
		job.StartTime = t
	}
	if v, ok := get("M"); ok {
		d, err := parseSlurmDuration(v)
		if err != nil {
			soft("%M", v, err)
		}
		job.TimeUsed = d
	}
	if v, ok := get("b"); ok {
		job.GresRaw = v
		g, err := ParseGRES(v)
		if err != nil {
			soft("%b", v, err)
		}
		job.Gres = g
	}
	if v, ok := get("N"); ok {
		job.NodeList = v
		nodes, err := ExpandHostlist(v)
		if err != nil {
			soft("%N", v, err)
		}
		job.Nodes = nodes
	}
	if v, ok := get("r"); ok {
		job.Reason = v
	}
	if v, ok := get("Q"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			soft("%Q", v, fmt.Errorf("%w: priority is not a number", ErrMalformed))
		}
		job.Priority = n
	}
	if v, ok := get("E"); ok && v != "(null)" {
		job.Dependency = v
	}
	if v, ok := get("j"); ok {
		job.Name = v
	}
	if v, ok := get("k"); ok {
		job.Comment = v
		if v == "(null)" {
			job.Comment = ""
		}
		job.CommentTruncated = commentWidth > 0 && len(v) >= commentWidth
	}
	return job, errs, false
}

// parseSlurmTime reads Slurm's standard time format (SLURM_TIME_FORMAT=standard,
// which ExecRunner sets) in local time. N/A, Unknown, None and "" give the
// zero time.
func parseSlurmTime(s string) (time.Time, error) {
	switch s {
	case "", "N/A", "Unknown", "None", "(null)":
		return time.Time{}, nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("not a Slurm time")
	}
	return t, nil
}

// parseSlurmDuration reads [days-][hours:]minutes:seconds (squeue %M,
// scontrol RunTime). INVALID, N/A and "" give 0 without an error.
func parseSlurmDuration(s string) (time.Duration, error) {
	switch s {
	case "", "INVALID", "N/A", "UNLIMITED", "Partition_Limit", "NOT_SET":
		return 0, nil
	}
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("not a duration")
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 1 || len(parts) > 3 {
		return 0, fmt.Errorf("not a duration")
	}
	var nums [3]int
	off := 3 - len(parts)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || len(p) > 6 {
			return 0, fmt.Errorf("not a duration")
		}
		nums[off+i] = n
	}
	if len(parts) == 1 && days == 0 {
		return 0, fmt.Errorf("not a duration")
	}
	return time.Duration(days)*24*time.Hour + time.Duration(nums[0])*time.Hour +
		time.Duration(nums[1])*time.Minute + time.Duration(nums[2])*time.Second, nil
}
