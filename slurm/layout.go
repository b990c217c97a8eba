package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// layout describes the bytes squeue -o / sinfo -O print for one record, so a
// parser can walk the output exactly as the tool wrote it. Both tools print
// each field as C's printf would:
//
//   - width > 0: exactly width bytes, the value cut or padded with spaces
//     ("%.Ns" then spaces; right-justified with "%Ns"), then the suffix;
//   - width 0: the value unchanged, then the suffix;
//
// and a newline after the last field.
type layout struct {
	prefix string
	fields []layoutField
	// verbatimFixed: fixed-width fields are taken byte for byte, newlines
	// included (squeue, where the user-controlled fields are fixed width so
	// that no byte of theirs can move a record boundary). When false, a
	// newline inside a fixed-width field ends the record early (sinfo output
	// whose trailing spaces were trimmed).
	verbatimFixed bool
}

type layoutField struct {
	name   string // squeue letter ("A") or lower-cased sinfo field name ("gresused")
	width  int
	right  bool
	suffix string
}

// squeueLayout parses an squeue -o format the way squeue's _parse_format does:
// text before the first '%' is a prefix; each "%[.][width]letter" is a field
// and everything up to the next '%' is its suffix.
func squeueLayout(format string) (*layout, error) {
	l := &layout{verbatimFixed: true}
	i := strings.IndexByte(format, '%')
	if i < 0 {
		return nil, fmt.Errorf("squeue format %q has no fields", format)
	}
	l.prefix = format[:i]
	for _, tok := range strings.Split(format[i+1:], "%") {
		if tok == "" {
			return nil, fmt.Errorf("squeue format %q: empty field", format)
		}
		var f layoutField
		j := 0
		if tok[j] == '.' {
			f.right = true
			j++
		}
		for j < len(tok) && tok[j] >= '0' && tok[j] <= '9' {
			f.width = f.width*10 + int(tok[j]-'0')
			if f.width > 1<<16 {
				return nil, fmt.Errorf("squeue format %q: width too large", format)
			}
			j++
		}
		if j >= len(tok) {
			return nil, fmt.Errorf("squeue format %q: field without a letter", format)
		}
		f.name = tok[j : j+1]
		f.suffix = tok[j+1:]
		l.fields = append(l.fields, f)
	}
	return l, l.check()
}

// sinfoLayout parses an sinfo -O (--Format) specification the way sinfo's
// _parse_long_token does: "Name" has width 20; "Name:[.][width][suffix]"
// with an empty width meaning 0 (no padding, no cutting).
func sinfoLayout(format string) (*layout, error) {
	l := &layout{}
	for _, tok := range strings.Split(format, ",") {
		var f layoutField
		name, spec, hasSpec := strings.Cut(tok, ":")
		f.name = strings.ToLower(strings.TrimSpace(name))
		if f.name == "" {
			return nil, fmt.Errorf("sinfo format %q: empty field", format)
		}
		if !hasSpec {
			f.width = 20
		} else {
			if strings.HasPrefix(spec, ".") {
				f.right = true
				spec = spec[1:]
			}
			// strtol: optional leading blanks, then digits; the rest is the suffix.
			k := 0
			for k < len(spec) && (spec[k] == ' ' || spec[k] == '\t') {
				k++
			}
			d := k
			for d < len(spec) && spec[d] >= '0' && spec[d] <= '9' {
				d++
			}
			if d > k {
				w, err := strconv.Atoi(spec[k:d])
				if err != nil || w > 1<<16 {
					return nil, fmt.Errorf("sinfo format %q: bad width", format)
				}
				f.width = w
				f.suffix = spec[d:]
			} else {
				f.suffix = spec // no digits: strtol consumed nothing
			}
		}
		l.fields = append(l.fields, f)
	}
	return l, l.check()
}

// check rejects layouts whose records cannot be split back into fields: a
// variable-width field without a suffix that is not the last field.
func (l *layout) check() error {
	for i, f := range l.fields[:len(l.fields)-1] {
		if f.width == 0 && f.suffix == "" {
			return fmt.Errorf("field %d (%s) has neither a width nor a separator", i+1, f.name)
		}
	}
	return nil
}

var errTruncated = errors.New("record ends early (output truncated?)")

// record reads the record starting at b[pos] and returns its field values and
// the position after its newline. full[i] reports a fixed-width field whose
// value fills its whole width, so the tool may have cut it.
func (l *layout) record(b []byte, pos int) (vals []string, full []bool, next int, err error) {
	p := pos
	if l.prefix != "" {
		if !bytes.HasPrefix(b[p:], []byte(l.prefix)) {
			return nil, nil, 0, fmt.Errorf("missing prefix %q", l.prefix)
		}
		p += len(l.prefix)
	}
	vals = make([]string, len(l.fields))
	full = make([]bool, len(l.fields))
	for i, f := range l.fields {
		last := i == len(l.fields)-1
		var v []byte
		switch {
		case f.width > 0:
			end := p + f.width
			if l.verbatimFixed {
				if end > len(b) {
					return nil, nil, 0, errTruncated
				}
			} else {
				if end > len(b) {
					end = len(b)
				}
				if nl := bytes.IndexByte(b[p:end], '\n'); nl >= 0 {
					end = p + nl
				}
			}
			v, p = b[p:end], end
			// Padding goes after a left-justified value, before a right-justified one.
			full[i] = len(v) == f.width && ((!f.right && v[len(v)-1] != ' ') || (f.right && v[0] != ' '))
			if f.right {
				v = bytes.TrimLeft(v, " ")
			} else {
				v = bytes.TrimRight(v, " ")
			}
		case f.suffix != "":
			// Variable width with a separator: never spans lines.
			line := b[p:]
			if nl := bytes.IndexByte(line, '\n'); nl >= 0 {
				line = line[:nl]
			}
			k := bytes.Index(line, []byte(f.suffix))
			if k < 0 {
				if last && strings.TrimSpace(f.suffix) == "" {
					// A trailing blank separator may have been trimmed.
					v, p = line, p+len(line)
					vals[i] = string(v)
					continue
				}
				return nil, nil, 0, fmt.Errorf("field %d (%s): separator %q not found", i+1, f.name, f.suffix)
			}
			v, p = line[:k], p+k
		default: // last, variable width, no suffix: the rest of the line
			line := b[p:]
			if nl := bytes.IndexByte(line, '\n'); nl >= 0 {
				line = line[:nl]
			}
			v, p = line, p+len(line)
		}
		vals[i] = string(v)
		if f.suffix != "" {
			if bytes.HasPrefix(b[p:], []byte(f.suffix)) {
				p += len(f.suffix)
			} else if l.verbatimFixed || !(last || atLineEnd(b, p)) {
				return nil, nil, 0, fmt.Errorf("field %d (%s): separator %q not found", i+1, f.name, f.suffix)
			}
		}
	}
	if !l.verbatimFixed {
		// Tolerate trailing blanks after the last field.
		for p < len(b) && (b[p] == ' ' || b[p] == '\t' || b[p] == '\r') {
			p++
		}
	}
	switch {
	case p == len(b):
		return vals, full, p, nil
	case b[p] == '\n':
		return vals, full, p + 1, nil
	default:
		return nil, nil, 0, fmt.Errorf("unexpected %q after the last field", snippet(string(restOfLine(b, p))))
	}
}

func atLineEnd(b []byte, p int) bool { return p >= len(b) || b[p] == '\n' }

func restOfLine(b []byte, p int) []byte {
	if nl := bytes.IndexByte(b[p:], '\n'); nl >= 0 {
		return b[p : p+nl]
	}
	return b[p:]
}

// records walks b with l. It yields each record's values with its starting
// line number; a record that does not fit the layout is reported through
// bad and the walk resumes at the next line. Blank lines are skipped.
func (l *layout) records(b []byte, good func(line int, vals []string, full []bool), bad func(line int, text string, err error)) {
	pos, line := 0, 1
	for pos < len(b) {
		if b[pos] == '\n' {
			pos++
			line++
			continue
		}
		vals, full, next, err := l.record(b, pos)
		if err != nil {
			bad(line, string(restOfLine(b, pos)), err)
			nl := bytes.IndexByte(b[pos:], '\n')
			if nl < 0 {
				return
			}
			pos += nl + 1
			line++
			continue
		}
		good(line, vals, full)
		line += bytes.Count(b[pos:next], []byte{'\n'})
		pos = next
	}
}
