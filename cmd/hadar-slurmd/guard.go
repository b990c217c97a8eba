package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/hadar-sched/hadar/bridge"
)

// Fail-open when the daemon dies without its clean stop (SIGKILL, a
// crash, the OOM killer): the daemon starts a guardian, itself with
// --fail-open-guard, in a session of its own, joined to the daemon by a pipe
// the daemon never writes. When the daemon dies the kernel closes the pipe;
// the guardian then takes the instance lock (which died with the daemon) and
// releases every held hadar job, as the clean stop would. If a new daemon
// took the lock first, it has the jobs, and the guardian leaves them alone.
// Hangs are systemd's watchdog's (notify.go).

// startGuardian starts the guardian; the returned file is the daemon's end
// of the pipe, kept open for the daemon's life (see cleanStop).
func startGuardian(args []string, log *slog.Logger) (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("guardian: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guardian: %w", err)
	}
	cmd := exec.Command(exe, append([]string{"--fail-open-guard"}, args...)...)
	cmd.Stdin = r
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("guardian: %w", err)
	}
	r.Close()
	log.Info("fail-open guardian started", "pid", cmd.Process.Pid)
	go func() { _ = cmd.Wait() }() // reaped if it ends first
	return w, nil
}

// guard is the guardian's life: wait for the daemon to go, then fail open
// unless another daemon holds the lock.
func guard(o options, stdin io.Reader, stderr io.Writer) int {
	// Returns when the daemon's end closes; a clean stop writes first.
	said, _ := io.ReadAll(stdin)
	if len(said) > 0 {
		return 0
	}
	cfg, _, err := loadConfig(o)
	if err != nil {
		fmt.Fprintln(stderr, "hadar-slurmd guardian:", err)
		return 2
	}
	log := newLogger(cfg, stderr).With("component", "fail-open-guardian", "pid", os.Getpid())
	// The daemon's lock goes with its process; give the kernel a moment.
	var lock *bridge.InstanceLock
	for try := 0; try < 20; try++ {
		if lock, err = bridge.AcquireLock(cfg.DataDir, bridge.LockReleaseAll); err == nil || !errors.Is(err, bridge.ErrLocked) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		// A clean stop has released the jobs and a new daemon owns them,
		// or the data directory is gone: nothing of ours to release.
		log.Info("daemon gone; not failing open", "reason", err)
		return 0
	}
	lock.Release() // run takes it again for the release
	log.Warn("the daemon ended without its clean stop: handing every held hadar job back to Slurm")
	return run(append(guardianArgs(o), "--release-all"), io.Discard, stderr)
}

// guardianArgs are the daemon's own flags, for the guardian to read the
// same config.
func guardianArgs(o options) []string {
	var out []string
	if o.configSet {
		out = append(out, "--config", o.config)
	}
	if o.logFormat != "" {
		out = append(out, "--log-format", o.logFormat)
	}
	if o.logLevel != "" {
		out = append(out, "--log-level", o.logLevel)
	}
	return out
}

// cleanStop tells the guardian that the daemon stopped cleanly (it failed
// open itself), then closes the pipe.
func cleanStop(w *os.File) {
	_, _ = w.Write([]byte("clean\n"))
	w.Close()
}
