package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
)

func traceCommand() *cli.Command {
	// Fresh flag values per subcommand: urfave/cli records state in them.
	referenceFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "reference-type", Value: sim.DefaultReferenceType, Usage: "GPU `TYPE` job durations are measured on (one of the matrix's, e.g. a100 with --throughputs lambda)"}
	}
	return &cli.Command{
		Name:  "trace",
		Usage: "generate or inspect job traces (Gavel's format)",
		Description: "Traces are Gavel's tab-separated format, one job a line: job_type, command,\n" +
			"working_dir, num_steps_arg, needs_data_dir, total_steps, scale_factor,\n" +
			"priority_weight, SLO, arrival_time_s. gavel:NAME names a trace embedded in the\n" +
			"binary (" + strings.Join(sim.EmbeddedTraceNames(), ", ") + ").",
		Subcommands: []*cli.Command{
			{
				Name:  "generate",
				Usage: "draw a synthetic trace the way Gavel's generator does",
				Description: "Scale factors 1 (or 1/2/4/8 w.p. .70/.10/.15/.05 with --multi-gpu), job types\n" +
					"uniform over those the matrix measures on --reference-type at that scale factor,\n" +
					"durations 60*10^U(1.5,3) s w.p. 0.8 else 60*10^U(3,4) s, total_steps = duration x\n" +
					"throughput on --reference-type, Poisson arrivals at --rate jobs/hour (0: all at t=0).\n" +
					"The same flags always give the same trace. Example, for a current cluster:\n" +
					"  hadar trace generate --throughputs lambda --reference-type a100 --multi-gpu --jobs 200",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "jobs", Value: 160, Usage: "number of jobs"},
					&cli.Int64Flag{Name: "seed", Value: 0, Usage: "random seed"},
					&cli.BoolFlag{Name: "multi-gpu", Usage: "draw scale factors 1/2/4/8 (default: all 1)"},
					&cli.Float64Flag{Name: "rate", Value: 0, Usage: "arrival rate in jobs/hour; 0 = static (all jobs at t=0)"},
					&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output file (default: stdout)"},
					throughputsFlag(),
					referenceFlag(),
					&cli.BoolFlag{Name: "prior", Usage: "fill the cells --throughputs lacks with the prior (docs/prior.md), e.g. for a --reference-type no matrix measured"},
				},
				Action: runTraceGenerate,
			},
			{
				Name:      "show",
				Usage:     "summarise a trace: jobs, scale factors, arrival span, GPU-hours",
				ArgsUsage: "FILE|gavel:NAME",
				Flags:     []cli.Flag{throughputsFlag(), referenceFlag()},
				Action:    runTraceShow,
			},
		},
	}
}

func runTraceGenerate(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("trace generate: unexpected argument %q (write to a file with --out)", c.Args().First())
	}
	thr, err := loadThroughputs(c.String("throughputs"))
	if err != nil {
		return err
	}
	if c.Bool("prior") {
		thr = profiles.WithPrior(thr, append(thr.GPUTypes(), c.String("reference-type")))
	}
	jobs, err := sim.Generate(sim.GenerateOptions{
		Jobs:          c.Int("jobs"),
		Seed:          c.Int64("seed"),
		MultiGPU:      c.Bool("multi-gpu"),
		ArrivalRate:   c.Float64("rate"),
		Throughputs:   thr,
		ReferenceType: c.String("reference-type"),
	})
	if err != nil {
		return err
	}
	out := c.String("out")
	if out == "" || out == "-" {
		return sim.WriteTrace(c.App.Writer, jobs)
	}
	var buf bytes.Buffer
	if err := sim.WriteTrace(&buf, jobs); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("trace generate: %w", err)
	}
	fmt.Fprintf(c.App.ErrWriter, "wrote %d jobs to %s\n", len(jobs), out)
	return nil
}

func runTraceShow(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("trace show: want one trace (a file or gavel:NAME), got %d arguments", c.NArg())
	}
	spec := c.Args().First()
	jobs, err := sim.LoadTrace(spec)
	if err != nil {
		return err
	}
	thr, err := loadThroughputs(c.String("throughputs"))
	if err != nil {
		return err
	}
	printTraceSummary(c.App.Writer, spec, sim.SummarizeTrace(jobs, thr, c.String("reference-type")))
	return nil
}

func printTraceSummary(w io.Writer, name string, s sim.TraceSummary) {
	fmt.Fprintf(w, "trace          %s\n", name)
	fmt.Fprintf(w, "jobs           %d (%d job types)\n", s.Jobs, s.JobTypes)
	if s.Jobs == 0 {
		return
	}
	sfs := make([]int, 0, len(s.ScaleFactors))
	for sf := range s.ScaleFactors {
		sfs = append(sfs, sf)
	}
	sort.Ints(sfs)
	var hist []string
	for _, sf := range sfs {
		n := s.ScaleFactors[sf]
		hist = append(hist, fmt.Sprintf("%d GPU: %d (%.0f%%)", sf, n, 100*float64(n)/float64(s.Jobs)))
	}
	fmt.Fprintf(w, "scale factors  %s\n", strings.Join(hist, ", "))
	span := s.LastArrival - s.FirstArrival
	if span == 0 {
		fmt.Fprintf(w, "arrivals       all at %.0f s (static)\n", s.FirstArrival)
	} else {
		rate := ""
		if s.Jobs > 1 {
			rate = fmt.Sprintf(", %.2f jobs/hour", float64(s.Jobs-1)/(span/3600))
		}
		fmt.Fprintf(w, "arrivals       %.0f s to %.0f s (%.2f h%s)\n", s.FirstArrival, s.LastArrival, span/3600, rate)
	}
	fmt.Fprintf(w, "total steps    %.0f\n", s.TotalSteps)
	work := fmt.Sprintf("%.1f GPU-hours on %s", s.GPUHours, s.ReferenceType)
	if s.Unpriced > 0 {
		work += fmt.Sprintf(" (%d jobs left out: no %s throughput for their job type and scale factor)", s.Unpriced, s.ReferenceType)
	}
	fmt.Fprintf(w, "work           %s\n", work)
}
