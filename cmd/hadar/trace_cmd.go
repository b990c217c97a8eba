package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

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
			importCommand(referenceFlag()),
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
	if c.Int("jobs") < 1 {
		return fmt.Errorf("trace generate: --jobs must be at least 1, got %d (a trace with no job simulates nothing)", c.Int("jobs"))
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
	return writeTraceOut(c, "trace generate", jobs)
}

func runTraceShow(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf(c, "want one trace (a file or gavel:NAME), got %d arguments", c.NArg())
	}
	spec := c.Args().First()
	if strings.TrimSpace(spec) == "" {
		return usageErrorf(c, "empty trace name (a file or gavel:NAME)")
	}
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

// importTimeLayouts are the forms --from and --to accept.
var importTimeLayouts = []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05"}

func importCommand(reference cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "convert real job records (Philly's CSV, a site's sacct history) to a trace",
		Description: "Reads Philly's job records (--philly, the CSV of Microsoft's 2017 Philly trace as in\n" +
			"RFold's philly_trace.csv) or a Slurm site's history (--sacct, the output of\n" +
			"  sacct --allusers --duplicates --parsable2 --starttime 2025-01-01 --endtime 2025-02-01 \\\n" +
			"      --format=" + sim.SacctFormat + "\n" +
			"with its header; FILE - reads stdin) and writes a trace in Gavel's format that\n" +
			"`hadar simulate --trace` replays. Real records have arrival times, GPU counts and\n" +
			"durations but no model and no step count, so, as Gavel's Philly-derived generator\n" +
			"does, each job's type is drawn (seeded by --seed) uniformly among the matrix's types\n" +
			"measured at its GPU count (the distributed types for a multi-GPU job) on its pricing\n" +
			"type, and total_steps = duration x that type's throughput there. The pricing type is\n" +
			"the GPU type sacct records for the job (gres/gpu:TYPE=N) when the matrix has it,\n" +
			"else --reference-type (always with --ignore-gpu-type). GPU counts above --max-gpus\n" +
			"(default 8, the most Gavel's matrix measures) are capped to it, the duration kept;\n" +
			"--max-gpus 0 keeps them (their rate is scaled linearly from the largest measured\n" +
			"count). --from/--to (UTC dates or times in the records' clock: sacct's local time,\n" +
			"Philly's seconds from 2017-08-14 23:27) or --week N (7 days from the first record\n" +
			"plus N weeks) keep the jobs submitted in that window; the trace starts at the first\n" +
			"kept job's submit time. sacct: the records of one job id (-D prints one per run of a\n" +
			"requeued job) are one job, submitted at its first record, running as its last; job\n" +
			"steps (123.batch, 123.0), jobs that never started, are still running or have no GPUs,\n" +
			"and jobs that ran 0 s are skipped; every job that ran is kept whatever its end state\n" +
			"(it held its GPUs) unless --states narrows that. The rules and every count are\n" +
			"printed to stderr, a line that does not read is an error naming its line, and no\n" +
			"job to import is an error (docs/traces.md). Example, week 5 of Philly (18-25 Sep 2017):\n" +
			"  hadar trace import --philly philly-aug-sep-2017.csv --week 5 --seed 1 --out w5-s1.trace",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "philly", Usage: "Philly job records `FILE` (CSV: job id, arrival s, topology, shape, GPUs, duration s)"},
			&cli.StringFlag{Name: "sacct", Usage: "`FILE` of sacct --parsable2 output with at least the fields JobID,Submit,Start,End,AllocTRES (- for stdin)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output file (default: stdout)"},
			&cli.Int64Flag{Name: "seed", Value: 0, Usage: "seed of the job-type draw"},
			throughputsFlag(),
			reference,
			&cli.BoolFlag{Name: "ignore-gpu-type", Usage: "price every job on --reference-type, even one whose record names a GPU type the matrix has"},
			&cli.IntFlag{Name: "max-gpus", Value: 8, Usage: "cap jobs' GPU counts at `N` (0: keep every count)"},
			&cli.StringFlag{Name: "states", Usage: "keep only the sacct jobs that ended in one of these `STATES` (comma-separated, e.g. COMPLETED,TIMEOUT; default: every job that ran)"},
			&cli.StringFlag{Name: "from", Usage: "keep jobs submitted at or after `TIME` (2017-09-18 or 2017-09-18T06:00, UTC in the records' clock)"},
			&cli.StringFlag{Name: "to", Usage: "keep jobs submitted before `TIME`"},
			&cli.IntFlag{Name: "week", Value: -1, Usage: "keep the jobs of week `N` (0-based, 7 days each from the first record's submit time); not with --from/--to"},
		},
		Action: runTraceImport,
	}
}

func runTraceImport(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("trace import: unexpected argument %q (name the records with --philly or --sacct)", c.Args().First())
	}
	philly, sacct := c.String("philly"), c.String("sacct")
	if (philly == "") == (sacct == "") {
		return fmt.Errorf("trace import: give exactly one of --philly FILE and --sacct FILE")
	}
	parse, path, format := sim.ParsePhilly, philly, "Philly CSV"
	if sacct != "" {
		parse, path, format = sim.ParseSacct, sacct, "sacct --parsable2"
	}
	thr, err := loadThroughputs(c.String("throughputs"))
	if err != nil {
		return err
	}
	// The matrix's types beside the catalogue's, each once (a type named
	// twice would make every name containing it ambiguous).
	var matrixOnly []string
	for _, gt := range thr.GPUTypes() {
		if !slices.Contains(profiles.CatalogTypes(), gt) {
			matrixOnly = append(matrixOnly, gt)
		}
	}
	opts := sim.ImportOptions{
		Throughputs: thr, ReferenceType: c.String("reference-type"), Seed: c.Int64("seed"), MaxGPUs: c.Int("max-gpus"),
		IgnoreRecordedType: c.Bool("ignore-gpu-type"),
		// The names Slurm's GRES types go by, as the daemon reads them.
		ResolveGPUType: func(recorded string) (string, bool) {
			gt, err := profiles.ResolveDefault(recorded, matrixOnly...)
			return gt, err == nil
		},
	}
	if opts.MaxGPUs < 0 {
		return fmt.Errorf("trace import: --max-gpus must be at least 0, got %d", opts.MaxGPUs)
	}
	if c.IsSet("states") {
		if philly != "" {
			return fmt.Errorf("trace import: --states: Philly's records have no job state")
		}
		if opts.States, err = parseStates(c.String("states")); err != nil {
			return fmt.Errorf("trace import: --states: %w", err)
		}
	}
	var in io.Reader = c.App.Reader
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("trace import: %w", err)
		}
		defer f.Close()
		in, name = f, path
	} else if in == nil {
		in = os.Stdin
	}
	src, err := parse(in, name)
	if err != nil {
		return fmt.Errorf("trace import: %w", err)
	}
	if opts.States != nil && !src.HasState {
		return fmt.Errorf("trace import: --states: %s has no State field (add State to sacct's --format)", name)
	}
	window := "all"
	if c.IsSet("week") {
		if c.IsSet("from") || c.IsSet("to") {
			return fmt.Errorf("trace import: --week and --from/--to both set: give one")
		}
		if opts.From, opts.To, err = src.Week(c.Int("week")); err != nil {
			return fmt.Errorf("trace import: --week: %w", err)
		}
		window = fmt.Sprintf("week %d", c.Int("week"))
	}
	for _, fl := range []struct {
		name string
		t    *time.Time
	}{{"from", &opts.From}, {"to", &opts.To}} {
		if !c.IsSet(fl.name) {
			continue
		}
		if *fl.t, err = parseImportTime(c.String(fl.name)); err != nil {
			return fmt.Errorf("trace import: --%s: %w", fl.name, err)
		}
		window = "set"
	}
	if !opts.From.IsZero() && !opts.To.IsZero() && !opts.From.Before(opts.To) {
		return fmt.Errorf("trace import: the window [%s, %s) is empty", opts.From.Format(time.DateTime), opts.To.Format(time.DateTime))
	}
	jobs, rep, err := sim.Import(src, opts)
	if err != nil && !errors.Is(err, sim.ErrNoJobs) {
		return err
	}
	// With no job to import, the counts say why.
	printImportReport(c.App.ErrWriter, format, window, src, opts, rep)
	if err != nil {
		return err
	}
	return writeTraceOut(c, "trace import", jobs)
}

// parseStates reads --states: sacct's state names, comma-separated, any case.
func parseStates(s string) ([]string, error) {
	var states []string
	for _, part := range strings.Split(s, ",") {
		st := strings.ToUpper(strings.TrimSpace(part))
		if st == "" {
			continue
		}
		if !slices.Contains(sim.SacctStates, st) {
			return nil, fmt.Errorf("%q is not a job state sacct prints (%s)", part, strings.Join(sim.SacctStates, ", "))
		}
		states = append(states, st)
	}
	if len(states) == 0 {
		return nil, fmt.Errorf("no state given")
	}
	return states, nil
}

func parseImportTime(s string) (time.Time, error) {
	for _, layout := range importTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2017-09-18 or 2017-09-18T06:00", s)
}

// printImportReport writes the conversion rules and counts, so that what a
// trace is made of is on record next to it.
func printImportReport(w io.Writer, format, window string, src *sim.ImportSource, opts sim.ImportOptions, rep sim.ImportReport) {
	ref := opts.ReferenceType
	if ref == "" {
		ref = sim.DefaultReferenceType
	}
	fmt.Fprintf(w, "import %s from %s\n", format, src.Name)
	pricing := ref
	if !opts.IgnoreRecordedType && format != "Philly CSV" {
		pricing = "the job's recorded GPU type if the matrix has it, else " + ref
	}
	fmt.Fprintf(w, "rules: job type drawn with seed %d among the matrix's types measured at the job's GPU count (distributed types for multi-GPU jobs)\n", opts.Seed)
	fmt.Fprintf(w, "       on its pricing type, %s; total_steps = duration x that type's throughput there;\n       ", pricing)
	if opts.MaxGPUs > 0 {
		fmt.Fprintf(w, "GPU counts above %d capped to %d (duration kept)\n", opts.MaxGPUs, opts.MaxGPUs)
	} else {
		fmt.Fprintf(w, "GPU counts kept (no cap)\n")
	}
	if opts.States != nil {
		fmt.Fprintf(w, "states: jobs that ended %s\n", strings.Join(opts.States, ", "))
	} else if src.HasState {
		fmt.Fprintf(w, "states: every job that ran, whatever its end state\n")
	}
	switch {
	case window == "all":
		fmt.Fprintf(w, "window: every job\n")
	default:
		from, to := "-", "-"
		if !opts.From.IsZero() {
			from = opts.From.Format(time.DateTime)
		}
		if !opts.To.IsZero() {
			to = opts.To.Format(time.DateTime)
		}
		label := ""
		if window != "set" {
			label = window + ": "
		}
		fmt.Fprintf(w, "window: %ssubmitted in [%s, %s)\n", label, from, to)
	}
	fmt.Fprintf(w, "read %d records: %d jobs imported", rep.Read, rep.Jobs)
	if rep.Jobs > 0 {
		fmt.Fprintf(w, " (t=0 is %s)", rep.Start.Format(time.DateTime))
	}
	fmt.Fprintln(w)
	if rep.Merged > 0 {
		fmt.Fprintf(w, "  merged  %6d  earlier runs of %d requeued jobs (arrival = first submit, duration = last run); %.0f GPU-s of runs thrown away\n",
			rep.Merged, rep.RequeuedJobs, rep.DiscardedGPUSeconds)
	}
	for _, r := range slices.Sorted(maps.Keys(rep.Skipped)) {
		fmt.Fprintf(w, "  skipped %6d  %s\n", rep.Skipped[r], r)
	}
	fmt.Fprintf(w, "  capped  %6d  jobs with more than %d GPUs\n", rep.Capped, opts.MaxGPUs)
	if src.HasState {
		states := slices.Sorted(maps.Keys(rep.Kept))
		for st := range rep.Dropped {
			if _, ok := rep.Kept[st]; !ok {
				states = append(states, st)
			}
		}
		slices.Sort(states)
		fmt.Fprintf(w, "jobs by end state   kept  dropped\n")
		for _, st := range states {
			label := st
			if label == "" {
				label = "(none)"
			}
			fmt.Fprintf(w, "  %-15s %6d %8d\n", label, rep.Kept[st], rep.Dropped[st])
		}
	}
	sfs := slices.Sorted(maps.Keys(rep.ScaleFactors))
	var hist []string
	for _, sf := range sfs {
		hist = append(hist, fmt.Sprintf("%d GPU: %d", sf, rep.ScaleFactors[sf]))
	}
	if len(hist) > 0 {
		fmt.Fprintf(w, "GPUs: %s; %d job types drawn\n", strings.Join(hist, ", "), len(rep.JobTypes))
	}
	if len(rep.PricedOn) > 1 || len(rep.Unmatched) > 0 {
		var parts []string
		for _, gt := range slices.Sorted(maps.Keys(rep.PricedOn)) {
			parts = append(parts, fmt.Sprintf("%s %d", gt, rep.PricedOn[gt]))
		}
		line := "priced on: " + strings.Join(parts, ", ")
		if len(rep.Unmatched) > 0 {
			parts = parts[:0]
			for _, gt := range slices.Sorted(maps.Keys(rep.Unmatched)) {
				parts = append(parts, fmt.Sprintf("%s %d", gt, rep.Unmatched[gt]))
			}
			line += fmt.Sprintf(" (recorded types not in the matrix, priced on %s: %s)", ref, strings.Join(parts, ", "))
		}
		fmt.Fprintln(w, line)
	}
	if format == "Philly CSV" {
		return
	}
	// What sacct's options and fields say about requeued jobs.
	switch {
	case src.MissingRuns > 0:
		fmt.Fprintf(w, "warning: %d jobs were requeued (Restarts) but their earlier runs are not in the file: their arrival is their last requeue; run sacct with -D (--duplicates) and a --starttime before their first submit\n", src.MissingRuns)
	case src.Duplicated == 0 && !src.HasRestarts:
		fmt.Fprintf(w, "note: no job has more than one record: if sacct ran without -D (--duplicates), a requeued job shows only its last run, submitted at its requeue (docs/traces.md)\n")
	}
	if len(src.FreeText) > 0 {
		fmt.Fprintf(w, "warning: the file has free text users set (%s), which hadar does not use and which can hold '|' or whole lines that pass for records: leave it out of sacct's --format (%s)",
			strings.Join(src.FreeText, ", "), sim.SacctFormat)
		if src.Repaired > 0 {
			fmt.Fprintf(w, "; %d records had a '|' or a newline in it and were read by their other fields", src.Repaired)
		}
		fmt.Fprintln(w)
	}
	for _, msg := range src.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	if src.Warned > len(src.Warnings) {
		fmt.Fprintf(w, "warning: ... and %d more\n", src.Warned-len(src.Warnings))
	}
}

// writeTraceOut writes jobs to --out (stdout for "" or "-"); what names
// the command in an error.
func writeTraceOut(c *cli.Context, what string, jobs []sim.TraceJob) error {
	out := c.String("out")
	if out == "" || out == "-" {
		return sim.WriteTrace(c.App.Writer, jobs)
	}
	var buf bytes.Buffer
	if err := sim.WriteTrace(&buf, jobs); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "wrote %d jobs to %s\n", len(jobs), out)
	return nil
}
