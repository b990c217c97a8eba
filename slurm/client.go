package slurm

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultCommandTimeout bounds each Slurm command a Client runs.
const DefaultCommandTimeout = 60 * time.Second

// Client runs the Slurm commands hadar needs through a Runner: one command
// per read, batched updates. Every method takes the context first; errors
// name what was being done and are classified (errors.Is(err, ErrJobHeld),
// errors.As(err, &*CommandError)). Job ids are checked before anything runs,
// and every value is passed as one argv element, never through a shell.
//
// A Client is safe for concurrent use; set CommandTimeout before sharing it.
type Client struct {
	runner Runner
	log    *slog.Logger
	// CommandTimeout bounds each command (0: only the caller's context).
	CommandTimeout time.Duration
}

// NewClient returns a Client running commands with runner. A nil logger
// discards logs.
func NewClient(runner Runner, logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Client{runner: runner, log: logger.With("component", "slurm"), CommandTimeout: DefaultCommandTimeout}
}

func (c *Client) run(ctx context.Context, argv []string) ([]byte, error) {
	if c.CommandTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.CommandTimeout)
		defer cancel()
	}
	start := time.Now()
	out, err := c.runner.Run(ctx, argv[0], argv[1:]...)
	c.log.Debug("slurm command", "argv", quoteArgv(argv), "duration", time.Since(start), "bytes", len(out), "err", err)
	return out, Classify(err)
}

// maxLoggedParseErrors caps the warnings one read logs, so hostile input
// cannot flood the log.
const maxLoggedParseErrors = 20

func (c *Client) logParseErrors(what string, errs []error) {
	for i, err := range errs {
		if i == maxLoggedParseErrors {
			c.log.Warn("more unparsable records not logged", "output", what, "count", len(errs)-i)
			return
		}
		c.log.Warn("skipping unparsable record", "output", what, "err", err)
	}
}

// Nodes runs NodeQueryArgs and parses it. Records that cannot be parsed are
// logged as warnings and left out; if no record parses at all, Nodes fails
// (ErrMalformed) instead of reporting an empty cluster.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	out, err := c.run(ctx, NodeQueryArgs)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes, errs := ParseNodes(bytes.NewReader(out))
	c.logParseErrors("scontrol show node", errs)
	if err := nothingParsed(len(nodes), errs); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodes, nil
}

// Jobs runs JobQueryArgs and parses it. Records that cannot be parsed are
// logged as warnings and left out; if no record parses at all, Jobs fails
// (ErrMalformed) instead of reporting an empty queue.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	out, err := c.run(ctx, JobQueryArgs)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	jobs, errs := ParseJobs(bytes.NewReader(out))
	c.logParseErrors("squeue", errs)
	if err := nothingParsed(len(jobs), errs); err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return jobs, nil
}

// JobDetails runs JobDetailQueryArgs and parses it (see JoinDetails).
func (c *Client) JobDetails(ctx context.Context) ([]JobDetail, error) {
	out, err := c.run(ctx, JobDetailQueryArgs)
	if err != nil {
		return nil, fmt.Errorf("reading job details: %w", err)
	}
	details, errs := ParseJobDetails(bytes.NewReader(out))
	c.logParseErrors("scontrol show job", errs)
	if err := nothingParsed(len(details), errs); err != nil {
		return nil, fmt.Errorf("reading job details: %w", err)
	}
	return details, nil
}

// nothingParsed turns "every record failed" into an error: output of an
// unexpected shape (another Slurm version, a changed format) must stop the
// round rather than look like an empty cluster.
func nothingParsed(parsed int, errs []error) error {
	if parsed == 0 && len(errs) > 0 {
		return fmt.Errorf("%w: none of the output could be parsed (first problem: %v)", ErrMalformed, errs[0])
	}
	return nil
}

// reActionID is what a job id given to scontrol must look like: a job id, or
// an array task "<array>_<task>".
var reActionID = regexp.MustCompile(`^[0-9]{1,10}(_[0-9]{1,10})?$`)

func checkIDs(ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: no job ids", ErrBadArgument)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !reActionID.MatchString(id) {
			return fmt.Errorf("%w: job id %q", ErrBadArgument, snippet(id))
		}
		if seen[id] {
			return fmt.Errorf("%w: job id %s given twice", ErrBadArgument, id)
		}
		seen[id] = true
	}
	return nil
}

// jobsVerb runs "scontrol <verb> a,b,c".
func (c *Client) jobsVerb(ctx context.Context, verb string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := checkIDs(ids); err != nil {
		return fmt.Errorf("scontrol %s: %w", verb, err)
	}
	if _, err := c.run(ctx, []string{"scontrol", verb, strings.Join(ids, ",")}); err != nil {
		return fmt.Errorf("scontrol %s of %d job(s): %w", verb, len(ids), err)
	}
	return nil
}

// Release releases held jobs with one "scontrol release a,b,c". No ids: no-op.
func (c *Client) Release(ctx context.Context, ids ...string) error {
	return c.jobsVerb(ctx, "release", ids)
}

// Hold holds pending jobs (an admin hold) with one "scontrol hold a,b,c".
func (c *Client) Hold(ctx context.Context, ids ...string) error {
	return c.jobsVerb(ctx, "hold", ids)
}

// RequeueHold requeues running jobs and holds them, keeping their ids
// ("scontrol requeuehold a,b,c"): the first step of a migration.
func (c *Client) RequeueHold(ctx context.Context, ids ...string) error {
	return c.jobsVerb(ctx, "requeuehold", ids)
}

// Cancel cancels jobs with one "scancel a b c".
func (c *Client) Cancel(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := checkIDs(ids); err != nil {
		return fmt.Errorf("scancel: %w", err)
	}
	if _, err := c.run(ctx, append([]string{"scancel"}, ids...)); err != nil {
		return fmt.Errorf("scancel of %d job(s): %w", len(ids), err)
	}
	return nil
}

// PlaceOnNodes pins a pending job to nodes: "scontrol update JobId=X
// NodeList=n1,n2". Slurm takes one job per call for NodeList. Never use it
// on a running job (22.05 then stalls that job's later updates).
func (c *Client) PlaceOnNodes(ctx context.Context, id string, nodes []string) error {
	if err := checkIDs([]string{id}); err != nil {
		return fmt.Errorf("placing job: %w", err)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("placing job %s: %w: no nodes", id, ErrBadArgument)
	}
	for _, n := range nodes {
		if !validHostname(n) {
			return fmt.Errorf("placing job %s: %w: node name %q", id, ErrBadArgument, snippet(n))
		}
	}
	argv := []string{"scontrol", "update", "JobId=" + id, "NodeList=" + strings.Join(nodes, ",")}
	if _, err := c.run(ctx, argv); err != nil {
		return fmt.Errorf("placing job %s on %s: %w", id, strings.Join(nodes, ","), err)
	}
	return nil
}

// listFields are the job fields scontrol 22.05 updates for a list of jobs in
// one call (JobId=a,b,c), as measured on the test cluster. NodeList is not
// one of them: use PlaceOnNodes.
var listFields = map[string]string{
	"comment": "Comment", "admincomment": "AdminComment", "starttime": "StartTime",
	"excnodelist": "ExcNodeList", "gres": "Gres", "features": "Features",
	"trespernode": "TresPerNode", "partition": "Partition",
}

// UpdateJobs sets fields of several jobs in one "scontrol update
// JobId=a,b,c Key=value ...". Each kv is "Key=value" with Key one of
// Comment, AdminComment, StartTime, ExcNodeList, Gres, Features,
// TresPerNode, Partition; the value goes to scontrol as part of one argv
// element and must not hold control characters (newlines would corrupt the
// one-line outputs hadar parses). No ids: no-op.
func (c *Client) UpdateJobs(ctx context.Context, ids []string, kv ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := checkIDs(ids); err != nil {
		return fmt.Errorf("updating jobs: %w", err)
	}
	if len(kv) == 0 {
		return fmt.Errorf("updating jobs: %w: no fields", ErrBadArgument)
	}
	seen := map[string]bool{}
	for _, f := range kv {
		key, val, ok := strings.Cut(f, "=")
		canon, allowed := listFields[strings.ToLower(key)]
		if !ok || !allowed {
			return fmt.Errorf("updating jobs: %w: field %q (allowed: Comment, AdminComment, StartTime, ExcNodeList, Gres, Features, TresPerNode, Partition)",
				ErrBadArgument, snippet(key))
		}
		if seen[canon] {
			return fmt.Errorf("updating jobs: %w: field %s given twice", ErrBadArgument, canon)
		}
		seen[canon] = true
		if i := strings.IndexFunc(val, isControl); i >= 0 {
			return fmt.Errorf("updating jobs: %w: %s value holds a control character", ErrBadArgument, canon)
		}
	}
	argv := append([]string{"scontrol", "update", "JobId=" + strings.Join(ids, ",")}, kv...)
	if _, err := c.run(ctx, argv); err != nil {
		return fmt.Errorf("updating %d job(s): %w", len(ids), err)
	}
	return nil
}

// MaxAdminComment bounds what SetAdminComment writes.
const MaxAdminComment = 1024

// SetAdminComment sets the admin comment of jobs (where hadar tells users
// why their job waits or was refused). Unlike UpdateJobs it accepts any
// text: control characters become spaces, invalid UTF-8 is replaced and the
// text is cut to MaxAdminComment bytes.
func (c *Client) SetAdminComment(ctx context.Context, ids []string, text string) error {
	return c.UpdateJobs(ctx, ids, "AdminComment="+SanitizeComment(text, MaxAdminComment))
}

// SanitizeComment makes text safe to store in a Slurm comment field: control
// characters become spaces, invalid UTF-8 becomes U+FFFD, and the result is
// cut to at most max bytes on a rune boundary.
func SanitizeComment(text string, max int) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, text)
	if len(text) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return text
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }
