package slurm

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// NodeQueryArgs is the argv of the one command hadar runs to read the nodes:
// one line per node (-o), with GresUsed (-d, details), including nodes of
// hidden partitions (-a). Options come before the subcommand so the argv
// parses the same with or without GNU getopt's argument permutation.
var NodeQueryArgs = []string{"scontrol", "-a", "-d", "-o", "show", "node"}

// Node is one Slurm node.
type Node struct {
	Name string
	// State is the node's state as sinfo names it, lower case: idle, mixed,
	// allocated, completing, down, drained (DRAIN set, nothing running),
	// draining (DRAIN set, jobs still running), ... An unknown state is kept
	// as Slurm printed it (lower-cased) and is never schedulable.
	State string
	// Flags are the upper-case state flags: DRAIN, NOT_RESPONDING (from a
	// trailing '*'), DYNAMIC_NORM, POWERED_DOWN, MAINTENANCE, ...
	Flags []string
	// RawState is the state exactly as printed ("IDLE+DRAIN", "drained*").
	RawState string
	// Gres are the node's configured GRES; GresUsed those allocated to jobs.
	Gres     []GRES
	GresUsed []GRES
	// Partitions and Features (available features) of the node.
	Partitions []string
	Features   []string
	CPUTot     int
	CPUAlloc   int
	// RealMemory and AllocMem are the node's memory and what jobs hold
	// of it, in MB (0 when not reported).
	RealMemory int64
	AllocMem   int64
	// Reason is the admin's drain/down reason, if any.
	Reason string
	// Incomplete is set when a field failed to parse (reported in the
	// []error); such a node is not schedulable.
	Incomplete bool
}

// baseStates are the node states Slurm knows, as sinfo prints them in long
// form, plus the short forms of sinfo %t.
var baseStates = map[string]string{
	"idle": "idle", "mixed": "mixed", "mix": "mixed", "allocated": "allocated", "alloc": "allocated",
	"completing": "completing", "comp": "completing", "down": "down", "drained": "drained",
	"drain": "drained", "draining": "draining", "drng": "draining", "fail": "fail", "failing": "failing",
	"future": "future", "futr": "future", "unknown": "unknown", "unk": "unknown", "error": "error",
	"reserved": "reserved", "resv": "reserved", "maint": "maint", "planned": "planned", "plnd": "planned",
	"inval": "inval", "blocked": "blocked", "reboot": "reboot", "npc": "npc", "perfctrs": "perfctrs",
	"power_down": "power_down", "powered_down": "powered_down", "powering_up": "powering_up",
	"powering_down": "powering_down", "pow_dn": "powered_down", "pow_up": "powering_up", "boot": "boot",
	"cloud": "cloud",
}

// stateSymbols are the suffixes sinfo (and old scontrol) append to a state.
var stateSymbols = map[byte]string{
	'*': "NOT_RESPONDING", '~': "POWERED_DOWN", '#': "POWERING_UP", '!': "POWER_DOWN",
	'%': "POWERING_DOWN", '$': "MAINTENANCE", '@': "REBOOT_REQUESTED", '^': "REBOOT_ISSUED",
	'-': "PLANNED",
}

// schedulableStates and benignFlags decide Node.Schedulable.
var (
	schedulableStates = map[string]bool{"idle": true, "mixed": true, "allocated": true, "completing": true, "planned": true}
	benignFlags       = map[string]bool{"DYNAMIC_NORM": true, "CLOUD": true, "COMPLETING": true, "PLANNED": true}
)

// Schedulable reports whether hadar may place work on the node: a known
// healthy state, no flag that keeps jobs off it (DRAIN, NOT_RESPONDING,
// power saving, maintenance, reboot, unknown flags), and every field parsed.
func (n Node) Schedulable() bool {
	if n.Incomplete || !schedulableStates[n.State] {
		return false
	}
	for _, f := range n.Flags {
		if !benignFlags[f] {
			return false
		}
	}
	return true
}

// ParseNodeState normalises a node state as printed by scontrol
// ("MIXED+DRAIN", "IDLE+DYNAMIC_NORM", "DOWN*") or sinfo ("drained*",
// "draining", "idle~", "mix-") into sinfo's lower-case state and upper-case
// flags. DRAIN becomes drained or draining as sinfo reports it.
func ParseNodeState(raw string) (state string, flags []string) {
	parts := strings.Split(strings.TrimSpace(raw), "+")
	base := parts[0]
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			flags = append(flags, f)
		}
	}
	stripSymbols := func(s string) string {
		for len(s) > 1 {
			f, ok := stateSymbols[s[len(s)-1]]
			if !ok {
				break
			}
			add(f)
			s = s[:len(s)-1]
		}
		return s
	}
	base = strings.ToLower(stripSymbols(base))
	for _, p := range parts[1:] {
		add(strings.ToUpper(stripSymbols(p)))
	}
	state, known := baseStates[base]
	if !known {
		return base, flags
	}
	switch state {
	case "drained", "draining":
		add("DRAIN")
	case "maint":
		add("MAINTENANCE")
	}
	if seen["DRAIN"] && state != "drained" && state != "draining" {
		if state == "allocated" || state == "mixed" || state == "completing" || seen["COMPLETING"] {
			state = "draining"
		} else {
			state = "drained"
		}
	}
	return state, flags
}

var nodeSpec = newKVSpec("node",
	[]string{"NodeName", "Arch", "CpuBind", "CoresPerSocket", "CPUAlloc", "CPUEfctv", "CPUErr", "CPUTot",
		"CPULoad", "AvailableFeatures", "ActiveFeatures", "Features", "Gres", "GresDrain", "GresUsed",
		"NodeAddr", "NodeHostName", "BcastAddr", "Port", "Version", "OS", "RealMemory", "AllocMem", "FreeMem",
		"Sockets", "Boards", "CoreSpecCount", "CPUSpecList", "MemSpecLimit", "RestrictedCoresPerGPU", "State",
		"ThreadsPerCore", "TmpDisk", "Weight", "Owner", "MCS_label", "NextState", "Partitions", "BootTime",
		"SlurmdStartTime", "LastBusyTime", "ResumeAfterTime", "CfgTRES", "AllocTRES", "CapWatts",
		"CurrentWatts", "AveWatts", "LowestJoules", "ConsumedJoules", "ExtSensorsJoules", "ExtSensorsWatts",
		"ExtSensorsTemp", "Reason", "Comment", "Extra", "InstanceId", "InstanceType", "ReservationName"},
	[]string{"OS", "Reason", "Comment", "Extra"}, nil, nil, false)

// ParseNodes parses the output of NodeQueryArgs (scontrol show node -o, with
// or without -d): one "NodeName=..." line per node. Values may contain
// spaces; an admin's Reason or Comment cannot override the node's own
// fields. A node whose name or state cannot be read is skipped; other field
// failures mark it Incomplete. Both are reported in the []error.
func ParseNodes(r io.Reader) ([]Node, []error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, []error{fmt.Errorf("reading scontrol output: %w", err)}
	}
	recs, junk := splitRecords(string(b), "NodeName=")
	var errs errCollector
	for _, j := range junk {
		if strings.HasPrefix(j.text, "No nodes in the system") {
			continue
		}
		errs.add(&ParseError{Line: j.line, Input: snippet(j.text),
			Err: fmt.Errorf("%w: line is not part of a node record", ErrMalformed)})
	}
	var nodes []Node
	seen := map[string]int{}
	for _, rec := range recs {
		pairs, err := splitKV(rec.text, nodeSpec)
		if err != nil {
			errs.add(&ParseError{Line: rec.line, Input: snippet(rec.text), Err: err})
			continue
		}
		n, nerrs := buildNode(firstValues(pairs))
		for _, e := range nerrs {
			e.Line = rec.line
			errs.add(e)
		}
		if n == nil {
			continue
		}
		if prev, dup := seen[n.Name]; dup {
			errs.add(&ParseError{Line: rec.line, Record: n.Name,
				Err: fmt.Errorf("%w: node already listed on line %d", ErrDuplicate, prev)})
			continue
		}
		seen[n.Name] = rec.line
		nodes = append(nodes, *n)
	}
	return nodes, errs.result()
}

func buildNode(v map[string]string) (*Node, []*ParseError) {
	var errs []*ParseError
	n := &Node{Name: v["NodeName"]}
	fail := func(field, input string, err error) {
		errs = append(errs, &ParseError{Record: n.Name, Field: field, Input: snippet(input), Err: err})
	}
	if !validHostname(n.Name) {
		fail("NodeName", n.Name, fmt.Errorf("%w: bad node name", ErrMalformed))
		return nil, errs
	}
	raw, ok := v["State"]
	if !ok || strings.TrimSpace(raw) == "" {
		fail("State", raw, fmt.Errorf("%w: no state", ErrMalformed))
		return nil, errs
	}
	n.RawState = raw
	n.State, n.Flags = ParseNodeState(raw)

	soft := func(field, input string, err error) {
		fail(field, input, err)
		n.Incomplete = true
	}
	var err error
	if n.Gres, err = ParseGRES(v["Gres"]); err != nil {
		soft("Gres", v["Gres"], err)
	}
	if used, ok := v["GresUsed"]; ok {
		if n.GresUsed, err = ParseGRES(used); err != nil {
			soft("GresUsed", used, err)
		}
	}
	n.Partitions = splitList(v["Partitions"])
	feat, ok := v["AvailableFeatures"]
	if !ok {
		feat = v["Features"] // before Slurm 17.11
	}
	n.Features = splitList(feat)
	for _, f := range []struct {
		key string
		dst *int
	}{{"CPUTot", &n.CPUTot}, {"CPUAlloc", &n.CPUAlloc}} {
		s, ok := v[f.key]
		if !ok {
			continue
		}
		x, err := strconv.Atoi(s)
		if err != nil || x < 0 {
			soft(f.key, s, fmt.Errorf("not a count"))
			continue
		}
		*f.dst = x
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"RealMemory", &n.RealMemory}, {"AllocMem", &n.AllocMem}} {
		if s, ok := v[f.key]; ok {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil || x < 0 {
				soft(f.key, s, fmt.Errorf("not a size"))
				continue
			}
			*f.dst = x
		}
	}
	n.Reason = v["Reason"]
	return n, errs
}

// splitList splits a comma-separated Slurm list; (null), N/A and "" give nil.
func splitList(s string) []string {
	s = strings.TrimSpace(s)
	if isEmptyValue(s) {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
