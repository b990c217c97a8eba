package optimizer

import (
	"math"
	"math/rand/v2"
)

// ELAS is E-LAS (Sultana et al., ICPP 2020): least estimated remaining
// service first, where the estimate comes from each job's real-time epoch
// progress rate and its attained service, never from a stated duration.
//
// A job that has run for Executed seconds and done a fraction f of its
// epochs (the progress it reports) progresses at f / Executed per second of
// run time, so at that rate it needs Executed x (1-f) / f more seconds, on
// the Attained / Executed GPUs it has held on average: Attained x (1-f) / f
// GPU-seconds. Jobs are ranked by that estimate, least first, which puts a
// nearly finished job ahead of one that has progressed little for the same
// service. A job with no progress yet (new, or never seen to progress) has no
// estimate and is ranked by its attained service, as in LAS: a new job (0)
// runs first for a round, which gives it an estimate. Ties go to the earlier
// arrival. Whole gangs are placed in that order, heterogeneity-agnostic, as
// for Tiresias; a job that does not fit is skipped and smaller ones backfill.
type ELAS struct {
	src *rand.PCG // rng's source, kept to save its state
	rng *rand.Rand
}

func init() {
	Register("elas", "E-LAS: least remaining service first, estimated from each job's epoch progress rate and attained service (no durations), preemptive, agnostic", func(o Options) Policy {
		src := rand.NewPCG(uint64(o.Seed), 0xbf58476d1ce4e5b9)
		return &ELAS{src: src, rng: rand.New(src)}
	})
}

// Name implements Policy.
func (e *ELAS) Name() string { return "elas" }

// ELASKey is job j's rank under E-LAS, in GPU-seconds (less runs first): the
// estimated remaining service when j has progressed, else its attained
// service. It reads only what a live system sees: the fraction of its steps
// the job reports done, its attained service and its run time.
func ELASKey(j *Job) float64 {
	if rem, ok := elasRemaining(j); ok {
		return rem
	}
	return j.Attained
}

// elasRemaining estimates the GPU-seconds j still needs from its epoch
// progress rate; ok is false while j has no progress to go by.
func elasRemaining(j *Job) (rem float64, ok bool) {
	if j.TotalSteps <= 0 || j.Executed <= 0 || j.Attained <= 0 {
		return 0, false
	}
	done := 1 - j.RemainingSteps/j.TotalSteps
	if done <= 0 || math.IsNaN(done) {
		return 0, false
	}
	if done >= 1 {
		return 0, true
	}
	rate := done / j.Executed       // fraction of the job per second run
	gpus := j.Attained / j.Executed // GPUs held on average
	return gpus * (1 - done) / rate, true
}

// Plan implements Policy.
func (e *ELAS) Plan(s *Snapshot) (*Plan, error) {
	jobs := sortedJobs(s)
	keys := make(map[string]float64, len(jobs))
	for _, j := range jobs {
		keys[j.ID] = ELASKey(j)
	}
	stableSort(jobs, func(a, b *Job) bool { return keys[a.ID] < keys[b.ID] })
	return placeAgnostic(s, jobs, e.rng), nil
}
