package optimizer

import "sort"

// Throughputs is the heterogeneity matrix as a plain value:
// job type -> GPU type -> workers -> steps per second of the whole job.
// Policies read it; only package profiles knows where it is stored.
type Throughputs map[string]map[string]map[int]float64

// Set records a rate.
func (t Throughputs) Set(jobType, gpuType string, workers int, stepsPerSecond float64) {
	byType := t[jobType]
	if byType == nil {
		byType = map[string]map[int]float64{}
		t[jobType] = byType
	}
	byWorkers := byType[gpuType]
	if byWorkers == nil {
		byWorkers = map[int]float64{}
		byType[gpuType] = byWorkers
	}
	byWorkers[workers] = stepsPerSecond
}

// Rate returns the steps/s of a job of jobType running workers workers, all
// on gpuType. A worker count that was never measured is estimated from the
// largest measured count below it, scaled linearly (data parallelism rarely
// does better than that); a GPU type or job type with no entry runs at 0.
func (t Throughputs) Rate(jobType, gpuType string, workers int) float64 {
	byWorkers := t[jobType][gpuType]
	if byWorkers == nil || workers <= 0 {
		return 0
	}
	if r, ok := byWorkers[workers]; ok {
		return r
	}
	best := 0
	for w := range byWorkers {
		if w < workers && w > best {
			best = w
		}
	}
	if best == 0 {
		return 0
	}
	return byWorkers[best] * float64(workers) / float64(best)
}

// PlacementRate is the one throughput model shared by every policy and the
// simulator: a synchronous data-parallel job whose workers span several GPU
// types runs at the pace of its slowest worker, so its rate is the smallest
// whole-job rate over the types it uses. A placement that does not hold
// exactly the job's workers runs at 0 (gangs are all or nothing).
func (t Throughputs) PlacementRate(jobType string, workers int, tasks []Task) float64 {
	if TaskGPUs(tasks) != workers || workers <= 0 {
		return 0
	}
	rate := -1.0
	for _, task := range tasks {
		r := t.Rate(jobType, task.Type, workers)
		if rate < 0 || r < rate {
			rate = r
		}
	}
	if rate < 0 {
		return 0
	}
	return rate
}

// CopiesRate is HadarE's model: independent copies each progress at their
// own single-type rate, and the job at their sum times efficiency.
func (t Throughputs) CopiesRate(jobType string, tasks []Task, efficiency float64) float64 {
	sum := 0.0
	for _, task := range tasks {
		sum += t.Rate(jobType, task.Type, task.GPUs)
	}
	return sum * efficiency
}

// BestRate is jobType's whole-gang rate with workers GPUs on the fastest GPU
// type of capacity (GPUs per type) that can hold the gang; for a gang wider
// than every type (it can only span types), its rate on the fastest type
// there is. It is 0 when no type of capacity has a rate for the job.
func (t Throughputs) BestRate(jobType string, workers int, capacity map[string]int) float64 {
	holds, spanning := 0.0, 0.0
	for h, c := range capacity {
		if c <= 0 {
			continue
		}
		r := t.Rate(jobType, h, workers)
		spanning = max(spanning, r)
		if c >= workers {
			holds = max(holds, r)
		}
	}
	if holds > 0 {
		return holds
	}
	return spanning
}

// TypeSpeed scores a GPU type by its throughput relative to the best type,
// averaged over the single-worker job types: 1 for a type that is fastest for
// every job.
func (t Throughputs) TypeSpeed(gpuType string) float64 {
	sum, n := 0.0, 0
	for _, byType := range t {
		best := 0.0
		for _, byWorkers := range byType {
			if byWorkers[1] > best {
				best = byWorkers[1]
			}
		}
		if best <= 0 {
			continue
		}
		sum += byType[gpuType][1] / best
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// JobTypes returns the job types in the matrix, sorted.
func (t Throughputs) JobTypes() []string {
	out := make([]string, 0, len(t))
	for jt := range t {
		out = append(out, jt)
	}
	sort.Strings(out)
	return out
}

// GPUTypes returns every GPU type that appears in the matrix, sorted.
func (t Throughputs) GPUTypes() []string {
	seen := map[string]bool{}
	for _, byType := range t {
		for h := range byType {
			seen[h] = true
		}
	}
	out := make([]string, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// Optimistic returns t with every cell known lacks at (1 + bonus) times its
// value: the exploration rule of docs/learning.md, optimism in the face of
// uncertainty. t is a matrix filled by the prior, known the cells measured
// or learned; a cell still on the prior then wins a placement wherever the
// prior cannot rule out that its type is the better one, and is learned,
// while a type the prior puts far below the known ones is never tried.
// bonus <= 0 returns t itself.
func (t Throughputs) Optimistic(known Throughputs, bonus float64) Throughputs {
	if bonus <= 0 {
		return t
	}
	out := Throughputs{}
	for jt, byType := range t {
		for gt, byW := range byType {
			for w, r := range byW {
				if _, ok := known[jt][gt][w]; !ok {
					r *= 1 + bonus
				}
				out.Set(jt, gt, w, r)
			}
		}
	}
	return out
}
