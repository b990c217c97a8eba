package optimizer

import (
	"math"
	"testing"
)

func TestMoveGain(t *testing.T) {
	tp := Throughputs{}
	tp.Set("m", "k80", 1, 1)
	tp.Set("m", "v100", 1, 4)
	k80 := []Task{{Node: "k80-0", Type: "k80", GPUs: 1}}
	v100 := []Task{{Node: "v100-0", Type: "v100", GPUs: 1}}
	p100 := []Task{{Node: "p100-0", Type: "p100", GPUs: 1}} // no rate: no progress there
	for _, tc := range []struct {
		name      string
		cur, next []Task
		want      float64
	}{
		{"to a faster type", k80, v100, 400 - 100},
		{"to a slower type", v100, k80, 100 - 400},
		{"to a type it cannot run on", k80, p100, math.Inf(-1)},
		{"from a placement that makes no progress", p100, v100, math.Inf(1)},
		{"not running", nil, v100, math.Inf(1)},
	} {
		if got := MoveGain(tp, "m", 1, 400, tc.cur, tc.next); got != tc.want {
			t.Errorf("%s: MoveGain = %v, want %v", tc.name, got, tc.want)
		}
	}
}
