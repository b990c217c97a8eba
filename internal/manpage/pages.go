package manpage

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/profiles"
)

// The files of the pages.
const (
	HadarFile       = "hadar.1"
	HadarSlurmdFile = "hadar-slurmd.8"
	HadarTomlFile   = "hadar.toml.5"
)

const seeAlso = `\fBhadar\fR(1), \fBhadar\-slurmd\fR(8), \fBhadar.toml\fR(5), \fBsbatch\fR(1), \fBscontrol\fR(1), \fBslurm.conf\fR(5), \fBjob_submit.lua\fR in /usr/local/share/hadar`

// dbDefault describes the throughput database's default path, which
// depends on the user (profiles.DefaultPath).
const dbDefault = "/var/lib/hadar/hadar.db for root, else $XDG_DATA_HOME/hadar/hadar.db or ~/.local/share/hadar/hadar.db"

// envDocs describe the environment variables hadar's flags read.
var envDocs = map[string]string{
	"HADAR_DB":            "The throughput database (the heterogeneity matrix), shared with hadar-slurmd. Default: " + dbDefault + ".",
	"HADAR_CONFIG":        "hadar-slurmd's config file. Default: /etc/hadar/hadar.toml.",
	"HADAR_STATE_DB":      "hadar-slurmd's state database, for `hadar history`. Default: state.db in the config's data_dir.",
	"HADAR_SLURM_BIN_DIR": "Directory of the Slurm client binaries. Default: found through PATH.",
	"HADAR_SPOOL":         "hadar-slurmd's spool directory, where `hadar report` writes. Default: /var/spool/hadar.",
	"SLURM_JOB_ID":        "Set by Slurm inside a job: the job `hadar report` reports for.",
}

// Hadar generates hadar(1) from the CLI's command tree.
func Hadar(app *cli.App) (string, error) {
	r := newRoff("hadar", "1", "User Commands")
	r.sh("NAME")
	r.line(`hadar \- ` + escape(app.Usage))
	r.sh("SYNOPSIS")
	r.line(bold(app.Name) + ` [\fIglobal options\fR] \fIcommand\fR [\fIcommand options\fR] [\fIarguments\fR ...]`)
	r.sh("DESCRIPTION")
	r.text(app.Description)
	r.text("Every command has `--help`. Commands that read the cluster (`hadar status`) find it\n" +
		"like every Slurm client, through SLURM_CONF and PATH, and need no hadar config.")
	r.sh("GLOBAL OPTIONS")
	for _, f := range app.VisibleFlags() {
		if d, ok := cliFlagDoc(f, nil); ok {
			r.item(d.tag(), d.text())
		}
	}
	r.item(bold("--help")+", "+bold("-h"), "Show help (also after any command).")
	r.item(bold("--version")+", "+bold("-v"), "Print the version.")
	r.sh("COMMANDS")
	envUse := map[string][]string{}
	envFallback := map[string]string{} // the first flag's usage, for variables envDocs lacks
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := append(append([]string(nil), path...), c.Name)
			head := bold(strings.Join(p, " "))
			var flags []flagDoc
			for _, f := range c.Flags {
				d, ok := cliFlagDoc(f, userDefault)
				if !ok || d.names[0] == "help" {
					continue
				}
				flags = append(flags, d)
				for _, e := range d.env {
					envUse[e] = append(envUse[e], "`"+strings.Join(p, " ")+" --"+d.names[0]+"`")
					if _, ok := envFallback[e]; !ok {
						envFallback[e] = capitalize(strings.TrimSpace(d.usage))
					}
				}
			}
			if len(flags) > 0 {
				head += ` [\fIoptions\fR]`
			}
			if len(c.Subcommands) > 0 {
				head += ` \fIcommand\fR`
			}
			if a := strings.TrimSpace(c.ArgsUsage); a != "" {
				head += " " + italic(a)
			}
			r.ss(head)
			usage := capitalize(c.Usage)
			if !strings.HasSuffix(usage, ".") {
				usage += "."
			}
			if len(c.Aliases) > 0 {
				usage += " Alias: " + strings.Join(c.Aliases, ", ") + "."
			}
			r.text(usage)
			if c.Description != "" {
				r.text(c.Description)
			}
			for _, d := range flags {
				r.item(d.tag(), d.text())
			}
			walk(p, c.Subcommands)
		}
	}
	walk([]string{app.Name}, app.Commands)

	r.sh("ENVIRONMENT")
	envs := make([]string, 0, len(envUse))
	for e := range envUse {
		envs = append(envs, e)
	}
	sort.Strings(envs)
	for _, e := range envs {
		doc := envDocs[e]
		if doc == "" {
			doc = strings.TrimSuffix(envFallback[e], ".") + "."
		}
		r.item(bold(e), doc+" Read by "+strings.Join(dedup(envUse[e]), ", ")+".")
	}
	r.item(bold("SLURM_CONF")+", "+bold("PATH"), "Where the Slurm clients that `hadar status` runs find the cluster and themselves.")
	r.sh("FILES")
	r.item(italic("/etc/hadar/hadar.toml"), "hadar-slurmd's configuration (hadar.toml(5)); `hadar config check` validates it.")
	r.item(italic("/var/lib/hadar/hadar.db"), "The throughput database (the heterogeneity matrix), when hadar runs as root.")
	r.item(italic("/var/lib/hadar/state.db"), "hadar-slurmd's state database, read by `hadar history`.")
	r.item(italic("/var/spool/hadar/progress/"), "Where `hadar report` leaves a job's progress for hadar-slurmd.")
	r.sh("EXIT STATUS")
	r.item(bold("0"), "Success.")
	r.item(bold("1"), "A runtime error: a file or database that cannot be read, an invalid config or\n"+
		"trace, a simulation in which a policy left jobs unfinished (without --allow-incomplete).\n"+
		"The message is one line on standard error.")
	r.item(bold("2"), "A usage error: an unknown command or flag, a missing required flag, a wrong number\n"+
		"of arguments, a flag value out of range or flags that exclude each other. Two lines on\n"+
		"standard error name the problem and the command's --help; nothing is printed on\n"+
		"standard output. Flags may follow a command's arguments; `--` ends the flags.")
	r.sh("SEE ALSO")
	r.line(seeAlso)
	return r.String(), nil
}

// userDefault replaces defaults that depend on the user running the
// generator.
func userDefault(name, def string) string {
	if p, err := profiles.DefaultPath(); err == nil && def == p {
		return dbDefault
	}
	return def
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// slurmdPlaceholders name the values of hadar-slurmd's flags.
var slurmdPlaceholders = map[string]string{
	"config": "FILE", "log-format": "FORMAT", "log-level": "LEVEL", "round": "DURATION", "policy": "NAME",
}

// HadarSlurmd generates hadar-slurmd(8) from the daemon's flags.
func HadarSlurmd(fs *flag.FlagSet) (string, error) {
	flags := flagSetDocs(fs, slurmdPlaceholders)
	if len(flags) == 0 {
		return "", fmt.Errorf("hadar-slurmd has no flags")
	}
	r := newRoff("hadar-slurmd", "8", "System Administration")
	r.sh("NAME")
	r.line(`hadar\-slurmd \- place Slurm GPU jobs where they run fastest (hadar's daemon beside slurmctld)`)
	r.sh("SYNOPSIS")
	syn := bold("hadar-slurmd")
	for _, f := range flags {
		s := "[" + bold("--"+f.names[0])
		if f.placeholder != "" {
			s += " " + italic(f.placeholder)
		}
		syn += " " + s + "]"
	}
	r.line(syn)
	r.sh("DESCRIPTION")
	r.text(`hadar-slurmd runs beside slurmctld and schedules the jobs that users tag with
` + "`sbatch --comment=hadar`" + ` (optionally followed by model=NAME steps=N copies=N weight=W).
job_submit.lua holds those jobs at submission, so Slurm's own scheduler never starts
them; every round (` + "`round`" + `, default 6 minutes, and early when tagged jobs arrive or end)
hadar-slurmd observes the queue and the nodes with one squeue and one scontrol show node,
asks its policy (default hadar) which jobs run on which GPU types, checks the plan, and
carries it out with scontrol: it places a held job on nodes of the chosen GPU type
(NodeList) and releases it, and migrates a running job (requeuehold, NodeList,
release) only when the estimated gain exceeds ` + "`migration_penalty`" + `. It never
touches a job that is not tagged.

Jobs request GPUs as usual (` + "`--gres=gpu:N`" + `, ` + "`--gpus=N`" + `, ` + "`--gpus-per-node`" + `,
` + "`--gpus-per-task`" + `; a typed request limits the job to its type); hadar chooses the GPU type by
choosing the node, within the job's constraint, excluded nodes, partition, CPUs and memory.
Site GPU type names map to the canonical types of the heterogeneity matrix through
[gres] aliases or ` + "`hadar profiles alias set`" + `. A tagged job hadar cannot schedule (a bad
tag, an unknown GPU type, a request no live node can hold) is released to Slurm's scheduler
with the reason in its AdminComment; a model no matrix knows is planned with the prior.
One daemon runs per data_dir; if it dies without its clean stop, its fail-open guardian
releases the held jobs.

Fail-open: when hadar-slurmd stops (SIGTERM, SIGINT) it releases every held tagged job
to Slurm's own scheduler before it exits, so no job waits for a daemon that is gone;
` + "`hadar-slurmd --release-all`" + ` does the same by hand.

State (rounds, decisions, scontrol actions, placements, progress estimates, history) is
kept in data_dir/state.db; on a restart the daemon rebuilds everything else from Slurm
and never applies an action twice. Jobs report progress with ` + "`hadar report --steps N`" + `,
which improves the learned throughputs.`)
	r.sh("OPTIONS")
	for _, f := range flags {
		r.item(f.tag(), f.text())
	}
	r.item(bold("-h")+", "+bold("--help"), "Show the options and exit.")
	r.text("The options override the config file's keys of the same name.")
	r.sh("SIGNALS")
	r.item(bold("SIGHUP"), "Reload the config file. An invalid file is logged and the old configuration stays in\n"+
		"force. Changes apply from the next round; [log], [metrics] and [slurm] changes apply\n"+
		"after a restart, and data_dir cannot change while running. `systemctl reload\n"+
		"hadar-slurmd` sends it.")
	r.item(bold("SIGTERM")+", "+bold("SIGINT"), "Stop: finish or abandon the current round, release every held hadar job to Slurm's\n"+
		"scheduler (three tries within 30 seconds), then exit. The systemd unit waits up to\n"+
		"TimeoutStopSec=90s for this.")
	r.sh("ENVIRONMENT")
	r.item(bold("HADAR_CONFIG"), envDocs["HADAR_CONFIG"]+" --config overrides it. A file named this\nway must exist; the default file may be missing (the defaults are used).")
	r.item(bold("HADAR_DB"), "The throughput database. Default: data_dir/hadar.db.")
	r.item(bold("SLURM_CONF")+", "+bold("PATH"), "How the Slurm clients find the cluster and themselves (see also [slurm] bin_dir).\n"+
		"Under systemd, set them in /etc/default/hadar-slurmd.")
	r.sh("FILES")
	r.item(italic("/etc/hadar/hadar.toml"), "The configuration, hadar.toml(5). A commented example is installed as\n/etc/hadar/hadar.toml.example.")
	r.item(italic("/var/lib/hadar/state.db"), "The state database (data_dir/state.db, mode 0600). A corrupt file is moved aside\n(state.db.corrupt-TIME) and replaced: history is lost, jobs are not.")
	r.item(italic("/var/lib/hadar/hadar.db"), "The throughput database (data_dir/hadar.db), shared with `hadar profiles`.\n"+
		"--release-all (and the fail-open on stop) never opens it.")
	r.item(italic("/var/spool/hadar/progress/"), "Progress reports of the jobs (spool_dir, on a filesystem the compute nodes share).")
	r.item(italic("hadar-slurmd.service"), "The systemd unit, in /usr/local/lib/systemd/system (make install).")
	r.sh("EXIT STATUS")
	r.item(bold("0"), "Stopped, and every held hadar job released (or --once, --release-all succeeded).")
	r.item(bold("1"), "A runtime failure: a database cannot be opened, the round of --once failed, or the\n"+
		"held jobs could not be released on exit (release them with `hadar-slurmd --release-all`).")
	r.item(bold("2"), "Bad options or configuration, or a config file, slurm.bin_dir, data_dir or spool_dir\n"+
		"that anyone but root (or the daemon's own user) could change; nothing was started.")
	r.sh("LOGGING")
	r.text("Logs go to standard error (the journal under systemd) as key=value text or, with\n" +
		"--log-format json, one JSON object a line. Each decision is one line with msg=decision\n" +
		"and job, decision (place, migrate, preempt, pass-through, rehold, ...), from, to,\n" +
		"gpu_type and reason; each round ends with a msg=round summary. The decisions that\n" +
		"change nothing are logged at debug level.")
	r.sh("METRICS")
	r.text("With [metrics] listen set (default 127.0.0.1:9788), Prometheus metrics are served at\n" +
		"http://ADDR/metrics: hadar_rounds_total{result}, hadar_round_duration_seconds{phase}\n" +
		"(observe, solve, enforce), hadar_jobs{class}, hadar_gpus{type,state} (free, hadar,\n" +
		"others), hadar_slurm_actions_total{kind,result}, hadar_slurm_errors_total{class},\n" +
		"hadar_throughput_samples_total, and the Go and process collectors.")
	r.sh("EXAMPLES")
	r.text("Watch what hadar would do, changing nothing:\n\n" +
		"  hadar-slurmd --dry-run --once\n\n" +
		"Run as a service, reload after editing the config, hand every job back to Slurm:\n\n" +
		"  systemctl enable --now hadar-slurmd\n" +
		"  hadar config check && systemctl reload hadar-slurmd\n" +
		"  systemctl stop hadar-slurmd")
	r.sh("SEE ALSO")
	r.line(seeAlso)
	return r.String(), nil
}

// HadarToml generates hadar.toml(5) from config/config.go's source (doc
// comments) and the Config type (keys, defaults).
func HadarToml(configSource []byte) (string, error) {
	keys, tables, err := configDocs(configSource)
	if err != nil {
		return "", err
	}
	r := newRoff("hadar.toml", "5", "File Formats")
	r.sh("NAME")
	r.line(`hadar.toml \- configuration file of hadar\-slurmd`)
	r.sh("SYNOPSIS")
	r.line(italic("/etc/hadar/hadar.toml"))
	r.sh("DESCRIPTION")
	r.text(`hadar-slurmd(8) reads /etc/hadar/hadar.toml, or the file named by its --config option or
$HADAR_CONFIG. The file is TOML (https://toml.io). Every key is optional: a key the file
leaves out has its default, and without a file at the default path the daemon runs on the
defaults. A commented example with every key is installed as
/etc/hadar/hadar.toml.example.

The file is read strictly: an unknown key, a value of the wrong type, a duration without a
unit, or an unknown policy is an error that names the key and its line, and the daemon does
not start (on SIGHUP, the configuration in force is kept). The file must not be writable by
every user. hadar-slurmd acts as root on what it names, so it also refuses the file unless
the file, every directory above it, slurm.bin_dir with the Slurm programs in it, and a
throughputs file are owned by root (or the daemon's own user) and not writable by group or
others; the error names the file and the chown or chmod that fixes it.
` + "`hadar config check [FILE]`" + ` validates a file and prints the configuration in
effect.

Durations are strings with a unit, as Go writes them: "90s", "6m", "1h30m". Most keys
apply from the next round after SIGHUP (` + "`systemctl reload hadar-slurmd`" + `); [log],
[metrics] and [slurm] apply after a restart, and data_dir cannot change while running.`)
	r.sh("KEYS")
	writeKeys := func(table string) {
		for _, k := range keys {
			if k.Table != table {
				continue
			}
			if k.Kind == "map" {
				r.item(bold("["+k.Key+"]")+" ("+tableOf(k.Elem)+")", k.Doc)
				continue
			}
			r.item(bold(k.Name)+" = "+escape(k.Default), k.Doc)
		}
	}
	writeKeys("")
	for _, t := range tables {
		r.ss(bold("[" + t.Name + "]"))
		r.text(t.Doc)
		writeKeys(t.Name)
	}
	r.sh("EXAMPLE")
	r.text(`  policy = "hadar"
  round = "6m"
  migration_penalty = "10m"
  data_dir = "/var/lib/hadar"
  spool_dir = "/shared/hadar/spool"

  [gres.aliases]
  "tesla_v100-sxm2-32gb" = "v100"

  [models.aliases]
  "resnet50" = "ResNet-50 (batch size 64)"

  [log]
  format = "json"`)
	r.sh("FILES")
	r.item(italic("/etc/hadar/hadar.toml"), "The configuration.")
	r.item(italic("/etc/hadar/hadar.toml.example"), "The commented example, with every key at its default.")
	r.sh("SEE ALSO")
	r.line(seeAlso)
	return r.String(), nil
}

// ConfigMarkdown generates docs/config.md, the same reference as
// hadar.toml(5) for reading on the web.
func ConfigMarkdown(configSource []byte) (string, error) {
	keys, tables, err := configDocs(configSource)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("<!-- Generated by internal/manpage from config/config.go; do not edit. Regenerate with `make man`. -->\n")
	b.WriteString("# hadar.toml: hadar-slurmd's configuration\n\n")
	b.WriteString("hadar-slurmd reads `" + config.DefaultPath + "` (or `--config FILE`, or `$HADAR_CONFIG`). Every key is\n" +
		"optional; the defaults are below and in the commented example\n" +
		"[`contrib/hadar.toml`](../contrib/hadar.toml) (installed as `/etc/hadar/hadar.toml.example`).\n" +
		"The file is read strictly: an unknown key, a wrong type, a duration without a unit or an\n" +
		"unknown policy is an error naming the key and the line. hadar-slurmd also refuses the file\n" +
		"unless it, every directory above it, `slurm.bin_dir` with the Slurm programs in it, and a\n" +
		"`throughputs` file are owned by root (or the daemon's own user) and not writable by group\n" +
		"or others ([security](security.md)). Check a file with\n" +
		"`hadar config check FILE`; apply changes with `systemctl reload hadar-slurmd` (SIGHUP;\n" +
		"`[log]`, `[metrics]` and `[slurm]` need a restart, `data_dir` cannot change while running).\n" +
		"Durations are strings with a unit: `\"90s\"`, `\"6m\"`, `\"1h30m\"`. The same reference is\n" +
		"`man 5 hadar.toml`.\n")
	writeTable := func(table string) {
		b.WriteString("\n| key | type | default | meaning |\n|---|---|---|---|\n")
		for _, k := range keys {
			if k.Table != table {
				continue
			}
			name, kind, def := "`"+k.Name+"`", k.Kind, "`"+k.Default+"`"
			if k.Kind == "map" {
				name, kind, def = "`["+k.Key+"]`", tableOf(k.Elem), "empty"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, kind, def, mdCell(k.Doc))
		}
	}
	b.WriteString("\n## Top level\n")
	writeTable("")
	for _, t := range tables {
		fmt.Fprintf(&b, "\n## [%s]\n\n%s\n", t.Name, t.Doc)
		writeTable(t.Name)
	}
	return b.String(), nil
}

func mdCell(s string) string {
	s = strings.ReplaceAll(s, "\n\n", "<br>")
	s = strings.ReplaceAll(s, "|", `\|`)
	return s
}

// tableOf names a TOML table by the kind of its values.
func tableOf(elem string) string {
	if elem == "float64" {
		return "table of numbers"
	}
	return "table of strings"
}
