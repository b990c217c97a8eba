package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/sim"
)

// gavelClusterOrder is the order of Gavel's V:P:K spelling of a cluster
// ("36:36:36" is 36 each of v100, p100 and k80).
var gavelClusterOrder = []string{"v100", "p100", "k80"}

// parseCluster reads --cluster: "v100=36,p100=36,k80=36", or Gavel's
// "36:36:36" (v100:p100:k80). Each GPU type name is resolved as everywhere
// else in hadar (profiles.ResolveDefault: any case, Slurm's and sites' GRES
// names such as tesla_v100-sxm2-32gb), to the catalogue's types and the
// matrix's (matrixTypes).
func parseCluster(s string, matrixTypes []string) (map[string]int, error) {
	if strings.Contains(s, ":") && !strings.Contains(s, "=") {
		return parseGavelCluster(s)
	}
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, count, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || strings.TrimSpace(name) == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("--cluster: %q is not TYPE=COUNT (e.g. v100=36,p100=36,k80=36, or 36:36:36 for v100:p100:k80)", part)
		}
		gt, err := profiles.ResolveDefault(name, matrixTypes...)
		if err != nil {
			return nil, fmt.Errorf("--cluster: %w", err)
		}
		if _, dup := out[gt]; dup {
			return nil, fmt.Errorf("--cluster: GPU type %s given twice (%q is %s)", gt, strings.TrimSpace(name), gt)
		}
		out[gt] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--cluster: no GPU types given")
	}
	total := 0
	for _, n := range out {
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("--cluster %s: no GPUs", s)
	}
	return out, nil
}

func parseGavelCluster(s string) (map[string]int, error) {
	parts := strings.Split(s, ":")
	if len(parts) != len(gavelClusterOrder) {
		return nil, fmt.Errorf("--cluster: %q is not Gavel's V:P:K (GPUs of v100, p100 and k80, e.g. 36:36:36)", s)
	}
	out := map[string]int{}
	total := 0
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--cluster: %q is not Gavel's V:P:K (GPUs of v100, p100 and k80, e.g. 36:36:36)", s)
		}
		out[gavelClusterOrder[i]] = n
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("--cluster %s: no GPUs", s)
	}
	return out, nil
}

// unratedTypes are the GPU types of gpus (with GPUs) that thr has no rate
// for at all, sorted.
func unratedTypes(thr optimizer.Throughputs, gpus map[string]int) []string {
	rated := map[string]bool{}
	for _, gt := range thr.GPUTypes() {
		rated[gt] = true
	}
	var out []string
	for _, gt := range slices.Sorted(maps.Keys(gpus)) {
		if gpus[gt] > 0 && !rated[gt] {
			out = append(out, gt)
		}
	}
	return out
}

// fillUnratedTypes gives thr the prior's cells (docs/prior.md) on the GPU
// types it has no rate for, as hadar-slurmd plans them, and leaves every
// type it rates as it is.
func fillUnratedTypes(thr optimizer.Throughputs, unrated []string) optimizer.Throughputs {
	if len(unrated) == 0 {
		return thr
	}
	filled := profiles.WithPrior(thr, append(thr.GPUTypes(), unrated...))
	out := optimizer.Throughputs{}
	for jt, byType := range thr {
		for gt, byW := range byType {
			for w, r := range byW {
				out.Set(jt, gt, w, r)
			}
		}
	}
	for jt, byType := range filled {
		for _, gt := range unrated {
			for w, r := range byType[gt] {
				out.Set(jt, gt, w, r)
			}
		}
	}
	return out
}

// checkClusterRuns says, before a run, which job of the trace no GPU type of
// the cluster can run and why: the matrix lacks its job type, rates it on no
// type of the cluster, or the cluster is smaller than its gang.
func checkClusterRuns(thr optimizer.Throughputs, matrix string, gpus map[string]int, trace []sim.TraceJob) error {
	total := 0
	var have []string
	for _, gt := range slices.Sorted(maps.Keys(gpus)) {
		total += gpus[gt]
		if gpus[gt] > 0 {
			have = append(have, gt)
		}
	}
	for i, tj := range trace {
		byType, ok := thr[tj.JobType]
		if !ok {
			return fmt.Errorf("trace job %d: job type %q is not in the matrix %s (its job types: %s); give the matrix the trace was made with (--throughputs)",
				i, tj.JobType, matrix, clip(thr.JobTypes(), 6))
		}
		if total < tj.ScaleFactor {
			return fmt.Errorf("trace job %d (%q) needs %d GPUs; the cluster has %d in all (--cluster)", i, tj.JobType, tj.ScaleFactor, total)
		}
		runnable := false
		for _, gt := range have {
			runnable = runnable || thr.Rate(tj.JobType, gt, tj.ScaleFactor) > 0
		}
		if !runnable {
			var rated []string
			for _, gt := range slices.Sorted(maps.Keys(byType)) {
				if byType[gt][tj.ScaleFactor] > 0 {
					rated = append(rated, gt)
				}
			}
			where := "on no GPU type"
			if len(rated) > 0 {
				where = "only on " + strings.Join(rated, ", ")
			}
			return fmt.Errorf("trace job %d: the matrix %s rates %q with %d workers %s, and the cluster has %s; add one of those types to --cluster, or --prior to predict the missing cells",
				i, matrix, tj.JobType, tj.ScaleFactor, where, strings.Join(have, ", "))
		}
	}
	return nil
}

// clip joins the first n of names, and says how many more there are.
func clip(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
