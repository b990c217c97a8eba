package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// StatusFile is the daemon's world-readable status in spool_dir: users'
// tools (hadar explain, hadar status) read it to tell whether the daemon
// is alive and what its own last round decided for a job, without reading
// the state database (root's, 0600).
const StatusFile = "hadar-status.json"

// DaemonStatus is what StatusFile holds.
type DaemonStatus struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
	// SlurmConf is the daemon's SLURM_CONF: a reader of another cluster
	// (another SLURM_CONF) must not take this status for its own.
	SlurmConf string    `json:"slurm_conf"`
	Started   time.Time `json:"started"`
	// LastRound is when the last round started; RoundSeconds the round
	// length in the daemon's config.
	LastRound    time.Time `json:"last_round"`
	RoundSeconds float64   `json:"round_seconds"`
	Policy       string    `json:"policy"`
	DryRun       bool      `json:"dry_run"`
	// Stopped is set by a clean stop (fail-open done).
	Stopped time.Time `json:"stopped,omitzero"`
	// Jobs are the tagged jobs of the last round, by id.
	Jobs map[string]JobStatus `json:"jobs"`
}

// JobStatus is one job's lot in the daemon's last round.
type JobStatus struct {
	Class    JobClass     `json:"class"`
	Decision DecisionKind `json:"decision,omitempty"`
	To       string       `json:"to,omitempty"`
	GPUType  string       `json:"gpu_type,omitempty"`
	Reason   string       `json:"reason,omitempty"`
}

// statusFromReport builds the status after a round.
func statusFromReport(base DaemonStatus, rep RoundReport) DaemonStatus {
	st := base
	st.LastRound = rep.Started
	st.Policy = rep.Policy
	st.DryRun = rep.DryRun
	st.Jobs = map[string]JobStatus{}
	if rep.View != nil {
		for _, jv := range rep.View.Jobs {
			if jv.Tagged {
				js := JobStatus{Class: jv.Class}
				if jv.Class == ClassPassThrough {
					js.Reason = jv.Problem
				}
				st.Jobs[jv.ID] = js
			}
		}
	}
	for _, d := range rep.Decisions {
		js := st.Jobs[d.JobID]
		js.Decision, js.To, js.GPUType, js.Reason = d.Kind, d.To, d.GPUType, d.Reason
		st.Jobs[d.JobID] = js
	}
	return st
}

// WriteStatus writes the status atomically, readable by everyone.
func WriteStatus(spoolDir string, st DaemonStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if err := os.MkdirAll(spoolDir, 0o755); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	f, err := os.CreateTemp(spoolDir, "."+StatusFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(spoolDir, StatusFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// ErrOtherCluster: the status file belongs to a daemon of another cluster.
var ErrOtherCluster = errors.New("the status file is of another cluster's daemon")

// ReadStatus reads the daemon's status from spoolDir; a status written
// under another SLURM_CONF than the reader's is ErrOtherCluster.
func ReadStatus(spoolDir string) (DaemonStatus, error) {
	var st DaemonStatus
	path := filepath.Join(spoolDir, StatusFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("read daemon status: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read daemon status %s: %w", path, err)
	}
	if mine := os.Getenv("SLURM_CONF"); st.SlurmConf != mine {
		return st, fmt.Errorf("read daemon status %s: %w (SLURM_CONF %q, yours %q)", path, ErrOtherCluster, st.SlurmConf, mine)
	}
	return st, nil
}

// Liveness says, for users, whether the daemon of this status runs: alive
// when it has not stopped, its last round is at most three rounds (and a
// minute) old, and, on the same host, its process exists.
func (st DaemonStatus) Liveness(now time.Time) (alive bool, why string) {
	ago := now.Sub(st.LastRound).Round(time.Second)
	switch {
	case !st.Stopped.IsZero():
		return false, fmt.Sprintf("hadar-slurmd is stopped (since %s; it handed its held jobs to Slurm's scheduler)", st.Stopped.Local().Format(time.DateTime))
	case st.LastRound.IsZero():
		return false, "hadar-slurmd has not run a round yet"
	case ago > 3*time.Duration(st.RoundSeconds*float64(time.Second))+time.Minute:
		return false, fmt.Sprintf("hadar-slurmd is not running: its last round was %s ago (rounds every %gs)", ago, st.RoundSeconds)
	}
	if host, _ := os.Hostname(); host == st.Host && st.PID > 0 {
		if err := syscall.Kill(st.PID, 0); errors.Is(err, syscall.ESRCH) {
			return false, fmt.Sprintf("hadar-slurmd is not running: process %d is gone (last round %s ago)", st.PID, ago)
		}
	}
	return true, fmt.Sprintf("hadar-slurmd runs (pid %d on %s, last round %s ago, policy %s)", st.PID, st.Host, ago, st.Policy)
}
