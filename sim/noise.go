package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/hadar-sched/hadar/optimizer"
)

// Estimation noise (`hadar simulate --noise-steps S --noise-rate S`): real
// users' step counts and a site's measured throughputs are off by tens of
// percent, while every other simulation gives the policy the truth. Noise
// multiplies what the policy sees by lognormal factors exp(N(0, S^2)) (the
// median estimate is right; S = 0.5 puts half of them more than 40% off),
// drawn from a seeded PCG, while jobs progress at the truth.
//
//   - Steps (Config.StepNoise): each job's total steps, as its user's tag
//     would state them, is seen as true x factor, one factor per job in
//     trace order. The policy sees what hadar-slurmd would of the rest
//     (optimizer.RemainingEstimate: past its estimate, a job is taken to
//     need as much again as it has overrun). The job completes when its
//     true steps are done.
//   - Rates (NoisyThroughputs): one factor per job type x GPU type cell,
//     the same for every worker count of the cell, on the matrix the plan
//     starts from. `hadar simulate` then runs the --truth path (learn.go):
//     the noisy matrix is the imported one, the truth what jobs progress
//     at, and learning corrects a cell from the progress it observes.

// Independent noise streams (after tracegen.go's), so that step noise and
// rate noise do not shift each other's draws.
const (
	streamNoiseSteps uint64 = iota + 0x6861646172 + 0x100
	streamNoiseRate
)

// checkSigma rejects a sigma that is not a finite number >= 0.
func checkSigma(what string, s float64) error {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return fmt.Errorf("%s noise: sigma must be a finite number >= 0, got %v", what, s)
	}
	return nil
}

// lognormal draws exp(N(0, sigma^2)).
func lognormal(r *rand.Rand, sigma float64) float64 {
	return math.Exp(sigma * r.NormFloat64())
}

// stepFactors returns the factor each of n jobs' total steps is seen
// through; nil when sigma is 0 (the policy sees the truth).
func stepFactors(n int, sigma float64, seed int64) []float64 {
	if sigma == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(seed), streamNoiseSteps))
	f := make([]float64, n)
	for i := range f {
		f[i] = lognormal(r, sigma)
	}
	return f
}

// seenRemaining is what the policy sees of a job estimated at est steps
// that has done done steps: hadar-slurmd's rule.
func seenRemaining(est, done float64) float64 {
	return optimizer.RemainingEstimate(est, done)
}

// NoisyThroughputs returns thr with every job type x GPU type cell
// multiplied by its own lognormal factor exp(N(0, sigma^2)), the same for
// every worker count of the cell (a mismeasured model on a GPU type is
// mismeasured at every scale); thr is not modified. Factors are drawn in
// sorted job-type, GPU-type order from a PCG seeded by seed, so the same
// matrix, sigma and seed always give the same matrix.
func NoisyThroughputs(thr optimizer.Throughputs, sigma float64, seed int64) (optimizer.Throughputs, error) {
	if err := checkSigma("rate", sigma); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(uint64(seed), streamNoiseRate))
	out := optimizer.Throughputs{}
	for _, jt := range thr.JobTypes() {
		gts := make([]string, 0, len(thr[jt]))
		for gt := range thr[jt] {
			gts = append(gts, gt)
		}
		sort.Strings(gts)
		for _, gt := range gts {
			f := 1.0
			if sigma > 0 {
				f = lognormal(r, sigma)
			}
			for w, v := range thr[jt][gt] {
				out.Set(jt, gt, w, v*f)
			}
		}
	}
	return out, nil
}
