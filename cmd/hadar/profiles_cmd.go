package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
)

// profilesCommand is `hadar profiles`: the heterogeneity matrix in the
// SQLite database that hadar-slurmd reads.
func profilesCommand() *cli.Command {
	jsonFlag := func() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"} }
	return &cli.Command{
		Name:  "profiles",
		Usage: "show and edit the heterogeneity matrix (steps/s per job type, GPU type and worker count)",
		Description: "The matrix lives in a SQLite database shared with hadar-slurmd. Each cell (job type,\n" +
			"GPU type, workers) keeps one value per source: imported (Gavel's matrix, loaded when\n" +
			"the database is created, or `import`), learned (from observed progress) and\n" +
			"measured (set by hand with `set`). The scheduler uses measured if present, else learned\n" +
			"once it has 3 samples from 2 users, else imported; `list` marks the value in use with\n" +
			"* (IN USE). `purge --user` removes one user's samples (docs/learning.md).\n\n" +
			"GPU type names from Slurm (gres.conf) map to canonical types through aliases; see\n" +
			"`hadar profiles alias`.",
		Flags: []cli.Flag{profilesDBFlag()},
		Subcommands: []*cli.Command{
			profilesRateCommand(),
			profilesImportCommand(),
			profilesGPUsCommand(),
			profilesPriorErrorCommand(),
			{
				Name:      "import-gavel",
				Usage:     "import a throughput file in Gavel's JSON format as imported values",
				ArgsUsage: "FILE",
				Description: "FILE is Gavel's simulation_throughputs.json format (- reads standard input).\n" +
					"Imported values replace earlier imported values of the same cells; learned and\n" +
					"measured values are kept and still take precedence.",
				Flags: []cli.Flag{profilesDBFlag()},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return profilesUsage(c, "want one FILE argument")
					}
					file := c.Args().First()
					var t optimizer.Throughputs
					var err error
					if file == "-" {
						in := c.App.Reader
						if in == nil {
							in = os.Stdin
						}
						t, err = profiles.ParseGavel(in)
					} else {
						t, err = profiles.LoadGavelFile(file)
					}
					if err != nil {
						return err
					}
					return withProfilesStore(c, func(s *profiles.Store) error {
						n, err := s.ImportGavel(c.Context, t)
						if err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "imported %d rates for %d job types from %s\n", n, len(t), file)
						return nil
					})
				},
			},
			{
				Name:  "list",
				Usage: "list every stored rate (* marks the value the scheduler uses)",
				Flags: []cli.Flag{
					profilesDBFlag(),
					jsonFlag(),
					&cli.BoolFlag{Name: "in-use", Usage: "only the values the scheduler uses"},
					&cli.StringFlag{Name: "gpu-type", Usage: "only this GPU `TYPE` (canonical name or alias)"},
					priorFlag(),
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return profilesUsage(c, "takes no arguments")
					}
					return withProfilesStore(c, func(s *profiles.Store) error {
						list := s.List
						if c.Bool("prior") {
							list = s.ListWithPrior
						}
						rows, err := list(c.Context)
						if err != nil {
							return err
						}
						gpu := ""
						if c.IsSet("gpu-type") {
							if gpu, err = s.ResolveGPUType(c.Context, c.String("gpu-type")); err != nil {
								return err
							}
						}
						kept := rows[:0]
						for _, r := range rows {
							if (!c.Bool("in-use") || r.InUse) && (gpu == "" || r.GPUType == gpu) {
								kept = append(kept, r)
							}
						}
						return printProfileRows(c.App.Writer, kept, c.Bool("json"), false)
					})
				},
			},
			{
				Name:      "show",
				Usage:     "show every stored rate of one job type, with its source and age",
				ArgsUsage: "JOBTYPE",
				Flags:     []cli.Flag{profilesDBFlag(), jsonFlag(), priorFlag()},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return profilesUsage(c, "want one JOBTYPE argument (quote it: 'ResNet-18 (batch size 128)')")
					}
					return withProfilesStore(c, func(s *profiles.Store) error {
						rows, err := s.Show(c.Context, c.Args().First())
						if errors.Is(err, profiles.ErrNotFound) {
							return profilesUnknownJob(c, s, c.Args().First(), err)
						}
						if err != nil {
							return err
						}
						if c.Bool("prior") && len(rows) > 0 {
							all, err := s.ListWithPrior(c.Context)
							if err != nil {
								return err
							}
							rows = rows[:0]
							for _, r := range all {
								if r.JobType == strings.TrimSpace(c.Args().First()) {
									rows = append(rows, r)
								}
							}
						}
						return printProfileRows(c.App.Writer, rows, c.Bool("json"), true)
					})
				},
			},
			{
				Name:  "set",
				Usage: "set a measured rate, which overrides learned and imported values",
				Description: "Example: hadar profiles set --job-type 'ResNet-50 (batch size 64)' --gpu-type a100 \\\n" +
					"    --workers 4 --steps-per-s 41.5\n" +
					"A rate of 0 marks the job type as unable to run on that GPU type. --job-type is\n" +
					"resolved as hadar-slurmd resolves model= (case, spaces and punctuation ignored,\n" +
					"\"batch size\" as \"bs\": resnet50-bs64 is 'ResNet-50 (batch size 64)'); a job type\n" +
					"the database lacks is an error unless --new creates it. --gpu-type is a GPU type of\n" +
					"the database, an alias of one, or a catalogue type (hadar profiles gpus); any other\n" +
					"name is an error, as for `alias set`.",
				Flags: []cli.Flag{
					profilesDBFlag(),
					&cli.StringFlag{Name: "job-type", Required: true, Usage: "job type `NAME` as hadar profiles list prints it, or as model= names it (quote names with spaces)"},
					&cli.StringFlag{Name: "gpu-type", Required: true, Usage: "GPU `TYPE` (canonical name or alias)"},
					&cli.IntFlag{Name: "workers", Value: 1, Usage: "number of GPUs `N` the job runs on"},
					&cli.Float64Flag{Name: "steps-per-s", Required: true, Usage: "throughput `RATE` of the whole job in steps per second"},
					&cli.BoolFlag{Name: "new", Usage: "create --job-type as a new job type (a model the database has no rates for)"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return profilesUsage(c, "takes flags only, no arguments")
					}
					return withProfilesStore(c, func(s *profiles.Store) error {
						gpu, w, r := c.String("gpu-type"), c.Int("workers"), c.Float64("steps-per-s")
						job, isNew, err := profilesJobTypeForSet(c, s, c.String("job-type"), c.Bool("new"))
						if err != nil {
							return err
						}
						if err := s.Set(c.Context, job, gpu, w, r); err != nil {
							return err
						}
						gt, err := s.ResolveGPUType(c.Context, gpu)
						if err != nil {
							return err
						}
						if isNew {
							fmt.Fprintf(c.App.Writer, "new job type %q\n", job)
						}
						fmt.Fprintf(c.App.Writer, "%s on %d x %s: %g steps/s (measured)\n", job, w, gt, r)
						return nil
					})
				},
			},
			{
				Name:  "unset",
				Usage: "remove a measured rate, falling back to learned or imported values",
				Flags: []cli.Flag{
					profilesDBFlag(),
					&cli.StringFlag{Name: "job-type", Required: true, Usage: "job type `NAME`"},
					&cli.StringFlag{Name: "gpu-type", Required: true, Usage: "GPU `TYPE` (canonical name or alias)"},
					&cli.IntFlag{Name: "workers", Value: 1, Usage: "number of GPUs"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return profilesUsage(c, "takes flags only, no arguments")
					}
					return withProfilesStore(c, func(s *profiles.Store) error {
						job, gpu, w := c.String("job-type"), c.String("gpu-type"), c.Int("workers")
						if jobs, err := s.JobTypes(c.Context); err == nil {
							if jt, err := jobproto.NewModelResolver(jobs, nil).Resolve(job); err == nil {
								job = jt
							}
						}
						if err := s.Unset(c.Context, job, gpu, w); err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "%s on %d x %s: measured rate removed\n", job, w, gpu)
						return nil
					})
				},
			},
			{
				Name:  "purge",
				Usage: "remove one user's learned-throughput samples and recompute the cells they were in",
				Description: "Every sample a job's progress gave is stored with the job's user. purge removes\n" +
					"those of --user and recomputes the learned value of each cell they were in from the\n" +
					"samples left (a cell left with none loses its learned value). hadar-slurmd reads the\n" +
					"change at its next round.",
				Flags: []cli.Flag{
					profilesDBFlag(),
					&cli.StringFlag{Name: "user", Required: true, Usage: "Slurm user `NAME` whose samples to remove"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return profilesUsage(c, "takes flags only, no arguments")
					}
					user := c.String("user")
					if strings.TrimSpace(user) == "" {
						return profilesUsage(c, "--user: want a user name")
					}
					return withProfilesStore(c, func(s *profiles.Store) error {
						n, cells, err := s.PurgeUser(c.Context, user)
						if err != nil {
							return err
						}
						fmt.Fprintf(c.App.Writer, "removed %d samples of %s from %d cells; their learned values are recomputed\n", n, printable(user), cells)
						return nil
					})
				},
			},
			{
				Name:  "alias",
				Usage: "map Slurm GPU type names (gres.conf) to canonical GPU types",
				Flags: []cli.Flag{profilesDBFlag()},
				Subcommands: []*cli.Command{
					{
						Name:  "list",
						Usage: "list the aliases",
						Flags: []cli.Flag{profilesDBFlag(), jsonFlag()},
						Action: func(c *cli.Context) error {
							if c.NArg() != 0 {
								return profilesUsage(c, "takes no arguments")
							}
							return withProfilesStore(c, func(s *profiles.Store) error {
								as, err := s.Aliases(c.Context)
								if err != nil {
									return err
								}
								if c.Bool("json") {
									return printProfilesJSON(c.App.Writer, append([]profiles.Alias{}, as...))
								}
								tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
								fmt.Fprintln(tw, "SITE NAME\tGPU TYPE")
								for _, a := range as {
									fmt.Fprintf(tw, "%s\t%s\n", a.Site, a.GPUType)
								}
								return tw.Flush()
							})
						},
					},
					{
						Name:      "set",
						Usage:     "map SITE (a GPU type name in gres.conf) to the canonical type CANONICAL",
						ArgsUsage: "SITE CANONICAL",
						Flags:     []cli.Flag{profilesDBFlag()},
						Action: func(c *cli.Context) error {
							if c.NArg() != 2 {
								return profilesUsage(c, "want SITE and CANONICAL arguments")
							}
							return withProfilesStore(c, func(s *profiles.Store) error {
								gt, err := s.SetAlias(c.Context, c.Args().Get(0), c.Args().Get(1))
								if err != nil {
									return err
								}
								fmt.Fprintf(c.App.Writer, "%s -> %s\n", c.Args().Get(0), gt)
								return nil
							})
						},
					},
					{
						Name:      "resolve",
						Usage:     "print the canonical GPU type a Slurm GPU type name maps to",
						ArgsUsage: "NAME",
						Flags:     []cli.Flag{profilesDBFlag()},
						Action: func(c *cli.Context) error {
							if c.NArg() != 1 {
								return profilesUsage(c, "want one NAME argument")
							}
							return withProfilesStore(c, func(s *profiles.Store) error {
								gt, err := s.ResolveGPUType(c.Context, c.Args().First())
								if err != nil {
									return err
								}
								fmt.Fprintln(c.App.Writer, gt)
								return nil
							})
						},
					},
				},
			},
		},
	}
}

// priorFlag is --prior of list and show.
func priorFlag() cli.Flag {
	return &cli.BoolFlag{Name: "prior", Usage: "add the prior's rate (source prior) for every cell with no value in use, on every GPU type of the database (docs/prior.md)"}
}

// profilesDBFlag is --db. Every profiles subcommand takes it, so it may go
// before or after the subcommand name; see profilesDBPath.
func profilesDBFlag() cli.Flag {
	def, err := profiles.DefaultPath()
	if err != nil {
		def = ""
	}
	return &cli.StringFlag{
		Name:    "db",
		EnvVars: []string{"HADAR_DB"},
		Value:   def,
		Usage:   "SQLite database `PATH` (created if missing)",
	}
}

// profilesDBPath returns --db (or $HADAR_DB) as given at the deepest level
// that sets it to something, else the default.
func profilesDBPath(c *cli.Context) (string, error) {
	for _, cc := range c.Lineage() {
		for _, name := range cc.LocalFlagNames() {
			if p := cc.String("db"); name == "db" && p != "" {
				return p, nil
			}
		}
	}
	if p := c.String("db"); p != "" {
		return p, nil
	}
	_, err := profiles.DefaultPath()
	return "", fmt.Errorf("no --db given and no default database path: %w", err)
}

func withProfilesStore(c *cli.Context, f func(*profiles.Store) error) error {
	path, err := profilesDBPath(c)
	if err != nil {
		return err
	}
	s, err := profiles.Open(c.Context, path)
	if err != nil {
		return err
	}
	err = f(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// profilesUsage is the error for wrong arguments: what is wrong and the
// command's usage line.
func profilesUsage(c *cli.Context, msg string) error {
	usage := c.Command.HelpName
	if c.Command.ArgsUsage != "" && strings.TrimSpace(c.Command.ArgsUsage) != "" {
		usage += " " + c.Command.ArgsUsage
	}
	return usageErrorf(c, "%s (usage: %s [options])", msg, usage)
}

// profilesJobTypeForSet resolves `profiles set --job-type name` against the
// database's job types as hadar-slurmd resolves model=, so a short name sets
// the job type it means. A name that resolves to none is an error unless
// create (--new) is set; then it is the name of a new job type, which
// reports isNew.
func profilesJobTypeForSet(c *cli.Context, s *profiles.Store, name string, create bool) (jobType string, isNew bool, err error) {
	jobs, err := s.JobTypes(c.Context)
	if err != nil {
		return "", false, err
	}
	name = strings.TrimSpace(name)
	jt, err := jobproto.NewModelResolver(jobs, nil).Resolve(name)
	switch {
	case err == nil && create:
		return "", false, fmt.Errorf("--job-type %q is the existing job type %q: drop --new to set its rate", name, jt)
	case err == nil:
		return jt, false, nil
	case errors.Is(err, jobproto.ErrAmbiguousModel):
		return "", false, fmt.Errorf("--job-type: %w", err)
	case create:
		if jobproto.NormalizeModel(name) == "" {
			return "", false, fmt.Errorf("--job-type: %w", err)
		}
		return name, true, nil
	}
	return "", false, fmt.Errorf("--job-type: %w; the database has no such job type (hadar profiles list): pass --new to create it", err)
}

// profilesUnknownJob wraps err with job types resembling name.
func profilesUnknownJob(c *cli.Context, s *profiles.Store, name string, err error) error {
	jobs, lerr := s.JobTypes(c.Context)
	if lerr != nil {
		return err
	}
	var like []string
	for _, j := range jobs {
		if strings.Contains(strings.ToLower(j), strings.ToLower(strings.TrimSpace(name))) {
			like = append(like, j)
		}
	}
	if len(like) == 0 {
		return fmt.Errorf("%w (see `hadar profiles list`)", err)
	}
	if len(like) > 8 {
		like = append(like[:8], "...")
	}
	return fmt.Errorf("%w; did you mean: %s", err, strings.Join(like, "; "))
}

func printProfileRows(w io.Writer, rows []profiles.Row, asJSON, withTime bool) error {
	if asJSON {
		return printProfilesJSON(w, append([]profiles.Row{}, rows...))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "JOB TYPE\tGPU TYPE\tWORKERS\tSTEPS/S\tSOURCE\tSAMPLES\tIN USE"
	if withTime {
		header += "\tUPDATED"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		mark := ""
		if r.InUse {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%s\t%d\t%s", r.JobType, r.GPUType, r.Workers, r.StepsPerSecond, r.Source, r.Samples, mark)
		if withTime {
			at := "-" // a prior value is computed, not stored
			if !r.UpdatedAt.IsZero() {
				at = r.UpdatedAt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "\t%s", at)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func printProfilesJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// profilesImportCommand is `hadar profiles import`: a built-in matrix or a
// file in Gavel's format into the database as imported values.
func profilesImportCommand() *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "import a throughput matrix (gavel, lambda or a Gavel-format file) as imported values",
		Description: "Imports --throughputs (default gavel) into the database. Imported values replace\n" +
			"earlier imported values of the same cells; learned and measured values are kept and\n" +
			"still take precedence. Example, for a site with current GPUs:\n" +
			"  hadar profiles import --throughputs lambda\n" +
			"A new database is seeded with the daemon config's `throughputs` matrix instead.",
		Flags: []cli.Flag{profilesDBFlag(), throughputsFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return profilesUsage(c, "takes flags only (--throughputs NAME|FILE)")
			}
			t, err := loadThroughputs(c.String("throughputs"))
			if err != nil {
				return err
			}
			return withProfilesStore(c, func(s *profiles.Store) error {
				n, err := s.ImportGavel(c.Context, t)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "imported %d rates for %d job types from %s\n", n, len(t), c.String("throughputs"))
				return nil
			})
		},
	}
}

// profilesGPUsCommand is `hadar profiles gpus`: the GPU catalogue.
func profilesGPUsCommand() *cli.Command {
	return &cli.Command{
		Name:  "gpus",
		Usage: "list the GPU catalogue: canonical types, spec figures and their sources",
		Description: "The figures the prior predicts unmeasured rates from: dense FP16/BF16 tensor TFLOPS,\n" +
			"FP32 TFLOPS, memory (a hard limit) and memory bandwidth, per GPU as Slurm counts them.",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON with the sources and notes"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return profilesUsage(c, "takes no arguments")
			}
			specs := profiles.Catalog()
			if c.Bool("json") {
				return printProfilesJSON(c.App.Writer, specs)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TYPE\tNAME\tFP16 TFLOPS\tFP32 TFLOPS\tMEMORY GB\tBANDWIDTH GB/S")
			for _, s := range specs {
				fmt.Fprintf(tw, "%s\t%s\t%g\t%g\t%g\t%g\n", s.Type, s.Name, s.FP16TFLOPS, s.FP32TFLOPS, s.MemoryGB, s.BandwidthGBs)
			}
			return tw.Flush()
		},
	}
}

// profilesPriorErrorCommand is `hadar profiles prior-error`: the prior's
// leave-one-type-out error, the table in docs/prior.md.
func profilesPriorErrorCommand() *cli.Command {
	return &cli.Command{
		Name:  "prior-error",
		Usage: "measure the prior's error by leaving one GPU type out of a matrix at a time",
		Description: "For each GPU type of --throughputs, removes its column, predicts its cells with the\n" +
			"prior fitted on the rest, and prints the median and 90th percentile of |prior -\n" +
			"measured| / measured over the type's measured cells (every worker count); the last\n" +
			"row pools all types. See docs/prior.md.",
		Flags: []cli.Flag{
			throughputsFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.BoolFlag{Name: "markdown", Usage: "print a Markdown table"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return profilesUsage(c, "takes flags only")
			}
			t, err := loadThroughputs(c.String("throughputs"))
			if err != nil {
				return err
			}
			rows := profiles.LeaveOneTypeOut(t)
			switch {
			case c.Bool("json"):
				return printProfilesJSON(c.App.Writer, rows)
			case c.Bool("markdown"):
				fmt.Fprintln(c.App.Writer, "| GPU type left out | cells | predicted | median error | p90 error |")
				fmt.Fprintln(c.App.Writer, "|---|---:|---:|---:|---:|")
				for _, r := range rows {
					fmt.Fprintf(c.App.Writer, "| %s | %d | %d | %.0f%% | %.0f%% |\n", r.GPUType, r.Cells, r.Predicted, 100*r.Median, 100*r.P90)
				}
				return nil
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "LEFT OUT\tCELLS\tPREDICTED\tMEDIAN ERR\tP90 ERR")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%.1f%%\n", r.GPUType, r.Cells, r.Predicted, 100*r.Median, 100*r.P90)
			}
			return tw.Flush()
		},
	}
}
