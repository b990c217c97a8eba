package jobproto

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type result struct {
	Step, Total float64
	OK          bool
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name, line string
		want       result
	}{
		{"step slash", "step 450/1000 loss 0.31", result{450, 1000, true}},
		{"Step of", "Step 450 of 1000", result{450, 1000, true}},
		{"colon", "train step: 7/20", result{7, 20, true}},
		{"brackets", "Epoch [1/5], Step [100/600], Loss: 0.2", result{100, 600, true}},
		{"steps equals", "steps=12/30", result{12, 30, true}},
		{"zero", "step 0/10", result{0, 10, true}},
		{"tqdm", "  45%|████▌     | 450/1000 [00:10<00:12, 45.00it/s]", result{450, 1000, true}},
		{"tqdm desc", "Training:  100%|██████████| 1000/1000 [01:02:03<00:00, 16.1it/s, loss=0.1]", result{1000, 1000, true}},
		{"tqdm unit scale", " 15%|█▌        | 1.50k/10.0k [00:03<00:17, 480it/s]", result{1500, 10000, true}},
		{"tqdm no total", "450it [00:10, 45.00it/s]", result{450, 0, true}},
		{"tqdm no total unit", "Steps: 3200step [01:00, 53.3step/s]", result{3200, 0, true}},
		{"tqdm unknown total", " 12/? [00:01<?, ?it/s]", result{}},
		{"step wins over tqdm", "step 5/9 | 450/1000 [00:10<00:12]", result{5, 9, true}},
		{"no progress", "loading data from /data/x 3/4", result{}},
		{"epoch only", "Epoch 3/10", result{}},
		{"ratio without step", "accuracy 97/100", result{}},
		{"stepper word", "stepper 3/4", result{}},
		{"empty", "", result{}},
		{"total zero", "step 3/0", result{3, 0, true}},
		{"huge number", "step 12345678901234567890/5", result{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, tot, ok := ParseLogLine(tc.line)
			if diff := cmp.Diff(tc.want, result{s, tot, ok}); diff != "" {
				t.Errorf("ParseLogLine(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}

func TestParsePattern(t *testing.T) {
	tests := []struct {
		name, pattern, line string
		want                result
	}{
		{"first group", `iter (\d+)`, "iter 42 loss 1", result{42, 0, true}},
		{"two groups", `it=(\d+) of=(\d+)`, "it=3 of=9", result{3, 9, true}},
		{"named", `(?P<total>\d+) total, (?P<step>\d+) done`, "90 total, 12 done", result{12, 90, true}},
		{"named step only", `(\w+) (?P<step>\d+)`, "batch 8", result{8, 0, true}},
		{"no match", `iter (\d+)`, "step 5/6", result{}},
		{"not a number", `iter (\S+)`, "iter abc", result{}},
		{"float step", `done=([\d.]+)`, "done=12.5", result{12.5, 0, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewLogParser(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			s, tot, ok := p.Parse(tc.line)
			if diff := cmp.Diff(tc.want, result{s, tot, ok}); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
	for _, bad := range []string{`no groups`, `(unclosed`, `(?:x)`} {
		if _, err := NewLogParser(bad); err == nil {
			t.Errorf("NewLogParser(%q) accepted a pattern without a step group", bad)
		}
	}
}

func FuzzParseProgressLine(f *testing.F) {
	for _, s := range []string{
		"step 450/1000", "Step 450 of 1000", "  45%|████▌     | 450/1000 [00:10<00:12, 45.00it/s]",
		"450it [00:10, 45.00it/s]", " 1.50k/10.0k [00:03<00:17]", "step 1e9/2", "", "step 99999999999999999/1",
	} {
		f.Add(s, "")
		f.Add(s, `(\d+)/(\d+)`)
	}
	f.Fuzz(func(t *testing.T, line, pattern string) {
		s, tot, ok := ParseLogLine(line)
		check := func(s, tot float64, ok bool) {
			if !ok {
				if s != 0 || tot != 0 {
					t.Fatalf("not ok but (%v, %v)", s, tot)
				}
				return
			}
			for _, v := range []float64{s, tot} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("line %q: step %v total %v", line, s, tot)
				}
			}
		}
		check(s, tot, ok)
		// The default patterns need a digit; a line of none never parses.
		if ok && !strings.ContainsAny(line, "0123456789") {
			t.Fatalf("line %q without digits parsed as %v/%v", line, s, tot)
		}
		if s2, t2, ok2 := ParseLogLine(line); s2 != s || t2 != tot || ok2 != ok {
			t.Fatalf("not deterministic on %q", line)
		}
		if p, err := NewLogParser(pattern); err == nil {
			check(p.Parse(line))
		}
	})
}
