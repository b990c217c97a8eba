package main

import (
	"encoding/csv"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/hadar-sched/hadar/sim"
)

// writeJobsCSV writes every job's outcome under every policy to path, one
// row per policy and job, in hours: what a site reads to see which of its
// jobs a policy served well or badly, and on which GPU types they ran.
func writeJobsCSV(path string, order []string, results map[string]*sim.Result) error {
	types := map[string]bool{}
	for _, r := range results {
		for t := range r.Capacity {
			types[t] = true
		}
		for _, j := range r.Jobs {
			for t := range j.GPUSecsByType {
				types[t] = true
			}
		}
	}
	typeNames := slices.Sorted(maps.Keys(types))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--jobs-csv: %w", err)
	}
	w := csv.NewWriter(f)
	header := []string{"policy", "job", "job_type", "gpus", "arrival_h", "first_start_h", "completion_h", "jct_h", "queue_h", "isolated_jct_h", "stops", "moves"}
	for _, t := range typeNames {
		header = append(header, "gpu_h_"+t)
	}
	_ = w.Write(header)
	hours := func(s float64) string {
		if s < 0 {
			return "" // never started, or never completed
		}
		return strconv.FormatFloat(s/3600, 'f', 3, 64)
	}
	for _, name := range order {
		r := results[name]
		if r == nil {
			continue
		}
		for _, j := range r.Jobs {
			jct, queue := -1.0, -1.0
			if j.Completion >= 0 {
				jct = j.JCT()
			}
			if j.FirstStart >= 0 {
				queue = j.FirstStart - j.Arrival
			}
			row := []string{name, j.ID, j.Type, strconv.Itoa(j.Workers), hours(j.Arrival), hours(j.FirstStart), hours(j.Completion),
				hours(jct), hours(queue), hours(j.IsolatedJCT), strconv.Itoa(j.Stops), strconv.Itoa(j.Moves)}
			for _, t := range typeNames {
				row = append(row, hours(j.GPUSecsByType[t]))
			}
			_ = w.Write(row)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("--jobs-csv %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--jobs-csv %s: %w", path, err)
	}
	return nil
}
