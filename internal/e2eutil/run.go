// Package e2eutil holds what hadar's end-to-end test suites (e2e,
// e2e/reliability and e2e/hadare) share: running commands with a time
// limit or as another user, submitting jobs and reading the queue, reading
// Slurm's jobcomp log, a layout and hadar-slurmd's state database,
// starting a test cluster of a suite's own (contrib/testcluster), and
// waiting for a condition. Only tests import it.
package e2eutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Result is what a command printed and how it ended.
type Result struct {
	Stdout, Stderr string
	// Err is nil when the command exited 0; otherwise it names the command
	// and holds its stderr, or says that it timed out.
	Err error
}

// Output is the command's stdout followed by its stderr.
func (r Result) Output() string { return r.Stdout + r.Stderr }

// Must returns the command's stdout, or ends the test if it failed.
func (r Result) Must(t testing.TB) string {
	t.Helper()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r.Stdout
}

// Cmd is how to run a command. The zero Cmd runs it as the test process's
// user, in its working directory and environment, without a time limit.
type Cmd struct {
	// Timeout kills the command, and every process of its process group,
	// once it has passed; 0 is no limit.
	Timeout time.Duration
	Env     []string // VAR=value added to the test process's environment
	Dir     string   // working directory; "" for the test process's
	// User runs the command as that user: runuser -u User -- env
	// UserEnv... NAME ARGS (runuser resets HOME, USER and the like, so
	// UserEnv is what the command must see, e.g. SLURM_CONF).
	User    string
	UserEnv []string
}

// Run runs name with args.
func (c Cmd) Run(name string, args ...string) Result {
	if c.User != "" {
		argv := append([]string{"-u", c.User, "--", "env"}, c.UserEnv...)
		name, args = "runuser", append(append(argv, name), args...)
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if c.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	// A process group of its own, so that a timeout also ends what the
	// command started (runuser's child, a script's Slurm clients).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A daemon that inherited stdout must not hold Run forever.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	line := strings.Join(append([]string{name}, args...), " ")
	switch {
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("%s: timed out after %s (%w)", line, c.Timeout, err)
	case err != nil:
		err = fmt.Errorf("%s: %w: %s", line, err, strings.TrimSpace(stderr.String()))
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}

// Run runs name with args, with env added to the test process's
// environment, and kills it after timeout (0: no limit).
func Run(timeout time.Duration, env []string, name string, args ...string) Result {
	return Cmd{Timeout: timeout, Env: env}.Run(name, args...)
}
