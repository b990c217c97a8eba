package optimizer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// CopyEfficiency is HadarE's combining efficiency as a function of the
// number of copies K: K copies of rates r_i move the job at At(K) x sum(r_i)
// (docs/hadare.md, "Copy efficiency, measured"). One copy combines with
// nothing, so At(1) is 1 whatever the curve.
//
// The zero value is perfect combining (1 for every K). With Points empty,
// Constant (if > 0) is the efficiency of any K >= 2. With Points, the
// efficiency is the measured points' speed-up K x efficiency, interpolated
// linearly in K between them (from 1 at K = 1) and held at the last point's
// beyond it: more copies than were measured are assumed to add nothing.
type CopyEfficiency struct {
	// Constant is the efficiency of any number of copies from 2 when Points
	// is empty (0 means 1).
	Constant float64
	// Points are the efficiencies measured at K copies, K increasing from 2.
	Points []CopyPoint
}

// CopyPoint is the efficiency of K copies.
type CopyPoint struct {
	K          int
	Efficiency float64
}

// MeasuredCopyEfficiency is the curve measured with the PyTorch example
// (contrib/examples/hadare/measure_copy_efficiency.py, 10 seeds): 0.63, 0.34
// and 0.18 for 2, 4 and 8 copies. `hadar simulate` and hadar-slurmd default
// to it.
func MeasuredCopyEfficiency() CopyEfficiency {
	return CopyEfficiency{Points: []CopyPoint{{2, 0.63}, {4, 0.34}, {8, 0.18}}}
}

// ErrCopyEfficiency marks a copy efficiency that cannot be parsed or used.
var ErrCopyEfficiency = errors.New("bad copy efficiency")

// At is the efficiency of k copies.
func (c CopyEfficiency) At(k int) float64 {
	if k <= 1 {
		return 1
	}
	if len(c.Points) == 0 {
		if c.Constant > 0 {
			return c.Constant
		}
		return 1
	}
	return c.SpeedUp(k) / float64(k)
}

// SpeedUp is k x At(k): how much faster k copies of equal rates move the job
// than one copy.
func (c CopyEfficiency) SpeedUp(k int) float64 {
	if k <= 1 {
		return 1
	}
	if len(c.Points) == 0 {
		return float64(k) * c.At(k)
	}
	k0, s0 := 1, 1.0
	for _, p := range c.Points {
		s := float64(p.K) * p.Efficiency
		if k <= p.K {
			return s0 + (s-s0)*float64(k-k0)/float64(p.K-k0)
		}
		k0, s0 = p.K, s
	}
	return s0
}

// Validate checks a curve: points with K increasing from 2 and efficiencies
// in (0, 1], or a constant in [0, 1] (0 means 1).
func (c CopyEfficiency) Validate() error {
	if len(c.Points) > 0 && c.Constant != 0 {
		return fmt.Errorf("%w: a constant and points", ErrCopyEfficiency)
	}
	if c.Constant < 0 || c.Constant > 1 || math.IsNaN(c.Constant) {
		return fmt.Errorf("%w: %v: want an efficiency in (0, 1]", ErrCopyEfficiency, c.Constant)
	}
	prev := 1
	for _, p := range c.Points {
		if p.K <= prev {
			return fmt.Errorf("%w: K = %d: want K increasing from 2", ErrCopyEfficiency, p.K)
		}
		if !(p.Efficiency > 0 && p.Efficiency <= 1) {
			return fmt.Errorf("%w: %d:%v: want an efficiency in (0, 1]", ErrCopyEfficiency, p.K, p.Efficiency)
		}
		prev = p.K
	}
	return nil
}

// ParseCopyEfficiency reads a curve as String writes it: one number (a
// constant for every K >= 2, "0.34") or K:efficiency pairs separated by
// commas ("2:0.63,4:0.34,8:0.18", in any order).
func ParseCopyEfficiency(s string) (CopyEfficiency, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, ":") {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return CopyEfficiency{}, fmt.Errorf("%w: %q: want a number or K:efficiency pairs (2:0.63,4:0.34)", ErrCopyEfficiency, s)
		}
		if v <= 0 || v > 1 || math.IsNaN(v) {
			return CopyEfficiency{}, fmt.Errorf("%w: %v: want an efficiency in (0, 1]", ErrCopyEfficiency, v)
		}
		return CopyEfficiency{Constant: v}, nil
	}
	var c CopyEfficiency
	for _, part := range strings.Split(s, ",") {
		ks, es, ok := strings.Cut(strings.TrimSpace(part), ":")
		k, kerr := strconv.Atoi(strings.TrimSpace(ks))
		e, eerr := strconv.ParseFloat(strings.TrimSpace(es), 64)
		if !ok || kerr != nil || eerr != nil {
			return CopyEfficiency{}, fmt.Errorf("%w: %q: want K:efficiency (e.g. 4:0.34)", ErrCopyEfficiency, part)
		}
		c.Points = append(c.Points, CopyPoint{K: k, Efficiency: e})
	}
	sort.SliceStable(c.Points, func(a, b int) bool { return c.Points[a].K < c.Points[b].K })
	if err := c.Validate(); err != nil {
		return CopyEfficiency{}, err
	}
	return c, nil
}

// String writes the curve in ParseCopyEfficiency's form ("1" for the zero
// value).
func (c CopyEfficiency) String() string {
	if len(c.Points) == 0 {
		v := c.Constant
		if v <= 0 {
			v = 1
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	parts := make([]string, len(c.Points))
	for i, p := range c.Points {
		parts[i] = fmt.Sprintf("%d:%s", p.K, strconv.FormatFloat(p.Efficiency, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}
