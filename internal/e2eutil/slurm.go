package e2eutil

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SlurmEnv is the environment that points Slurm's commands at the cluster
// of conf, followed by more; conf "" keeps the test process's SLURM_CONF.
func SlurmEnv(conf string, more ...string) []string {
	if conf == "" {
		return more
	}
	return append([]string{"SLURM_CONF=" + conf}, more...)
}

// Sbatch submits a job with `sbatch --parsable args...` and returns its id.
func (c Cmd) Sbatch(args ...string) (string, error) {
	r := c.Run("sbatch", append([]string{"--parsable"}, args...)...)
	if r.Err != nil {
		return "", r.Err
	}
	return ParseJobID(r.Stdout)
}

// ParseJobID reads what sbatch --parsable prints: "ID" or "ID;CLUSTER".
func ParseJobID(out string) (string, error) {
	id, _, _ := strings.Cut(out, ";")
	id = strings.TrimSpace(id)
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch printed %q", out)
	}
	return id, nil
}

// queueFormat is the squeue output format ParseQueue reads.
const queueFormat = "%i|%T|%r|%N"

// QueuedJob is squeue's view of one job.
type QueuedJob struct {
	State, Reason, Nodes string
}

// OnLease reports whether the job waits on a begin time: hadar's lease
// (job_submit.lua's, renewed while hadar keeps it waiting) or its user's
// --begin. squeue says PENDING, reason BeginTime.
func (j QueuedJob) OnLease() bool { return j.State == "PENDING" && j.Reason == "BeginTime" }

// Held reports whether the job is held: by its owner (JobHeldUser: sbatch
// -H, scontrol hold, hadar's own requeuehold) or an admin (JobHeldAdmin).
func (j QueuedJob) Held() bool {
	return j.State == "PENDING" && (j.Reason == "JobHeldUser" || j.Reason == "JobHeldAdmin")
}

// StartTime is squeue's %S of job id on the cluster of conf: the begin
// time of a job on a lease, the start of a running one.
func StartTime(conf, id string) (time.Time, error) {
	r := Run(30*time.Second, SlurmEnv(conf), "squeue", "-h", "-j", id, "-o", "%S")
	if r.Err != nil {
		return time.Time{}, r.Err
	}
	return ParseStartTime(r.Stdout)
}

// ParseStartTime reads squeue's %S ("2026-12-07T14:52:03", local time).
func ParseStartTime(out string) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(out), time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("squeue %%S: %w", err)
	}
	return t, nil
}

// Queue is squeue's view of the jobs ids (of every job when ids is nil)
// on the cluster of conf ("" for SLURM_CONF's), by job id.
func Queue(conf string, ids []string) (map[string]QueuedJob, error) {
	args := []string{"-h", "-o", queueFormat}
	if ids != nil {
		if len(ids) == 0 {
			return map[string]QueuedJob{}, nil
		}
		args = append(args, "-j", strings.Join(ids, ","))
	}
	r := Run(30*time.Second, SlurmEnv(conf), "squeue", args...)
	if r.Err != nil {
		if ids != nil && strings.Contains(r.Stderr, "Invalid job id") {
			return map[string]QueuedJob{}, nil // 22.05 says so when every job of the list is gone
		}
		return nil, r.Err
	}
	return ParseQueue(r.Stdout), nil
}

// ParseQueue reads squeue's output of queueFormat ("%i|%T|%r|%N") by job
// id; lines of another shape are skipped.
func ParseQueue(out string) map[string]QueuedJob {
	jobs := map[string]QueuedJob{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(line, "|"); len(f) == 4 {
			jobs[f[0]] = QueuedJob{State: f[1], Reason: f[2], Nodes: f[3]}
		}
	}
	return jobs
}

// WaitGone waits until none of ids (no job at all when ids is nil) is in
// the queue of conf, checking every second.
func WaitGone(conf string, ids []string, timeout time.Duration) error {
	var left map[string]QueuedJob
	var err error
	if WaitEvery(timeout, time.Second, func() bool {
		left, err = Queue(conf, ids)
		return err == nil && len(left) == 0
	}) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("after %s, the queue cannot be read: %w", timeout, err)
	}
	named := slices.Sorted(maps.Keys(left))
	if len(named) > 20 {
		named = append(named[:20], "...")
	}
	return fmt.Errorf("after %s, %d jobs still in the queue: %s", timeout, len(left), strings.Join(named, ","))
}
