package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeBin writes executable scripts into a temporary BinDir.
func fakeBin(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestExecRunnerArgvIsNotInterpreted(t *testing.T) {
	dir := fakeBin(t, map[string]string{
		// Prints each argument on its own line, between brackets.
		"squeue": `for a in "$@"; do printf '[%s]\n' "$a"; done`,
	})
	marker := filepath.Join(t.TempDir(), "pwned")
	args := []string{"-o", "%A|%k", "$(touch " + marker + ")", "`touch " + marker + "`", "; touch " + marker, "a b", "*", "\"'"}
	out, err := ExecRunner{BinDir: dir}.Run(context.Background(), "squeue", args...)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString("[" + a + "]\n")
	}
	if diff := cmp.Diff(want.String(), string(out)); diff != "" {
		t.Errorf("arguments changed on the way (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("an argument was executed by a shell")
	}
}

func TestExecRunnerCommandError(t *testing.T) {
	dir := fakeBin(t, map[string]string{
		"scontrol": `echo partial; echo "Job is in held state, pending scheduler release for job $2" >&2; exit 3`,
	})
	out, err := ExecRunner{BinDir: dir}.Run(context.Background(), "scontrol", "update", "JobId=7", "Priority=1")
	var ce *CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *CommandError", err)
	}
	want := &CommandError{Argv: []string{"scontrol", "update", "JobId=7", "Priority=1"}, ExitCode: 3,
		Stderr: "Job is in held state, pending scheduler release for job JobId=7\n"}
	if diff := cmp.Diff(want, ce); diff != "" {
		t.Errorf("CommandError (-want +got):\n%s", diff)
	}
	if string(out) != "partial\n" {
		t.Errorf("stdout %q", out)
	}
	if !errors.Is(Classify(err), ErrJobHeld) {
		t.Errorf("not classified: %v", Classify(err))
	}
}

func TestExecRunnerTimeout(t *testing.T) {
	dir := fakeBin(t, map[string]string{"squeue": "exec sleep 30\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ExecRunner{BinDir: dir}.Run(ctx, "squeue")
	if !errors.Is(Classify(err), ErrTimeout) {
		t.Errorf("err = %v, want ErrTimeout", Classify(err))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v after the deadline", d)
	}
}

func TestExecRunnerEnvironment(t *testing.T) {
	dir := fakeBin(t, map[string]string{"sinfo": "env\n"})
	t.Setenv("SQUEUE_FORMAT", "%i")
	t.Setenv("SINFO_FORMAT", "%N")
	t.Setenv("SCANCEL_INTERACTIVE", "1")
	t.Setenv("SLURM_TIME_FORMAT", "relative")
	t.Setenv("SLURM_CONF", "/etc/slurm/site.conf")
	out, err := ExecRunner{BinDir: dir, Env: []string{"HADAR_TEST=1"}}.Run(context.Background(), "sinfo")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, gone := range []string{"SQUEUE_FORMAT", "SINFO_FORMAT", "SCANCEL_INTERACTIVE"} {
		if _, ok := env[gone]; ok {
			t.Errorf("%s passed to the command", gone)
		}
	}
	for k, want := range map[string]string{"SLURM_TIME_FORMAT": "standard", "SLURM_CONF": "/etc/slurm/site.conf", "HADAR_TEST": "1"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
}

func TestExecRunnerNames(t *testing.T) {
	for _, name := range []string{"", "../squeue", "/usr/bin/squeue", "bin/squeue", ".", ".."} {
		if _, err := (ExecRunner{}).Run(context.Background(), name); err == nil {
			t.Errorf("Run(%q) accepted a path", name)
		}
	}
	_, err := ExecRunner{BinDir: t.TempDir()}.Run(context.Background(), "squeue")
	if !errors.Is(err, ErrCommandNotFound) {
		t.Errorf("missing binary: err = %v, want ErrCommandNotFound", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = ExecRunner{}.Run(context.Background(), "squeue")
	if !errors.Is(err, ErrCommandNotFound) {
		t.Errorf("not in PATH: err = %v, want ErrCommandNotFound", err)
	}
}

func TestFakeRunner(t *testing.T) {
	f := NewFakeRunner()
	f.SetOutput([]string{"squeue", "-h"}, "out")
	out, err := f.Run(context.Background(), "squeue", "-h")
	if err != nil || string(out) != "out" {
		t.Errorf("got %q, %v", out, err)
	}
	if _, err := f.Run(context.Background(), "scontrol", "release", "5"); err == nil {
		t.Error("unconfigured argv succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Run(ctx, "squeue", "-h"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	want := [][]string{{"squeue", "-h"}, {"scontrol", "release", "5"}, {"squeue", "-h"}}
	if diff := cmp.Diff(want, f.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	f.Reset()
	if len(f.Calls()) != 0 {
		t.Error("Reset kept calls")
	}
}

func TestParseFixtureHeader(t *testing.T) {
	fx, err := ParseFixture([]byte("# scontrol release 5\n# exit status: 1\n# stderr:\nInvalid job id specified\n  trailing  "))
	if err != nil {
		t.Fatal(err)
	}
	want := Fixture{Command: "scontrol release 5", Header: []string{"exit status: 1", "stderr:"},
		Output: []byte("Invalid job id specified\n  trailing  ")}
	if diff := cmp.Diff(want, fx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseFixture([]byte("no header\n")); err == nil {
		t.Error("a fixture without the command line was accepted")
	}
}
