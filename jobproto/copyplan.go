package jobproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CopiesSubdir is the directory under the spool dir where copies jobs
// synchronize: CopiesSubdir/<array id>/.
const CopiesSubdir = "copies"

// TaskIndex is the array task index of a task id ("47_3" -> 3), or -1.
func TaskIndex(id string) int {
	_, t, ok := strings.Cut(id, "_")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return -1
	}
	return n
}

// CopyPlan is what the bridge tells a copies job's copies in a round
// (spool_dir/copies/<job>/plan.json).
type CopyPlan struct {
	Job  string `json:"job"`
	User string `json:"-"`
	// Generation is the bridge's round number: it only grows.
	Generation int64 `json:"generation"`
	// WrittenAt/WrittenUnix: when the file was written (copies ignore a
	// plan older than three rounds).
	WrittenAt   time.Time `json:"written_at"`
	WrittenUnix float64   `json:"written_unix"`
	// RoundSeconds is the length of a round: each copy's share is about
	// what it trains in that time.
	RoundSeconds float64 `json:"round_seconds"`
	Model        string  `json:"model"`
	TotalSteps   float64 `json:"total_steps"`
	// RemainingSteps is the bridge's estimate (the copies know better: the
	// last combined checkpoint).
	RemainingSteps float64 `json:"remaining_steps"`
	// Allowed is the tag's copies=.
	Allowed int `json:"allowed"`
	// Copies are the copies running or starting after this round.
	Copies []CopyMember `json:"copies"`
}

// CopyMember is one copy in a CopyPlan.
type CopyMember struct {
	// Index is the array task index (the copy's HADAR_COPY_INDEX); Task its
	// Slurm id.
	Index   int    `json:"index"`
	Task    string `json:"task"`
	Node    string `json:"node"`
	GPUType string `json:"gpu_type"`
	GPUs    int    `json:"gpus"`
	// Rate is the matrix's steps/s of the model on GPUType with GPUs.
	Rate float64 `json:"rate"`
	// Steps is the copy's share of the round: the round's steps
	// (min(remaining, summed rates x round)) split in proportion to rates,
	// so that the copies finish the round together.
	Steps float64 `json:"steps"`
	// State: "running", "launching" (released earlier, not started) or
	// "placed" (placed and released this round).
	State string `json:"state"`
}

// EnsureCopiesDir creates spoolDir/copies with mode 1777 (sticky, like
// /tmp: every job can make its directory there, none can touch another's).
// It never follows a symlink there (see openSharedDir).
func EnsureCopiesDir(spoolDir string) error {
	if err := os.MkdirAll(spoolDir, 0o755); err != nil {
		return err
	}
	return openSharedDir(filepath.Join(spoolDir, CopiesSubdir))
}

// WriteCopyPlan writes cp as spoolDir/copies/<job>/plan.json, atomically
// (temporary file, then rename). The job's directory is created owned by
// uid (mode 0755: the job's copies write their checkpoints there); an
// existing one must be a real directory owned by uid, root or this
// process. Every step goes through an os.Root opened on the directory
// itself, so a job cannot redirect the write with a symlink.
func WriteCopyPlan(spoolDir string, uid int, cp CopyPlan) error {
	if !reProgressID.MatchString(cp.Job) || strings.Contains(cp.Job, "_") {
		return fmt.Errorf("copies plan: bad job id %q", Clip(cp.Job))
	}
	fail := func(err error) error { return fmt.Errorf("copies plan of job %s: %w", cp.Job, err) }
	if err := EnsureCopiesDir(spoolDir); err != nil {
		return fail(err)
	}
	top, err := os.OpenRoot(filepath.Join(spoolDir, CopiesSubdir))
	if err != nil {
		return fail(err)
	}
	defer top.Close()
	st, err := top.Lstat(cp.Job)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := top.Mkdir(cp.Job, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fail(err)
		}
		if uid != os.Geteuid() {
			if err := top.Lchown(cp.Job, uid, -1); err != nil {
				return fail(fmt.Errorf("give the job's directory to uid %d: %w", uid, err))
			}
		}
	case err != nil:
		return fail(err)
	case !st.IsDir():
		return fail(fmt.Errorf("%s is not a directory", filepath.Join(spoolDir, CopiesSubdir, cp.Job)))
	}
	dir, err := top.OpenRoot(cp.Job)
	if err != nil {
		return fail(err)
	}
	defer dir.Close()
	st, err = dir.Stat(".")
	if err != nil {
		return fail(err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !st.IsDir() ||
		(int(sys.Uid) != uid && sys.Uid != 0 && int(sys.Uid) != os.Geteuid()) {
		return fail(fmt.Errorf("the job's directory is not owned by the job's user (uid %d)", uid))
	}
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return fail(err)
	}
	tmp := fmt.Sprintf(".plan.json.tmp-%d-%08x", os.Getpid(), rand.Uint32())
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fail(err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Rename(tmp, "plan.json")
	}
	if err != nil {
		_ = dir.Remove(tmp)
		return fail(err)
	}
	return nil
}

// ReadCopyPlan reads spoolDir/copies/<job>/plan.json (tests, tools).
func ReadCopyPlan(spoolDir, job string) (CopyPlan, error) {
	var cp CopyPlan
	b, err := os.ReadFile(filepath.Join(spoolDir, CopiesSubdir, job, "plan.json"))
	if err != nil {
		return cp, err
	}
	err = json.Unmarshal(b, &cp)
	return cp, err
}
