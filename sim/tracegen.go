package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"

	"github.com/hadar-sched/hadar/optimizer"
)

// GenerateOptions configures Generate.
type GenerateOptions struct {
	// Jobs is the number of jobs to generate.
	Jobs int
	// Seed makes the trace reproducible: the same options give the same trace.
	Seed int64
	// MultiGPU draws scale factors 1/2/4/8 with probabilities
	// .70/.10/.15/.05 (Gavel's Philly-derived distribution); otherwise every
	// job has scale factor 1.
	MultiGPU bool
	// ArrivalRate is the mean arrival rate of a Poisson process in jobs per
	// hour; 0 makes a static trace where every job arrives at t=0.
	ArrivalRate float64
	// Throughputs is the matrix job types are drawn from and steps are
	// computed with.
	Throughputs optimizer.Throughputs
	// ReferenceType is the GPU type a job's duration is measured on
	// (default "v100", as in Gavel).
	ReferenceType string
}

// DefaultReferenceType is Gavel's reference GPU type.
const DefaultReferenceType = "v100"

// Gavel's scale-factor distribution (scheduler/utils.py
// _generate_scale_factor): cumulative probabilities of 1, 2, 4 and 8 workers.
var (
	genScaleFactors = [...]int{1, 2, 4, 8}
	genScaleCDF     = [...]float64{0.70, 0.80, 0.95, 1}
)

// Independent random streams, so that, for instance, turning MultiGPU on
// changes scale factors and job types but not durations or arrival times.
const (
	streamJobType uint64 = iota + 0x6861646172 // "hadar"
	streamScale
	streamDuration
	streamArrival
)

// Generate draws a synthetic trace the way Gavel's generator does
// (scheduler/utils.py generate_job, scheduler/scripts/utils/generate_trace.py):
//
//   - scale factor 1 (or, with MultiGPU, 1/2/4/8 w.p. .70/.10/.15/.05);
//   - job type uniformly among the matrix's job types that have a measured
//     throughput on the reference type at that scale factor (on Gavel's
//     matrix only ResNet-18/50, Transformer and LM have 2, 4 and 8 GPUs).
//     A scale factor that no job type has is drawn again, which
//     renormalises the distribution over the ones the matrix has;
//   - duration 60*10^U(1.5,3) s w.p. 0.8, else 60*10^U(3,4) s (1.05 min to
//     16.7 h, or 16.7 h to 6.9 days);
//   - total_steps = duration x throughput(job type, reference type, scale
//     factor), truncated to a whole number, at least 1, as in Gavel's files;
//   - arrivals: the first job at t=0, then exponential inter-arrival times
//     with mean 3600/ArrivalRate s, truncated to whole seconds as Gavel
//     writes them; all at t=0 when ArrivalRate is 0.
//
// Command, working_dir, num_steps_arg and needs_data_dir come from the
// first job of that type in the embedded Gavel traces, else from a
// placeholder derived from the job type ("python3 train.py --batch_size
// 64", dir "resnet-50"); priority weight 1; SLO -1 (none).
//
// The draws use math/rand/v2's PCG seeded from Seed, one stream per
// quantity; the trace does not match Gavel's Python random streams.
func Generate(opts GenerateOptions) ([]TraceJob, error) {
	if opts.Jobs < 0 {
		return nil, fmt.Errorf("generate trace: jobs must not be negative, got %d", opts.Jobs)
	}
	if math.IsNaN(opts.ArrivalRate) || math.IsInf(opts.ArrivalRate, 0) || opts.ArrivalRate < 0 {
		return nil, fmt.Errorf("generate trace: arrival rate must be a finite number >= 0 jobs/hour, got %v", opts.ArrivalRate)
	}
	ref := opts.ReferenceType
	if ref == "" {
		ref = DefaultReferenceType
	}
	// eligible[k] lists the job types (sorted) measured on ref with
	// genScaleFactors[k] workers.
	var eligible [len(genScaleFactors)][]string
	found := false
	for k, sf := range genScaleFactors {
		if sf > 1 && !opts.MultiGPU {
			break
		}
		for _, jt := range opts.Throughputs.JobTypes() {
			if r := opts.Throughputs[jt][ref][sf]; r > 0 && !math.IsInf(r, 0) {
				eligible[k] = append(eligible[k], jt)
				found = true
			}
		}
	}
	if !found {
		what := "with 1 worker"
		if opts.MultiGPU {
			what = "with 1, 2, 4 or 8 workers"
		}
		return nil, fmt.Errorf("generate trace: no job type of the throughput matrix has a throughput on reference type %q %s", ref, what)
	}

	rng := func(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(uint64(opts.Seed), stream)) }
	typeRNG, scaleRNG, durRNG, arrRNG := rng(streamJobType), rng(streamScale), rng(streamDuration), rng(streamArrival)
	templates := gavelTemplates()

	jobs := make([]TraceJob, 0, opts.Jobs)
	arrival := 0.0
	for i := 0; i < opts.Jobs; i++ {
		k := 0
		if opts.MultiGPU {
			for {
				k = drawScaleIndex(scaleRNG)
				if len(eligible[k]) > 0 {
					break
				}
			}
		}
		sf := genScaleFactors[k]
		duration := drawDuration(durRNG)
		jt := eligible[k][typeRNG.IntN(len(eligible[k]))]
		steps := math.Max(1, math.Floor(duration*opts.Throughputs[jt][ref][sf]))
		if i > 0 && opts.ArrivalRate > 0 {
			arrival += arrRNG.ExpFloat64() * 3600 / opts.ArrivalRate
		}
		tmpl, ok := templates[jt]
		if !ok {
			tmpl = placeholderTemplate(jt)
		}
		jobs = append(jobs, TraceJob{
			JobType:        jt,
			Command:        tmpl.Command,
			WorkingDir:     tmpl.WorkingDir,
			NumStepsArg:    tmpl.NumStepsArg,
			NeedsDataDir:   tmpl.NeedsDataDir,
			TotalSteps:     steps,
			ScaleFactor:    sf,
			PriorityWeight: 1,
			SLO:            -1,
			Arrival:        math.Floor(arrival),
		})
	}
	for i, j := range jobs {
		if err := j.Validate(); err != nil {
			return nil, fmt.Errorf("generate trace: job %d: %w", i, err)
		}
	}
	return jobs, nil
}

// drawScaleIndex draws an index into genScaleFactors.
func drawScaleIndex(r *rand.Rand) int {
	u := r.Float64()
	for k, p := range genScaleCDF {
		if u < p {
			return k
		}
	}
	return len(genScaleCDF) - 1
}

// drawDuration draws a job duration in seconds from Gavel's Philly-derived
// distribution.
func drawDuration(r *rand.Rand) float64 {
	lo, hi := 1.5, 3.0
	if r.Float64() >= 0.8 {
		lo, hi = 3, 4
	}
	return 60 * math.Pow(10, lo+(hi-lo)*r.Float64())
}

// jobTemplate is the run-time part of a trace line.
type jobTemplate struct {
	Command, WorkingDir, NumStepsArg string
	NeedsDataDir                     bool
}

var (
	gavelTemplatesOnce sync.Once
	gavelTemplatesMap  map[string]jobTemplate
)

// gavelTemplates maps each job type of the embedded Gavel traces to the
// first command line given for it (traces in name order).
func gavelTemplates() map[string]jobTemplate {
	gavelTemplatesOnce.Do(func() {
		m := map[string]jobTemplate{}
		for _, name := range EmbeddedTraceNames() {
			jobs, err := EmbeddedTrace(name)
			if err != nil {
				panic(fmt.Sprintf("sim: embedded trace %s: %v", name, err)) // tested
			}
			for _, j := range jobs {
				if _, ok := m[j.JobType]; !ok {
					m[j.JobType] = jobTemplate{j.Command, j.WorkingDir, j.NumStepsArg, j.NeedsDataDir}
				}
			}
		}
		gavelTemplatesMap = m
	})
	return gavelTemplatesMap
}

var (
	batchSizeRE = regexp.MustCompile(`\(batch size (\d+)\)`)
	dirUnsafeRE = regexp.MustCompile(`[^a-z0-9._-]+`)
)

// placeholderTemplate makes a plausible command line for a job type Gavel's
// traces do not have: "Foo-1 (batch size 32)" runs
// "python3 train.py --batch_size 32" in "foo-1".
func placeholderTemplate(jobType string) jobTemplate {
	cmd := "python3 train.py"
	model := jobType
	if m := batchSizeRE.FindStringSubmatchIndex(jobType); m != nil {
		cmd += " --batch_size " + jobType[m[2]:m[3]]
		model = jobType[:m[0]]
	}
	dir := strings.Trim(dirUnsafeRE.ReplaceAllString(strings.ToLower(strings.TrimSpace(model)), "_"), "_")
	if dir == "" {
		dir = "job"
	}
	return jobTemplate{Command: cmd, WorkingDir: dir, NumStepsArg: "--num_steps", NeedsDataDir: true}
}
