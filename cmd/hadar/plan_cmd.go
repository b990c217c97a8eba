package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// slurmRunner builds the Runner of the Slurm commands `hadar plan` and
// `hadar explain` read the cluster with; tests replace it with a
// slurm.FakeRunner.
var slurmRunner = func(binDir string) slurm.Runner { return slurm.ExecRunner{BinDir: binDir} }

// defaultConfigPath is where plan and explain look for hadar-slurmd's
// config (a variable for tests).
var defaultConfigPath = config.DefaultPath

// configDefaults is the config used without a config file (a variable for
// tests, which point its data_dir away from the machine's).
var configDefaults = config.Default

// dryRoundFlags are the flags shared by plan and explain.
func dryRoundFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		&cli.StringFlag{Name: "config", EnvVars: []string{"HADAR_CONFIG"}, Value: defaultConfigPath,
			Usage: "hadar-slurmd's config `FILE` (its defaults are used when the default file is missing)"},
		&cli.StringFlag{Name: "policy", Usage: "plan with this policy instead of the configured one"},
		&cli.StringFlag{Name: "slurm-bin-dir", EnvVars: []string{"HADAR_SLURM_BIN_DIR"}, Usage: "directory of the Slurm client binaries (default: [slurm] bin_dir, then PATH)"},
		&cli.StringFlag{Name: "spool", EnvVars: []string{"HADAR_SPOOL"}, Usage: "hadar-slurmd's spool_dir, where its status file says whether it runs (default: the config's spool_dir)"},
	}
}

// dryRound is one round of hadar-slurmd run in dry-run mode against a
// throwaway copy of its databases.
type dryRound struct {
	Report bridge.RoundReport
	Config config.Config
	// Sources says where the config, the throughput matrix and the state
	// came from (for the reader: a plan is only as good as its inputs).
	Sources []string
	// Jobs is the queue as squeue printed it.
	Jobs []slurm.Job
	// Daemon is hadar-slurmd's status file (nil if unreadable: DaemonErr).
	Daemon    *bridge.DaemonStatus
	DaemonErr string
}

// runDryRound observes the cluster like hadar-slurmd and runs its round
// (bridge.Bridge.Cycle, the very code the daemon runs) with dry_run set,
// a Slurm client that refuses every update, and a data dir in a
// temporary directory holding copies of the daemon's throughput and state
// databases (when they can be read): the daemon's files are never opened
// for writing and nothing in Slurm changes.
func runDryRound(c *cli.Context) (*dryRound, error) {
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	cfgPath := c.String("config")
	explicit := c.IsSet("config")
	cfg, found, err := config.LoadOrDefault(cfgPath, !explicit)
	if err == nil && !found {
		cfg = configDefaults()
	}
	var sources []string
	switch {
	case err != nil && !explicit && errors.Is(err, fs.ErrPermission):
		// The daemon's config is root's; plan with the defaults.
		cfg = configDefaults()
		sources = append(sources, fmt.Sprintf("config: defaults (%s is not readable)", cfgPath))
	case err != nil:
		return nil, err
	case found:
		sources = append(sources, "config: "+cfgPath)
	default:
		sources = append(sources, "config: defaults (no "+cfgPath+")")
	}
	if p := c.String("policy"); p != "" {
		cfg.Policy = p
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
	}
	daemonDB := os.Getenv("HADAR_DB")
	if daemonDB == "" {
		daemonDB = filepath.Join(cfg.DataDir, profiles.DBFile)
	}
	daemonState := filepath.Join(cfg.DataDir, statedb.File)

	tmp, err := os.MkdirTemp("", "hadar-plan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg.DataDir = tmp
	cfg.DryRun = true

	dbCopy := filepath.Join(tmp, profiles.DBFile)
	dbSource := len(sources)
	err = snapshotDB(ctx, daemonDB, dbCopy)
	copied := err == nil
	if copied {
		sources = append(sources, "throughputs: a copy of "+daemonDB)
	} else {
		_ = os.Remove(dbCopy)
		sources = append(sources, fmt.Sprintf("throughputs: built-in defaults (%s: %s)", daemonDB, shortErr(err)))
	}
	if err := snapshotDB(ctx, daemonState, filepath.Join(tmp, statedb.File)); err == nil {
		sources = append(sources, "state: a copy of "+daemonState)
	} else {
		_ = os.Remove(filepath.Join(tmp, statedb.File))
		sources = append(sources, fmt.Sprintf("state: none (%s: %s); jobs hadar released but Slurm has not started yet look like Slurm's own, progress is estimated from run time", daemonState, shortErr(err)))
	}
	store, err := profiles.Open(ctx, dbCopy)
	if err != nil && copied {
		// A copy that does not open (a database of a newer hadar, ...):
		// plan with the defaults rather than not at all.
		for _, sfx := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(dbCopy + sfx)
		}
		sources[dbSource] = fmt.Sprintf("throughputs: built-in defaults (the copy of %s does not open: %v)", daemonDB, err)
		store, err = profiles.Open(ctx, dbCopy)
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()

	binDir := cfg.Slurm.BinDir
	if d := c.String("slurm-bin-dir"); d != "" {
		binDir = d
	}
	logger := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client := slurm.NewClient(slurmRunner(binDir), logger)
	client.CommandTimeout = cfg.Slurm.CommandTimeout.Duration
	cluster := &readOnlyCluster{c: client}
	b, err := bridge.New(cfg, bridge.Deps{Cluster: cluster, Store: store, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rep, err := b.Cycle(ctx)
	if err != nil {
		return nil, err
	}
	dr := &dryRound{Report: rep, Config: cfg, Sources: sources, Jobs: cluster.jobs}
	if s := c.String("spool"); s != "" {
		dr.Config.SpoolDir = s
	}
	if st, err := bridge.ReadStatus(dr.Config.SpoolDir); err == nil {
		dr.Daemon = &st
	} else {
		dr.DaemonErr = shortErr(errors.Unwrap(err))
		if errors.Is(err, bridge.ErrOtherCluster) {
			dr.DaemonErr = "of another cluster's daemon"
		}
	}
	return dr, nil
}

func shortErr(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "not found"
	case errors.Is(err, fs.ErrPermission):
		return "not readable"
	}
	return err.Error()
}

// snapshotDB copies the SQLite database src into dst (which must not
// exist) without ever writing to src. While the daemon has it open (its
// write-ahead log exists) the copy is taken through a read-only connection
// (VACUUM INTO), consistent even while the daemon writes; a database that
// was closed cleanly (no log) is a complete file and is copied as is, so
// that not even SQLite's -wal and -shm files are created beside it.
func snapshotDB(ctx context.Context, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := os.Stat(src + "-wal"); err != nil {
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, f); err != nil {
			out.Close()
			return fmt.Errorf("copying: %w", err)
		}
		return out.Close()
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(src)
	db, err := sql.Open("sqlite3", "file:"+esc+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copying: %w", err)
	}
	return nil
}

// readOnlyCluster lets the dry round read Slurm and refuses every change
// (the dry run never asks for one: this is a second lock on the door). It
// keeps the queue it read, for explain.
type readOnlyCluster struct {
	c    *slurm.Client
	jobs []slurm.Job
}

var errReadOnly = errors.New("hadar plan/explain never change Slurm")

func (r *readOnlyCluster) Jobs(ctx context.Context) ([]slurm.Job, error) {
	jobs, err := r.c.Jobs(ctx)
	r.jobs = jobs
	return jobs, err
}
func (r *readOnlyCluster) Nodes(ctx context.Context) ([]slurm.Node, error) { return r.c.Nodes(ctx) }

// SlurmVersion is a read too: the dry round uses nodes with several GPU
// types as the daemon does on this Slurm (bridge.SlurmVersioner).
func (r *readOnlyCluster) SlurmVersion(ctx context.Context) (slurm.Version, error) {
	return r.c.SlurmVersion(ctx)
}
func (r *readOnlyCluster) JobDetails(ctx context.Context) ([]slurm.JobDetail, error) {
	return r.c.JobDetails(ctx)
}
func (*readOnlyCluster) PlaceOnNodes(context.Context, string, []string) error {
	return errReadOnly
}
func (*readOnlyCluster) UpdateJobs(context.Context, []string, ...string) error { return errReadOnly }
func (*readOnlyCluster) Release(context.Context, ...string) error              { return errReadOnly }
func (*readOnlyCluster) Hold(context.Context, ...string) error                 { return errReadOnly }
func (*readOnlyCluster) RequeueHold(context.Context, ...string) error          { return errReadOnly }
func (*readOnlyCluster) SetAdminComment(context.Context, []string, string) error {
	return errReadOnly
}

// planOutput is `hadar plan --json`.
type planOutput struct {
	Policy    string         `json:"policy"`
	DryRun    bool           `json:"dry_run"`
	Jobs      int            `json:"jobs"`
	Tagged    int            `json:"tagged"`
	ObserveMS float64        `json:"observe_ms"`
	SolveMS   float64        `json:"solve_ms"`
	PlanError string         `json:"plan_error,omitempty"`
	Sources   []string       `json:"sources"`
	Nodes     []planNode     `json:"nodes"`
	Decisions []planDecision `json:"decisions"`
	Actions   []planAction   `json:"actions"`
}

type planNode struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// GPUType is the canonical type hadar plans with ("" if it does not use
	// the node); SiteTypes are the GPUs by the site's GRES type names.
	GPUType   string         `json:"gpu_type"`
	SiteTypes map[string]int `json:"site_types"`
	Total     int            `json:"total"`
	Used      int            `json:"used"`
	// Available is what the policy may hand out (free GPUs plus those of
	// running hadar jobs it may move).
	Available int    `json:"available"`
	Usable    bool   `json:"usable"`
	Why       string `json:"why,omitempty"`
}

type planDecision struct {
	Job      string   `json:"job"`
	Decision string   `json:"decision"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Nodes    []string `json:"nodes"`
	GPUType  string   `json:"gpu_type"`
	Reason   string   `json:"reason"`
}

type planAction struct {
	Kind    string   `json:"kind"`
	Jobs    []string `json:"jobs"`
	Nodes   []string `json:"nodes,omitempty"`
	Text    string   `json:"text,omitempty"`
	Command string   `json:"command"`
}

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "show what the policy would do now (a dry run of hadar-slurmd's round; nothing changes)",
		ArgsUsage: " ",
		Description: "Observes the cluster the way hadar-slurmd does (one squeue, one scontrol show node), runs the\n" +
			"daemon's own round in dry-run mode and prints its decisions (place, migrate, keep, wait, defer,\n" +
			"pass-through, ...) and the scontrol commands the daemon would run. It reads hadar-slurmd's\n" +
			"config if there is one (--config; defaults otherwise) and works on a throwaway copy of the\n" +
			"daemon's databases, so it never writes to them and never changes anything in Slurm. Like\n" +
			"every Slurm client it finds the cluster through SLURM_CONF and PATH.",
		Flags: append(dryRoundFlags(), &cli.StringFlag{Name: "job", Usage: "only this job's decision and its earliest expected start (like sbatch --test-only)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf(c, "unexpected arguments: %s", strings.Join(c.Args().Slice(), " "))
			}
			dr, err := runDryRound(c)
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if id := c.String("job"); id != "" {
				at, why := expectedStart(dr.Report, id)
				out := planJobOutput{Job: id, Why: why}
				if !at.IsZero() {
					out.Start = at.UTC().Format(time.RFC3339)
					out.InSeconds = max(0, at.Sub(dr.Report.Started).Seconds())
				}
				if c.Bool("json") {
					return json.NewEncoder(c.App.Writer).Encode(out)
				}
				when := "unknown"
				if out.Start != "" {
					when = at.Local().Format(time.DateTime) + fmt.Sprintf(" (in %s)", time.Duration(out.InSeconds*float64(time.Second)).Round(time.Second))
				}
				fmt.Fprintf(c.App.Writer, "job %s: expected start %s: %s\n", printable(id), when, why)
				return nil
			}
			out := buildPlan(dr)
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			printPlan(c.App.Writer, out)
			return nil
		},
	}
}

// planJobOutput is `hadar plan --job ID --json`.
type planJobOutput struct {
	Job string `json:"job"`
	// Start is the earliest expected start (RFC 3339), "" when unknown;
	// InSeconds the time to it from the round.
	Start     string  `json:"start,omitempty"`
	InSeconds float64 `json:"in_seconds,omitempty"`
	Why       string  `json:"why"`
}

// buildPlan is the pure part of `hadar plan`.
func buildPlan(dr *dryRound) planOutput {
	rep := dr.Report
	out := planOutput{Policy: rep.Policy, DryRun: true, Jobs: rep.Jobs, Tagged: rep.Tagged,
		ObserveMS: millis(rep.Observe), SolveMS: millis(rep.Solve), Sources: dr.Sources,
		Nodes: []planNode{}, Decisions: []planDecision{}, Actions: []planAction{}}
	if rep.PlanError != nil {
		out.PlanError = rep.PlanError.Error()
	}
	if rep.View != nil {
		for _, n := range rep.View.Nodes {
			gpuType := n.Type
			if n.Pools != nil {
				// A node used per GPU type (Slurm 24.11): "a100+v100".
				var ts []string
				for _, p := range n.Pools {
					ts = append(ts, p.Type)
				}
				gpuType = strings.Join(ts, "+")
			}
			out.Nodes = append(out.Nodes, planNode{Name: n.Name, State: n.State, GPUType: gpuType, SiteTypes: n.SiteTypes,
				Total: n.Total, Used: n.Used, Available: n.Available(), Usable: n.Usable, Why: n.Why})
		}
	}
	for _, d := range rep.Decisions {
		nodes := d.ToNodes
		if nodes == nil {
			nodes = []string{}
		}
		out.Decisions = append(out.Decisions, planDecision{Job: d.JobID, Decision: string(d.Kind), From: d.From, To: d.To,
			Nodes: nodes, GPUType: d.GPUType, Reason: d.Reason})
	}
	sort.SliceStable(out.Decisions, func(a, b int) bool { return lessJobID(out.Decisions[a].Job, out.Decisions[b].Job) })
	for _, a := range rep.Actions {
		out.Actions = append(out.Actions, planAction{Kind: string(a.Kind), Jobs: a.JobIDs, Nodes: a.Nodes, Text: a.Text, Command: a.String()})
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// lessJobID orders job ids numerically ("9" < "10"; "45_6" by array id,
// then task).
func lessJobID(a, b string) bool {
	pa, ta, _ := strings.Cut(a, "_")
	pb, tb, _ := strings.Cut(b, "_")
	if pa != pb {
		na, ea := strconv.Atoi(pa)
		nb, eb := strconv.Atoi(pb)
		if ea == nil && eb == nil {
			return na < nb
		}
		return pa < pb
	}
	na, ea := strconv.Atoi(ta)
	nb, eb := strconv.Atoi(tb)
	if ea == nil && eb == nil {
		return na < nb
	}
	return ta < tb
}

func printPlan(w io.Writer, out planOutput) {
	fmt.Fprintf(w, "hadar plan: policy %s; %d jobs in the queue, %d tagged; a dry run of hadar-slurmd's round: nothing was changed\n",
		out.Policy, out.Jobs, out.Tagged)
	for _, s := range out.Sources {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "  observe %.1f ms, solve %.1f ms\n", out.ObserveMS, out.SolveMS)
	if out.PlanError != "" {
		fmt.Fprintf(w, "POLICY FAILED (the daemon would only pass jobs through this round): %s\n", out.PlanError)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tGPU TYPE\tGPUS\tUSED\tFOR HADAR\tNOTE")
	for _, n := range out.Nodes {
		t := n.GPUType
		if t == "" {
			t = "-"
		} else if _, same := n.SiteTypes[t]; !same && len(n.SiteTypes) == 1 {
			for site := range n.SiteTypes {
				t += " (" + site + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", n.Name, n.State, t, n.Total, n.Used, n.Available, n.Why)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(out.Decisions) == 0 {
		fmt.Fprintln(w, "no tagged jobs to plan")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tDECISION\tFROM\tTO\tGPU TYPE\tREASON")
		for _, d := range out.Decisions {
			t := d.GPUType
			if t == "" {
				t = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Job, d.Decision, d.From, d.To, t, printable(d.Reason))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(out.Actions) == 0 {
		fmt.Fprintln(w, "hadar-slurmd would change nothing")
		return
	}
	fmt.Fprintln(w, "hadar-slurmd would run:")
	for _, a := range out.Actions {
		fmt.Fprintf(w, "  %s\n", printable(a.Command))
	}
}
