// Command hadar-slurmd is the hadar daemon that runs beside slurmctld: every
// round it observes the Slurm queue, plans the jobs tagged
// --comment=hadar with a policy, and places them with scontrol (see package
// bridge). On SIGTERM or SIGINT it stops and hands every held hadar job
// back to Slurm's own scheduler; on SIGHUP it reloads its config.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/pathtrust"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

var version = "dev"

type options struct {
	config     string
	configSet  bool
	dryRun     bool
	releaseAll bool
	once       bool
	logFormat  string
	logLevel   string
	round      time.Duration
	roundSet   bool
	policy     string
	version    bool
	guard      bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := newFlagSet(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "config":
			o.configSet = true
		case "round":
			o.roundSet = true
		}
	})
	return o, nil
}

// newFlagSet defines hadar-slurmd's flags, stored into o. The man page
// hadar-slurmd(8) is generated from it (man_test.go).
func newFlagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hadar-slurmd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := config.DefaultPath
	if env := os.Getenv("HADAR_CONFIG"); env != "" {
		def = env
		o.configSet = true
	}
	fs.StringVar(&o.config, "config", def, "config file (env HADAR_CONFIG); without one the defaults are used")
	fs.BoolVar(&o.dryRun, "dry-run", false, "log the actions each round would take; change nothing in Slurm")
	fs.BoolVar(&o.releaseAll, "release-all", false, "release every held hadar job to Slurm's scheduler, then exit")
	fs.BoolVar(&o.once, "once", false, "run one round, then exit")
	fs.StringVar(&o.logFormat, "log-format", "", "log format: text or json (overrides [log] format)")
	fs.StringVar(&o.logLevel, "log-level", "", "log level: debug, info, warn, error (overrides [log] level)")
	fs.DurationVar(&o.round, "round", 0, "time between rounds (overrides round)")
	fs.StringVar(&o.policy, "policy", "", "scheduling policy (overrides policy)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.guard, "fail-open-guard", false, "internal: the fail-open guardian the daemon starts (it releases the held jobs if the daemon dies without its clean stop)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hadar-slurmd [flags]\n\nThe hadar scheduler beside slurmctld. Flags:\n")
		printFlags(stderr, fs)
	}
	return fs
}

// loadConfig reads the config file (defaults if it is the default path and
// missing), checks that no one but root or the daemon's user can change
// it or what it names (config.CheckTrusted), and applies the flags over
// it.
func loadConfig(o options) (config.Config, string, error) {
	cfg, found, err := config.LoadOrDefault(o.config, !o.configSet)
	if err != nil {
		return cfg, "", err
	}
	src, trusted := o.config, o.config
	if !found {
		src, trusted = "defaults (no "+o.config+")", ""
	}
	// Root acts on what the config names: only root (or the daemon's own
	// user) may be able to change it.
	if err := config.CheckTrusted(trusted, cfg, os.Geteuid()); err != nil {
		return cfg, "", err
	}
	if o.dryRun {
		cfg.DryRun = true
	}
	if o.logFormat != "" {
		cfg.Log.Format = o.logFormat
	}
	if o.logLevel != "" {
		cfg.Log.Level = o.logLevel
	}
	if o.roundSet {
		// Validate checks it with the config file's rule (at least 1s).
		cfg.Round = config.Duration{Duration: o.round}
		if cfg.MinRoundGap.Duration > o.round && o.round > 0 {
			cfg.MinRoundGap = config.Duration{Duration: o.round}
		}
	}
	if o.policy != "" {
		cfg.Policy = o.policy
	}
	return cfg, src, cfg.Validate()
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "hadar-slurmd:", err)
		return 2
	}
	if o.guard {
		return guard(o, os.Stdin, stderr)
	}
	if o.version {
		fmt.Fprintln(stdout, "hadar-slurmd", version)
		return 0
	}
	cfg, src, err := loadConfig(o)
	if err != nil {
		fmt.Fprintln(stderr, "hadar-slurmd:", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	log.Info("hadar-slurmd starting", "version", version, "config", src, "policy", cfg.Policy, "round", cfg.Round.Duration,
		"dry_run", cfg.DryRun, "data_dir", cfg.DataDir, "spool_dir", cfg.SpoolDir)

	if msg := bridge.CheckScriptLease(os.Getenv("SLURM_CONF"), cfg.Lease.Duration); msg != "" {
		log.Error("job_submit.lua and hadar.toml disagree on the lease; jobs' --begin will be read wrong", "problem", msg)
	}

	// Root writes in data_dir (the lock, the databases) and opens parts of
	// spool_dir to every job: no one else may be able to change either, or
	// put a symlink on the way.
	if err := pathtrust.MkdirAll(cfg.DataDir, 0o750, os.Geteuid()); err != nil {
		fmt.Fprintln(stderr, "hadar-slurmd: data_dir:", err)
		return 2
	}
	if !cfg.DryRun && !o.releaseAll {
		if err := pathtrust.MkdirAll(cfg.SpoolDir, 0o755, os.Geteuid()); err != nil {
			fmt.Fprintln(stderr, "hadar-slurmd: spool_dir:", err)
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// One daemon per data_dir: a second one exits here, before it touches
	// Slurm or a database. A dry run changes nothing and may run beside.
	if !cfg.DryRun {
		role := bridge.LockDaemon
		if o.releaseAll {
			role = bridge.LockReleaseAll
		}
		lock, err := bridge.AcquireLockWaiting(cfg.DataDir, role, 30*time.Second)
		if err != nil {
			log.Error("not starting", "err", err)
			fmt.Fprintln(stderr, "hadar-slurmd:", err)
			return 1
		}
		defer lock.Release()
	}

	// Fail-open needs Slurm's clients and the state database alone: a
	// corrupt or newer hadar.db, or a bad throughputs file, must not
	// strand the held jobs.
	var store bridge.Profiles = noThroughputs{}
	if !o.releaseAll {
		s, err := openStore(ctx, cfg)
		if err != nil {
			log.Error("cannot open the throughput database", "err", err)
			return 1
		}
		defer s.Close()
		store = s
	}
	var metrics *bridge.Metrics
	if cfg.Metrics.Listen != "" && !o.once && !o.releaseAll {
		metrics = bridge.NewMetrics()
	}
	cluster := bridge.NewSlurmCluster(cfg.Slurm.BinDir, cfg.Slurm.CommandTimeout.Duration, log)
	b, err := bridge.New(cfg, bridge.Deps{Cluster: cluster, Store: store, Logger: log, Metrics: metrics})
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer b.Close()
	if !cfg.DryRun && !o.releaseAll {
		if err := jobproto.EnsureProgressDir(cfg.SpoolDir); err != nil {
			log.Warn("cannot create the progress directory; jobs cannot report progress", "dir", cfg.SpoolDir, "err", err)
		}
	}

	switch {
	case o.releaseAll:
		if _, err := b.ReleaseAll(ctx); err != nil {
			log.Error("release all failed", "err", err)
			return 1
		}
		return 0
	case o.once:
		rep, err := b.Cycle(ctx)
		if err != nil {
			log.Error("round failed", "err", err)
			return 1
		}
		for _, a := range rep.Actions {
			prefix := ""
			if cfg.DryRun {
				prefix = "would run: "
			}
			fmt.Fprintln(stdout, prefix+a.String())
		}
		return 0
	}

	if !cfg.DryRun {
		if w, err := startGuardian(guardianArgs(o), log); err != nil {
			log.Warn("no fail-open guardian: if the daemon is killed, its jobs wait until their leases run out (or `hadar-slurmd --release-all`)", "err", err)
		} else {
			defer cleanStop(w)
		}
	}
	go feedWatchdog(ctx, watchdogInterval(), b.Alive)
	sdNotify("READY=1")
	if metrics != nil {
		go func() {
			if err := metrics.Serve(ctx, cfg.Metrics.Listen, log); err != nil {
				log.Error("metrics endpoint failed", "addr", cfg.Metrics.Listen, "err", err)
			}
		}()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload(b, o, log)
			}
		}
	}()

	_ = b.Run(ctx)
	sdNotify("STOPPING=1")
	log.Info("stopping: handing every held hadar job back to Slurm's scheduler")
	code := releaseOnExit(b, log)
	if code == 0 {
		if err := b.MarkStopped(); err != nil {
			log.Warn("could not mark the status file stopped", "err", err)
		}
	}
	return code
}

// openStore opens the throughput database (HADAR_DB, or data_dir/hadar.db),
// seeding a new one with the configured matrix.
func openStore(ctx context.Context, cfg config.Config) (*profiles.Store, error) {
	dbPath := os.Getenv("HADAR_DB")
	if dbPath == "" {
		dbPath = filepath.Join(cfg.DataDir, profiles.DBFile)
	}
	seedMatrix, err := profiles.Matrix(cfg.Throughputs)
	if err != nil {
		return nil, fmt.Errorf("the throughputs matrix: %w", err)
	}
	return profiles.Open(ctx, dbPath, profiles.WithSeedMatrix(seedMatrix))
}

// errNoThroughputs is what noThroughputs answers.
var errNoThroughputs = errors.New("the throughput database is not opened by --release-all")

// noThroughputs is the throughput database of a fail-open: releasing the
// held jobs reads no rate, so --release-all (and the guardian) never opens
// hadar.db.
type noThroughputs struct{}

func (noThroughputs) Throughputs(context.Context) (optimizer.Throughputs, error) {
	return nil, errNoThroughputs
}

func (noThroughputs) ResolveGPUType(context.Context, string) (string, error) {
	return "", errNoThroughputs
}

func (noThroughputs) RecordObservations(_ context.Context, obs []profiles.Observation) []error {
	errs := make([]error, len(obs))
	for i := range errs {
		errs[i] = errNoThroughputs
	}
	return errs
}

func reload(b *bridge.Bridge, o options, log *slog.Logger) {
	cfg, src, err := loadConfig(o)
	if err != nil {
		log.Error("SIGHUP: config not reloaded", "err", err)
		return
	}
	changes, err := b.Reload(cfg)
	if err != nil {
		log.Error("SIGHUP: config partly reloaded", "err", err)
	}
	if len(changes) == 0 {
		log.Info("SIGHUP: config reloaded, nothing changed", "config", src)
		return
	}
	for _, c := range changes {
		log.Info("SIGHUP: config changed", "change", c)
		if strings.HasPrefix(c, "log.") || strings.HasPrefix(c, "metrics.") || strings.HasPrefix(c, "slurm.") {
			log.Warn("SIGHUP: this change applies after a restart", "change", c)
		}
	}
}

// releaseOnExit is the fail-open step: a few tries within ~30 s.
func releaseOnExit(b *bridge.Bridge, log *slog.Logger) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for try := 1; ; try++ {
		_, err := b.ReleaseAll(ctx)
		if err == nil {
			return 0
		}
		if try == 3 || ctx.Err() != nil {
			log.Error("could not release the held hadar jobs; run `hadar-slurmd --release-all` or `scontrol release` as root", "err", err)
			return 1
		}
		log.Warn("release all failed; retrying", "try", try, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try) * 2 * time.Second):
		}
	}
}

// printFlags lists the flags as the man page writes them (--name; Go's
// flag package accepts both - and --).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
