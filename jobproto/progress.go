package jobproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// DefaultSpoolDir is where jobs leave their progress reports (the
// daemon's spool_dir unless the config says otherwise).
const DefaultSpoolDir = "/var/spool/hadar"

// ProgressSubdir is the directory under the spool dir where jobs report.
const ProgressSubdir = "progress"

// maxProgressFile bounds what ReadProgress reads of one file.
const maxProgressFile = 4 << 10

// Progress is one job's latest progress report.
type Progress struct {
	// JobID is the job's id (as scontrol names it: "123" or "45_6").
	JobID string `json:"job_id"`
	// Steps is the number of training steps the job has done in total.
	Steps float64 `json:"steps"`
	// Total is the number of steps the job says it will do in all, or 0
	// when it did not say (optional; older reports do not carry it).
	Total float64 `json:"total,omitempty"`
	// At is when the job reported.
	At time.Time `json:"at"`
	// UID is the owner of the report file (set by ReadProgress).
	UID int `json:"-"`
}

var reProgressID = regexp.MustCompile(`^[0-9]{1,10}(_[0-9]{1,10})?$`)

// ProgressPath is the file in which job jobID reports under spoolDir.
func ProgressPath(spoolDir, jobID string) string {
	return filepath.Join(spoolDir, ProgressSubdir, jobID+".json")
}

// WriteProgress records that job jobID has done steps steps in total at
// time at: it writes spoolDir/progress/<jobID>.json atomically (a
// temporary file in the same directory, then rename), so the daemon never
// reads half a report. The progress directory is created (mode 1777, like
// /tmp: every job can report, no job can replace another user's report) if
// it is missing. It is what `hadar report --steps N` calls inside a job.
func WriteProgress(spoolDir, jobID string, steps float64, at time.Time) error {
	return WriteReport(spoolDir, Progress{JobID: jobID, Steps: steps, At: at})
}

// WriteReport is WriteProgress for a whole report: p.JobID, p.Steps, p.At
// and, when the job knows it, p.Total (0: not known).
func WriteReport(spoolDir string, p Progress) error {
	jobID, steps, at := p.JobID, p.Steps, p.At
	if !reProgressID.MatchString(jobID) {
		return fmt.Errorf("write progress: bad job id %q", Clip(jobID))
	}
	if math.IsNaN(steps) || math.IsInf(steps, 0) || steps < 0 {
		return fmt.Errorf("write progress of job %s: steps %v, want a finite number >= 0", jobID, steps)
	}
	if math.IsNaN(p.Total) || math.IsInf(p.Total, 0) || p.Total < 0 {
		return fmt.Errorf("write progress of job %s: total %v, want a finite number >= 0", jobID, p.Total)
	}
	dir := filepath.Join(spoolDir, ProgressSubdir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write progress of job %s: %w", jobID, err)
	}
	if os.Geteuid() == 0 {
		// Created by root (the daemon or an admin): open it to every job.
		_ = openSharedDir(dir)
	}
	b, err := json.Marshal(Progress{JobID: jobID, Steps: steps, Total: p.Total, At: at.UTC()})
	if err != nil {
		return fmt.Errorf("write progress of job %s: %w", jobID, err)
	}
	f, err := os.CreateTemp(dir, "."+jobID+".json.tmp-*")
	if err != nil {
		return fmt.Errorf("write progress of job %s: %w", jobID, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, ProgressPath(spoolDir, jobID))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write progress of job %s: %w", jobID, err)
	}
	return nil
}

// EnsureProgressDir creates spoolDir/progress with mode 1777 if missing.
// It never follows a symlink there (see openSharedDir).
func EnsureProgressDir(spoolDir string) error {
	if err := os.MkdirAll(spoolDir, 0o755); err != nil {
		return err
	}
	return openSharedDir(filepath.Join(spoolDir, ProgressSubdir))
}

// openSharedDir creates dir (a directory of the spool every job writes
// in) if it is missing and gives it mode 1777, like /tmp. It opens dir
// with O_NOFOLLOW and changes the mode through that descriptor, so a
// symlink or a file planted in its place is refused, never followed, and
// it refuses a directory neither root nor this process owns.
func openSharedDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s is a symlink or not a directory; refusing to follow or change it (remove it)", dir)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || (sys.Uid != 0 && int(sys.Uid) != os.Geteuid()) {
		return fmt.Errorf("%s is not owned by root; refusing to open it to every user (remove it)", dir)
	}
	if st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		return f.Chmod(0o777 | os.ModeSticky)
	}
	return nil
}

// ReadProgress reads every report in spoolDir/progress. Files that are not
// regular (symlinks included), too large, not JSON, or whose job id does not
// match their name are skipped and reported in the []error, without their
// contents. A missing directory is no reports and no error. The owner of
// each file is returned in Progress.UID: the caller must only trust a report
// owned by the job's own user (or root).
func ReadProgress(spoolDir string) (map[string]Progress, []error) {
	dir := filepath.Join(spoolDir, ProgressSubdir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Progress{}, nil
	}
	if err != nil {
		return map[string]Progress{}, []error{fmt.Errorf("read progress: %w", err)}
	}
	out := map[string]Progress{}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		id := strings.TrimSuffix(name, ".json")
		if !reProgressID.MatchString(id) {
			errs = append(errs, fmt.Errorf("progress file %q: name is not <jobid>.json", Clip(name)))
			continue
		}
		p, err := readProgressFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("progress file %s: %w", name, err))
			continue
		}
		if p.JobID != id {
			errs = append(errs, fmt.Errorf("progress file %s: job id inside is not %s", name, id))
			continue
		}
		out[id] = p
	}
	return out, errs
}

func readProgressFile(path string) (Progress, error) {
	var p Progress
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return p, errors.New("cannot open (not a regular file?)")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return p, err
	}
	if !st.Mode().IsRegular() {
		return p, errors.New("not a regular file")
	}
	if st.Size() > maxProgressFile {
		return p, fmt.Errorf("larger than %d bytes", maxProgressFile)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return p, errors.New("no file owner")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxProgressFile+1))
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return Progress{}, errors.New("not a progress report (bad JSON)")
	}
	if math.IsNaN(p.Steps) || math.IsInf(p.Steps, 0) || p.Steps < 0 {
		return Progress{}, errors.New("steps out of range")
	}
	if math.IsNaN(p.Total) || math.IsInf(p.Total, 0) || p.Total < 0 {
		p.Total = 0 // an optional field: a bad total does not lose the steps
	}
	if p.At.IsZero() {
		p.At = st.ModTime()
	}
	p.UID = int(sys.Uid)
	return p, nil
}

// RemoveStaleProgress deletes report files of jobs that are no longer
// known and older than maxAge. It returns how many it removed.
func RemoveStaleProgress(spoolDir string, known map[string]bool, now time.Time, maxAge time.Duration) int {
	dir := filepath.Join(spoolDir, ProgressSubdir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		id := strings.TrimSuffix(strings.TrimPrefix(name, "."), ".json")
		if i := strings.Index(id, ".json.tmp-"); i >= 0 {
			id = id[:i]
		}
		if known[id] {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < maxAge || !info.Mode().IsRegular() {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			n++
		}
	}
	return n
}
