package optimizer

import (
	"math/rand/v2"
	"time"
)

// Tiresias is 2D-LAS with discretised queues (Gu et al., NSDI 2019):
// attained service (GPUs x time) moves a job down K queues at fixed
// thresholds; new jobs enter the top queue; jobs are FIFO within a queue;
// higher queues preempt lower ones; smaller jobs backfill when the head does
// not fit; a job that has waited PromoteKnob times its executed time is
// promoted back to the top queue. It is heterogeneity-agnostic.
type Tiresias struct {
	// Thresholds are the attained-service queue limits in GPU-seconds.
	Thresholds  []float64
	PromoteKnob float64

	src     *rand.PCG // rng's source, kept to save its state
	rng     *rand.Rand
	lastRun map[string]time.Time
	offset  map[string]float64 // attained service forgiven by promotion
}

func init() {
	Register("tiresias", "Tiresias: discretised 2D-LAS (GPU-time queues 3250/7200/18000 s), preemptive, starvation promotion, agnostic", func(o Options) Policy {
		to := o.Tiresias.withDefaults()
		src := rand.NewPCG(uint64(o.Seed), 0x94d049bb133111eb)
		return &Tiresias{
			Thresholds: append([]float64(nil), to.Thresholds...), PromoteKnob: to.PromoteKnob,
			src: src, rng: rand.New(src),
			lastRun: map[string]time.Time{}, offset: map[string]float64{},
		}
	})
}

// Name implements Policy.
func (t *Tiresias) Name() string { return "tiresias" }

func (t *Tiresias) queue(j *Job) int {
	a := j.Attained - t.offset[j.ID]
	q := 0
	for _, th := range t.Thresholds {
		if a >= th {
			q++
		}
	}
	return q
}

// Plan implements Policy.
func (t *Tiresias) Plan(s *Snapshot) (*Plan, error) {
	jobs := sortedJobs(s)
	present := map[string]bool{}
	for _, j := range jobs {
		present[j.ID] = true
		if len(j.Current) > 0 {
			t.lastRun[j.ID] = s.Now
		}
		last, ran := t.lastRun[j.ID]
		if !ran {
			last = j.Arrival
		}
		if waited := s.Now.Sub(last).Seconds(); j.Executed > 0 && waited >= t.PromoteKnob*j.Executed {
			t.offset[j.ID] = j.Attained
		}
	}
	for id := range t.lastRun {
		if !present[id] {
			delete(t.lastRun, id)
			delete(t.offset, id)
		}
	}
	stableSort(jobs, func(a, b *Job) bool { return t.queue(a) < t.queue(b) })
	return placeAgnostic(s, jobs, t.rng), nil
}

// placeAgnostic places whole gangs in the given order, each on one GPU type
// without regard to speed: the first type, in an order shuffled each round
// (as Gavel does for its agnostic policies), with room. Jobs that do not fit
// are skipped, so smaller ones behind them backfill. A job that lands on its
// current type keeps its nodes.
func placeAgnostic(s *Snapshot, order []*Job, rng *rand.Rand) *Plan {
	types := s.Types()
	rng.Shuffle(len(types), func(a, b int) { types[a], types[b] = types[b], types[a] })
	pool := newFreePool(s.Nodes)
	left := map[string]int{}
	for _, h := range types {
		left[h] = pool.Free(h)
	}
	chosen := map[string]string{}
	var picked []*Job
	for _, j := range order {
		for _, h := range types {
			if left[h] >= j.Workers && s.JobRate(j, h, j.Workers) > 0 {
				left[h] -= j.Workers
				chosen[j.ID] = h
				picked = append(picked, j)
				break
			}
		}
	}
	return placeChosen(pool, picked, chosen)
}
