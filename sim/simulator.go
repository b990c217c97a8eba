package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
)

// Epoch is the simulated wall-clock time of second 0 of a trace. Policies see
// Snapshot.Now = Epoch + simulated seconds; nothing reads a real clock.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Cluster describes the simulated cluster: GPUs per type, packed into nodes
// of GPUsPerNode GPUs of one type each.
type Cluster struct {
	GPUs        map[string]int
	GPUsPerNode int
}

// Nodes lays the cluster out as nodes named <type>-<n>, in type order.
func (c Cluster) Nodes() []optimizer.Node {
	per := c.GPUsPerNode
	if per <= 0 {
		per = 1
	}
	types := make([]string, 0, len(c.GPUs))
	for t := range c.GPUs {
		types = append(types, t)
	}
	sort.Strings(types)
	var nodes []optimizer.Node
	for _, t := range types {
		left := c.GPUs[t]
		for i := 0; left > 0; i++ {
			n := min(per, left)
			nodes = append(nodes, optimizer.Node{Name: fmt.Sprintf("%s-%d", t, i), Type: t, GPUs: n})
			left -= n
		}
	}
	return nodes
}

// TotalGPUs is the number of GPUs in the cluster.
func (c Cluster) TotalGPUs() int {
	n := 0
	for _, g := range c.GPUs {
		n += g
	}
	return n
}

// maxIdleRounds is how many rounds in a row a policy may leave every
// remaining job waiting, with no arrival to come, before the run is declared
// stuck (Gavel's mechanism may wait up to 1,920 s for a new allocation).
const maxIdleRounds = 50

// Config is one simulation run.
type Config struct {
	Cluster Cluster
	Round   time.Duration
	// Throughputs is the matrix the policy plans with (with Learn set: the
	// imported matrix the plan starts from, see Learning).
	Throughputs optimizer.Throughputs
	// Truth is the matrix jobs progress at; nil: Throughputs.
	Truth optimizer.Throughputs
	// Learn, if set, makes the plan what hadar would know and learn of
	// Truth (learn.go); nil plans with Throughputs as given.
	Learn  *Learning
	Policy optimizer.Policy
	// CopyEfficiency is the combining efficiency of k HadarE copies: k
	// copies move their job at CopyEfficiency.At(k) times their summed rate
	// (the zero value: 1 for every k).
	CopyEfficiency optimizer.CopyEfficiency
	// StepNoise, if positive, is the sigma of the lognormal factor each
	// job's total steps is seen through by the policy (noise.go); jobs still
	// complete at their true steps. NoiseSeed seeds the factors.
	StepNoise float64
	NoiseSeed int64
	// Rules are the rules of hadar-slurmd's round the run follows (the
	// zero value: Gavel's simulator's; daemonsim.FastPathRules: the
	// daemon's).
	Rules
	// MaxSimulatedTime stops a run that would never end (a job no GPU type can
	// run); default 10 years.
	MaxSimulatedTime time.Duration
	// Progress, if set, is called after every round with jobs completed so far.
	Progress func(completed, total int)
}

// Rules are what a fast-path run may follow of the daemon's round.
type Rules struct {
	// Shaped gives every job the request shape its sbatch would have on the
	// cluster's nodes (RequestShape): one node when the gang fits one,
	// else equal parts on the fewest nodes. Slurm cannot run a gang split
	// any other way, so this is what the daemon's round plans for; false
	// lets the policy split gangs freely (Gavel's model).
	Shaped bool
	// NoStop: a running job may not be stopped, only moved (hadar-slurmd
	// with preemption = false, its default). The policy's guard
	// (optimizer.KeepNoStop) keeps it running, or moves it where that saves
	// more than the policy's migration penalty.
	NoStop bool
	// Events, if set, plans again as hadar-slurmd does between its full
	// rounds: a job's completion or arrival starts a round Events.Delay
	// later (the daemon's poll), a mid-round (optimizer.Snapshot.MidRound)
	// until the next full round is due. Unset: rounds start only every
	// Round (or when every running job has finished), as in Gavel's
	// simulator.
	Events *Events
	// StartCost is the time a job loses each time it starts running
	// (first, again after a stop, or on other GPUs), by its model: Slurm's
	// scheduling pass and the job's start-up, paid over as many rounds as
	// it takes. The job holds its GPUs meanwhile.
	StartCost StartCosts
}

// Events configures rounds started by completions and arrivals.
type Events struct {
	// Delay is the time from a completion or arrival to the round it
	// starts.
	Delay time.Duration
}

// JobResult is one job's outcome.
type JobResult struct {
	ID          string
	Type        string
	Workers     int
	Arrival     float64 // seconds
	FirstStart  float64 // seconds; -1 if it never ran
	Completion  float64 // seconds; -1 if it never completed
	IsolatedJCT float64 // seconds, for finish-time fairness
	MaxCopies   int     // most HadarE copies the job ran at once
	CopyRounds  int     // rounds in which the job ran copies
	CopySum     int     // sum of copies over those rounds
	// GPUSecsByType is the GPU time the job held on each GPU type.
	GPUSecsByType map[string]float64
	// Stops counts the rounds whose plan left the running job out (live:
	// a requeue each), Moves those that gave it other GPUs (live: a
	// requeue and a new placement each).
	Stops, Moves int
}

// JCT is completion minus arrival, in seconds.
func (j JobResult) JCT() float64 { return j.Completion - j.Arrival }

// UtilSample is the fraction of GPUs busy during one round.
type UtilSample struct {
	Start, Length float64 // seconds
	Utilization   float64
}

// Result is the outcome of one run.
type Result struct {
	Policy      string
	Jobs        []JobResult
	Rounds      int
	SchedTimes  []time.Duration
	Wall        time.Duration
	BusyGPUSecs float64
	// IdealGPUSecs is the GPU time the work done would have taken had every
	// job run on its fastest GPU type in the cluster (at most BusyGPUSecs).
	IdealGPUSecs float64
	TotalGPUs    int
	Util         []UtilSample
	// Capacity is the cluster's GPUs per type, BusyByType the busy GPU
	// seconds of each.
	Capacity   map[string]int
	BusyByType map[string]float64
	// Learning is the planning matrix's error against the truth, at the
	// start and after every round that completed jobs (Config.Learn only).
	Learning []LearnPoint
}

type simJob struct {
	// Job is what the policy sees: with step noise, TotalSteps is the
	// estimate and RemainingSteps follows from it (seenRemaining).
	optimizer.Job
	// steps is the job's true work, left the true steps still to do.
	steps, left float64
	arrival     float64
	firstStart  float64
	completion  float64
	isolated    float64
	// bestRate is the job's rate on its fastest GPU type in the cluster.
	bestRate float64
	// HadarE bookkeeping.
	maxCopies, copyRounds, copySum int
	stops, moves                   int
	gpuSecsByType                  map[string]float64
	// startLeft is the start-up (Rules.StartCost) still to pay before the
	// job trains: a start-up longer than the round carries over.
	startLeft float64
}

// Run simulates jobs under cfg until every job completes. It is
// deterministic: only the scheduling-time measurements vary between runs.
func Run(ctx context.Context, cfg Config, trace []TraceJob) (*Result, error) {
	if cfg.Policy == nil {
		return nil, fmt.Errorf("simulate: no policy")
	}
	if cfg.Round <= 0 {
		return nil, fmt.Errorf("simulate: round must be positive, got %s", cfg.Round)
	}
	if cfg.Cluster.TotalGPUs() == 0 {
		return nil, fmt.Errorf("simulate: the cluster has no GPUs")
	}
	if err := cfg.CopyEfficiency.Validate(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if err := checkSigma("steps", cfg.StepNoise); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if cfg.MaxSimulatedTime == 0 {
		cfg.MaxSimulatedTime = 10 * 365 * 24 * time.Hour
	}
	wallStart := time.Now()
	limiter, _ := cfg.Policy.(optimizer.CopyLimiter)
	nodes := cfg.Cluster.Nodes()
	capacity := cfg.Cluster.GPUs
	round := cfg.Round.Seconds()

	truth := cfg.Truth
	if truth == nil {
		truth = cfg.Throughputs
	}
	planned := cfg.Throughputs
	var confirmed optimizer.Throughputs // nil without learning: no probes
	var learn *learner
	if cfg.Learn != nil {
		learn = newLearner(*cfg.Learn, cfg.Throughputs, truth, trace, capacity)
		planned, confirmed = learn.plan, learn.observed
	}
	jobs := make([]*simJob, len(trace))
	stepNoise := stepFactors(len(trace), cfg.StepNoise, cfg.NoiseSeed)
	for i, tj := range trace {
		if err := checkRunnable(planned, tj, capacity); err != nil {
			return nil, fmt.Errorf("simulate: job %d: %w", i, err)
		}
		if err := checkRunnable(truth, tj, capacity); err != nil {
			return nil, fmt.Errorf("simulate: job %d: truth: %w", i, err)
		}
		est := tj.TotalSteps
		if stepNoise != nil {
			est *= stepNoise[i]
		}
		jobs[i] = &simJob{
			Job: optimizer.Job{
				ID: strconv.Itoa(i), Type: tj.JobType, Workers: tj.ScaleFactor,
				Arrival:    Epoch.Add(seconds(tj.Arrival)),
				TotalSteps: est, RemainingSteps: est,
				Weight: max(tj.PriorityWeight, 0),
				// The site's priority of a trace job: its age, as
				// Slurm's multifactor age factor orders jobs (and
				// slurmsim's squeue reports it): earlier first, jobs
				// submitted in the same second alike.
				Priority: -int64(tj.Arrival),
			},
			steps: tj.TotalSteps, left: tj.TotalSteps,
			arrival: tj.Arrival, firstStart: -1, completion: -1,
		}
		if jobs[i].Weight == 0 {
			jobs[i].Weight = 1
		}
		if cfg.Shaped {
			n, per := RequestShape(tj.ScaleFactor, cfg.Cluster.GPUsPerNode)
			jobs[i].Shape = optimizer.Shape{Nodes: n, GPUsPerNode: per}
		}
	}
	// Jobs enter in arrival order (ties by trace position).
	order := make([]*simJob, len(jobs))
	copy(order, jobs)
	sort.SliceStable(order, func(a, b int) bool { return order[a].arrival < order[b].arrival })

	res := &Result{Policy: cfg.Policy.Name(), TotalGPUs: cfg.Cluster.TotalGPUs(), Capacity: capacity, BusyByType: map[string]float64{}}
	if len(jobs) == 0 {
		res.Wall = time.Since(wallStart)
		return res, nil
	}
	fastestFirst := (&optimizer.Snapshot{Nodes: nodes, Throughput: planned}).TypesFastestFirst()
	var jobBuf []optimizer.Job
	now := order[0].arrival
	if learn != nil {
		learn.record(0, now)
	}
	next := 0 // next job in order to arrive
	// lastFull is the start of the last full round; a round that starts
	// before lastFull+round is a mid-round (Events only).
	lastFull := math.Inf(-1)
	var active []*simJob
	completed := 0
	idleRounds := 0
	for completed < len(jobs) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if now-order[0].arrival > cfg.MaxSimulatedTime.Seconds() {
			return nil, fmt.Errorf("simulate: %s: %d of %d jobs still unfinished after %s of simulated time", cfg.Policy.Name(), len(jobs)-completed, len(jobs), cfg.MaxSimulatedTime)
		}
		for next < len(order) && order[next].arrival <= now {
			j := order[next]
			active = append(active, j)
			exact := j.Job // the metric is of the true work
			exact.TotalSteps = j.steps
			j.isolated = isolatedTime(truth, &exact, capacity, len(active))
			j.bestRate = truth.BestRate(j.Type, j.Workers, capacity)
			next++
		}
		if len(active) == 0 {
			now = order[next].arrival
			continue
		}
		mid := cfg.Events != nil && now < lastFull+round
		if !mid {
			lastFull = now
		}
		// The job slice is reused round after round; a policy must not keep
		// it past its Plan call.
		if cap(jobBuf) < len(active) {
			jobBuf = make([]optimizer.Job, len(active), len(order))
		}
		snap := &optimizer.Snapshot{
			Now:          Epoch.Add(seconds(now)),
			Round:        cfg.Round,
			Nodes:        nodes,
			Jobs:         jobBuf[:len(active)],
			Throughput:   planned,
			Confirmed:    confirmed,
			FastestFirst: fastestFirst,
			MidRound:     mid,
			NoPreemption: cfg.NoStop,
		}
		for i, j := range active {
			snap.Jobs[i] = j.Job
			snap.Jobs[i].NoStop = cfg.NoStop && len(j.Current) > 0
			if limiter != nil && j.MaxCopies == 0 {
				// Trace jobs set no copy limit: declare the policy's
				// default, so that Check enforces it.
				snap.Jobs[i].MaxCopies = limiter.CopyLimit(snap, &snap.Jobs[i])
			}
		}
		t0 := time.Now()
		plan, err := cfg.Policy.Plan(snap)
		res.SchedTimes = append(res.SchedTimes, time.Since(t0))
		if err != nil {
			return nil, fmt.Errorf("simulate: %s at t=%.0fs: %w", cfg.Policy.Name(), now, err)
		}
		if err := optimizer.Check(snap, plan); err != nil {
			return nil, fmt.Errorf("simulate: %s at t=%.0fs: %w", cfg.Policy.Name(), now, err)
		}
		res.Rounds++

		// Advance every job by one round. A job runs whole steps: as many
		// as fit in the round, or the steps it has left (Gavel leases
		// int(throughput x round) steps). The round ends when the last
		// running job stops: about a round's length, or earlier when every
		// running job finishes in it, even if other jobs are waiting (as in
		// Gavel's simulator, whose round ends with its last micro-task).
		// With Events it ends at the next full round, or Events.Delay after
		// the first completion or arrival before it.
		length := round
		if cfg.Events != nil {
			length = lastFull + round - now
			if e := firstEvent(&cfg, truth, active, plan, now, length, order, next); e >= 0 {
				length = min(length, e+cfg.Events.Delay.Seconds())
			}
		}
		roundEnd := now
		busy, ideal := 0.0, 0.0
		completedBefore := completed
		still := active[:0]
		anyRunning := false
		for _, j := range active {
			tasks := plan.Assignments[j.ID]
			starts := len(tasks) > 0 && !sameTasks(j.Current, tasks)
			switch {
			case len(j.Current) > 0 && len(tasks) == 0:
				j.stops++
			case len(j.Current) > 0 && starts:
				j.moves++
			}
			j.Current = tasks
			if len(tasks) == 0 {
				still = append(still, j)
				continue
			}
			anyRunning = true
			rate, copies := jobRate(truth, cfg.CopyEfficiency, &j.Job, tasks)
			if copies > 0 {
				j.copyRounds++
				j.copySum += copies
				j.maxCopies = max(j.maxCopies, copies)
			}
			if j.firstStart < 0 {
				j.firstStart = now
			}
			gpus := float64(optimizer.TaskGPUs(tasks))
			if starts {
				j.startLeft = cfg.StartCost.For(j.Type).Seconds()
			}
			lost := min(j.startLeft, length)
			j.startLeft -= lost
			ran := length - lost
			before := j.left
			steps := roundSteps(rate, ran)
			if cfg.Events != nil {
				// Rounds of any length: the daemon's jobs do not lease
				// whole steps.
				steps = rate * ran
			}
			if rate > 0 && j.left <= steps {
				ran = j.left / rate
				j.left = 0
				j.completion = now + lost + ran
			} else if rate > 0 {
				ran = steps / rate
				j.left -= steps
			}
			j.RemainingSteps = j.left
			if stepNoise != nil {
				j.RemainingSteps = seenRemaining(j.TotalSteps, j.steps-j.left)
			}
			if j.bestRate > 0 {
				ideal += float64(j.Workers) * (before - j.left) / j.bestRate
			}
			held := lost + ran
			j.Attained += gpus * held
			j.Executed += held
			busy += gpus * held
			for _, t := range tasks {
				res.BusyByType[t.Type] += float64(t.GPUs) * held
				if j.gpuSecsByType == nil {
					j.gpuSecsByType = map[string]float64{}
				}
				j.gpuSecsByType[t.Type] += float64(t.GPUs) * held
			}
			if learn != nil && ran > 0 {
				observe(learn, truth, &j.Job, tasks, rate)
			}
			roundEnd = math.Max(roundEnd, now+held)
			if j.completion >= 0 {
				completed++
				continue
			}
			still = append(still, j)
		}
		if cfg.Events != nil && anyRunning && len(still) > 0 {
			// Jobs left running hold their GPUs to the round's end.
			roundEnd = math.Max(roundEnd, now+length)
		}
		active = still
		if anyRunning || next < len(order) {
			idleRounds = 0
		} else if idleRounds++; idleRounds >= maxIdleRounds {
			var stuck []string
			for _, j := range active {
				stuck = append(stuck, fmt.Sprintf("%s (%s, %d GPUs)", j.ID, j.Type, j.Workers))
			}
			return nil, fmt.Errorf("simulate: %s runs none of the %d remaining jobs for %d rounds: %s", cfg.Policy.Name(), len(active), idleRounds, strings.Join(stuck, ", "))
		}
		if !anyRunning {
			roundEnd = now + length
		}
		if !anyRunning && next < len(order) && len(active) == 0 {
			roundEnd = order[next].arrival
		}
		if learn != nil && learn.endRound(completed, roundEnd, completed != completedBefore) {
			planned, confirmed = learn.plan, learn.observed
			fastestFirst = (&optimizer.Snapshot{Nodes: nodes, Throughput: planned}).TypesFastestFirst()
		}
		res.BusyGPUSecs += busy
		res.IdealGPUSecs += ideal
		res.Util = append(res.Util, UtilSample{Start: now, Length: roundEnd - now, Utilization: busy / (float64(res.TotalGPUs) * (roundEnd - now))})
		now = roundEnd
		if cfg.Progress != nil {
			cfg.Progress(completed, len(jobs))
		}
	}
	for _, j := range jobs {
		res.Jobs = append(res.Jobs, JobResult{
			ID: j.ID, Type: j.Type, Workers: j.Workers, Arrival: j.arrival,
			FirstStart: j.firstStart, Completion: j.completion, IsolatedJCT: j.isolated,
			MaxCopies: j.maxCopies, CopyRounds: j.copyRounds, CopySum: j.copySum, GPUSecsByType: j.gpuSecsByType,
			Stops: j.stops, Moves: j.moves,
		})
	}
	if learn != nil {
		res.Learning = learn.log
	}
	res.Wall = time.Since(wallStart)
	return res, nil
}

// RequestShape is how a gang of workers GPUs is asked of Slurm on nodes of
// perNode GPUs (--nodes x --gres=gpu:N): on one node when it fits one, else
// on the fewest nodes that split it evenly (8 on nodes of 4: 2 x 4; 6 on
// nodes of 4: 2 x 3).
func RequestShape(workers, perNode int) (nodes, gpusPerNode int) {
	if perNode <= 0 || workers <= perNode {
		return 1, workers
	}
	n := (workers + perNode - 1) / perNode
	for ; n <= workers; n++ {
		if workers%n == 0 {
			return n, workers / n
		}
	}
	return workers, 1
}

// firstEvent is the time from now, within length, of the first event that
// starts a round early: a running job's completion under plan, or the next
// arrival; -1 if none comes within length.
func firstEvent(cfg *Config, truth optimizer.Throughputs, active []*simJob, plan *optimizer.Plan, now, length float64, order []*simJob, next int) float64 {
	first := -1.0
	consider := func(t float64) {
		if t >= 0 && t < length && (first < 0 || t < first) {
			first = t
		}
	}
	if next < len(order) {
		consider(order[next].arrival - now)
	}
	for _, j := range active {
		tasks := plan.Assignments[j.ID]
		if len(tasks) == 0 {
			continue
		}
		rate, _ := jobRate(truth, cfg.CopyEfficiency, &j.Job, tasks)
		if rate <= 0 {
			continue
		}
		lost := j.startLeft
		if !sameTasks(j.Current, tasks) {
			lost = cfg.StartCost.For(j.Type).Seconds()
		}
		consider(lost + j.left/rate)
	}
	return first
}

// sameTasks reports whether a and b are the same placement (in any order).
func sameTasks(a, b []optimizer.Task) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !slices.Contains(b, t) {
			return false
		}
	}
	return true
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// roundSteps is the work a job running at rate steps/s does in a full round
// of round seconds: whole steps (Gavel's int(throughput x round)), or the
// fraction of a step for a job too slow to do one step per round.
func roundSteps(rate, round float64) float64 {
	s := rate * round
	if s >= 1 {
		return math.Floor(s)
	}
	return s
}

// jobRate is the job's steps/s under tasks, and its number of HadarE copies
// (0 for a gang placement).
func jobRate(thr optimizer.Throughputs, copyEfficiency optimizer.CopyEfficiency, j *optimizer.Job, tasks []optimizer.Task) (float64, int) {
	if len(tasks) > 0 && tasks[0].Copy > 0 {
		return thr.CopiesRate(j.Type, tasks, copyEfficiency.At(len(tasks))), len(tasks)
	}
	return thr.PlacementRate(j.Type, j.Workers, tasks), 0
}

// checkRunnable rejects a job that no GPU type of the cluster could ever run.
// (A gang wider than every single type may still run under a task-level
// policy; a job-level policy that never places it is caught as a stall.)
func checkRunnable(thr optimizer.Throughputs, tj TraceJob, capacity map[string]int) error {
	if _, ok := thr[tj.JobType]; !ok {
		return fmt.Errorf("job type %q is not in the throughput matrix", tj.JobType)
	}
	total, runnable := 0, false
	for h, n := range capacity {
		total += n
		if n > 0 && thr.Rate(tj.JobType, h, tj.ScaleFactor) > 0 {
			runnable = true
		}
	}
	if !runnable || total < tj.ScaleFactor {
		return fmt.Errorf("no GPU type in the cluster can run %q with %d workers", tj.JobType, tj.ScaleFactor)
	}
	return nil
}

// isolatedTime is the job's completion time running alone on an equal 1/n
// share of every GPU type (Themis, Gavel), n being the number of jobs in the
// system when it arrived: the share buys time fractions C_h/(n*W) of each
// type, normalised so that they sum to at most 1.
func isolatedTime(thr optimizer.Throughputs, j *optimizer.Job, capacity map[string]int, n int) float64 {
	types := make([]string, 0, len(capacity))
	sum := 0.0
	for h, c := range capacity {
		types = append(types, h)
		sum += float64(c) / float64(n*j.Workers)
	}
	sort.Strings(types) // a fixed summation order keeps runs bit-identical
	norm := math.Max(sum, 1)
	rate := 0.0
	for _, h := range types {
		f := float64(capacity[h]) / float64(n*j.Workers) / norm
		rate += f * thr.Rate(j.Type, h, j.Workers)
	}
	if rate <= 0 {
		return math.Inf(1)
	}
	return j.TotalSteps / rate
}

// IsolatedJCT is a job's finish-time-fairness reference, as Run computes
// it: its time to do steps alone on an equal 1/n share of every GPU type of
// capacity, n being the jobs in the system when it arrived. Other drivers
// of the same metrics (hadar simulate --daemon) use it.
func IsolatedJCT(thr optimizer.Throughputs, jobType string, workers int, steps float64, capacity map[string]int, n int) float64 {
	return isolatedTime(thr, &optimizer.Job{Type: jobType, Workers: workers, TotalSteps: steps}, capacity, max(n, 1))
}
