// The log side of `hadar report --follow`: a pure parser from one log
// line to (step, total), and a LogFollower that reads a log file as it
// grows, like tail -F.

package jobproto

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// DefaultLogPatterns are the line shapes ParseLogLine knows, tried in order:
//
//	step 450/1000   Step 450 of 1000   step: 450/1000   Step [450/1000]   steps=450/1000
//	 45%|████▌     | 450/1000 [00:10<00:12, 45.00it/s]      (tqdm, total known)
//	450it [00:10, 45.00it/s]                                  (tqdm, no total)
//
// tqdm counts may carry its unit_scale suffixes (1.50k/10.0k).
var DefaultLogPatterns = []string{
	`(?i)\bsteps?\s*[:=#]?\s*[\[(]?\s*(\d{1,15})\s*(?:/|\bof\b)\s*(\d{1,15})`,
	`(?:^|[|\s])(\d{1,12}(?:\.\d+)?[kMGT]?)/(\d{1,12}(?:\.\d+)?[kMGT]?)\s+\[\d+:\d\d`,
	`(?:^|[|\s])(\d{1,12}(?:\.\d+)?[kMGT]?)[A-Za-z_]*\s+\[\d+:\d\d`,
}

// LogParser finds (step, total) in a line with one or more patterns.
type LogParser struct {
	res []pattern
}

type pattern struct {
	re          *regexp.Regexp
	step, total int // submatch indexes; total 0: none
}

// NewLogParser returns a parser for pattern, a regular expression (Go's RE2
// syntax) whose group named "step", else its first group, is the step and
// whose group named "total", else its second group if any, is the total.
// An empty pattern is the DefaultLogPatterns.
func NewLogParser(expr string) (*LogParser, error) {
	exprs := DefaultLogPatterns
	if expr != "" {
		exprs = []string{expr}
	}
	p := &LogParser{}
	for _, e := range exprs {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("progress pattern: %w", err)
		}
		pt := pattern{re: re, step: re.SubexpIndex("step"), total: re.SubexpIndex("total")}
		n := re.NumSubexp()
		if pt.step < 0 {
			if n < 1 {
				return nil, fmt.Errorf("progress pattern %q: no capture group for the step", e)
			}
			pt.step = 1
		}
		if pt.total < 0 {
			pt.total = 0
			if n >= 2 && re.SubexpIndex("step") < 0 {
				pt.total = 2
			}
		}
		p.res = append(p.res, pt)
	}
	return p, nil
}

var defaultParser = func() *LogParser {
	p, err := NewLogParser("")
	if err != nil {
		panic(err)
	}
	return p
}()

// ParseLogLine is the default parser's Parse.
func ParseLogLine(line string) (step, total float64, ok bool) { return defaultParser.Parse(line) }

// Parse returns the step and total (0: not given) of the first pattern
// that matches line with a step that is a finite number >= 0. A total that
// is not a positive number is 0.
func (p *LogParser) Parse(line string) (step, total float64, ok bool) {
	for _, pt := range p.res {
		m := pt.re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s, ok := number(m[pt.step])
		if !ok {
			continue
		}
		t := 0.0
		if pt.total > 0 {
			if v, ok := number(m[pt.total]); ok && v > 0 {
				t = v
			}
		}
		return s, t, true
	}
	return 0, 0, false
}

// number parses a count, with tqdm's unit_scale suffixes (k, M, G, T).
func number(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	mult := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		case 'T':
			mult = 1e12
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	if s == "" || strings.ContainsAny(s, "eEnNiIxXpP_+-") { // digits and a point only
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	v *= mult
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false
	}
	return math.Round(v*1e6) / 1e6, true
}
