package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Runner runs one Slurm command and returns its standard output. It is the
// package's only seam to the outside world: Client builds argv slices and
// hands them to a Runner; tests use FakeRunner.
//
// A command that exits non-zero returns a *CommandError (with stdout, if
// any); a context that ends first returns an error wrapping ctx.Err().
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs Slurm binaries directly by argv, never through a shell.
type ExecRunner struct {
	// BinDir, when set, is the directory holding the Slurm client binaries
	// (config [slurm] bin_dir); otherwise they are looked up in PATH.
	BinDir string
	// Env is added to the inherited environment (later entries win), e.g.
	// SLURM_CONF=/etc/slurm/slurm.conf.
	Env []string
}

// maxStderr bounds how much of a command's stderr is kept.
const maxStderr = 64 << 10

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return nil, fmt.Errorf("%s: command must be a bare program name", quoteArgv(argv))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", quoteArgv(argv), err)
	}
	path := name
	if r.BinDir != "" {
		path = filepath.Join(r.BinDir, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = commandEnv(os.Environ(), r.Env)
	cmd.Stdin = nil
	// Return promptly after cancellation even if a child keeps the pipes open.
	cmd.WaitDelay = 2 * time.Second
	var stdout bytes.Buffer
	stderr := &capped{max: maxStderr}
	cmd.Stdout = &stdout
	cmd.Stderr = stderr

	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %w", quoteArgv(argv), ctxErr)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return stdout.Bytes(), &CommandError{Argv: argv, ExitCode: exitErr.ExitCode(), Stderr: stderr.String()}
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w: %v", quoteArgv(argv), ErrCommandNotFound, err)
	}
	return nil, fmt.Errorf("%s: %w", quoteArgv(argv), err)
}

// scrubbedEnv lists variables that change what Slurm's clients print or do
// (output formats, filters, interactive prompts, time format, clusters).
// hadar's parsers rely on the exact argv it passes, so these are removed from
// the inherited environment.
var scrubbedEnvPrefixes = []string{
	"SQUEUE_", "SINFO_", "SCONTROL_", "SCANCEL_",
	"SLURM_TIME_FORMAT=", "SLURM_CLUSTERS=", "SLURM_BITSTR_LEN=", "POSIXLY_CORRECT=",
}

// commandEnv builds a Slurm client's environment: base without the scrubbed
// variables, SLURM_TIME_FORMAT=standard (ISO 8601 times, which the parsers
// read), then extra.
func commandEnv(base, extra []string) []string {
	env := make([]string, 0, len(base)+len(extra)+1)
next:
	for _, kv := range base {
		for _, p := range scrubbedEnvPrefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	env = append(env, "SLURM_TIME_FORMAT=standard")
	return append(env, extra...)
}

// capped is a writer that keeps the first max bytes and drops the rest.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }
