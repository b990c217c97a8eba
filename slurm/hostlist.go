package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHostlist bounds the expansion of one host list expression.
const maxHostlist = 1 << 16

// ExpandHostlist expands a Slurm host list expression such as
// "node[1-3,7],gpu-a-[01-02]" or "rack[1-2]-n[1-2]" into node names, in order.
// "", "(null)" and "N/A" give nil. Zero padding of a range's lower bound is
// kept ("[08-10]" gives 08, 09, 10).
func ExpandHostlist(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if isEmptyValue(s) {
		return nil, nil
	}
	var out []string
	for _, item := range splitTopLevel(s, ',') {
		if item == "" {
			continue
		}
		names, err := expandHostItem(item, maxHostlist-len(out))
		if err != nil {
			return nil, fmt.Errorf("%w: host list %q: %v", ErrMalformed, snippet(s), err)
		}
		for _, n := range names {
			if !validHostname(n) {
				return nil, fmt.Errorf("%w: host list %q: bad host name %q", ErrMalformed, snippet(s), snippet(n))
			}
		}
		out = append(out, names...)
	}
	return out, nil
}

// expandHostItem expands one comma-free item with any number of [..] groups.
func expandHostItem(item string, budget int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("unbalanced ']'")
		}
		return []string{item}, nil
	}
	close := strings.IndexByte(item[open:], ']')
	if close < 0 {
		return nil, fmt.Errorf("unclosed '['")
	}
	close += open
	prefix, ranges, rest := item[:open], item[open+1:close], item[close+1:]
	if strings.ContainsAny(prefix, "]") {
		return nil, fmt.Errorf("unbalanced ']'")
	}
	var heads []string
	for _, r := range strings.Split(ranges, ",") {
		a, b, isRange := strings.Cut(r, "-")
		lo, err := smallInt(a)
		if err != nil {
			return nil, err
		}
		hi := lo
		if isRange {
			if hi, err = smallInt(b); err != nil {
				return nil, err
			}
		}
		if hi < lo {
			return nil, fmt.Errorf("range %q runs backwards", r)
		}
		if len(heads)+(hi-lo+1) > budget {
			return nil, fmt.Errorf("expands to more than %d names", maxHostlist)
		}
		width := len(a)
		for i := lo; i <= hi; i++ {
			n := strconv.Itoa(i)
			if len(n) < width {
				n = strings.Repeat("0", width-len(n)) + n
			}
			heads = append(heads, prefix+n)
		}
	}
	if rest == "" {
		return heads, nil
	}
	var out []string
	for _, h := range heads {
		tails, err := expandHostItem(rest, (budget-len(out))/max(1, len(heads)))
		if err != nil {
			return nil, err
		}
		if len(out)+len(tails) > budget {
			return nil, fmt.Errorf("expands to more than %d names", maxHostlist)
		}
		for _, t := range tails {
			out = append(out, h+t)
		}
	}
	return out, nil
}

// validHostname accepts Slurm node names: letters, digits, '-', '_', '.'.
func validHostname(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
