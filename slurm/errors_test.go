package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	cmdErr := func(stderr string) error {
		return &CommandError{Argv: []string{"scontrol", "release", "7"}, ExitCode: 1, Stderr: stderr}
	}
	tests := []struct {
		name string
		err  error
		want error // nil: not classified
	}{
		{"invalid id", cmdErr("Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n"), ErrInvalidJobID},
		{"invalid id on update", cmdErr("scontrol: error: Could not load state information for job 9: Invalid job id specified\n"), ErrInvalidJobID},
		{"not pending", cmdErr("Job is no longer pending execution for job 1\n"), ErrJobNotPending},
		{"held", cmdErr("Job is in held state, pending scheduler release for job 7\n"), ErrJobHeld},
		{"bad node", cmdErr("Invalid node name specified for job 1\n"), ErrInvalidNodeName},
		{"controller down", cmdErr("slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"), ErrControllerDown},
		{"socket timeout", cmdErr("slurm_load_jobs error: Socket timed out on send/recv operation\n"), ErrControllerDown},
		{"connection refused", cmdErr("error: Connection refused\n"), ErrControllerDown},
		{"rate limited", cmdErr("Rate limit exceeded, please retry momentarily\n"), ErrControllerDown},
		{"access denied (also the shipped job_submit.lua)", cmdErr("Access/permission denied for job 8\nslurm_suspend error: Access/permission denied\n"), ErrAccessDenied},
		{"no config", cmdErr("squeue: fatal: Could not establish a configuration source\n"), ErrNotConfigured},
		{"submit plugin", cmdErr("sbatch: error: job_submit/lua: hadar: unknown model\n"), ErrRejectedBySubmitPlugin},
		{"case-insensitive", cmdErr("INVALID JOB ID SPECIFIED"), ErrInvalidJobID},
		{"deadline", fmt.Errorf("squeue: %w", context.DeadlineExceeded), ErrTimeout},
		{"unknown stderr", cmdErr("something new\n"), nil},
		{"not a command error", errors.New("boom"), nil},
		{"canceled is not a timeout", fmt.Errorf("x: %w", context.Canceled), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if tt.want == nil {
				if got != tt.err {
					t.Errorf("Classify changed an unknown error: %v", got)
				}
				return
			}
			if !errors.Is(got, tt.want) {
				t.Errorf("Classify(%v) = %v, want errors.Is %v", tt.err, got, tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("Classify lost the original error")
			}
			var ce *CommandError
			if errors.As(tt.err, &ce) && !errors.As(got, &ce) {
				t.Errorf("errors.As(*CommandError) fails after Classify")
			}
			wrapped := fmt.Errorf("releasing: %w", got)
			if Classify(wrapped) != wrapped || !errors.Is(wrapped, tt.want) {
				t.Errorf("Classify is not idempotent through wrapping")
			}
		})
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}

// TestClassifyCaptured classifies the stderr captured from the 22.05 test
// cluster (testdata/errors).
func TestClassifyCaptured(t *testing.T) {
	want := map[string]error{
		"22.05-gres-running.txt":             ErrJobNotPending,
		"22.05-lua-denied-hold.txt":          ErrAccessDenied,
		"22.05-lua-denied-release.txt":       ErrAccessDenied,
		"22.05-lua-denied-tag.txt":           ErrAccessDenied,
		"22.05-lua-denied-update.txt":        ErrAccessDenied,
		"22.05-nodelist-running.txt":         ErrInvalidNodeName,
		"22.05-priority-held.txt":            ErrJobHeld,
		"22.05-release-invalid-jobid.txt":    ErrInvalidJobID,
		"22.05-update-invalid-jobid.txt":     ErrInvalidJobID,
		"22.05-no-slurm-conf.txt":            ErrNotConfigured,
		"22.05-controller-down-squeue.txt":   ErrControllerDown,
		"22.05-controller-down-scontrol.txt": ErrControllerDown,
		"22.05-controller-down-update.txt":   ErrControllerDown,
		"22.05-controller-down-release.txt":  ErrControllerDown,
	}
	files, err := filepath.Glob(filepath.Join("testdata", "errors", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		fx, err := LoadFixture(path)
		if err != nil {
			t.Fatal(err)
		}
		status, _ := headerValue(fx, "exit status:")
		code, _ := strconv.Atoi(status)
		name := filepath.Base(path)
		if code == 0 {
			continue
		}
		w, ok := want[name]
		if !ok {
			t.Logf("%s: no expectation (classified as %q)", name, sentinelName(Classify(&CommandError{ExitCode: code, Stderr: string(fx.Output)})))
			continue
		}
		argv, _ := shellWords(fx.Command)
		got := Classify(&CommandError{Argv: argv, ExitCode: code, Stderr: string(fx.Output)})
		if !errors.Is(got, w) {
			t.Errorf("%s: Classify = %v, want %v", name, got, w)
		}
	}
}

func TestCommandErrorMessage(t *testing.T) {
	e := &CommandError{Argv: []string{"scontrol", "update", "JobId=5", "Comment=a b\n"}, ExitCode: 1,
		Stderr: "Access/permission denied for job 5\nslurm_update error: Access/permission denied\n"}
	got := e.Error()
	want := `scontrol update JobId=5 "Comment=a b\n": exit status 1: Access/permission denied for job 5 slurm_update error: Access/permission denied`
	if got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains((&CommandError{Argv: []string{"x"}}).Error(), "(no stderr)") {
		t.Error("empty stderr not named")
	}
}
