package slurm

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
)

// ReservationQueryArgs is the argv of the command that lists reservations,
// one line each: active ones and those that start later.
var ReservationQueryArgs = []string{"scontrol", "-o", "show", "reservation"}

// noReservations is what scontrol prints (on stdout, exit 0) when there is
// no reservation at all.
const noReservations = "No reservations in the system"

// Reservation is one record of ReservationQueryArgs.
type Reservation struct {
	Name  string
	Start time.Time
	End   time.Time
	// Nodes is the expanded node list ("node[4-5]" gives node4, node5).
	Nodes []string
	// Partition is "" when the reservation names none.
	Partition string
	// Flags as Slurm prints them: MAINT, SPEC_NODES, IGNORE_JOBS, ...
	Flags []string
	// Users and Accounts may hold it; a leading '-' (Users=-bob) means
	// everyone but that one.
	Users    []string
	Accounts []string
	// State is ACTIVE (it has begun) or INACTIVE (it starts later).
	State string
}

// HasFlag reports whether the reservation carries a flag (MAINT, ...).
func (r Reservation) HasFlag(flag string) bool {
	for _, f := range r.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Active reports whether the reservation has begun.
func (r Reservation) Active() bool { return r.State == "ACTIVE" }

// reservationSpec is the key order of 22.05 and 24.11. No value is user
// free text except Comment (24.11); admins choose names and comments.
var reservationSpec = newKVSpec("reservation",
	[]string{"ReservationName", "StartTime", "EndTime", "Duration", "Nodes", "NodeCnt", "CoreCnt",
		"Features", "PartitionName", "Flags", "NodeName", "TRES", "Users", "Groups", "Accounts",
		"Licenses", "State", "BurstBuffer", "Watts", "MaxStartDelay", "Comment"},
	[]string{"Comment"}, nil, nil, false)

// ParseReservations parses the output of ReservationQueryArgs. "No
// reservations in the system" gives none. A record that cannot be read is
// reported and skipped.
func ParseReservations(r io.Reader) ([]Reservation, []error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, []error{fmt.Errorf("reading scontrol show reservation output: %w", err)}
	}
	if string(bytes.TrimSpace(b)) == noReservations {
		return nil, nil
	}
	var errs errCollector
	recs, junk := splitRecords(string(b), "ReservationName=")
	for _, j := range junk {
		errs.add(&ParseError{Line: j.line, Input: snippet(j.text),
			Err: fmt.Errorf("%w: not a reservation record", ErrMalformed)})
	}
	var out []Reservation
	seen := map[string]int{}
	for _, rec := range recs {
		res, err := parseReservation(rec.text)
		if err != nil {
			errs.add(&ParseError{Line: rec.line, Record: res.Name, Err: err})
			continue
		}
		if prev, dup := seen[res.Name]; dup {
			errs.add(&ParseError{Line: rec.line, Record: res.Name,
				Err: fmt.Errorf("%w: reservation %s already listed on line %d", ErrDuplicate, res.Name, prev)})
			continue
		}
		seen[res.Name] = rec.line
		out = append(out, res)
	}
	return out, errs.result()
}

func parseReservation(text string) (Reservation, error) {
	var res Reservation
	pairs, err := splitKV(text, reservationSpec)
	if err != nil {
		return res, err
	}
	kv := firstValues(pairs)
	res.Name = kv["ReservationName"]
	if res.Name == "" || isEmptyValue(res.Name) {
		return res, fmt.Errorf("%w: reservation without a name", ErrMalformed)
	}
	for _, key := range []string{"StartTime", "EndTime", "Nodes", "State"} {
		if _, ok := kv[key]; !ok {
			return res, fmt.Errorf("%w: no %s=", ErrMalformed, key)
		}
	}
	if res.Start, err = parseSlurmTime(kv["StartTime"]); err != nil || res.Start.IsZero() {
		return res, fmt.Errorf("%w: StartTime %q", ErrMalformed, snippet(kv["StartTime"]))
	}
	if res.End, err = parseSlurmTime(kv["EndTime"]); err != nil || res.End.IsZero() {
		return res, fmt.Errorf("%w: EndTime %q", ErrMalformed, snippet(kv["EndTime"]))
	}
	if res.End.Before(res.Start) {
		return res, fmt.Errorf("%w: EndTime before StartTime", ErrMalformed)
	}
	if res.Nodes, err = ExpandHostlist(kv["Nodes"]); err != nil {
		return res, fmt.Errorf("Nodes: %w", err)
	}
	if p := kv["PartitionName"]; !isEmptyValue(p) {
		res.Partition = p
	}
	res.Flags = listValue(kv["Flags"])
	res.Users = listValue(kv["Users"])
	res.Accounts = listValue(kv["Accounts"])
	res.State = kv["State"]
	if res.State != "ACTIVE" && res.State != "INACTIVE" {
		return res, fmt.Errorf("%w: State %q is neither ACTIVE nor INACTIVE", ErrMalformed, snippet(res.State))
	}
	return res, nil
}

// listValue splits a comma list; (null), N/A and "" give nil.
func listValue(s string) []string {
	if isEmptyValue(s) {
		return nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
