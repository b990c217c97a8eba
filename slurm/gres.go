package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// GRES is one generic-resource entry as Slurm prints it: name[:type]:count,
// optionally followed by (S:sockets) and/or (IDX:indexes).
type GRES struct {
	// Name is the GRES name: "gpu", "shard", "mps", ...
	Name string
	// Type is the site's type name ("v100", "tesla_v100-sxm2-32gb"); "" when
	// untyped or printed as "(null)".
	Type string
	// Count is the number of units.
	Count int
	// Indexes are the device indexes from (IDX:...); nil when absent, empty
	// or N/A.
	Indexes []int
	// Sockets is the raw socket affinity from (S:...), e.g. "0-1"; "" if absent.
	Sockets string
}

// String renders g the way Slurm writes a request: name[:type]:count.
func (g GRES) String() string {
	if g.Type == "" {
		return fmt.Sprintf("%s:%d", g.Name, g.Count)
	}
	return fmt.Sprintf("%s:%s:%d", g.Name, g.Type, g.Count)
}

// Limits that keep hostile or corrupt input from allocating without bound.
const (
	maxGRESCount   = 1 << 30
	maxGRESIndexes = 1 << 14
	maxGRESErrors  = 10
)

// ParseGRES parses a GRES list as printed by scontrol (Gres=, GresUsed=,
// JOB_GRES=, per-node GRES=), sinfo (Gres, GresUsed) and squeue %b
// ("gres:gpu:v100:2", "gres/gpu:2"). "", "(null)", "N/A" and "none" mean no
// GRES.
//
// Entries that cannot be read are skipped; ParseGRES returns every entry that
// did parse together with an error joining one message per bad entry, so a
// caller can use the good entries and still report the bad ones.
func ParseGRES(s string) ([]GRES, error) {
	s = strings.TrimSpace(s)
	if isEmptyValue(s) {
		return nil, nil
	}
	var out []GRES
	var errs []error
	budget := maxGRESIndexes // device indexes across all entries
	for _, entry := range splitTopLevel(s, ',') {
		if entry == "" {
			continue
		}
		g, err := parseGRESEntry(entry, &budget)
		if err != nil {
			if len(errs) < maxGRESErrors {
				errs = append(errs, fmt.Errorf("%w: gres entry %q: %v", ErrMalformed, snippet(entry), err))
			} else if len(errs) == maxGRESErrors {
				errs = append(errs, fmt.Errorf("%w: more bad gres entries not listed", ErrMalformed))
			}
			continue
		}
		if g != nil {
			out = append(out, *g)
		}
	}
	return out, errors.Join(errs...)
}

// isEmptyValue reports Slurm's spellings of "nothing".
func isEmptyValue(s string) bool {
	switch strings.ToLower(s) {
	case "", "(null)", "n/a", "none":
		return true
	}
	return false
}

// splitTopLevel splits s on sep outside parentheses and brackets:
// "gpu:a:2(IDX:0,2),gpu:b:1" has two entries.
func splitTopLevel(s string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[':
			depth++
		case ')', ']':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func parseGRESEntry(entry string, budget *int) (*GRES, error) {
	entry = strings.TrimSpace(entry)
	// squeue %b and TRES spell the prefix "gres:" (22.05) or "gres/" (later).
	for _, p := range []string{"gres:", "gres/"} {
		if len(entry) > len(p) && strings.EqualFold(entry[:len(p)], p) {
			entry = entry[len(p):]
			break
		}
	}
	// Split off the parenthesised details: name:type:count(S:..)(IDX:..).
	// A '(' right after ':' opens a type token ("gpu:(null):0"), not details.
	head, details := entry, ""
	for i := 0; i < len(entry); i++ {
		if entry[i] != '(' {
			continue
		}
		if i > 0 && entry[i-1] == ':' {
			if strings.HasPrefix(entry[i:], "(null)") {
				i += len("(null)") - 1
			}
			continue
		}
		head, details = entry[:i], entry[i:]
		break
	}

	g := &GRES{}
	var idx []int
	hasIdx := false
	for details != "" {
		if details[0] != '(' {
			return nil, fmt.Errorf("unexpected %q after count", snippet(details))
		}
		end := strings.IndexByte(details, ')')
		if end < 0 {
			return nil, errors.New("unclosed parenthesis (output truncated?)")
		}
		group := details[1:end]
		details = details[end+1:]
		switch {
		case strings.HasPrefix(group, "IDX:"):
			v, err := parseIndexList(group[len("IDX:"):], *budget)
			if err != nil {
				return nil, fmt.Errorf("IDX: %w", err)
			}
			idx, hasIdx = v, true
			*budget -= len(v)
		case strings.HasPrefix(group, "S:"):
			g.Sockets = group[len("S:"):]
		default:
			// Other details (shard use per GPU "-/5,5/5", future ones) carry
			// nothing hadar needs.
		}
	}
	g.Indexes = idx

	// TRES spelling: name[:type]=count.
	countText, hasCount := "", false
	if i := strings.IndexByte(head, '='); i >= 0 {
		head, countText, hasCount = head[:i], head[i+1:], true
	}
	parts := strings.Split(head, ":")
	switch {
	case hasCount && len(parts) <= 2:
		// name=count or name:type=count
	case len(parts) == 3:
		countText, hasCount = parts[2], true
		parts = parts[:2]
	case len(parts) == 2:
		if looksNumeric(parts[1]) {
			countText, hasCount = parts[1], true
			parts = parts[:1]
		} else if !hasIdx {
			// Slurm always prints the count; name:word is damaged output
			// (e.g. "shard:h10").
			return nil, fmt.Errorf("count %q is not a number", parts[1])
		}
		// name:type(IDX:..) without a count: the count is the number of indexes.
	case len(parts) == 1:
	default:
		return nil, fmt.Errorf("too many ':' fields")
	}
	g.Name = strings.TrimSpace(parts[0])
	if !validGRESName(g.Name) {
		return nil, fmt.Errorf("bad name %q", snippet(g.Name))
	}
	if len(parts) == 2 {
		g.Type = strings.TrimSpace(parts[1])
		if g.Type == "(null)" {
			g.Type = ""
		} else if !validGRESType(g.Type) {
			return nil, fmt.Errorf("bad type %q", snippet(g.Type))
		}
	}
	switch {
	case hasCount:
		n, err := parseCount(countText)
		if err != nil {
			return nil, err
		}
		g.Count = n
	case hasIdx:
		g.Count = len(idx)
	default:
		g.Count = 1 // "gpu" alone: Slurm's default count
	}
	return g, nil
}

func looksNumeric(s string) bool {
	return s != "" && s[0] >= '0' && s[0] <= '9'
}

func validGRESName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func validGRESType(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("(),:=|", c) >= 0 {
			return false
		}
	}
	return true
}

// parseCount reads a GRES count: digits with an optional K/M/G/T/P suffix
// (powers of 1024, as Slurm's configuration allows).
func parseCount(s string) (int, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		case 'p', 'P':
			mult = 1 << 50
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	if s == "" || !allDigits(s) || len(s) > 18 {
		return 0, fmt.Errorf("count %q is not a number", snippet(s))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", s, err)
	}
	if v > maxGRESCount/mult {
		return 0, fmt.Errorf("count %q out of range", s)
	}
	return int(v * mult), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseIndexList reads "0,2-3"; "", "N/A" give nil. At most budget indexes.
func parseIndexList(s string, budget int) ([]int, error) {
	if isEmptyValue(s) {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, err := parseRange(part)
		if err != nil {
			return nil, err
		}
		if len(out)+(hi-lo+1) > budget {
			return nil, fmt.Errorf("more than %d indexes", maxGRESIndexes)
		}
		for i := lo; i <= hi; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// parseRange reads "3" or "0-3" (non-negative, lo <= hi).
func parseRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = smallInt(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = smallInt(b); err != nil {
			return 0, 0, err
		}
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", snippet(s))
	}
	return lo, hi, nil
}

func smallInt(s string) (int, error) {
	if !allDigits(s) || len(s) > 9 {
		return 0, fmt.Errorf("%q is not a small non-negative integer", snippet(s))
	}
	v, _ := strconv.Atoi(s)
	return v, nil
}

// GPUsByType sums the counts of the "gpu" entries by type; untyped GPUs are
// under the key "". Entries of other GRES (shard, mps) are ignored.
func GPUsByType(gres []GRES) map[string]int {
	out := map[string]int{}
	for _, g := range gres {
		if g.Name == "gpu" {
			out[g.Type] += g.Count
		}
	}
	return out
}
