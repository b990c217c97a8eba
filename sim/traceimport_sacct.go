package sim

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SacctFormat is the --format hadar recommends for `sacct --parsable2`:
// the fields ParseSacct reads and no free text a user sets (a job name can
// hold a '|' or a newline; see ParseSacct).
//
//	sacct --allusers --duplicates --parsable2 --starttime 2025-01-01 --endtime 2025-02-01 \
//	    --format=JobID,Submit,Start,End,State,AllocTRES,ReqTRES,User,Account,QOS
const SacctFormat = "JobID,Submit,Start,End,State,AllocTRES,ReqTRES,User,Account,QOS"

// sacctNeeded are the fields ParseSacct cannot do without.
var sacctNeeded = []string{"JobID", "Submit", "Start", "End", "AllocTRES"}

// sacctOptional are the fields ParseSacct reads when the header has them.
var sacctOptional = []string{"State", "ReqTRES", "Restarts", "User", "Account", "QOS"}

// sacctFreeText are sacct's fields that hold text a user sets (names,
// comments, paths, the submit command line): they may contain '|' and
// newlines, which sacct prints as they are.
var sacctFreeText = map[string]bool{
	"jobname": true, "comment": true, "admincomment": true, "systemcomment": true,
	"submitline": true, "workdir": true, "constraints": true, "wckey": true,
	"extra": true, "container": true, "stdin": true, "stdout": true, "stderr": true,
}

// SacctStates are the job states sacct prints (sacct(1), JOB STATE CODES).
var SacctStates = []string{
	"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
	"PENDING", "PREEMPTED", "RUNNING", "REQUEUED", "RESIZING", "REVOKED", "SUSPENDED", "TIMEOUT",
}

// sacctTime is the layout of sacct's times (SLURM_TIME_FORMAT's default,
// ISO 8601 without a zone).
const sacctTime = "2006-01-02T15:04:05"

// maxSacctRecord bounds a record rejoined from several lines (a newline in
// a job name): Slurm caps a job name at 1024 bytes, comments at a few KiB.
const maxSacctRecord = 64 << 10

// sacctHeader is what the header line says about the data lines.
type sacctHeader struct {
	col      map[string]int // lower-case field name -> index
	names    []string       // the fields as the header spells them
	width    int
	trailing bool // --parsable: every line ends with '|'
	// freeLo and freeHi are the first and last free-text columns, -1
	// without any: a record with too many fields is read from the left
	// up to freeLo and from the right after freeHi.
	freeLo, freeHi int
	free           []string
}

func readSacctHeader(text string) (*sacctHeader, error) {
	f := strings.Split(text, "|")
	h := &sacctHeader{col: map[string]int{}, freeLo: -1, freeHi: -1}
	if len(f) > 1 && f[len(f)-1] == "" {
		h.trailing = true
		f = f[:len(f)-1]
	}
	for i, name := range f {
		name = strings.TrimSpace(name)
		key := strings.ToLower(name)
		h.col[key] = i
		h.names = append(h.names, name)
		if sacctFreeText[key] {
			if h.freeLo < 0 {
				h.freeLo = i
			}
			h.freeHi = i
			h.free = append(h.free, name)
		}
	}
	h.width = len(f)
	var missing []string
	for _, need := range sacctNeeded {
		if _, ok := h.col[strings.ToLower(need)]; !ok {
			missing = append(missing, need)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the header (first line) has no %s field: run sacct --parsable2 --format=%s (without --noheader)", strings.Join(missing, ", "), SacctFormat)
	}
	return h, nil
}

// split cuts a data line into fields, --parsable's trailing '|' removed.
func (h *sacctHeader) split(text string) []string {
	f := strings.Split(text, "|")
	if h.trailing && len(f) > 1 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	return f
}

// field returns the named field of a record of len(f) >= h.width fields;
// ok is false when the field is absent from the header, or lies between
// two free-text columns of a record with too many fields (which '|' is
// the free text's own cannot be told).
func (h *sacctHeader) field(f []string, name string) (v string, ok bool) {
	i, ok := h.col[strings.ToLower(name)]
	if !ok {
		return "", false
	}
	extra := len(f) - h.width
	switch {
	case extra == 0 || i < h.freeLo:
	case h.freeLo >= 0 && i > h.freeHi:
		i += extra
	default:
		return "", false
	}
	return strings.TrimSpace(f[i]), true
}

// sacctRow is one job record (not a step) of sacct's output.
type sacctRow struct {
	id, state      string
	line           int
	submit         time.Time
	start, end     time.Time
	started, ended bool
	gpus           int
	gpuType        string
	restarts       int // -1: no Restarts field
	repaired       bool
	// user, account and qos: "" without the fields
	user, account, qos string
}

// Reasons a sacct record is not imported, beside the Skip* of ParseSacct's
// rules.
const (
	SkipUnreadable   = "records that do not read (the file has a free-text field such as JobName: see the warnings)"
	SkipCut          = "records cut short at the end of the file"
	SkipRequeuedLast = "last run requeued, its next run not in the file (pending again, or after --endtime)"
	SkipResized      = "resized while running (a RESIZING record): GPU count changed mid-run"
	SkipState        = "end state not chosen by --states"
)

// maxWarnings bounds the warnings an ImportSource keeps.
const maxWarnings = 10

// warn notes a record skipped for not reading.
func (src *ImportSource) warn(msg string) {
	src.Warned++
	if len(src.Warnings) < maxWarnings {
		src.Warnings = append(src.Warnings, msg)
	}
}

// ParseSacct reads a site's job history as `sacct --parsable2` prints it
// (Slurm 22.05 and later; --parsable's trailing '|' is accepted too): a
// header line naming the fields, then one line per job record and per job
// step, fields separated by '|'. It needs the fields JobID, Submit, Start,
// End and AllocTRES, in any order, and reads State, ReqTRES, Restarts,
// User, Account and QOS when present (SacctFormat); other fields are
// ignored. Blank lines and
// lines starting with '#' are skipped. The rules:
//
//   - a job step (JobID with a '.': 123.batch, 123.extern, 123.0, 123_4.0)
//     is counted in Skipped, not read as a job; array tasks (123_4) and
//     heterogeneous job components (123+0) are jobs of their own;
//   - the records of one JobID (sacct -D prints one per run of a requeued
//     job, the earlier ones in State REQUEUED or PREEMPTED) are one job:
//     its submit time is the earliest record's, its run (duration, GPUs,
//     State) the last record's (latest Submit); the earlier runs are
//     work thrown away, counted in Merged and the record's
//     DiscardedGPUSeconds. Runs that overlap, or a record submitted
//     before an earlier run ended, are not one requeued job: an error;
//   - the job's GPUs are AllocTRES's gres/gpu=N, or, if it lists only typed
//     counts, the sum of its gres/gpu:TYPE=N; a job without GPUs is
//     skipped. Its GPU type is the TYPE when all its GPUs are of one type
//     (AllocTRES's, else ReqTRES's);
//   - its duration is End minus Start; Start None or Unknown (never started:
//     cancelled while pending, or an unstarted array range 123_[5-9]) and
//     End Unknown (still running) are skipped, as is a job that ran 0 s and
//     one whose last record is REQUEUED (its next run is not in the file);
//     a Submit that does not read, or an End before Start, is an error.
//
// Free text: a field a user sets (JobName, Comment, SubmitLine, WorkDir,
// ...) may hold '|' or a newline, which sacct prints as they are. When the
// header has such a field, a record with too many fields is read from both
// ends (the fields left of the first free-text column from the left, those
// right of the last from the right), a line with too few fields is joined
// with the lines after it until the record is whole, and a record that
// still does not read is counted in Skipped under SkipUnreadable with a
// warning naming its line, instead of stopping the import. A user who
// writes whole lines into a job name can still pass one off as a record of
// its own, which is why SacctFormat has no free text. Without free-text
// fields, a line with the wrong number of fields is an error.
//
// Every error is an *ImportError with the line and field. A file with no
// record after the header is an error.
func ParseSacct(r io.Reader, name string) (*ImportSource, error) {
	src := &ImportSource{Name: name, Skipped: map[string]int{}, Dropped: map[string]int{}}
	var h *sacctHeader
	var rows []sacctRow
	// pending holds a record cut by a newline in a free-text field.
	var pending strings.Builder
	pendingLine, pendingLines, pendingPipes := 0, 0, 0
	lastLine := 0

	// fail skips a record that does not read when the file has free text a
	// user could have put there, and stops the import otherwise.
	fail := func(err *ImportError) error {
		if h.freeLo < 0 {
			return err
		}
		src.Skipped[SkipUnreadable]++
		src.warn(err.Error())
		return nil
	}
	record := func(line int, text string, repaired bool) error {
		src.Lines++
		f := h.split(text)
		if len(f) > h.width {
			repaired = true
		}
		if len(f) != h.width && h.freeLo < 0 {
			return &ImportError{Name: name, Line: line, Err: fmt.Errorf("got %d '|'-separated fields, the header has %d", len(f), h.width)}
		}
		if repaired {
			src.Repaired++
		}
		fieldErr := func(field string, err error) error {
			return fail(&ImportError{Name: name, Line: line, Field: field, Err: err})
		}
		apart := func(field string) error {
			return fail(&ImportError{Name: name, Line: line, Field: field, Err: fmt.Errorf("cannot be told apart from the free text of %s (a '|' in it)", strings.Join(h.free, ", "))})
		}
		id, ok := h.field(f, "JobID")
		if !ok {
			return apart("JobID")
		}
		if id == "" {
			return fieldErr("JobID", errors.New("is empty"))
		}
		if id[0] < '0' || id[0] > '9' {
			return fieldErr("JobID", fmt.Errorf("%s is not a job id", quoteField(id)))
		}
		if strings.Contains(id, ".") {
			src.Skipped[SkipStep]++
			return nil
		}
		row := sacctRow{id: id, line: line, restarts: -1, repaired: repaired}
		vals := map[string]string{}
		for _, fld := range append(append([]string{}, sacctNeeded[1:]...), sacctOptional...) {
			if _, present := h.col[strings.ToLower(fld)]; !present {
				continue
			}
			v, ok := h.field(f, fld)
			if !ok {
				return apart(fld)
			}
			vals[fld] = v
		}
		var err error
		if row.submit, ok, err = parseSacctTime(vals["Submit"]); err != nil {
			return fieldErr("Submit", err)
		} else if !ok {
			return fieldErr("Submit", fmt.Errorf("%s: a job always has a submit time", quoteField(vals["Submit"])))
		}
		if row.start, row.started, err = parseSacctTime(vals["Start"]); err != nil {
			return fieldErr("Start", err)
		}
		if row.end, row.ended, err = parseSacctTime(vals["End"]); err != nil {
			return fieldErr("End", err)
		}
		if row.started && row.ended && row.end.Before(row.start) {
			return fieldErr("End", fmt.Errorf("%s is before Start %s", vals["End"], vals["Start"]))
		}
		var types map[string]int
		if row.gpus, types, err = tresGPUs(vals["AllocTRES"]); err != nil {
			return fieldErr("AllocTRES", err)
		}
		row.gpuType = singleType(types, row.gpus)
		if req, present := vals["ReqTRES"]; present && row.gpuType == "" && len(types) == 0 {
			_, reqTypes, err := tresGPUs(req)
			if err != nil {
				return fieldErr("ReqTRES", err)
			}
			row.gpuType = singleType(reqTypes, -1)
		}
		if st, present := vals["State"]; present {
			row.state = sacctState(st)
		}
		for _, f := range []struct {
			name string
			to   *string
		}{{"User", &row.user}, {"Account", &row.account}, {"QOS", &row.qos}} {
			v := vals[f.name]
			if strings.ContainsAny(v, " \t") {
				return fieldErr(f.name, fmt.Errorf("%s has a blank: not a name sacct prints", quoteField(v)))
			}
			*f.to = v
		}
		if rs, present := vals["Restarts"]; present && rs != "" {
			n, err := strconv.Atoi(rs)
			if err != nil || n < 0 {
				return fieldErr("Restarts", fmt.Errorf("%s is not a count", quoteField(rs)))
			}
			row.restarts = n
		}
		rows = append(rows, row)
		return nil
	}

	err := scanLines(r, name, func(line int, text string) error {
		lastLine = line
		if h != nil && pendingLines > 0 {
			// A record cut by a newline: the rest of it follows, whatever
			// the next line looks like.
			pending.WriteByte('\n')
			pending.WriteString(text)
			pendingLines++
			// Counted line by line: re-splitting the whole record each
			// time is quadratic in a name of many newlines.
			pendingPipes += strings.Count(text, "|")
			fields := pendingPipes + 1
			if h.trailing && strings.HasSuffix(text, "|") {
				fields--
			}
			if fields >= h.width {
				t := pending.String()
				pending.Reset()
				pendingLines = 0
				return record(pendingLine, t, true)
			}
			if pending.Len() > maxSacctRecord {
				src.Lines++
				src.Skipped[SkipCut]++
				src.warn(fmt.Sprintf("%s:%d: a record of %d lines and still too few fields: skipped", name, pendingLine, pendingLines))
				pending.Reset()
				pendingLines = 0
			}
			return nil
		}
		// sacct prints no '#' lines (and no JobID starts with one): they
		// are notes, such as the producing command on line 1 of a fixture.
		if t := strings.TrimSpace(text); t == "" || strings.HasPrefix(t, "#") {
			return nil
		}
		if h == nil {
			var err error
			if h, err = readSacctHeader(text); err != nil {
				return &ImportError{Name: name, Line: line, Err: err}
			}
			return nil
		}
		if h.freeLo >= 0 && len(h.split(text)) < h.width {
			pending.WriteString(text)
			pendingLine, pendingLines = line, 1
			pendingPipes = strings.Count(text, "|")
			return nil
		}
		return record(line, text, false)
	})
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, &ImportError{Name: name, Line: 1, Err: fmt.Errorf("empty: want sacct --parsable2 --format=%s output with its header", SacctFormat)}
	}
	if pendingLines > 0 {
		src.Lines++
		src.Skipped[SkipCut]++
		src.warn(fmt.Sprintf("%s:%d: the file ends inside this record (too few fields): skipped", name, pendingLine))
	}
	if src.Lines == 0 {
		return nil, &ImportError{Name: name, Line: lastLine, Err: errors.New("no job records after the header")}
	}
	src.FreeText = h.free
	_, src.HasState = h.col["state"]
	_, src.HasRestarts = h.col["restarts"]
	if err := mergeSacctRuns(src, rows, h.freeLo >= 0); err != nil {
		return nil, err
	}
	return src, nil
}

// mergeSacctRuns makes one job of the records of each JobID and applies
// the rules of ParseSacct to its last run.
func mergeSacctRuns(src *ImportSource, rows []sacctRow, freeText bool) error {
	groups := map[string][]sacctRow{}
	var order []string
	for _, r := range rows {
		if _, seen := groups[r.id]; !seen {
			order = append(order, r.id)
		}
		groups[r.id] = append(groups[r.id], r)
	}
	for _, id := range order {
		runs := groups[id]
		sort.SliceStable(runs, func(a, b int) bool { return runs[a].submit.Before(runs[b].submit) })
		last := runs[len(runs)-1]
		skip := func(reason string) {
			src.Skipped[reason] += len(runs)
			src.Dropped[last.state]++
		}
		if err := checkRuns(src.Name, runs); err != nil {
			if !freeText {
				return err
			}
			// A forged record can share a real job's id.
			skip(SkipUnreadable)
			src.warn(err.Error())
			continue
		}
		if len(runs) > 1 {
			src.Duplicated++
		}
		resized := false
		discarded := 0.0
		for _, r := range runs[:len(runs)-1] {
			resized = resized || r.state == "RESIZING"
			if r.started && r.ended {
				discarded += float64(r.gpus) * r.end.Sub(r.start).Seconds()
			}
		}
		if last.restarts > len(runs)-1 {
			src.MissingRuns++
		}
		switch {
		case resized:
			skip(SkipResized)
		case !last.started:
			skip(SkipNotStarted)
		case !last.ended:
			skip(SkipRunning)
		case isRequeueState(last.state):
			skip(SkipRequeuedLast)
		case last.gpus == 0:
			skip(SkipNoGPU)
		case last.end.Equal(last.start):
			skip(SkipZero)
		default:
			src.Merged += len(runs) - 1
			src.Records = append(src.Records, ImportRecord{
				ID: id, Line: last.line, Submit: runs[0].submit, Duration: last.end.Sub(last.start).Seconds(),
				GPUs: last.gpus, State: last.state, GPUType: last.gpuType,
				Requeued: len(runs) - 1, DiscardedGPUSeconds: discarded,
				User: last.user, Account: last.account, QOS: last.qos,
			})
		}
	}
	return nil
}

// checkRuns checks that the records of one JobID, sorted by submit time,
// are the runs of one requeued job: each submitted when (or after) the one
// before it ended, none overlapping, none but the last without an End.
func checkRuns(name string, runs []sacctRow) error {
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		bad := func(why string) error {
			return &ImportError{Name: name, Line: cur.line, Field: "JobID", Err: fmt.Errorf(
				"job %s is also on line %d, and %s: not two runs of one requeued job (job ids reused, or several clusters' records? import one cluster's at a time)", cur.id, prev.line, why)}
		}
		switch {
		case prev.started && !prev.ended:
			return bad("that run has no End")
		case prev.ended && cur.submit.Before(prev.end):
			return bad("this record was submitted before that run ended")
		case prev.ended && cur.started && cur.start.Before(prev.end):
			return bad("the runs overlap")
		}
	}
	return nil
}

// isRequeueState reports a state that leaves the job to run again.
func isRequeueState(s string) bool {
	return s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED"
}

// sacctState reads a State field: "CANCELLED by 1000" is CANCELLED, and a
// '+' sacct appends when the field is too narrow is dropped.
func sacctState(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), " ")
	return strings.ToUpper(strings.TrimSuffix(s, "+"))
}

// singleType returns the GPU type when types holds exactly one with all
// total GPUs (total < 0: any count), else "".
func singleType(types map[string]int, total int) string {
	if len(types) != 1 {
		return ""
	}
	for t, n := range types {
		if total < 0 || n == total {
			return t
		}
	}
	return ""
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
// when a job asked for a type; older accounting only the typed ones); and
// the typed counts by type (those > 0).
func tresGPUs(s string) (int, map[string]int, error) {
	if s == "" {
		return 0, nil, nil
	}
	total, typed := -1, 0
	var types map[string]int
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" {
			return 0, nil, fmt.Errorf("%s is not KEY=VALUE", quoteField(item))
		}
		if k != "gres/gpu" && !strings.HasPrefix(k, "gres/gpu:") {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return 0, nil, fmt.Errorf("%s: %s is not a GPU count", k, quoteField(v))
		}
		if k == "gres/gpu" {
			total = n
			continue
		}
		typed += n
		if t := strings.TrimPrefix(k, "gres/gpu:"); n > 0 && t != "" {
			if types == nil {
				types = map[string]int{}
			}
			types[t] += n
		}
	}
	if total >= 0 {
		return total, types, nil
	}
	return typed, types, nil
}
