package optimizer

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// updateGolden rewrites testdata/plans.golden from the code as it is:
// `go test ./optimizer -run TestPlansGolden -update`. Only do that for a
// change meant to alter what a policy decides; a speed-up must leave the
// file as it is.
var updateGolden = flag.Bool("update", false, "rewrite testdata/plans.golden")

// goldenCase is a snapshot planned for a few rounds by one fresh instance
// of each listed policy; hashed cases store a digest of each round's plan
// instead of the plan (the 10,000-job plans would be megabytes).
type goldenCase struct {
	name     string
	snap     func() *Snapshot
	policies []string
	rounds   int
	hashed   bool
}

func goldenCases() []goldenCase {
	all := Names()
	cases := []goldenCase{}
	for seed := int64(1); seed <= 3; seed++ {
		cases = append(cases, goldenCase{name: fmt.Sprintf("synthetic-100x108x3-s%d", seed),
			snap: func() *Snapshot { return SyntheticSnapshot(100, 108, 3, seed) }, policies: all, rounds: 3})
	}
	cases = append(cases,
		goldenCase{name: "synthetic-400x512x4-s2", snap: func() *Snapshot { return SyntheticSnapshot(400, 512, 4, 2) }, policies: all, rounds: 2},
		goldenCase{name: "shaped-150x120x3-s5", snap: shapedSnapshot, policies: all, rounds: 3},
		goldenCase{name: "synthetic-10000x8192x4-s1", snap: func() *Snapshot { return SyntheticSnapshot(10000, 8192, 4, 1) },
			policies: []string{"hadar"}, rounds: 2, hashed: true},
		goldenCase{name: "synthetic-1000x1024x3-s1", snap: func() *Snapshot { return SyntheticSnapshot(1000, 1024, 3, 1) },
			policies: all, rounds: 2, hashed: true},
	)
	return cases
}

// shapedSnapshot is a synthetic snapshot whose nodes track CPUs and memory
// and whose jobs carry every kind of Shape, so that the golden plans cover
// the shaped paths of placement too.
func shapedSnapshot() *Snapshot {
	s := SyntheticSnapshot(150, 120, 3, 5)
	for i := range s.Nodes {
		s.Nodes[i].CPUs = 32
		s.Nodes[i].MemMB = 256000
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		switch i % 7 {
		case 1:
			if j.Workers >= 2 {
				j.Shape = Shape{Nodes: 2, GPUsPerNode: j.Workers / 2}
			}
		case 2:
			j.Shape = Shape{Types: []string{"gpu1", "gpu2"}}
		case 3:
			j.Shape = Shape{Eligible: map[string]bool{"gpu0-n0": true, "gpu0-n1": true, "gpu1-n0": true, "gpu2-n3": true, "gpu2-n4": true}}
		case 4:
			j.Shape = Shape{CPUsPerNode: 12, MemMBPerNode: 64000}
		case 5:
			j.Shape = Shape{Nodes: 1, GPUsPerNode: j.Workers}
		}
	}
	return s
}

// goldenRounds plans c.rounds rounds of policy on c's snapshot; between
// rounds every placed job runs on its plan (its Current) and does a tenth
// of its remaining steps, so later rounds exercise keeping nodes and
// migration.
func goldenRounds(t *testing.T, c goldenCase, policy string) []string {
	s := c.snap()
	p, err := New(policy, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for r := 0; r < c.rounds; r++ {
		plan, err := p.Plan(s)
		if err != nil {
			t.Fatalf("%s %s round %d: %v", c.name, policy, r, err)
		}
		text := planText(plan)
		if c.hashed {
			text = fmt.Sprintf("sha256 %x\n", sha256.Sum256([]byte(text)))
		}
		out = append(out, fmt.Sprintf("== %s %s round %d\n%s", c.name, policy, r, text))
		advance(s, plan)
	}
	return out
}

func advance(s *Snapshot, plan *Plan) {
	s.Now = s.Now.Add(s.Round)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.Current = plan.Assignments[j.ID]
		if len(j.Current) > 0 {
			j.RemainingSteps *= 0.9
			j.Executed += s.Round.Seconds()
			j.Attained += s.Round.Seconds() * float64(TaskGPUs(j.Current))
		}
	}
}

// planText is a plan as text, one job a line in ID order, its tasks as
// node:type:gpus[:copy:steps], floats in Go's shortest exact form.
func planText(p *Plan) string {
	ids := make([]string, 0, len(p.Assignments))
	for id := range p.Assignments {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return lessID(ids[a], ids[b]) })
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id)
		for _, t := range p.Assignments[id] {
			fmt.Fprintf(&b, " %s:%s:%d", t.Node, t.Type, t.GPUs)
			if t.Copy != 0 || t.Steps != 0 {
				fmt.Fprintf(&b, ":%d:%v", t.Copy, t.Steps)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestPlansGolden pins what every policy decides on seeded snapshots
// (synthetic ones as `hadar bench` builds them, and a shaped one) over a few
// rounds, so that a speed-up can show it changed no decision.
func TestPlansGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 10,000 jobs")
	}
	var got []string
	for _, c := range goldenCases() {
		for _, policy := range c.policies {
			got = append(got, goldenRounds(t, c, policy)...)
		}
	}
	text := strings.Join(got, "")
	path := filepath.Join("testdata", "plans.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(goldenHeader+text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimPrefix(string(want), goldenHeader), text); diff != "" {
		t.Errorf("plans differ from %s (-want +got):\n%s", path, diff)
	}
}

const goldenHeader = "# Plans of every policy on seeded snapshots (optimizer/golden_test.go).\n" +
	"# Produced by `go test ./optimizer -run TestPlansGolden -update` at commit f6aa8ab\n" +
	"# (before the speed-ups of issue 14, build point 6); a change that only makes\n" +
	"# planning faster must leave it as it is. Hadar's and HadarE's plans were\n" +
	"# regenerated on 2026-12-06 for a change of policy (the whole-type gang chain\n" +
	"# and the incumbency on a job's preferred type; 4 lines).\n"
