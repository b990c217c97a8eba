package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

// DefaultPath is where hadar-slurmd looks for its config file.
const DefaultPath = "/etc/hadar/hadar.toml"

// Duration is a time.Duration written in TOML as a Go duration string
// ("360s", "10m", "1h30m"). A bare number is refused: its unit would be a
// guess.
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("bad duration %q (write it with a unit, e.g. \"360s\", \"10m\")", jobproto.Clip(string(b)))
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Config is hadar-slurmd's configuration (/etc/hadar/hadar.toml). Every
// field has a default (Default), so the daemon also runs without a
// file.
type Config struct {
	// Policy is the scheduling policy, a name from optimizer.Names()
	// ("hadar", "gavel", "tiresias", ...). Default "hadar".
	Policy string `toml:"policy"`
	// Round is the time between two scheduling rounds. Default 360s.
	Round Duration `toml:"round"`
	// PollInterval is how often the daemon looks at the queue (one squeue)
	// between rounds; a new tagged job or a tagged job that finished starts
	// a round early. Default 10s.
	PollInterval Duration `toml:"poll_interval"`
	// MinRoundGap is the least time between the starts of two rounds, so a
	// stream of submissions cannot make the daemon plan continuously.
	// Default 5s.
	MinRoundGap Duration `toml:"min_round_gap"`
	// DryRun logs the actions each round would take and changes nothing in
	// Slurm. Default false.
	DryRun bool `toml:"dry_run"`
	// MigrationPenalty is what moving a running job costs (it restarts from
	// its last checkpoint): hadar's policy moves a running job to a faster
	// type only when the estimated gain in its remaining run time exceeds
	// this, and with preemption off no policy moves a running job for
	// less. Default 10m.
	MigrationPenalty Duration `toml:"migration_penalty"`
	// Preemption lets hadar stop (requeue and hold) a running job that the
	// policy no longer schedules, and move running jobs as the policy
	// plans. When false, a running job keeps its GPUs until it ends or is
	// migrated. Default false.
	Preemption bool `toml:"preemption"`
	// Order says who goes first among the waiting tagged jobs when GPUs
	// are short. "site" (the default): the site's priority, as Slurm
	// computes it (multifactor: fairshare, age, QOS, partition, nice;
	// submission order under priority/basic): the policy plans only the
	// jobs Slurm alone would start first, tier by tier of equal priority,
	// and chooses their GPU types (and among jobs of equal priority).
	// "policy": the policy's own order decides both (Hadar's shortest and
	// most-sped-up first, Gavel's fairness, ...), which may start a job
	// before others of higher priority.
	Order string `toml:"order"`
	// MoveWithoutProgress lets hadar move (and, with preemption, stop)
	// running jobs that never reported progress (`hadar report`, the
	// progress helpers). A move is a requeue: the job restarts from its
	// last checkpoint, or from the start if it keeps none, and the run it
	// throws away is billed to its user like any run (sacct shows it as a
	// REQUEUED record). Default false: only jobs that report progress,
	// and so can say where they resume, are moved.
	MoveWithoutProgress bool `toml:"move_without_progress"`
	// LaunchTimeout is how long a job hadar started may stay pending (its
	// GPUs taken by someone else meanwhile, a limit of the site) before
	// hadar gives it a lease again and re-plans it. Default 5m.
	LaunchTimeout Duration `toml:"launch_timeout"`
	// Lease is how long a tagged job waits for hadar before Slurm may
	// start it alone: job_submit.lua sets a job's begin time to its
	// submission (or its user's --begin) plus this, and hadar renews it
	// for the jobs it has not placed once less than half of it is left
	// (every poll). It must equal HADAR_LEASE_SECONDS in job_submit.lua.
	// If hadar-slurmd dies or hangs, every tagged job may be started by
	// Slurm alone within this (Slurm's next scheduling pass starts it:
	// sched_interval, 60s by default). At least 4 x poll_interval and
	// 10s. Default 2m.
	Lease Duration `toml:"lease"`
	// DefaultDuration is the run time assumed, on its fastest GPU type, for
	// a job whose tag gives no steps=. Default 1h.
	DefaultDuration Duration `toml:"default_duration"`
	// Explore is the optimism bonus of a rate this cluster has not
	// confirmed: a cell whose value in use is neither an administrator's
	// measurement nor learned here (the prior's, or imported from a matrix
	// measured elsewhere) is planned at (1 + explore) times its value until
	// the value learned from progress reports takes over, so a model seen
	// on one type is tried on another that may be faster. 0 (the default)
	// plans with the values as they are; docs/learning.md measures it. At
	// most 4.
	Explore float64 `toml:"explore"`
	// DataDir holds the daemon's state database (state.db) and, unless
	// HADAR_DB says otherwise, the throughput database (hadar.db). Default:
	// the directory of the profiles database (/var/lib/hadar for root).
	DataDir string `toml:"data_dir"`
	// SpoolDir is where jobs report progress (SpoolDir/progress/<jobid>.json,
	// see WriteProgress). It must be on a filesystem the compute nodes
	// share. Default /var/spool/hadar.
	SpoolDir string `toml:"spool_dir"`
	// DefaultModel is the job type used for tagged jobs that name no model
	// or an unknown one. Empty (the default): such jobs are handed to Slurm's
	// own scheduler.
	DefaultModel string `toml:"default_model"`
	// Throughputs is the matrix a new throughput database is seeded with
	// (an existing one keeps its rates; import into it with `hadar
	// profiles import`): "gavel" (Gavel's k80/p100/v100 measurements, the
	// default), "lambda" (Lambda's fp32 benchmark of current GPUs,
	// a100/h100/rtx4090/...), "lambda-fp16", or the absolute path of a file
	// in Gavel's JSON format. See profiles.Matrix.
	Throughputs string `toml:"throughputs"`
	// Slurm configures how Slurm's commands are run.
	Slurm SlurmConfig `toml:"slurm"`
	// GRES maps site GPU type names to canonical ones.
	GRES GRESConfig `toml:"gres"`
	// Models maps names users write in model= to job types of the matrix,
	// and bounds the job types made for models no matrix knows.
	Models ModelsConfig `toml:"models"`
	// Learning bounds what the jobs' progress reports teach the
	// throughput matrix.
	Learning LearningConfig `toml:"learning"`
	// Weights sets the site's priority weights of jobs, by account and
	// QOS.
	Weights WeightsConfig `toml:"weights"`
	// Log configures logging.
	Log LogConfig `toml:"log"`
	// Metrics configures the Prometheus endpoint.
	Metrics MetricsConfig `toml:"metrics"`
	// Policies are the knobs of each policy ([policies.hadar], ...), the
	// same for the daemon and for `hadar simulate --config`.
	Policies PoliciesConfig `toml:"policies"`
}

// PoliciesConfig is the [policies] table: one sub-table per policy that has
// knobs.
type PoliciesConfig struct {
	// Hadar tunes hadar and hadare.
	Hadar HadarPolicyConfig `toml:"hadar"`
	// HadarE tunes hadare's copies.
	HadarE HadarEPolicyConfig `toml:"hadare"`
	// Tiresias tunes tiresias.
	Tiresias TiresiasPolicyConfig `toml:"tiresias"`
}

// HadarPolicyConfig is the [policies.hadar] table (optimizer.HadarOptions).
type HadarPolicyConfig struct {
	// Critical: a job whose remaining time on its best type is at least
	// this fraction of the fluid horizon (the estimated end of all current
	// work) is critical and served first. Default 0.9.
	Critical float64 `toml:"critical"`
	// PriceRounds bounds the price search (tatonnement) per round. Default 60.
	PriceRounds int `toml:"price_rounds"`
	// FluidEvery is the rounds between solves of the fluid min-makespan LP;
	// -1 turns the LP off. Default 10.
	FluidEvery int `toml:"fluid_every"`
	// LeadShare: a job follows the LP's order of GPU types only where the LP
	// gives it at least this share of its time on some type. Default 0.3.
	LeadShare float64 `toml:"lead_share"`
	// MinShare: GPUs left after the first pass go only to jobs with at least
	// this share on the type. Default 0.05.
	MinShare float64 `toml:"min_share"`
	// ShareTie: shares closer than this are a tie, and prices decide.
	// Default 0.02.
	ShareTie float64 `toml:"share_tie"`
	// UncontendedShare: a round whose gangs need at most this share of the
	// GPUs has no scarce type; every job then prefers its fastest type.
	// Default 0.9.
	UncontendedShare float64 `toml:"uncontended_share"`
	// LeadRemaining: a job follows the LP's order of GPU types only when its
	// remaining time on its fastest type is at least this fraction of the
	// horizon (for shorter jobs the makespan LP's choice of type is
	// arbitrary); negative: whenever lead_share says so. Default 0.5.
	LeadRemaining float64 `toml:"lead_remaining"`
	// QuickShare: a job whose remaining time on its fastest type is at most
	// this fraction of the horizon is served before the critical jobs;
	// negative: off. Default 0.05.
	QuickShare float64 `toml:"quick_share"`
	// Starvation: a job whose time since submission has reached this many
	// times its fair-share time (its steps alone on 1/n of every GPU type,
	// n the jobs in the round) is served before every other job, oldest
	// first; negative: off. Default 6.
	Starvation float64 `toml:"starvation"`
	// FairDeadline: a long job (remaining time on its fastest type at least
	// lead_remaining of the cluster's load, the remaining work spread over
	// every GPU) is critical once that time reaches
	// this fraction of the time until it would end under fair sharing of
	// the cluster (a virtual equal share of every GPU type since it was
	// first seen), or once fair sharing would have ended it; negative:
	// off. Default 0.9.
	FairDeadline float64 `toml:"fair_deadline"`
	// Incumbency: a running job's remaining area counts this fraction less
	// in the shortest-area order, and its remaining time this fraction
	// more among the critical jobs and in the whole-type gang rule (twice
	// that on its preferred type), so that a waiting job stops it, or a
	// running one on a slower type takes its type, only when clearly
	// smaller or longer (two near-equal jobs would otherwise take turns, a
	// requeue each round); negative: off. Default 0.1.
	Incumbency float64 `toml:"incumbency"`
	// Probe: a critical running job whose rate on another GPU type this
	// cluster has not measured (the prior's, or an imported one not yet
	// confirmed), where that rate at (1 + probe) times its value would
	// beat the measured one of its current type, is moved once to GPUs of
	// that type left free in the round, its own GPUs held for it, until
	// the rate is measured; then it stays or goes back on what was
	// measured. Only with preemption = true (each try is a requeue);
	// negative: off. Default 0.3.
	Probe float64 `toml:"probe"`
}

// HadarEPolicyConfig is the [policies.hadare] table.
type HadarEPolicyConfig struct {
	// CopyEfficiency is the combining efficiency of K copies: they move
	// their job at efficiency(K) times their summed rate. One number for
	// every K ("1"), or K:efficiency points ("2:0.63,4:0.34,8:0.18", the
	// curve measured with the PyTorch example, docs/hadare.md), whose
	// speed-up is interpolated between them and held beyond the last. It
	// decides which copies pay (a gang becomes copies, and a job gets one
	// more copy, only if that is faster after the loss); the shares in
	// plan.json are the copies' own steps whatever it is. Default "1": the
	// copy protocol counts every copy's step as a step of the job
	// (docs/hadare-slurm.md, "The efficiency the daemon plans with").
	CopyEfficiency string `toml:"copy_efficiency"`
}

// TiresiasPolicyConfig is the [policies.tiresias] table.
type TiresiasPolicyConfig struct {
	// Thresholds are the attained-service bounds (GPU-seconds) of its
	// queues, increasing. Default [3250, 7200, 18000].
	Thresholds []float64 `toml:"thresholds"`
	// PromoteKnob: a job waiting longer than this many times its run time
	// is promoted to the first queue. Default 8.
	PromoteKnob float64 `toml:"promote_knob"`
}

// PolicyOptions are the optimizer options of this config.
func (c Config) PolicyOptions() optimizer.Options {
	h, ti := c.Policies.Hadar, c.Policies.Tiresias
	// Validate has parsed it; a bad value plans with 1.
	copyEff, _ := optimizer.ParseCopyEfficiency(c.Policies.HadarE.CopyEfficiency)
	return optimizer.Options{MigrationPenalty: c.MigrationPenalty.Duration, CopyEfficiency: copyEff, SiteOrder: c.Order == OrderSite,
		Hadar: optimizer.HadarOptions{Critical: h.Critical, PriceRounds: h.PriceRounds, FluidEvery: h.FluidEvery,
			LeadShare: h.LeadShare, MinShare: h.MinShare, ShareTie: h.ShareTie, Uncontended: h.UncontendedShare,
			LeadRemaining: h.LeadRemaining, QuickShare: h.QuickShare, Starvation: h.Starvation, FairDeadline: h.FairDeadline, Incumbency: h.Incumbency, Probe: h.Probe},
		Tiresias: optimizer.TiresiasOptions{Thresholds: append([]float64(nil), ti.Thresholds...), PromoteKnob: ti.PromoteKnob}}
}

func defaultPolicies() PoliciesConfig {
	h, ti := optimizer.DefaultHadarOptions(), optimizer.DefaultTiresiasOptions()
	return PoliciesConfig{
		Hadar: HadarPolicyConfig{Critical: h.Critical, PriceRounds: h.PriceRounds, FluidEvery: h.FluidEvery,
			LeadShare: h.LeadShare, MinShare: h.MinShare, ShareTie: h.ShareTie, UncontendedShare: h.Uncontended,
			LeadRemaining: h.LeadRemaining, QuickShare: h.QuickShare, Starvation: h.Starvation, FairDeadline: h.FairDeadline, Incumbency: h.Incumbency, Probe: h.Probe},
		HadarE:   HadarEPolicyConfig{CopyEfficiency: "1"},
		Tiresias: TiresiasPolicyConfig{Thresholds: ti.Thresholds, PromoteKnob: ti.PromoteKnob},
	}
}

// SlurmConfig is the [slurm] table.
type SlurmConfig struct {
	// BinDir is the directory of the Slurm client binaries (squeue,
	// scontrol). Empty (the default): they are found through PATH. The
	// daemon runs them as root: it refuses a bin_dir, or a program in it,
	// that anyone but root (or its own user) can change.
	BinDir string `toml:"bin_dir"`
	// CommandTimeout bounds each Slurm command. Default 60s.
	CommandTimeout Duration `toml:"command_timeout"`
}

// GRESConfig is the [gres] table.
type GRESConfig struct {
	// Aliases maps a site's GRES type name to a canonical GPU type, e.g.
	// { "tesla_v100-sxm2-32gb" = "v100" }. They are tried before the
	// profiles database's aliases (see profiles.Store.ResolveGPUType).
	Aliases map[string]string `toml:"aliases"`
}

// ModelsConfig is the [models] table.
type ModelsConfig struct {
	// NewPerRound bounds the job types one round may create for models no
	// matrix knows (each is planned with the cross-model prior, learned from
	// its progress, and stays in the throughput database): the oldest jobs'
	// models first. A job whose model finds no room is handed to Slurm's own
	// scheduler, the reason in its AdminComment. At least 1. Default 16.
	NewPerRound int `toml:"new_per_round"`
	// NewPerUser bounds the job types one user's jobs may create in one
	// round, so that no user takes every new_per_round. At least 1.
	// Default 4.
	NewPerUser int `toml:"new_per_user"`
	// Aliases maps a name users may write in model= to a job type of the
	// matrix, e.g. { "resnet50" = "ResNet-50 (batch size 64)" }.
	Aliases map[string]string `toml:"aliases"`
}

// LearningConfig is the [learning] table.
type LearningConfig struct {
	// MinInterval is the shortest interval between two reports of a job
	// that gives a learned-throughput sample (a report's time is believed
	// only between the daemon's previous look at the job and the round
	// that reads it); shorter ones wait for a later report. Default 10s, at
	// least 1s.
	MinInterval Duration `toml:"min_interval"`
}

// WeightsConfig is the [weights] table: a job's weight in the policy (the
// hadar policy divides its remaining work by it; gavel's fairness weights
// it) is its account's times its QOS's times its tag's weight= (which may
// only lower it, at most 1). An account or QOS not listed weighs 1. Each
// weight is a number > 0 and at most 1000.
type WeightsConfig struct {
	// Accounts maps a Slurm account to its weight, e.g. { "acct_a" = 2 }.
	Accounts map[string]float64 `toml:"accounts"`
	// QOS maps a Slurm QOS to its weight, e.g. { "high" = 4 }.
	QOS map[string]float64 `toml:"qos"`
}

// MaxWeight bounds an account's or QOS's weight in [weights].
const MaxWeight = 1000

// LogConfig is the [log] table.
type LogConfig struct {
	// Format is "text" (default) or "json".
	Format string `toml:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `toml:"level"`
}

// MetricsConfig is the [metrics] table.
type MetricsConfig struct {
	// Listen is the address of the Prometheus endpoint (/metrics). Default
	// "127.0.0.1:9788"; "" turns it off. A non-loopback address exposes the
	// queue's shape to the network: bind it only where that is wanted.
	Listen string `toml:"listen"`
}

// Default returns the configuration used when there is no file, and
// the values of every key a file leaves out.
func Default() Config {
	dataDir := profiles.SystemDir
	if p, err := profiles.DefaultPath(); err == nil {
		dataDir = filepath.Dir(p)
	}
	return Config{
		Policy:           "hadar",
		Round:            Duration{360 * time.Second},
		PollInterval:     Duration{10 * time.Second},
		MinRoundGap:      Duration{5 * time.Second},
		MigrationPenalty: Duration{10 * time.Minute},
		LaunchTimeout:    Duration{5 * time.Minute},
		Lease:            Duration{jobproto.DefaultLease},
		Order:            OrderSite,
		DefaultDuration:  Duration{time.Hour},
		DataDir:          dataDir,
		SpoolDir:         jobproto.DefaultSpoolDir,
		Throughputs:      profiles.DefaultMatrix,
		Slurm:            SlurmConfig{CommandTimeout: Duration{60 * time.Second}},
		Log:              LogConfig{Format: "text", Level: "info"},
		Models:           ModelsConfig{NewPerRound: 16, NewPerUser: 4},
		Learning:         LearningConfig{MinInterval: Duration{10 * time.Second}},
		Metrics:          MetricsConfig{Listen: "127.0.0.1:9788"},
		Policies:         defaultPolicies(),
	}
}

// The values of Config.Order.
const (
	OrderSite   = "site"
	OrderPolicy = "policy"
)

// ErrInvalid marks a configuration that cannot be used.
var ErrInvalid = errors.New("bad config")

// Load reads and validates the config file at path. The file must not
// be writable by everyone. A missing file is an error wrapping
// fs.ErrNotExist (the caller decides whether defaults will do).
func Load(path string) (Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if st.Mode().Perm()&0o002 != 0 {
		return Config{}, fmt.Errorf("%w: %s is writable by every user (mode %v); fix with chmod o-w", ErrInvalid, path, st.Mode().Perm())
	}
	if !st.Mode().IsRegular() {
		return Config{}, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return Parse(data, path)
}

// Parse decodes a config file's contents strictly over the defaults
// and validates the result. name is used in messages. An unknown key, a
// value of the wrong type, a bad duration or an unknown policy is an error
// naming the key and, where it can be found, its line.
func Parse(data []byte, name string) (Config, error) {
	cfg := Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			key := ""
			if pe.LastKey != "" {
				key = fmt.Sprintf(" key %q:", pe.LastKey)
			}
			return Config{}, fmt.Errorf("%w: %s:%d:%s %s", ErrInvalid, name, pe.Position.Line, key, pe.Message)
		}
		return Config{}, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		var msgs []string
		for _, k := range und {
			loc := name
			if line := findKeyLine(data, k); line > 0 {
				loc = fmt.Sprintf("%s:%d", name, line)
			}
			msgs = append(msgs, fmt.Sprintf("%s: unknown key %q", loc, k.String()))
		}
		return Config{}, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
	}
	if err := cfg.Validate(); err != nil {
		if line := findKeyLine(data, toml.Key(strings.Split(keyOf(err), "."))); line > 0 {
			return Config{}, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return cfg, nil
}

// keyError names the key a validation error is about.
type keyError struct {
	key string
	msg string
}

func (e *keyError) Error() string { return fmt.Sprintf("%v: key %q: %s", ErrInvalid, e.key, e.msg) }
func (e *keyError) Unwrap() error { return ErrInvalid }

func keyOf(err error) string {
	var ke *keyError
	if errors.As(err, &ke) {
		return ke.key
	}
	return ""
}

// findKeyLine returns the 1-based line where key is set, or 0. It follows
// [table] headers and dotted keys well enough for messages; it is not a
// TOML parser.
func findKeyLine(data []byte, key toml.Key) int {
	if len(key) == 0 {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	table := ""
	want := key.String()
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(s, "[") {
			table = strings.Trim(strings.TrimSpace(strings.Trim(s, "[]")), " ")
			if table == want {
				return line
			}
			continue
		}
		k, _, ok := strings.Cut(s, "=")
		if !ok {
			continue
		}
		k = strings.Trim(strings.TrimSpace(k), `"'`)
		full := k
		if table != "" {
			full = table + "." + k
		}
		if full == want || strings.HasPrefix(want, full+".") {
			return line
		}
	}
	return 0
}

// Validate checks the values of a config.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return &keyError{key: key, msg: fmt.Sprintf(format, args...)}
	}
	if !contains(optimizer.Names(), c.Policy) {
		return bad("policy", "unknown policy %q (known: %s)", c.Policy, strings.Join(optimizer.Names(), ", "))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
		min time.Duration
	}{
		{"round", c.Round.Duration, time.Second},
		{"poll_interval", c.PollInterval.Duration, 10 * time.Millisecond},
		{"min_round_gap", c.MinRoundGap.Duration, 0},
		{"migration_penalty", c.MigrationPenalty.Duration, 0},
		{"launch_timeout", c.LaunchTimeout.Duration, time.Second},
		{"lease", c.Lease.Duration, 10 * time.Second},
		{"default_duration", c.DefaultDuration.Duration, time.Second},
		{"slurm.command_timeout", c.Slurm.CommandTimeout.Duration, time.Second},
		{"learning.min_interval", c.Learning.MinInterval.Duration, time.Second},
	} {
		if d.v < d.min {
			return bad(d.key, "%v is below the minimum %v", d.v, d.min)
		}
	}
	if c.Order != OrderSite && c.Order != OrderPolicy {
		return bad("order", "%q: want %q or %q", c.Order, OrderSite, OrderPolicy)
	}
	if c.Explore < 0 || c.Explore > 4 || math.IsNaN(c.Explore) {
		return bad("explore", "%v: want a bonus from 0 to 4", c.Explore)
	}
	if _, err := optimizer.ParseCopyEfficiency(c.Policies.HadarE.CopyEfficiency); err != nil {
		return bad("policies.hadare.copy_efficiency", "%v", err)
	}
	// The optimizer's messages start with the key ("critical = 2: ...").
	o := c.PolicyOptions()
	for table, err := range map[string]error{"policies.hadar": o.Hadar.Validate(), "policies.tiresias": o.Tiresias.Validate()} {
		if err != nil {
			key, _, _ := strings.Cut(err.Error(), " ")
			return bad(table+"."+key, "%v", err)
		}
	}
	if c.Lease.Duration < 4*c.PollInterval.Duration {
		return bad("lease", "%v is shorter than 4 x poll_interval (%v): a poll renews a lease once half of it is left", c.Lease.Duration, c.PollInterval.Duration)
	}
	if c.MinRoundGap.Duration > c.Round.Duration {
		return bad("min_round_gap", "%v is longer than round (%v)", c.MinRoundGap.Duration, c.Round.Duration)
	}
	if c.DataDir == "" || !filepath.IsAbs(c.DataDir) {
		return bad("data_dir", "%q: want an absolute path", c.DataDir)
	}
	if c.SpoolDir == "" || !filepath.IsAbs(c.SpoolDir) {
		return bad("spool_dir", "%q: want an absolute path", c.SpoolDir)
	}
	if !profiles.IsBuiltinMatrix(c.Throughputs) && !filepath.IsAbs(c.Throughputs) {
		return bad("throughputs", "%q: want %s, or an absolute path", c.Throughputs, strings.Join(profiles.MatrixNames(), ", "))
	}
	if c.Slurm.BinDir != "" && !filepath.IsAbs(c.Slurm.BinDir) {
		return bad("slurm.bin_dir", "%q: want an absolute path", c.Slurm.BinDir)
	}
	for site, canon := range c.GRES.Aliases {
		if strings.TrimSpace(site) == "" || strings.TrimSpace(canon) == "" {
			return bad("gres.aliases", "empty name in %q = %q", site, canon)
		}
	}
	if c.Models.NewPerRound < 1 {
		return bad("models.new_per_round", "%d: want at least 1", c.Models.NewPerRound)
	}
	if c.Models.NewPerUser < 1 {
		return bad("models.new_per_user", "%d: want at least 1", c.Models.NewPerUser)
	}
	for key, m := range map[string]map[string]float64{"weights.accounts": c.Weights.Accounts, "weights.qos": c.Weights.QOS} {
		for name, w := range m {
			if strings.TrimSpace(name) == "" {
				return bad(key, "empty name")
			}
			if !(w > 0 && w <= MaxWeight) {
				return bad(key, "%q = %v: want a number > 0 and at most %d", name, w, MaxWeight)
			}
		}
	}
	for from, to := range c.Models.Aliases {
		if jobproto.NormalizeModel(from) == "" || strings.TrimSpace(to) == "" {
			return bad("models.aliases", "empty name in %q = %q", from, to)
		}
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return bad("log.format", "%q: want \"text\" or \"json\"", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			return bad("metrics.listen", "%q: want host:port", c.Metrics.Listen)
		}
	}
	return nil
}

// Diff lists the keys whose values differ between c and o, as
// "key: old -> new" (for the log when the config is reloaded).
func (c Config) Diff(o Config) []string {
	var out []string
	diffStruct(reflect.ValueOf(c), reflect.ValueOf(o), "", &out)
	sort.Strings(out)
	return out
}

func diffStruct(a, b reflect.Value, prefix string, out *[]string) {
	t := a.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("toml"), ",")[0]
		if name == "" {
			continue
		}
		key := prefix + name
		av, bv := a.Field(i), b.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(Duration{}) {
			diffStruct(av, bv, key+".", out)
			continue
		}
		if !reflect.DeepEqual(av.Interface(), bv.Interface()) {
			*out = append(*out, fmt.Sprintf("%s: %v -> %v", key, show(av), show(bv)))
		}
	}
}

func show(v reflect.Value) any {
	if d, ok := v.Interface().(Duration); ok {
		return d.Duration
	}
	return v.Interface()
}

// LoadOrDefault reads path like Load; if the file does not exist
// and missingOK is set, it returns Default().
func LoadOrDefault(path string, missingOK bool) (Config, bool, error) {
	cfg, err := Load(path)
	if err != nil && missingOK && errors.Is(err, fs.ErrNotExist) {
		return Default(), false, nil
	}
	return cfg, err == nil, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
