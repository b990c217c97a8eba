package optimizer

import "sort"

// fifoAllocator is Gavel's FIFO policy in its heterogeneity-agnostic ("base")
// mode, the YARN capacity scheduler baseline of Gavel's evaluation
// (scheduler/policies/fifo.py after Gavel's PR #151). It keeps an
// assignment of jobs to GPU types between computations; at each one:
//
//   - for every assigned job that finished, in job order, the head of the
//     queue takes over its type if the head's workers fit in that type's
//     GPUs as counted so far (GPUs of assigned jobs earlier in job order are
//     subtracted; later ones are not yet);
//   - then the waiting jobs are assigned in arrival order, while some type
//     is on the free list (types with a free GPU once the assigned jobs are
//     counted, sorted by name), until a job fits on no listed type
//     (head-of-line blocking);
//   - X[j][h] = 1 for a job assigned to h, 0 otherwise, and the mechanism
//     runs only jobs of positive priority, time-sharing a type whose jobs
//     need more GPUs than it has.
//
// With gavelQuirk, the type is chosen as Gavel's code really chooses it: it
// draws a random index among the listed types that fit, but never reads the
// type at that index; the job goes to the type left in the variable by the
// loop that built that list, the last listed type, by name, whether or not
// it fits (so a type can be assigned far more jobs than it has GPUs), and
// the random index only picks which listed type is dropped when the
// assigned type's count reaches exactly zero. Gavel's published FIFO
// figures come from this behaviour; with it and the mechanism of gavel.go
// our yarn-cs reproduces them to the digit (docs/fidelity.md). Without
// gavelQuirk the random index picks the type, as Gavel's code intends.
type fifoAllocator struct {
	rng        *pyRandom
	gavelQuirk bool
	assigned   map[string]string // job -> type
	seq        map[string]int    // job -> arrival rank, Gavel's job ID order
	next       int
}

func newFIFOAllocator(seed int64, gavelQuirk bool) *fifoAllocator {
	return &fifoAllocator{
		rng:        newPyRandom(seed),
		gavelQuirk: gavelQuirk,
		assigned:   map[string]string{},
		seq:        map[string]int{},
	}
}

func (f *fifoAllocator) allocate(in *gavelInput) (allocation, error) {
	available := map[string]float64{}
	for k, h := range in.Types {
		available[h] = in.Capacity[k]
	}
	active := map[string]int{}
	var queue []int // indexes into in.Jobs, in arrival order
	for i, j := range in.Jobs {
		active[j.ID] = i
		if _, ok := f.seq[j.ID]; !ok {
			f.seq[j.ID] = f.next
			f.next++
		}
		if _, ok := f.assigned[j.ID]; !ok {
			queue = append(queue, i)
		}
	}
	thr := func(i int, h string) float64 {
		for k, t := range in.Types {
			if t == h {
				return in.Thr[i][k]
			}
		}
		return 0
	}

	// Replace finished jobs and count the GPUs still held.
	held := make([]string, 0, len(f.assigned))
	for id := range f.assigned {
		held = append(held, id)
	}
	sort.Slice(held, func(a, b int) bool { return f.seq[held[a]] < f.seq[held[b]] })
	for _, id := range held {
		h := f.assigned[id]
		i, ok := active[id]
		if ok {
			available[h] -= in.Scale[i]
			continue
		}
		if len(queue) > 0 {
			head := queue[0]
			if in.Scale[head] <= available[h] && thr(head, h) > 0 {
				queue = queue[1:]
				f.assigned[in.Jobs[head].ID] = h
				available[h] -= in.Scale[head]
			}
		}
		delete(f.assigned, id)
		delete(f.seq, id)
	}

	// Assign waiting jobs in arrival order.
	var free []string
	for _, h := range in.Types { // sorted by name
		if available[h] > 0 {
			free = append(free, h)
		}
	}
	for len(queue) > 0 && len(free) > 0 {
		i := queue[0]
		queue = queue[1:]
		var fits []int // indexes into free
		for k, h := range free {
			// Only types it can run on: a request for one GPU type (or
			// nodes of one type) never draws another.
			if available[h] >= in.Scale[i] && thr(i, h) > 0 {
				fits = append(fits, k)
			}
		}
		if len(fits) == 0 {
			break // head-of-line blocking
		}
		r := f.rng.IntN(len(fits))
		h := free[fits[r]]
		if f.gavelQuirk && thr(i, free[len(free)-1]) > 0 {
			h = free[len(free)-1] // the stale loop variable
		}
		if thr(i, h) <= 0 {
			continue
		}
		f.assigned[in.Jobs[i].ID] = h
		available[h] -= in.Scale[i]
		if available[h] == 0 {
			free = append(free[:fits[r]], free[fits[r]+1:]...)
		}
	}

	out := allocation{}
	for _, j := range in.Jobs {
		row := map[string]float64{}
		for _, h := range in.Types {
			row[h] = 0
		}
		if h, ok := f.assigned[j.ID]; ok {
			row[h] = 1
		}
		out[j.ID] = row
	}
	return out, nil
}

func init() {
	Register("yarn-cs", "YARN capacity scheduler as Gavel simulates it (Gavel's FIFO, reproduced with its type-assignment quirk): FIFO, heterogeneity-agnostic, head-of-line blocking", func(o Options) Policy {
		return newGavelRounds("yarn-cs", newFIFOAllocator(o.Seed, true), true, true, o.Seed)
	})
}
