package sim

import (
	"math"
	"sort"
)

// Metrics are the headline figures of one run, in the shape `hadar simulate
// --json` prints.
type Metrics struct {
	Jobs        int     `json:"jobs"`
	Completed   int     `json:"completed"`
	MakespanS   float64 `json:"makespan_s"`
	AvgJCTS     float64 `json:"avg_jct_s"`
	P50JCTS     float64 `json:"p50_jct_s"`
	P99JCTS     float64 `json:"p99_jct_s"`
	AvgQueueS   float64 `json:"avg_queue_s"`
	FTFMean     float64 `json:"ftf_mean"`
	FTFMax      float64 `json:"ftf_max"`
	Utilization float64 `json:"utilization"`
	// TypeUtilization is each GPU type's busy GPU time over its GPUs times
	// the makespan.
	TypeUtilization map[string]float64 `json:"type_utilization,omitempty"`
	// GPUHours is the busy GPU time; TypeEfficiency is the share of it that
	// the same work would take with every job on its fastest GPU type (1:
	// no job ran slower than it could; gangs spanning types or sent to
	// slower types lower it).
	GPUHours       float64 `json:"gpu_hours"`
	TypeEfficiency float64 `json:"type_efficiency"`
	// Stops and Moves are the times a plan left a running job out or gave
	// it other GPUs: on a live cluster, a requeue each.
	Stops           int     `json:"stops"`
	Moves           int     `json:"moves"`
	Rounds          int     `json:"rounds"`
	SchedTimeMeanS  float64 `json:"sched_time_mean_s"`
	SchedTimeP99S   float64 `json:"sched_time_p99_s"`
	SchedTimeMaxS   float64 `json:"sched_time_max_s"`
	WallS           float64 `json:"wall_s"`
	CopiesMean      float64 `json:"copies_mean,omitempty"`
	CopiesMax       int     `json:"copies_max,omitempty"`
	InvariantChecks int     `json:"invariant_checks"`
	// Learning is the planning matrix's error against the truth at 0%, 25%,
	// 50%, 75% and 100% of the jobs completed (simulate --truth only).
	Learning []LearnPoint `json:"learning,omitempty"`
}

// LearningFractions are the completed fractions Summarize reports the
// learning error at.
var LearningFractions = []float64{0, 0.25, 0.5, 0.75, 1}

// Summarize computes the metrics of a run (hadar.md section 6).
func Summarize(r *Result) Metrics {
	m := Metrics{Jobs: len(r.Jobs), Rounds: r.Rounds, InvariantChecks: r.Rounds, WallS: r.Wall.Seconds()}
	if len(r.Jobs) == 0 {
		return m
	}
	first, last := math.Inf(1), math.Inf(-1)
	var jcts []float64
	queue, ftfSum := 0.0, 0.0
	copyRounds, copySum := 0, 0
	for _, j := range r.Jobs {
		first = math.Min(first, j.Arrival)
		if j.Completion < 0 {
			continue
		}
		m.Completed++
		last = math.Max(last, j.Completion)
		jcts = append(jcts, j.JCT())
		queue += j.FirstStart - j.Arrival
		rho := j.JCT() / j.IsolatedJCT
		ftfSum += rho
		m.FTFMax = math.Max(m.FTFMax, rho)
		copyRounds += j.CopyRounds
		m.Stops += j.Stops
		m.Moves += j.Moves
		copySum += j.CopySum
		m.CopiesMax = max(m.CopiesMax, j.MaxCopies)
	}
	if m.Completed == 0 {
		return m
	}
	sort.Float64s(jcts)
	m.MakespanS = last - first
	m.AvgJCTS = mean(jcts)
	m.P50JCTS = quantile(jcts, 0.50)
	m.P99JCTS = quantile(jcts, 0.99)
	m.AvgQueueS = queue / float64(m.Completed)
	m.FTFMean = ftfSum / float64(m.Completed)
	if m.MakespanS > 0 && r.TotalGPUs > 0 {
		m.Utilization = r.BusyGPUSecs / (float64(r.TotalGPUs) * m.MakespanS)
		for t, n := range r.Capacity {
			if n > 0 {
				if m.TypeUtilization == nil {
					m.TypeUtilization = map[string]float64{}
				}
				m.TypeUtilization[t] = r.BusyByType[t] / (float64(n) * m.MakespanS)
			}
		}
	}
	m.Learning = LearningAt(r.Learning, len(r.Jobs), LearningFractions...)
	m.GPUHours = r.BusyGPUSecs / 3600
	if r.BusyGPUSecs > 0 {
		m.TypeEfficiency = r.IdealGPUSecs / r.BusyGPUSecs
	}
	if copyRounds > 0 {
		m.CopiesMean = float64(copySum) / float64(copyRounds)
	}
	if len(r.SchedTimes) > 0 {
		ts := make([]float64, len(r.SchedTimes))
		for i, d := range r.SchedTimes {
			ts[i] = d.Seconds()
		}
		sort.Float64s(ts)
		m.SchedTimeMeanS = mean(ts)
		m.SchedTimeP99S = quantile(ts, 0.99)
		m.SchedTimeMaxS = ts[len(ts)-1]
	}
	return m
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// quantile of sorted xs by linear interpolation between closest ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}
