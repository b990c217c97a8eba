package slurm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newTestClient(t *testing.T) (*Client, *FakeRunner, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	f := NewFakeRunner()
	c := NewClient(f, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return c, f, &logs
}

func TestClientVerbsArgv(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		call func(*Client) error
		want []string
	}{
		{"release batches ids", func(c *Client) error { return c.Release(ctx, "5", "7", "10_2") },
			[]string{"scontrol", "release", "5,7,10_2"}},
		{"hold", func(c *Client) error { return c.Hold(ctx, "5", "6") }, []string{"scontrol", "hold", "5,6"}},
		{"requeuehold", func(c *Client) error { return c.RequeueHold(ctx, "9") }, []string{"scontrol", "requeuehold", "9"}},
		{"cancel", func(c *Client) error { return c.Cancel(ctx, "5", "6") }, []string{"scancel", "5", "6"}},
		{"place", func(c *Client) error { return c.PlaceOnNodes(ctx, "47_1", []string{"node2", "node3"}) },
			[]string{"scontrol", "update", "JobId=47_1", "NodeList=node2,node3"}},
		{"update list fields", func(c *Client) error {
			return c.UpdateJobs(ctx, []string{"5", "6"}, "StartTime=now", "ExcNodeList=node4", "Gres=gpu:2")
		}, []string{"scontrol", "update", "JobId=5,6", "StartTime=now", "ExcNodeList=node4", "Gres=gpu:2"}},
		{"user text stays one argv element", func(c *Client) error {
			return c.UpdateJobs(ctx, []string{"5"}, `Comment=hadar model=x; rm -rf / | "$(id)" 'q'`)
		}, []string{"scontrol", "update", "JobId=5", `Comment=hadar model=x; rm -rf / | "$(id)" 'q'`}},
		{"admin comment is sanitised", func(c *Client) error {
			return c.SetAdminComment(ctx, []string{"5", "6"}, "hadar: bad tag\n\"steps=-5\"\x00\xff")
		}, []string{"scontrol", "update", "JobId=5,6", "AdminComment=hadar: bad tag \"steps=-5\" \uFFFD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f, _ := newTestClient(t)
			f.SetOutput(tt.want, "")
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([][]string{tt.want}, f.Calls()); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientRejectsBeforeRunning(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		call func(*Client) error
	}{
		{"id with a space", func(c *Client) error { return c.Release(ctx, "5 6") }},
		{"id with a comma", func(c *Client) error { return c.Release(ctx, "5,6") }},
		{"negative id", func(c *Client) error { return c.Hold(ctx, "-5") }},
		{"option as id", func(c *Client) error { return c.Cancel(ctx, "--user=root") }},
		{"array range", func(c *Client) error { return c.RequeueHold(ctx, "5_[1-3]") }},
		{"empty id", func(c *Client) error { return c.Release(ctx, "") }},
		{"duplicate id", func(c *Client) error { return c.Release(ctx, "5", "5") }},
		{"huge id", func(c *Client) error { return c.Release(ctx, "123456789012") }},
		{"place without nodes", func(c *Client) error { return c.PlaceOnNodes(ctx, "5", nil) }},
		{"place with a bad node", func(c *Client) error { return c.PlaceOnNodes(ctx, "5", []string{"node1 Partition=x"}) }},
		{"place with a host list", func(c *Client) error { return c.PlaceOnNodes(ctx, "5", []string{"node[1-2]"}) }},
		{"update NodeList for many", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5", "6"}, "NodeList=node1") }},
		{"update Priority", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}, "Priority=100") }},
		{"update JobId smuggled", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}, "JobId=7") }},
		{"update operator form", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}, "Features+=x") }},
		{"update without =", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}, "Comment") }},
		{"update no fields", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}) }},
		{"update twice", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}, "Comment=a", "comment=b") }},
		{"newline in value", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5"}, "Comment=a\nJobId=9") }},
		{"bad id in update", func(c *Client) error { return c.UpdateJobs(ctx, []string{"5;6"}, "Comment=a") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f, _ := newTestClient(t)
			err := tt.call(c)
			if !errors.Is(err, ErrBadArgument) {
				t.Errorf("err = %v, want ErrBadArgument", err)
			}
			if calls := f.Calls(); len(calls) != 0 {
				t.Errorf("ran %v despite the bad argument", calls)
			}
		})
	}
	// No ids: nothing to do, nothing run.
	c, f, _ := newTestClient(t)
	for _, err := range []error{c.Release(ctx), c.Hold(ctx), c.RequeueHold(ctx), c.Cancel(ctx),
		c.UpdateJobs(ctx, nil, "Comment=x"), c.SetAdminComment(ctx, nil, "x")} {
		if err != nil {
			t.Errorf("empty batch: %v", err)
		}
	}
	if len(f.Calls()) != 0 {
		t.Errorf("empty batches ran %v", f.Calls())
	}
}

func TestClientClassifiesErrors(t *testing.T) {
	c, f, _ := newTestClient(t)
	argv := []string{"scontrol", "release", "7"}
	f.SetError(argv, &CommandError{Argv: argv, ExitCode: 1, Stderr: "Access/permission denied for job 7\n"})
	err := c.Release(context.Background(), "7")
	if !errors.Is(err, ErrAccessDenied) {
		t.Errorf("err = %v, want ErrAccessDenied", err)
	}
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 1 {
		t.Errorf("errors.As(*CommandError) failed: %v", err)
	}
	if !strings.Contains(err.Error(), "release") {
		t.Errorf("error does not say what was being done: %v", err)
	}

	f.SetError(JobQueryArgs, &CommandError{Argv: JobQueryArgs, ExitCode: 1,
		Stderr: "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"})
	if _, err := c.Jobs(context.Background()); !errors.Is(err, ErrControllerDown) {
		t.Errorf("Jobs err = %v, want ErrControllerDown", err)
	}
}

func TestClientTimeout(t *testing.T) {
	c, _, _ := newTestClient(t)
	c.runner = RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	c.CommandTimeout = 10 * time.Millisecond
	if _, err := c.Nodes(context.Background()); !errors.Is(err, ErrTimeout) {
		t.Errorf("err = %v, want ErrTimeout", err)
	}
}

// RunnerFunc adapts a function to Runner (tests only).
type RunnerFunc func(ctx context.Context, name string, args ...string) ([]byte, error)

func (f RunnerFunc) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return f(ctx, name, args...)
}

func TestClientReads(t *testing.T) {
	c, f, logs := newTestClient(t)
	if err := f.SetFixture(NodeQueryArgs, filepath.Join("testdata", "scontrol-show-node", "22.05-site-alloc.txt")); err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]map[string]int{}
	for _, n := range nodes {
		used[n.Name] = GPUsByType(n.GresUsed)
	}
	want := map[string]map[string]int{
		"cpu-01": {"": 0}, "gpu-a100-01": {"NVlink_A100_40GB": 0},
		"gpu-mix-01":  {"tesla_v100-sxm2-32gb": 2, "NVlink_A100_40GB": 1},
		"gpu-v100-01": {"tesla_v100-sxm2-32gb": 4}, "gpu-v100-02": {"tesla_v100-sxm2-32gb": 0},
	}
	if diff := cmp.Diff(want, used); diff != "" {
		t.Errorf("GPUs used (-want +got):\n%s", diff)
	}

	// Unparsable records are logged and skipped, never fatal.
	good := squeueEmulator(t, JobFormat, row("5"), row("x6"), row("7"))
	f.Set(JobQueryArgs, good, nil)
	jobs, err := c.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Errorf("got %d jobs, want 2", len(jobs))
	}
	if !strings.Contains(logs.String(), "skipping unparsable record") {
		t.Errorf("parse error not logged: %s", logs.String())
	}

	// The log is capped.
	logs.Reset()
	var many [][]byte
	for i := 0; i < 100; i++ {
		many = append(many, []byte("garbage\n"))
	}
	f.Set(JobQueryArgs, bytes.Join(many, nil), nil)
	// Nothing parsable at all is an error, not an empty queue.
	if _, err := c.Jobs(context.Background()); !errors.Is(err, ErrMalformed) {
		t.Errorf("err = %v, want ErrMalformed", err)
	}
	if n := strings.Count(logs.String(), "skipping unparsable record"); n != maxLoggedParseErrors {
		t.Errorf("logged %d parse errors, want %d", n, maxLoggedParseErrors)
	}

	// Empty output is an empty queue.
	f.Set(JobQueryArgs, nil, nil)
	if jobs, err := c.Jobs(context.Background()); err != nil || len(jobs) != 0 {
		t.Errorf("empty output: %v, %v", jobs, err)
	}
}

func TestSanitizeComment(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                 "plain",
		"a\nb\tc\x7f":           "a b c ",
		"bad \xff utf8":         "bad \uFFFD utf8",
		"ünïcödé":               "ünïcödé",
		"x" + "\u0085":          "x ",
		strings.Repeat("é", 10): strings.Repeat("é", 3), // cut on a rune boundary (max 7 bytes)
	} {
		max := 1024
		if strings.HasPrefix(in, "é") {
			max = 7
		}
		if got := SanitizeComment(in, max); got != want {
			t.Errorf("SanitizeComment(%q) = %q, want %q", in, got, want)
		}
	}
}
