package profiles

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hadar-sched/hadar/optimizer"
)

// The prior: a rate for every cell of the matrix nobody measured, so that no
// job waits for want of a row (a model no matrix knows) or a column (a GPU
// type nobody benchmarked). Everything here is pure: a measured matrix and
// the embedded catalogue in, a matrix out.
//
// A model's 1-GPU rate on a type g it was not measured on is anchored on
// each type s it was measured on, times the speed ratio g/s:
//
//   - the cross-model median ratio r_k(g)/r_k(s) over the other models k
//     measured on both, when at least priorMinRatioModels are (the matrix
//     itself says how the two types compare);
//   - else the ratio the catalogue's figures predict: exp(b_j . (x_g - x_s)),
//     x being log(FP16 tensor TFLOPS), log(FP32 TFLOPS) and log(memory
//     bandwidth), and b_j the model's exponents: a ridge fit of the model's
//     log rates on x, shrunk toward the fit pooled over all models (which is
//     in turn shrunk toward priorBase), because one model
//     rarely has enough types to fit three exponents alone.
//
// The anchors' log estimates are averaged with weights 1/(priorNear +
// |predicted log ratio|), so a near type (an h100-pcie for an h100) counts
// more than a far one (a k80). A k-GPU rate is the model's 1-GPU rate on g
// (measured or prior) times its median k-GPU speed-up over the types it was
// measured on at k and 1 GPUs; for a model with none, the median speed-up
// over all models.
//
// A model that no matrix knows gets the median model: on each type, the
// median (in log) of every known model's rate there, measured or prior.
//
// Memory is a hard limit where it is known: a measured rate of exactly 0
// at 1 GPU on a catalogue type (`hadar profiles set ... --steps-per-s 0`, "does
// not fit") says the model needs more than that type's memory, and the
// prior gives it nothing on types with that much memory or less. A zero
// on a type with more memory than one the model ran on is not taken as a
// memory limit.

const (
	// priorMinRatioModels is how many other models must be measured on
	// both types for their median ratio to be used instead of the specs.
	priorMinRatioModels = 2
	// priorNear keeps the anchor weights finite for types with equal specs.
	priorNear = 0.05
	// priorPooledRidge and priorModelRidge are the ridge penalties toward
	// equal exponents (pooled fit) and toward the pooled fit (per model).
	priorPooledRidge = 3.0
	priorModelRidge  = 1.0
)

// priorBase are the exponents the pooled fit is shrunk toward: rate as
// FP32^0.3 x bandwidth^0.7, summing to 1 (twice the specs, twice the
// speed), no tensor term until the data asks for one. Chosen by a small
// sweep over the leave-one-type-out error of docs/prior.md (so that table
// is a little optimistic): Gavel's three types cannot fit exponents, and
// equal thirds put the K80, which has no tensor cores, 2x too fast.
var priorBase = features{0, 0.3, 0.7}

// priorFeatures are the log spec figures the prior fits rates on.
const priorFeatures = 3

type features [priorFeatures]float64

func specFeatures(s GPUSpec) features {
	return features{math.Log(s.FP16TFLOPS), math.Log(s.FP32TFLOPS), math.Log(s.BandwidthGBs)}
}

func (a features) sub(b features) features {
	var d features
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

func (a features) dot(b features) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Prior is a fitted prior over a measured matrix; FitPrior makes one.
type Prior struct {
	measured optimizer.Throughputs
	pooled   features
	exps     map[string]features // model -> its exponents
	memNeed  map[string]float64  // model -> needs more than this many GB
	workers  []int               // every worker count measured
	speedup  map[int]float64     // cross-model median k-GPU speed-up
	ratios   map[[2]string]*pairRatios

	mu      sync.Mutex
	medians map[string]map[string]map[int]float64 // gpuTypes joined -> median model
}

// pairRatios are the models' log 1-GPU speed ratios between two types.
type pairRatios struct {
	sorted  []float64
	byModel map[string]float64
}

// medianWithout is the median of the ratios of every model but jobType,
// and how many there are.
func (pr *pairRatios) medianWithout(jobType string) (float64, int) {
	s := pr.sorted
	skip := -1
	if v, ok := pr.byModel[jobType]; ok {
		skip = sort.SearchFloat64s(s, v)
	}
	n := len(s)
	if skip >= 0 {
		n--
	}
	if n == 0 {
		return 0, 0
	}
	at := func(k int) float64 {
		if skip >= 0 && k >= skip {
			return s[k+1]
		}
		return s[k]
	}
	if n%2 == 1 {
		return at(n / 2), n
	}
	return (at(n/2-1) + at(n/2)) / 2, n
}

// FitPrior fits the prior of every model of measured. measured is not
// modified and must not be modified while the Prior is in use. Fit once
// and call Model for many models: FitPrior is the costly part. A Prior is
// safe for concurrent use.
func FitPrior(measured optimizer.Throughputs) *Prior {
	p := &Prior{measured: measured, exps: map[string]features{}, memNeed: map[string]float64{}, speedup: map[int]float64{},
		ratios: map[[2]string]*pairRatios{}, medians: map[string]map[string]map[int]float64{}}
	type point struct {
		x features
		y float64
	}
	byModel := map[string][]point{}
	for _, jt := range measured.JobTypes() {
		var pts []point
		// Sorted, so that the sums below (and the fit) are the same in
		// every run, to the last bit.
		for _, gt := range slices.Sorted(maps.Keys(measured[jt])) {
			byW := measured[jt][gt]
			s, ok := LookupGPU(gt)
			if r := byW[1]; ok && r > 0 {
				pts = append(pts, point{specFeatures(s), math.Log(r)})
			}
		}
		if len(pts) > 0 {
			// Within-model centring: the fit is about ratios between types.
			var mx features
			my := 0.0
			for _, q := range pts {
				for i := range mx {
					mx[i] += q.x[i] / float64(len(pts))
				}
				my += q.y / float64(len(pts))
			}
			for i := range pts {
				pts[i].x = pts[i].x.sub(mx)
				pts[i].y -= my
			}
		}
		byModel[jt] = pts
		p.memNeed[jt] = memoryNeed(measured[jt])
	}
	var all []point
	for _, jt := range measured.JobTypes() {
		all = append(all, byModel[jt]...)
	}
	xs := make([]features, len(all))
	ys := make([]float64, len(all))
	for i, q := range all {
		xs[i], ys[i] = q.x, q.y
	}
	p.pooled = ridge(xs, ys, priorBase, priorPooledRidge)
	for jt, pts := range byModel {
		xs := make([]features, len(pts))
		ys := make([]float64, len(pts))
		for i, q := range pts {
			xs[i], ys[i] = q.x, q.y
		}
		p.exps[jt] = ridge(xs, ys, p.pooled, priorModelRidge)
	}
	// Worker counts and the cross-model speed-ups.
	seen := map[int]bool{}
	ups := map[int][]float64{}
	for _, byType := range measured {
		for _, byW := range byType {
			for w, r := range byW {
				seen[w] = true
				if one := byW[1]; w > 1 && r > 0 && one > 0 {
					ups[w] = append(ups[w], math.Log(r/one))
				}
			}
		}
	}
	for w := range seen {
		p.workers = append(p.workers, w)
	}
	if !seen[1] {
		p.workers = append(p.workers, 1)
	}
	sort.Ints(p.workers)
	for w, xs := range ups {
		p.speedup[w] = math.Exp(median(xs))
	}
	// Every pair of types' ratios, once: oneGPU asks for them per model,
	// anchor and target.
	for jt, byType := range measured {
		for from, a := range byType {
			for to, b := range byType {
				if from == to || a[1] <= 0 || b[1] <= 0 {
					continue
				}
				k := [2]string{from, to}
				pr := p.ratios[k]
				if pr == nil {
					pr = &pairRatios{byModel: map[string]float64{}}
					p.ratios[k] = pr
				}
				pr.byModel[jt] = math.Log(b[1] / a[1])
			}
		}
	}
	for _, pr := range p.ratios {
		for _, x := range pr.byModel {
			pr.sorted = append(pr.sorted, x)
		}
		sort.Float64s(pr.sorted)
	}
	return p
}

// memoryNeed is the memory (GB) a model is known to need more than: the
// largest catalogue type it measured 0 on at 1 GPU, counting only types with
// less memory than every type it ran on.
func memoryNeed(byType map[string]map[int]float64) float64 {
	ran := math.Inf(1)
	for gt, byW := range byType {
		if m, ok := GPUMemoryGB(gt); ok && byW[1] > 0 {
			ran = math.Min(ran, m)
		}
	}
	need := 0.0
	for gt, byW := range byType {
		r, ok := byW[1]
		if m, known := GPUMemoryGB(gt); known && ok && r == 0 && m < ran {
			need = math.Max(need, m)
		}
	}
	return need
}

// ridge solves min |X b - y|^2 + lambda |b - b0|^2.
func ridge(xs []features, ys []float64, b0 features, lambda float64) features {
	var a [priorFeatures][priorFeatures]float64
	var rhs features
	for i := 0; i < priorFeatures; i++ {
		a[i][i] = lambda
		rhs[i] = lambda * b0[i]
	}
	for n, x := range xs {
		for i := 0; i < priorFeatures; i++ {
			rhs[i] += x[i] * ys[n]
			for j := 0; j < priorFeatures; j++ {
				a[i][j] += x[i] * x[j]
			}
		}
	}
	return solve(a, rhs)
}

// solve is Gaussian elimination with partial pivoting; a is symmetric
// positive definite here (ridge), so it never meets a zero pivot.
func solve(a [priorFeatures][priorFeatures]float64, b features) features {
	const n = priorFeatures
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < n; k++ {
				a[r][k] -= f * a[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	var x features
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x
}

// Exponents returns the fitted exponents of a model's rate on log FP16
// tensor TFLOPS, log FP32 TFLOPS and log memory bandwidth (the pooled fit
// for a model the matrix does not know).
func (p *Prior) Exponents(jobType string) [3]float64 {
	if e, ok := p.exps[jobType]; ok {
		return e
	}
	return p.pooled
}

// oneGPU returns the prior 1-GPU rate of a known model on gpuType, ignoring
// any measured value there, or false if no anchor reaches gpuType.
func (p *Prior) oneGPU(jobType, gpuType string) (float64, bool) {
	if need := p.memNeed[jobType]; need > 0 {
		if m, ok := GPUMemoryGB(gpuType); ok && m <= need {
			return 0, false
		}
	}
	target, targetKnown := LookupGPU(gpuType)
	exps := features(p.Exponents(jobType))
	sum, wsum := 0.0, 0.0
	for _, s := range slices.Sorted(maps.Keys(p.measured[jobType])) {
		byW := p.measured[jobType][s]
		r := byW[1]
		if s == gpuType || r <= 0 {
			continue
		}
		anchor, anchorKnown := LookupGPU(s)
		spec, haveSpec := 0.0, anchorKnown && targetKnown
		if haveSpec {
			spec = exps.dot(specFeatures(target).sub(specFeatures(anchor)))
		}
		delta, ok := p.ratio(jobType, s, gpuType)
		if !ok {
			if !haveSpec {
				continue
			}
			delta = spec
		}
		dist := math.Abs(delta)
		if haveSpec {
			dist = math.Abs(spec)
		}
		w := 1 / (priorNear + dist)
		sum += w * (math.Log(r) + delta)
		wsum += w
	}
	if wsum == 0 {
		return 0, false
	}
	return math.Exp(sum / wsum), true
}

// ratio is the cross-model median log speed ratio to/from at 1 GPU over
// the models other than jobType measured on both.
func (p *Prior) ratio(jobType, from, to string) (float64, bool) {
	pr := p.ratios[[2]string{from, to}]
	if pr == nil {
		return 0, false
	}
	m, n := pr.medianWithout(jobType)
	return m, n >= priorMinRatioModels
}

// modelSpeedup is a model's median k-GPU speed-up over its measured types.
func (p *Prior) modelSpeedup(jobType string, workers int) (float64, bool) {
	var xs []float64
	for _, byW := range p.measured[jobType] {
		if r, one := byW[workers], byW[1]; r > 0 && one > 0 {
			xs = append(xs, math.Log(r/one))
		}
	}
	if len(xs) > 0 {
		return math.Exp(median(xs)), true
	}
	s, ok := p.speedup[workers]
	return s, ok
}

// known reports whether the matrix has a 1-GPU rate of jobType anywhere.
func (p *Prior) known(jobType string) bool {
	for _, byW := range p.measured[jobType] {
		if byW[1] > 0 {
			return true
		}
	}
	return false
}

// Model returns the rates of jobType on gpuTypes at every worker count the
// matrix has: measured values where the matrix has them (an explicit 0
// included), the prior elsewhere. A cell the prior cannot reach (a type
// outside the catalogue that no other model was measured on, or too little
// memory) is left out. A model the matrix does not know gets the median
// model.
func (p *Prior) Model(jobType string, gpuTypes []string) map[string]map[int]float64 {
	if !p.known(jobType) {
		return p.medianModel(gpuTypes)
	}
	out := map[string]map[int]float64{}
	set := func(gt string, w int, r float64) {
		if out[gt] == nil {
			out[gt] = map[int]float64{}
		}
		out[gt][w] = r
	}
	for _, gt := range gpuTypes {
		byW := p.measured[jobType][gt]
		one, haveOne := byW[1]
		if !haveOne {
			one, haveOne = p.oneGPU(jobType, gt)
		}
		for _, w := range p.workers {
			if r, ok := byW[w]; ok {
				set(gt, w, r)
				continue
			}
			if !haveOne || one <= 0 {
				continue
			}
			if w == 1 {
				set(gt, 1, one)
				continue
			}
			if up, ok := p.modelSpeedup(jobType, w); ok {
				set(gt, w, one*up)
			}
		}
	}
	return out
}

// medianModel is the prior of a model no matrix knows: on every type and
// worker count, the median in log of the known models' rates (measured or
// prior).
func (p *Prior) medianModel(gpuTypes []string) map[string]map[int]float64 {
	key := strings.Join(gpuTypes, "\x00")
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.medians[key]; ok {
		return cloneRow(m)
	}
	logs := map[string]map[int][]float64{}
	for _, jt := range p.measured.JobTypes() {
		if !p.known(jt) {
			continue
		}
		for gt, byW := range p.Model(jt, gpuTypes) {
			if logs[gt] == nil {
				logs[gt] = map[int][]float64{}
			}
			for w, r := range byW {
				if r > 0 {
					logs[gt][w] = append(logs[gt][w], math.Log(r))
				}
			}
		}
	}
	out := map[string]map[int]float64{}
	for gt, byW := range logs {
		out[gt] = map[int]float64{}
		for w, xs := range byW {
			out[gt][w] = math.Exp(median(xs))
		}
	}
	p.medians[key] = out
	return cloneRow(out)
}

func cloneRow(m map[string]map[int]float64) map[string]map[int]float64 {
	out := make(map[string]map[int]float64, len(m))
	for gt, byW := range m {
		out[gt] = make(map[int]float64, len(byW))
		for w, r := range byW {
			out[gt][w] = r
		}
	}
	return out
}

// WithPrior returns measured with every missing cell of its job types on
// gpuTypes (nil: the types measured already) filled by the prior (see
// FitPrior); measured cells, explicit zeros included, are kept as they are.
// measured is not modified. PriorCells tells the filled cells apart.
func WithPrior(measured optimizer.Throughputs, gpuTypes []string) optimizer.Throughputs {
	if gpuTypes == nil {
		gpuTypes = measured.GPUTypes()
	}
	if complete(measured, gpuTypes) {
		return clone(measured) // nothing to fill: the daemon's usual round, spared a fit
	}
	return fillPrior(measured, gpuTypes)
}

// complete reports whether measured has every cell WithPrior would fill:
// each of its job types, known (a positive 1-GPU rate somewhere), on each
// of gpuTypes at every worker count of the matrix (and 1).
func complete(measured optimizer.Throughputs, gpuTypes []string) bool {
	workers := map[int]bool{1: true}
	for _, byType := range measured {
		for _, byW := range byType {
			for w := range byW {
				workers[w] = true
			}
		}
	}
	for _, byType := range measured {
		known := false
		for _, byW := range byType {
			known = known || byW[1] > 0
		}
		if !known {
			return false
		}
		for _, gt := range gpuTypes {
			for w := range workers {
				if _, ok := byType[gt][w]; !ok {
					return false
				}
			}
		}
	}
	return true
}

// fillPrior is WithPrior by a fit of the prior.
func fillPrior(measured optimizer.Throughputs, gpuTypes []string) optimizer.Throughputs {
	p := FitPrior(measured)
	out := clone(measured)
	for _, jt := range measured.JobTypes() {
		for gt, byW := range p.Model(jt, gpuTypes) {
			for w, r := range byW {
				out.Set(jt, gt, w, r)
			}
		}
	}
	return out
}

// PriorForModel returns the rates of jobType on gpuTypes as WithPrior would
// fill them, for a model measured may or may not know: a known model gets
// its measured rates and the prior elsewhere, an unknown one the median
// model. It fits the prior on every call; for many models, FitPrior once
// and call Prior.Model.
func PriorForModel(measured optimizer.Throughputs, jobType string, gpuTypes []string) map[string]map[int]float64 {
	return FitPrior(measured).Model(jobType, gpuTypes)
}

// Cell names one cell of the matrix.
type Cell struct {
	JobType string `json:"job_type"`
	GPUType string `json:"gpu_type"`
	Workers int    `json:"workers"`
}

// PriorCells lists the cells of filled that measured does not have (the
// prior's), sorted.
func PriorCells(measured, filled optimizer.Throughputs) []Cell {
	var out []Cell
	for jt, byType := range filled {
		for gt, byW := range byType {
			for w := range byW {
				if _, ok := measured[jt][gt][w]; !ok {
					out = append(out, Cell{jt, gt, w})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.JobType != b.JobType {
			return a.JobType < b.JobType
		}
		if a.GPUType != b.GPUType {
			return a.GPUType < b.GPUType
		}
		return a.Workers < b.Workers
	})
	return out
}

// LOOError is the prior's error on one GPU type left out of a matrix.
type LOOError struct {
	// GPUType is the type left out ("all" for every type's cells together).
	GPUType string `json:"gpu_type"`
	// Cells is how many measured cells (rate > 0) the type has; Predicted
	// how many of them the prior gave a rate.
	Cells     int `json:"cells"`
	Predicted int `json:"predicted"`
	// Median and P90 are the median and 90th percentile of |prior -
	// measured| / measured over the predicted cells.
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
}

// LeaveOneTypeOut measures the prior on measured: for each GPU type in
// turn, its column is removed, the prior is fitted on the rest and predicts
// the removed cells. The last row, "all", pools every type's errors.
func LeaveOneTypeOut(measured optimizer.Throughputs) []LOOError {
	var out []LOOError
	var all []float64
	cells, predicted := 0, 0
	for _, gt := range measured.GPUTypes() {
		rest := optimizer.Throughputs{}
		for jt, byType := range measured {
			for t, byW := range byType {
				if t == gt {
					continue
				}
				for w, r := range byW {
					rest.Set(jt, t, w, r)
				}
			}
		}
		p := FitPrior(rest)
		e := LOOError{GPUType: gt}
		var errs []float64
		for _, jt := range measured.JobTypes() {
			pred := p.Model(jt, []string{gt})[gt]
			for w, r := range measured[jt][gt] {
				if r <= 0 {
					continue
				}
				e.Cells++
				if x, ok := pred[w]; ok && x > 0 {
					errs = append(errs, math.Abs(x-r)/r)
				}
			}
		}
		e.Predicted = len(errs)
		e.Median, e.P90 = median(errs), percentile(errs, 0.9)
		out = append(out, e)
		all = append(all, errs...)
		cells += e.Cells
		predicted += e.Predicted
	}
	out = append(out, LOOError{GPUType: "all", Cells: cells, Predicted: predicted, Median: median(all), P90: percentile(all, 0.9)})
	return out
}

// percentile is the q-quantile of xs by linear interpolation between
// closest ranks; 0 for no values.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
}
