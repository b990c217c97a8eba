package optimizer

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLPGolden pins the exact bits of the LP solutions Hadar's fluid plan and
// Gavel's max-min fairness get on seeded bench snapshots: a speed-up of the
// interior-point solver must not change a single bit (plans could hide a
// small change behind their thresholds). Rewrite with
// `go test ./optimizer -run TestLPGolden -update`, only for a change meant
// to alter the solver's answers.
func TestLPGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("solves the LP for 10,000 jobs")
	}
	var b strings.Builder
	for _, c := range []struct{ jobs, gpus, types int }{{100, 108, 3}, {1000, 1024, 4}, {10000, 8192, 4}} {
		thr, scale, remaining, capv := lpInputs(SyntheticSnapshot(c.jobs, c.gpus, c.types, 1))
		X, T, err := minTotalDurationAlloc(thr, scale, remaining, capv)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "min_total_duration %dx%dx%d: T %v X %s\n", c.jobs, c.gpus, c.types, T, digest(X))
		if c.jobs > 1000 {
			continue
		}
		X, err = maxMinFairnessAlloc(thr, scale, nil, capv)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "max_min_fairness %dx%dx%d: X %s\n", c.jobs, c.gpus, c.types, digest(X))
	}
	path := filepath.Join("testdata", "lp.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(lpGoldenHeader+b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimPrefix(string(want), lpGoldenHeader), b.String()); diff != "" {
		t.Errorf("LP solutions differ from %s (-want +got):\n%s", path, diff)
	}
}

const lpGoldenHeader = "# Exact LP solutions on seeded bench snapshots (optimizer/lp_golden_test.go):\n" +
	"# SHA-256 of the bits of X. Produced by `go test ./optimizer -run TestLPGolden -update`\n" +
	"# on the solver of commit f6aa8ab (before the speed-ups of issue 14, build point 6).\n"

// lpInputs is the fluid LP's input for a snapshot as Hadar builds it.
func lpInputs(s *Snapshot) (thr [][]float64, scale, remaining, capv []float64) {
	types := s.TypesFastestFirst()
	capacity := s.Capacity()
	for _, name := range types {
		capv = append(capv, float64(capacity[name]))
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		row := make([]float64, len(types))
		for t, name := range types {
			row[t] = s.JobRate(j, name, j.Workers)
		}
		thr = append(thr, row)
		scale = append(scale, float64(j.Workers))
		remaining = append(remaining, j.RemainingSteps)
	}
	return thr, scale, remaining, capv
}

func digest(X [][]float64) string {
	h := sha256.New()
	var buf [8]byte
	for _, row := range X {
		for _, v := range row {
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v))
			h.Write(buf[:])
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
