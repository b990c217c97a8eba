package jobproto

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TagWord is the word a job's comment starts with to be scheduled by hadar.
const TagWord = "hadar"

// MaxCopies is the largest copies= a tag may ask for.
const MaxCopies = 64

// MaxTagWeight is the largest weight= a tag may give: users may only
// lower their job's weight.
const MaxTagWeight = 1

// DefaultLease is job_submit.lua's begin-time lease as shipped
// (HADAR_LEASE_SECONDS): a tagged job waits this long for hadar before
// Slurm may start it alone, unless hadar renews it.
const DefaultLease = 2 * time.Minute

// IsTagged reports whether a job comment is a hadar tag: exactly "hadar", or
// "hadar " followed by anything. This is the rule job_submit.lua applies
// when it gives a job its lease at submission, so every tagged job the
// bridge sees waited for hadar (and no other job did). "hadarx", " hadar"
// and "HADAR" are not tags.
func IsTagged(comment string) bool {
	return comment == TagWord || strings.HasPrefix(comment, TagWord+" ")
}

// Tag is what a job asked for in its comment. Zero fields were not given.
type Tag struct {
	// Model is the job type as the user wrote it (model=); see ModelResolver.
	Model string
	// Steps is the job's total number of training steps (steps=).
	Steps float64
	// Copies is the HadarE limit on concurrent copies (copies=, 1..64).
	Copies int
	// Weight lowers the job's priority weight (weight=, > 0 and at most
	// 1): users may only lower theirs, as with Slurm's --nice; the site
	// sets weights per account and QOS (hadar.toml [weights]).
	Weight float64
}

// TagError says why a tag could not be read. Its message is meant for the
// job's owner (it goes into the job's AdminComment).
type TagError struct {
	// Key is the offending key ("" when the problem is not about one key).
	Key string
	// Problem describes what is wrong.
	Problem string
}

func (e *TagError) Error() string {
	if e.Key == "" {
		return "bad hadar tag: " + e.Problem
	}
	return fmt.Sprintf("bad hadar tag: %s: %s", e.Key, e.Problem)
}

// maxTagValue bounds the length of one value (squeue shows at most 512
// bytes of comment anyway).
const maxTagValue = 256

// ParseTag reads a tagged comment:
//
//	hadar [key=value ...]
//
// with words separated by spaces; a value may be double-quoted to hold
// spaces (model="ResNet-50 (batch size 64)"; no escapes). Keys:
//
//	model=NAME   job type in the throughput matrix (see ModelResolver)
//	steps=N      total training steps, a number > 0
//	copies=K     HadarE: at most K concurrent copies, 1..64
//	weight=W     lowers the priority weight: a number > 0 and at most 1
//
// An unknown key, a bad or empty value, a key given twice, control
// characters or invalid UTF-8 give a *TagError. A comment that is not a tag
// (see IsTagged) is an error too.
func ParseTag(comment string) (Tag, error) {
	var t Tag
	if !IsTagged(comment) {
		return t, &TagError{Problem: "the comment does not start with \"hadar\""}
	}
	if !utf8.ValidString(comment) {
		return t, &TagError{Problem: "the comment is not valid UTF-8"}
	}
	if i := strings.IndexFunc(comment, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return t, &TagError{Problem: "the comment holds a control character"}
	}
	rest := comment[len(TagWord):]
	seen := map[string]bool{}
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return t, nil
		}
		var word string
		eq := strings.IndexAny(rest, "= ")
		if eq < 0 || rest[eq] == ' ' {
			end := len(rest)
			if eq >= 0 {
				end = eq
			}
			return t, &TagError{Problem: fmt.Sprintf("%q is not key=value", Clip(rest[:end]))}
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return t, &TagError{Key: key, Problem: "unterminated quote"}
			}
			val = rest[1 : 1+end]
			rest = rest[2+end:]
			if rest != "" && rest[0] != ' ' {
				return t, &TagError{Key: key, Problem: "text right after the closing quote"}
			}
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
			if strings.ContainsRune(val, '"') {
				return t, &TagError{Key: key, Problem: "a quote inside an unquoted value"}
			}
		}
		word = key
		if seen[word] {
			return t, &TagError{Key: key, Problem: "given twice"}
		}
		seen[word] = true
		if err := t.set(key, val); err != nil {
			return t, err
		}
	}
}

func (t *Tag) set(key, val string) error {
	bad := func(format string, args ...any) error {
		return &TagError{Key: key, Problem: fmt.Sprintf(format, args...)}
	}
	if val == "" {
		return bad("empty value")
	}
	if len(val) > maxTagValue {
		return bad("value longer than %d bytes", maxTagValue)
	}
	switch key {
	case "model":
		if strings.TrimSpace(val) == "" {
			return bad("empty value")
		}
		t.Model = val
	case "steps":
		x, err := positive(val)
		if err != nil {
			return bad("%q: %v", Clip(val), err)
		}
		t.Steps = x
	case "copies":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > MaxCopies {
			return bad("%q: want a whole number from 1 to %d", Clip(val), MaxCopies)
		}
		t.Copies = n
	case "weight":
		x, err := positive(val)
		if err != nil || x > MaxTagWeight {
			return bad("%q: want a number > 0 and at most 1 (a tag may only lower a job's weight; the site sets weights per account and QOS)", Clip(val))
		}
		t.Weight = x
	default:
		return &TagError{Key: Clip(key), Problem: "unknown key (known: model, steps, copies, weight)"}
	}
	return nil
}

func positive(s string) (float64, error) {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 || x > 1e15 {
		return 0, fmt.Errorf("want a number > 0")
	}
	return x, nil
}

// Clip shortens user text (a comment, a tag value, a file name) for
// messages, so a hostile job cannot flood a log or an AdminComment.
func Clip(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
