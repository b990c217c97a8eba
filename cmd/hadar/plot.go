package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hadar-sched/hadar/sim"
)

// writePlots draws the simulate plots: JCT CDF, utilization over time and the
// headline metrics.
func writePlots(dir string, names []string, results map[string]*sim.Result, metrics map[string]sim.Metrics) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	jct := map[string][]float64{}
	util := map[string][]sim.UtilPoint{}
	for _, name := range names {
		r := results[name]
		for _, j := range r.Jobs {
			if j.Completion >= 0 {
				jct[name] = append(jct[name], j.JCT()/3600)
			}
		}
		util[name] = utilSeries(r)
	}
	if err := sim.PlotJCTCDF(filepath.Join(dir, "jct_cdf.png"), jct); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := sim.PlotUtilization(filepath.Join(dir, "utilization.png"), util); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	labels := []string{"makespan (h)", "avg JCT (h)", "avg queue (h)", "FTF mean", "utilization"}
	values := map[string]map[string]float64{}
	for _, name := range names {
		m := metrics[name]
		values[name] = map[string]float64{
			labels[0]: m.MakespanS / 3600, labels[1]: m.AvgJCTS / 3600, labels[2]: m.AvgQueueS / 3600,
			labels[3]: m.FTFMean, labels[4]: m.Utilization,
		}
	}
	if err := sim.PlotMetricBars(filepath.Join(dir, "metrics.png"), names, labels, values); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// utilSeries averages the per-round utilization into at most 200 points so
// long runs stay readable.
func utilSeries(r *sim.Result) []sim.UtilPoint {
	if len(r.Util) == 0 {
		return nil
	}
	start := r.Util[0].Start
	end := r.Util[len(r.Util)-1].Start + r.Util[len(r.Util)-1].Length
	bucket := (end - start) / 200
	if bucket <= 0 {
		bucket = 1
	}
	var out []sim.UtilPoint
	// Each point holds from its bucket's start until the next point.
	var busy, span float64
	bucketStart := start
	for _, u := range r.Util {
		busy += u.Utilization * u.Length
		span += u.Length
		if u.Start+u.Length >= bucketStart+bucket {
			out = append(out, sim.UtilPoint{Hours: (bucketStart - start) / 3600, Utilization: busy / span})
			busy, span = 0, 0
			bucketStart = u.Start + u.Length
		}
	}
	if span > 0 {
		out = append(out, sim.UtilPoint{Hours: (bucketStart - start) / 3600, Utilization: busy / span})
	}
	return out
}
