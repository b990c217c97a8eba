package optimizer

import "math/rand/v2"

// fifoAllocator is Gavel's FIFO policy, the YARN capacity scheduler's
// behaviour: jobs start in arrival order, each on one GPU type (picked at
// random among the types with a free GPU: heterogeneity-agnostic), keep it
// until they finish (non-preemptive), and the head of the queue blocks
// everyone behind it when its type has too few free GPUs.
type fifoAllocator struct {
	rng      *rand.Rand
	assigned map[string]string
}

func (f *fifoAllocator) allocate(s *Snapshot, jobs []*Job, types []string) (allocation, error) {
	present := map[string]bool{}
	for _, j := range jobs {
		present[j.ID] = true
	}
	available := s.Capacity()
	for id := range f.assigned {
		if !present[id] {
			delete(f.assigned, id)
		}
	}
	for _, j := range jobs {
		if h, ok := f.assigned[j.ID]; ok {
			available[h] -= j.Workers
		}
	}
	for _, j := range jobs {
		if _, ok := f.assigned[j.ID]; ok {
			continue
		}
		var open []string
		for _, h := range s.Types() {
			if available[h] > 0 {
				open = append(open, h)
			}
		}
		if len(open) == 0 {
			break
		}
		h := open[f.rng.IntN(len(open))]
		if available[h] < j.Workers {
			break // head-of-line blocking
		}
		f.assigned[j.ID] = h
		available[h] -= j.Workers
	}
	out := allocation{}
	for _, j := range jobs {
		row := map[string]float64{}
		if h, ok := f.assigned[j.ID]; ok {
			row[h] = 1
		}
		out[j.ID] = row
	}
	return out, nil
}

func init() {
	Register("yarn-cs", "YARN capacity scheduler: FIFO, heterogeneity-agnostic, non-preemptive, head-of-line blocking (Gavel's FIFO)", func(o Options) Policy {
		return newGavelRounds("yarn-cs", &fifoAllocator{
			rng:      rand.New(rand.NewPCG(uint64(o.Seed), 0x2545f4914f6cdd1d)),
			assigned: map[string]string{},
		}, true, true, o.Seed)
	})
}
