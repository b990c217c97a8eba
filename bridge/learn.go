package bridge

import (
	"context"
	"errors"
	"log/slog"
	"math"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// learn records the round's throughput samples (seen[i] from a job of
// users[i]) and returns those the store kept. A sample out of bounds
// (profiles.ErrOutlier, ErrInvalid) is dropped, logged and counted: its
// job's user reported what the matrix cannot believe.
func (b *Bridge) learn(ctx context.Context, log *slog.Logger, tp optimizer.Throughputs, seen []statedb.Observation, users []string) []statedb.Observation {
	learn := make([]profiles.Observation, len(seen))
	for i, o := range seen {
		learn[i] = profiles.Observation{JobType: o.Model, GPUType: o.GPUType, Workers: o.Workers,
			Steps: o.Steps, Seconds: o.Seconds, At: o.At, JobID: o.JobID, User: users[i],
			Expected: tp.Rate(o.Model, o.GPUType, o.Workers)}
		if jobproto.IsUnknownModelType(o.Model) {
			// A model no matrix knows is planned with the prior, whose
			// steps/s are another model's (the median's): no bound
			// relative to it, only the absolute range. One user's samples
			// of it set only its own cells (it is no other model's row).
			learn[i].Expected = 0
		}
	}
	var kept []statedb.Observation
	for i, err := range b.deps.Store.RecordObservations(ctx, learn) {
		switch {
		case errors.Is(err, profiles.ErrOutlier) || errors.Is(err, profiles.ErrInvalid):
			log.Info("dropping a throughput sample out of bounds", "job", seen[i].JobID, "user", users[i], "err", err)
			b.deps.Metrics.observeDroppedSample()
		case err != nil:
			log.Warn("could not record a throughput observation", "job", seen[i].JobID, "err", err)
		default:
			kept = append(kept, seen[i])
			b.deps.Metrics.observeSample()
		}
	}
	return kept
}

// saneThroughputs is tp without the cells whose rate is not 0 ("cannot
// run") and not within [profiles.MinRate, profiles.MaxRate], each logged:
// no policy is given a rate that would overflow its arithmetic (Gavel's LP
// failed on 1.7e308 and then kept every job waiting).
func saneThroughputs(log *slog.Logger, tp optimizer.Throughputs) optimizer.Throughputs {
	var bad [][3]any
	for jt, byGPU := range tp {
		for gt, byW := range byGPU {
			for w, r := range byW {
				if r != 0 && !profiles.InRange(r) {
					bad = append(bad, [3]any{jt, gt, w})
				}
			}
		}
	}
	if len(bad) == 0 {
		return tp
	}
	out := optimizer.Throughputs{}
	for jt, byGPU := range tp {
		for gt, byW := range byGPU {
			for w, r := range byW {
				if r == 0 || profiles.InRange(r) {
					out.Set(jt, gt, w, r)
				} else {
					log.Error("ignoring a throughput out of range", "job_type", jt, "gpu_type", gt, "workers", w, "steps_per_s", r)
				}
			}
		}
	}
	return out
}

// siteWeights are the jobs' weights under the site's [weights]: the
// weight of the job's account times its QOS's (1 for one not listed), for
// every job scontrol showed whose weight is not 1.
func siteWeights(w config.WeightsConfig, details map[string]slurm.JobDetail) map[string]float64 {
	if len(w.Accounts) == 0 && len(w.QOS) == 0 {
		return nil
	}
	out := map[string]float64{}
	for id, d := range details {
		x := 1.0
		if a, ok := w.Accounts[d.Account]; ok {
			x *= a
		}
		if q, ok := w.QOS[d.QOS]; ok {
			x *= q
		}
		if x != 1 && x > 0 && !math.IsInf(x, 0) {
			out[id] = x
		}
	}
	return out
}

// jobWeight is a job's weight in the policy: the site's (siteWeights)
// times its tag's weight=, which may only lower it.
func jobWeight(site map[string]float64, id string, tagWeight float64) float64 {
	w := 1.0
	if x, ok := site[id]; ok {
		w = x
	}
	if tagWeight > 0 && tagWeight < 1 {
		w *= tagWeight
	}
	return w
}

// believableDone is the progress of a job the policy may plan with: its
// reported (and estimated) steps, at most profiles.MaxSampleRatio times
// what its run time could give at its fastest type's matrix rate. A
// report is the user's: 1e298 steps done made the job's remaining work
// overflow the policies' arithmetic, and they moved other users' jobs. A
// job planned with the prior (another model's steps) keeps its report.
func believableDone(jv *JobView, pr JobProgress, tp optimizer.Throughputs, capacity map[string]int) float64 {
	if jv.PriorOnly {
		return pr.Done
	}
	ran := max(pr.Executed, jv.TimeUsed.Seconds())
	return min(pr.Done, profiles.MaxSampleRatio*tp.BestRate(jv.Model, jv.Workers, capacity)*ran)
}
