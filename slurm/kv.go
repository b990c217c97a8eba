package slurm

import (
	"fmt"
	"strings"
)

// scontrol's one-line records ("show node -o", "show job -o") are
// "Key=value" pairs separated by spaces, where some values contain spaces
// (OS=Linux 6.1 #1 SMP ..., Reason=..., JobName=..., Comment=...) and user
// text can imitate a key ("Comment=x UserId=root(0)"). kvSpec knows, for one
// record kind, the order in which Slurm prints its keys and which values are
// free text; splitKV uses it to decide which "Key=" tokens start fields:
//
//   - a token counts only at the start of the record or after a space;
//   - inside a free-text value only a known key that Slurm prints later ends
//     the value (so "JobName=a b=c" keeps "a b=c", and a node's
//     "Reason=bad State=IDLE" cannot change its State);
//   - anywhere else any key ends the value (unknown keys are new Slurm fields).
//
// In strict mode (jobs) a record is rejected as ErrAmbiguous when a known
// key shows up out of Slurm's order, or when a key in the sensitive set
// appears more than once anywhere in the record, inside a value or not:
// either means user text is posing as Slurm's own fields.
type kvSpec struct {
	kind      string
	order     map[string]int
	free      map[string]bool
	group     map[string]bool // keys of a block that may repeat (per-node job details)
	sensitive map[string]bool
	strict    bool
}

func newKVSpec(kind string, order []string, free, group, sensitive []string, strict bool) *kvSpec {
	s := &kvSpec{kind: kind, order: map[string]int{}, free: set(free), group: set(group),
		sensitive: set(sensitive), strict: strict}
	for i, k := range order {
		// "A|B" gives alternatives that share one position.
		for _, alt := range strings.Split(k, "|") {
			s.order[alt] = i
		}
	}
	return s
}

func set(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

type kvPair struct {
	Key, Val string
}

type kvToken struct {
	key        string
	start, val int // offsets of the key and of its value
}

func isKeyStart(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

func isKeyByte(c byte) bool {
	return isKeyStart(c) || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '/'
}

// kvTokens finds every "Key=" that starts the string or follows a space.
func kvTokens(s string) []kvToken {
	toks := make([]kvToken, 0, min(strings.Count(s, "="), 512))
	for i := 0; i < len(s); i++ {
		if (i > 0 && s[i-1] != ' ') || !isKeyStart(s[i]) {
			continue
		}
		j := i + 1
		for j < len(s) && isKeyByte(s[j]) {
			j++
		}
		if j < len(s) && s[j] == '=' && j-i <= 64 {
			toks = append(toks, kvToken{key: s[i:j], start: i, val: j + 1})
			i = j
		}
	}
	return toks
}

// splitKV splits one record into its pairs, in order.
func splitKV(s string, spec *kvSpec) ([]kvPair, error) {
	toks := kvTokens(s)
	if len(toks) == 0 || toks[0].start != 0 {
		return nil, fmt.Errorf("%w: record does not start with Key=", ErrMalformed)
	}
	if spec.strict {
		count := make(map[string]int, len(spec.sensitive))
		for _, t := range toks {
			if spec.sensitive[t.key] {
				count[t.key]++
				if count[t.key] > 1 {
					return nil, fmt.Errorf("%w: %s= appears more than once", ErrAmbiguous, t.key)
				}
			}
		}
	}
	accepted := make([]kvToken, 1, len(toks))
	accepted[0] = toks[0]
	cur := toks[0]
	curIdx, known := spec.order[cur.key]
	if !known {
		curIdx = -1
	}
	for _, t := range toks[1:] {
		idx, isKnown := spec.order[t.key]
		if spec.free[cur.key] {
			if !isKnown || idx <= curIdx {
				continue // part of the free-text value
			}
		} else if isKnown && idx <= curIdx && !(spec.group[t.key] && spec.group[cur.key]) {
			if spec.strict {
				return nil, fmt.Errorf("%w: %s= out of order after %s=", ErrAmbiguous, t.key, cur.key)
			}
		}
		accepted = append(accepted, t)
		cur = t
		if isKnown {
			curIdx = idx
		}
	}
	pairs := make([]kvPair, len(accepted))
	for i, t := range accepted {
		end := len(s)
		if i+1 < len(accepted) {
			end = accepted[i+1].start
		}
		pairs[i] = kvPair{Key: t.key, Val: strings.TrimRight(s[t.val:end], " ")}
	}
	return pairs, nil
}

// firstValues maps each key to its first value.
func firstValues(pairs []kvPair) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		if _, ok := m[p.Key]; !ok {
			m[p.Key] = p.Val
		}
	}
	return m
}

// splitRecords cuts scontrol -o output into records. A record starts on a
// line that begins with startKey followed by a non-space character; other
// lines continue the previous record (a value with a newline in it), so a
// record is the original text from its first line up to the next record,
// without the final newline. Non-blank text before the first record is
// returned as junk, one entry per line.
func splitRecords(text, startKey string) (recs []record, junk []record) {
	line := 0
	cur := -1 // offset where the open record starts
	curLine := 0
	for off := 0; off < len(text); {
		line++
		end := strings.IndexByte(text[off:], '\n')
		next := len(text)
		if end < 0 {
			end = len(text)
		} else {
			end += off
			next = end + 1
		}
		l := text[off:end]
		if strings.HasPrefix(l, startKey) && len(l) > len(startKey) && l[len(startKey)] != ' ' {
			if cur >= 0 {
				recs = append(recs, record{line: curLine, text: strings.TrimRight(text[cur:off], "\n")})
			}
			cur, curLine = off, line
		} else if cur < 0 && strings.TrimSpace(l) != "" {
			junk = append(junk, record{line: line, text: l})
		}
		off = next
	}
	if cur >= 0 {
		recs = append(recs, record{line: curLine, text: strings.TrimRight(text[cur:], "\n")})
	}
	return recs, junk
}

type record struct {
	line int
	text string
}
