package profiles

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hadar-sched/hadar/optimizer"
)

//go:embed gavel/simulation_throughputs.json
var gavelJSON []byte

// gavelIgnoredSuffix marks GPU types in Gavel's files that describe workers
// spread over several servers; hadar models consolidation itself.
const gavelIgnoredSuffix = "_unconsolidated"

// ParseGavel reads a throughput file in Gavel's format: GPU type -> key
// "('<job type>', <workers>)" -> object whose "null" entry is the steps/s of
// the job running alone. Colocation entries (every key other than "null") and
// GPU types ending in "_unconsolidated" are ignored.
func ParseGavel(r io.Reader) (optimizer.Throughputs, error) {
	var raw map[string]map[string]map[string]json.RawMessage
	dec := json.NewDecoder(r)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("gavel throughputs: %w", err)
	}
	out := optimizer.Throughputs{}
	for gpuType, byKey := range raw {
		if strings.HasSuffix(gpuType, gavelIgnoredSuffix) {
			continue
		}
		if strings.TrimSpace(gpuType) == "" {
			return nil, fmt.Errorf("gavel throughputs: empty GPU type")
		}
		for key, entries := range byKey {
			jobType, workers, err := parseGavelKey(key)
			if err != nil {
				return nil, fmt.Errorf("gavel throughputs: %s: %w", gpuType, err)
			}
			alone, ok := entries["null"]
			if !ok {
				return nil, fmt.Errorf("gavel throughputs: %s: key %q has no \"null\" (isolated) rate", gpuType, key)
			}
			var rate *float64
			if err := json.Unmarshal(alone, &rate); err != nil || rate == nil {
				return nil, fmt.Errorf("gavel throughputs: %s: key %q: \"null\" rate %s is not a number", gpuType, key, alone)
			}
			if *rate < 0 || math.IsInf(*rate, 0) {
				return nil, fmt.Errorf("gavel throughputs: %s: key %q: rate %v out of range", gpuType, key, *rate)
			}
			out.Set(jobType, gpuType, workers, *rate)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gavel throughputs: no rates found")
	}
	return out, nil
}

// parseGavelKey splits a Python tuple repr such as
// "('ResNet-18 (batch size 128)', 4)" into its job type and worker count.
func parseGavelKey(key string) (string, int, error) {
	bad := func(why string) (string, int, error) {
		return "", 0, fmt.Errorf("malformed key %q: %s", key, why)
	}
	if !strings.HasPrefix(key, "(") || !strings.HasSuffix(key, ")") {
		return bad("want ('<job type>', <workers>)")
	}
	inner := key[1 : len(key)-1]
	comma := strings.LastIndex(inner, ",")
	if comma < 0 {
		return bad("no comma")
	}
	quoted := strings.TrimSpace(inner[:comma])
	if len(quoted) < 2 || (quoted[0] != '\'' && quoted[0] != '"') || quoted[len(quoted)-1] != quoted[0] {
		return bad("job type is not a quoted string")
	}
	jobType := quoted[1 : len(quoted)-1]
	if strings.TrimSpace(jobType) == "" || strings.ContainsAny(jobType, "\\'\"") {
		return bad("empty or escaped job type")
	}
	workers, err := strconv.Atoi(strings.TrimSpace(inner[comma+1:]))
	if err != nil || workers <= 0 {
		return bad("workers is not a positive integer")
	}
	return jobType, workers, nil
}

// LoadGavelFile parses the Gavel throughput file at path (see ParseGavel).
func LoadGavelFile(path string) (optimizer.Throughputs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load gavel throughputs: %w", err)
	}
	defer f.Close()
	t, err := ParseGavel(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

var defaultMatrix = sync.OnceValue(func() optimizer.Throughputs {
	t, err := ParseGavel(bytes.NewReader(gavelJSON))
	if err != nil {
		panic("profiles: embedded Gavel matrix: " + err.Error())
	}
	return t
})

// Default returns Gavel's simulation matrix (k80, p100, v100), embedded in
// the binary. Each call returns a fresh copy that the caller may modify.
func Default() optimizer.Throughputs {
	return clone(defaultMatrix())
}

func clone(t optimizer.Throughputs) optimizer.Throughputs {
	out := make(optimizer.Throughputs, len(t))
	for jt, byType := range t {
		for gt, byWorkers := range byType {
			for w, r := range byWorkers {
				out.Set(jt, gt, w, r)
			}
		}
	}
	return out
}
