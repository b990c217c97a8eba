package sim

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// PublishedStartup is what a start costs a training job by its model, as
// the public simulator of Sia (Jayaram Subramanya et al., SOSP 2023;
// github.com/siasosp23/artifacts, sia-simulator/applications.py) charges
// each restart: ResNet-50 on ImageNet 250 s, BERT 120 s, YOLOv3 80 s,
// ResNet-18 on CIFAR-10 50 s, DeepSpeech2 25 s, NCF on MovieLens 15 s, and
// 30 s for any other model (Pollux's simulator, OSDI 2021, charges 30 s for
// every job). Gavel's Recommendation jobs (MovieLens) take NCF's.
// docs/fidelity.md, "A job's start-up", has why and what it changes.
const PublishedStartup = "resnet50=250s, bert=120s, yolov3=80s, resnet18=50s, deepspeech2=25s, ncf=15s, recommendation=15s, *=30s"

// StartCosts is the time a job loses each time it starts running (first,
// again after a stop, or on other GPUs), by its model: its framework's and
// data pipeline's start-up, loading its checkpoint and the steps since that
// checkpoint. --startup and PublishedStartup are the job's part only;
// Rules.StartCost adds Slurm's scheduling pass (Plus, in
// daemonsim.FastPathRules).
type StartCosts struct {
	// Models give the cost of the job types they begin (both folded: lower
	// case, letters and digits only, so "resnet50" matches "ResNet-50
	// (batch size 64)"); where several do, the longest ("resnet50" before
	// "resnet").
	Models []ModelStartCost
	// Other is the cost for a job no model matches.
	Other time.Duration
}

// ModelStartCost is one model's start cost.
type ModelStartCost struct {
	Model string
	Cost  time.Duration
}

// EveryJob is a StartCosts of d for every job.
func EveryJob(d time.Duration) StartCosts { return StartCosts{Other: d} }

// ParseStartCosts reads a duration for every job ("60s") or a list of
// MODEL=DURATION with *=DURATION for every other model
// ("resnet50=250s,*=30s"; without *, other jobs cost nothing).
func ParseStartCosts(spec string) (StartCosts, error) {
	spec = strings.TrimSpace(spec)
	if !strings.Contains(spec, "=") {
		d, err := time.ParseDuration(spec)
		if err != nil {
			return StartCosts{}, fmt.Errorf("start-up %q: want a duration (60s) or MODEL=DURATION,...,*=DURATION: %w", spec, err)
		}
		if d < 0 {
			return StartCosts{}, fmt.Errorf("start-up %q: must not be negative", spec)
		}
		return EveryJob(d), nil
	}
	var sc StartCosts
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		model, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		model = strings.TrimSpace(model)
		if !ok || model == "" {
			return StartCosts{}, fmt.Errorf("start-up %q: %q is not MODEL=DURATION", spec, item)
		}
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil {
			return StartCosts{}, fmt.Errorf("start-up %q: model %s: %w", spec, model, err)
		}
		if d < 0 {
			return StartCosts{}, fmt.Errorf("start-up %q: model %s: must not be negative", spec, model)
		}
		key := foldModel(model)
		if model == "*" {
			key = "*"
		}
		if key == "" {
			return StartCosts{}, fmt.Errorf("start-up %q: model %q has no letters or digits", spec, model)
		}
		if seen[key] {
			return StartCosts{}, fmt.Errorf("start-up %q: model %s given twice", spec, model)
		}
		seen[key] = true
		if key == "*" {
			sc.Other = d
			continue
		}
		sc.Models = append(sc.Models, ModelStartCost{Model: key, Cost: d})
	}
	return sc, nil
}

// For is the start cost of a job of jobType.
func (sc StartCosts) For(jobType string) time.Duration {
	t := foldModel(jobType)
	cost, matched := sc.Other, 0
	for _, m := range sc.Models {
		if len(m.Model) > matched && strings.HasPrefix(t, m.Model) {
			cost, matched = m.Cost, len(m.Model)
		}
	}
	return cost
}

// Plus adds d to every cost (Slurm's scheduling pass, paid at every start).
func (sc StartCosts) Plus(d time.Duration) StartCosts {
	out := StartCosts{Other: sc.Other + d, Models: make([]ModelStartCost, len(sc.Models))}
	for i, m := range sc.Models {
		out.Models[i] = ModelStartCost{Model: m.Model, Cost: m.Cost + d}
	}
	return out
}

// String is the spec ParseStartCosts reads back.
func (sc StartCosts) String() string {
	if len(sc.Models) == 0 {
		return sc.Other.String()
	}
	parts := make([]string, 0, len(sc.Models)+1)
	for _, m := range sc.Models {
		parts = append(parts, m.Model+"="+m.Cost.String())
	}
	return strings.Join(append(parts, "*="+sc.Other.String()), ",")
}

// foldModel keeps a model or job type's letters and digits, in lower case.
func foldModel(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
