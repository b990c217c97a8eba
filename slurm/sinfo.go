package slurm

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SinfoFormat is the sinfo -O specification ParseSinfo reads by default.
// Every field has width 0 (sinfo neither pads nor cuts it) and ends in '|',
// so long GRES strings cannot run into the next column. (With fixed widths,
// sinfo cuts values silently: the 22.05 test cluster printed
// "...:1(IDX:2mixed" for NodeList:64,Gres:64,GresUsed:64,StateLong:32.)
const SinfoFormat = "NodeList:|,Partition:|,StateLong:|,CPUsState:|,Gres:|,GresUsed:|,Features:"

// SinfoQueryArgs reads the same node facts as NodeQueryArgs with sinfo: one
// row per node and partition (-N), all partitions (-a), no header. The bridge
// uses NodeQueryArgs (one row per node, with state flags); this is the
// alternative for sites that only allow sinfo.
var SinfoQueryArgs = []string{"sinfo", "-a", "-h", "-N", "-O", SinfoFormat}

// ParseSinfo parses the output of SinfoQueryArgs.
func ParseSinfo(r io.Reader) ([]Node, []error) {
	return ParseSinfoFormat(r, SinfoFormat)
}

// ParseSinfoFormat parses sinfo output printed with -O format (the argument
// of -O/--Format, e.g. "NodeList:64,Gres:64,GresUsed:64,StateLong:32" or
// "NodeHost,Gres:50,GresUsed:50,StateLong"), walking each row exactly as
// sinfo lays it out: fixed-width fields by width, width-0 fields up to their
// separator. It reads the fields NodeList (or NodeHost), Partition,
// StateLong/StateCompact/StateComplete, CPUsState, Gres, GresUsed and
// Features; others are skipped. A header row (sinfo without -h) is skipped.
// Rows of a node in several partitions are merged. A value that sinfo cut
// at its width fails to parse and marks the node Incomplete.
func ParseSinfoFormat(r io.Reader, format string) ([]Node, []error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, []error{fmt.Errorf("reading sinfo output: %w", err)}
	}
	l, err := sinfoLayout(format)
	if err != nil {
		return nil, []error{err}
	}
	col := map[string]int{}
	for i, f := range l.fields {
		key := f.name
		switch key {
		case "nodehost":
			key = "nodelist"
		case "statecompact", "statecomplete", "state":
			key = "statelong"
		}
		if _, dup := col[key]; !dup {
			col[key] = i
		}
	}
	nameCol, ok := col["nodelist"]
	if !ok {
		return nil, []error{fmt.Errorf("sinfo format %q has no NodeList or NodeHost field", format)}
	}

	var nodes []Node
	var errs errCollector
	index := map[string]int{}
	first := true
	l.records(b, func(line int, vals []string, full []bool) {
		if first {
			first = false
			if isSinfoHeader(vals[nameCol]) {
				return
			}
		}
		// A value that fills a fixed-width column may have been cut.
		var cut []string
		for i, f := range full {
			if f {
				cut = append(cut, l.fields[i].name)
			}
		}
		if full[nameCol] {
			errs.add(&ParseError{Line: line, Input: snippet(vals[nameCol]),
				Err: fmt.Errorf("%w: node name fills its column and may have been cut", ErrMalformed)})
			return
		}
		get := func(key string) (string, bool) {
			if i, ok := col[key]; ok {
				return strings.TrimSpace(vals[i]), true
			}
			return "", false
		}
		n, nerrs := buildSinfoNode(get)
		for _, e := range nerrs {
			e.Line = line
			errs.add(e)
		}
		if n == nil {
			return
		}
		if len(cut) > 0 && !n.Incomplete {
			n.Incomplete = true
			errs.add(&ParseError{Line: line, Record: n.Name, Field: strings.Join(cut, ","),
				Err: fmt.Errorf("%w: value fills its fixed-width column and may have been cut by sinfo (use width 0 with a separator)", ErrMalformed)})
		}
		if i, dup := index[n.Name]; dup {
			// Same node, another partition.
			prev := &nodes[i]
			for _, p := range n.Partitions {
				if !contains(prev.Partitions, p) {
					prev.Partitions = append(prev.Partitions, p)
				}
			}
			prev.Incomplete = prev.Incomplete || n.Incomplete
			return
		}
		index[n.Name] = len(nodes)
		nodes = append(nodes, *n)
	}, func(line int, text string, err error) {
		errs.add(&ParseError{Line: line, Input: snippet(text), Err: fmt.Errorf("%w: %v", ErrMalformed, err)})
	})
	return nodes, errs.result()
}

func isSinfoHeader(name string) bool {
	switch strings.TrimSpace(name) {
	case "NODELIST", "HOSTNAMES":
		return true
	}
	return false
}

func buildSinfoNode(get func(string) (string, bool)) (*Node, []*ParseError) {
	var errs []*ParseError
	name, _ := get("nodelist")
	n := &Node{Name: name}
	fail := func(field, input string, err error) {
		errs = append(errs, &ParseError{Record: n.Name, Field: field, Input: snippet(input), Err: err})
	}
	if !validHostname(name) {
		fail("NodeList", name, fmt.Errorf("%w: bad node name", ErrMalformed))
		return nil, errs
	}
	soft := func(field, input string, err error) {
		fail(field, input, err)
		n.Incomplete = true
	}
	if raw, ok := get("statelong"); ok {
		if raw == "" {
			fail("StateLong", raw, fmt.Errorf("%w: no state", ErrMalformed))
			return nil, errs
		}
		n.RawState = raw
		n.State, n.Flags = ParseNodeState(raw)
	}
	if p, ok := get("partition"); ok {
		for _, part := range splitList(p) {
			n.Partitions = append(n.Partitions, strings.TrimSuffix(part, "*")) // '*' marks the default partition
		}
	}
	if v, ok := get("cpusstate"); ok && !isEmptyValue(v) {
		// allocated/idle/other/total
		f := strings.Split(v, "/")
		a, errA := strconv.Atoi(f[0])
		t, errT := strconv.Atoi(f[len(f)-1])
		if len(f) != 4 || errA != nil || errT != nil || a < 0 || t < 0 {
			soft("CPUsState", v, fmt.Errorf("want allocated/idle/other/total"))
		} else {
			n.CPUAlloc, n.CPUTot = a, t
		}
	}
	var err error
	if v, ok := get("gres"); ok {
		if n.Gres, err = ParseGRES(v); err != nil {
			soft("Gres", v, err)
		}
	}
	if v, ok := get("gresused"); ok {
		if n.GresUsed, err = ParseGRES(v); err != nil {
			soft("GresUsed", v, err)
		}
	}
	if v, ok := get("features"); ok {
		n.Features = splitList(v)
	}
	return n, errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
