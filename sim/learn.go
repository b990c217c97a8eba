package sim

import (
	"math"
	"sort"

	"github.com/hadar-sched/hadar/optimizer"
)

// PriorFunc returns known with the cells it lacks for jobTypes on gpuTypes
// filled by the prior; every cell of known is kept as it is and known is not
// modified. `hadar simulate` passes profiles' rule (docs/prior.md); package
// sim does not depend on how the prior is computed.
type PriorFunc func(known optimizer.Throughputs, jobTypes, gpuTypes []string) optimizer.Throughputs

// Learning makes the simulator plan the way hadar-slurmd does when the
// matrix is not the truth (Config.Truth): the policy sees Config.Throughputs
// (the imported matrix) with every cell it lacks on the cluster's GPU types
// filled by Prior, and each round a job runs on one GPU type its observed
// rate (the truth's) is folded into the learned value of its cell, as
// profiles.Store.RecordObservation does. A cell's value in the plan is, as
// in the daemon's store: learned once it has MinSamples samples, else
// imported, else learned with fewer samples, else prior. The prior is fitted
// again, on what is known, whenever that changes (the daemon fits it every
// round), so learning one model's rate on a type also moves the prior of the
// models not yet seen there.
//
// Exploration: a cell not yet planned at a learned value (the prior's, or
// the imported matrix's, measured elsewhere) is planned at (1 + Explore)
// times its value until the learned value takes over (at its first sample
// for a prior cell, its third for an imported one), optimism in the face
// of uncertainty. It changes a decision only where the value comes within
// that factor of the best known alternative, that is where it cannot rule
// out that the type is the better one; there the job is tried on the type
// until its own rate replaces the value, and the bonus is gone. It
// is a lazy form of Sia's bootstrapping, which profiles every new job on
// every GPU type: hadar pays the try only where knowing could change the
// placement. docs/learning.md measures it against no exploration.
type Learning struct {
	// Prior fills the cells no matrix has; nil leaves them out (a job type
	// then runs only where the imported matrix has a rate for it).
	Prior PriorFunc
	// MinSamples is how many samples a learned value needs to replace an
	// imported one (profiles.WithMinLearnedSamples; default 3). A cell with
	// no imported value uses the learned one from its first sample.
	MinSamples int
	// Window is the learning window W of the running mean (default 20).
	Window int
	// Explore is the optimism bonus of a prior cell (0: no exploration).
	Explore float64
	// Frozen plans with the prior-filled matrix and never learns: the
	// baseline of what learning gains.
	Frozen bool
}

// LearnPoint is the planning matrix's error against the truth at one point
// of a run, over the cells of the truth for the trace's job types on the
// cluster's GPU types (every worker count the truth has).
type LearnPoint struct {
	Completed int     `json:"completed"`
	TimeS     float64 `json:"time_s"`
	Cells     int     `json:"cells"`
	// Learned is how many of those cells the plan takes from a learned value.
	Learned int `json:"learned"`
	// MedianError and P90Error are of |plan - truth| / truth over the cells
	// (the plan's values before any exploration bonus).
	MedianError float64 `json:"median_error"`
	P90Error    float64 `json:"p90_error"`
	// TypeMedianError is the median error of each GPU type's cells.
	TypeMedianError map[string]float64 `json:"type_median_error"`
}

type cellKey struct {
	job, gpu string
	workers  int
}

type learnedCell struct {
	mean    float64
	samples int
}

// learner keeps the simulated daemon's knowledge. It is deterministic: the
// same observations in the same order give the same matrices.
type learner struct {
	opts               Learning
	imported, truth    optimizer.Throughputs
	jobTypes, gpuTypes []string
	learned            map[cellKey]*learnedCell
	// known is what the store resolves (imported and learned); filled adds
	// the prior; plan adds the exploration bonus to the prior's cells.
	known, filled, plan optimizer.Throughputs
	// observed holds the cells planned at what was learned here (the
	// snapshot's Confirmed).
	observed optimizer.Throughputs
	changed  bool
	eval     []cellKey
	log      []LearnPoint
}

func newLearner(opts Learning, imported, truth optimizer.Throughputs, trace []TraceJob, capacity map[string]int) *learner {
	if opts.MinSamples <= 0 {
		opts.MinSamples = 3
	}
	if opts.Window <= 0 {
		opts.Window = 20
	}
	l := &learner{opts: opts, imported: imported, truth: truth, learned: map[cellKey]*learnedCell{}}
	seen := map[string]bool{}
	for _, tj := range trace {
		if !seen[tj.JobType] {
			seen[tj.JobType] = true
			l.jobTypes = append(l.jobTypes, tj.JobType)
		}
	}
	sort.Strings(l.jobTypes)
	for gt, n := range capacity {
		if n > 0 {
			l.gpuTypes = append(l.gpuTypes, gt)
		}
	}
	sort.Strings(l.gpuTypes)
	for _, jt := range l.jobTypes {
		for _, gt := range l.gpuTypes {
			ws := make([]int, 0, len(truth[jt][gt]))
			for w, r := range truth[jt][gt] {
				if r > 0 {
					ws = append(ws, w)
				}
			}
			sort.Ints(ws)
			for _, w := range ws {
				l.eval = append(l.eval, cellKey{jt, gt, w})
			}
		}
	}
	l.refit()
	return l
}

// observe folds one observed rate of a job type running workers workers on
// one GPU type into its cell.
func (l *learner) observe(jobType, gpuType string, workers int, rate float64) {
	if l.opts.Frozen || workers <= 0 || rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return
	}
	k := cellKey{jobType, gpuType, workers}
	c := l.learned[k]
	if c == nil {
		c = &learnedCell{}
		l.learned[k] = c
	}
	c.samples++
	before := c.mean
	c.mean += (rate - c.mean) / float64(min(c.samples, l.opts.Window))
	_, imported := l.imported[jobType][gpuType][workers]
	switch {
	case c.samples == 1 && !imported, c.samples == l.opts.MinSamples && imported:
		l.changed = true // the cell now takes the learned value
	case (c.samples > l.opts.MinSamples || !imported) && c.mean != before:
		l.changed = true
	}
}

// endRound refits the plan if what is known changed, and logs the error at
// every change of the completed count. It reports whether the plan changed.
func (l *learner) endRound(completed int, now float64, logIt bool) bool {
	changed := l.changed
	if changed {
		l.refit()
	}
	if logIt {
		l.record(completed, now)
	}
	return changed
}

func (l *learner) refit() {
	l.changed = false
	known := optimizer.Throughputs{}
	for jt, byType := range l.imported {
		for gt, byW := range byType {
			for w, r := range byW {
				known.Set(jt, gt, w, r)
			}
		}
	}
	// observed holds the cells planned at what was learned here; the others
	// (the prior's, and imported ones measured on another cluster or off as
	// --noise-rate makes them) are what exploration is optimistic about.
	observed := optimizer.Throughputs{}
	keys := make([]cellKey, 0, len(l.learned))
	for k := range l.learned {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].less(keys[b]) })
	for _, k := range keys {
		c := l.learned[k]
		_, imported := l.imported[k.job][k.gpu][k.workers]
		if !imported || c.samples >= l.opts.MinSamples {
			known.Set(k.job, k.gpu, k.workers, c.mean)
			observed.Set(k.job, k.gpu, k.workers, c.mean)
		}
	}
	l.known = known
	l.observed = observed
	l.filled = known
	if l.opts.Prior != nil {
		l.filled = l.opts.Prior(known, l.jobTypes, l.gpuTypes)
	}
	l.plan = l.filled.Optimistic(observed, l.opts.Explore)
}

func (a cellKey) less(b cellKey) bool {
	if a.job != b.job {
		return a.job < b.job
	}
	if a.gpu != b.gpu {
		return a.gpu < b.gpu
	}
	return a.workers < b.workers
}

// record appends the current error of the filled matrix to the log.
func (l *learner) record(completed int, now float64) {
	p := LearnPoint{Completed: completed, TimeS: now, Cells: len(l.eval), TypeMedianError: map[string]float64{}}
	var all []float64
	byType := map[string][]float64{}
	for _, k := range l.eval {
		t := l.truth[k.job][k.gpu][k.workers]
		e := math.Abs(l.filled.Rate(k.job, k.gpu, k.workers)-t) / t
		all = append(all, e)
		byType[k.gpu] = append(byType[k.gpu], e)
		if c := l.learned[k]; c != nil {
			if _, imp := l.imported[k.job][k.gpu][k.workers]; !imp || c.samples >= l.opts.MinSamples {
				p.Learned++
			}
		}
	}
	if len(all) > 0 {
		sort.Float64s(all)
		p.MedianError = quantile(all, 0.5)
		p.P90Error = quantile(all, 0.9)
	}
	for gt, es := range byType {
		sort.Float64s(es)
		p.TypeMedianError[gt] = quantile(es, 0.5)
	}
	l.log = append(l.log, p)
}

// LearningAt returns the log's first point with at least frac of the jobs
// completed (the last point if none), for each fraction.
func LearningAt(log []LearnPoint, jobs int, fracs ...float64) []LearnPoint {
	var out []LearnPoint
	if len(log) == 0 {
		return nil
	}
	for _, f := range fracs {
		p := log[len(log)-1]
		for _, q := range log {
			if float64(q.Completed) >= f*float64(jobs) {
				p = q
				break
			}
		}
		out = append(out, p)
	}
	return out
}

// observe gives the learner what a round of job j under tasks showed, as the
// daemon samples progress: a gang on one GPU type is one sample of its cell
// (rate is its whole-job rate); a gang spanning types runs at its slowest
// type's pace and tells nothing about one cell; each HadarE copy is a
// sample of its own type and GPU count.
func observe(l *learner, truth optimizer.Throughputs, j *optimizer.Job, tasks []optimizer.Task, rate float64) {
	if tasks[0].Copy > 0 {
		for _, t := range tasks {
			l.observe(j.Type, t.Type, t.GPUs, truth.Rate(j.Type, t.Type, t.GPUs))
		}
		return
	}
	for _, t := range tasks[1:] {
		if t.Type != tasks[0].Type {
			return
		}
	}
	l.observe(j.Type, tasks[0].Type, j.Workers, rate)
}
