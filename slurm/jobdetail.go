package slurm

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ParseMemoryMB reads a Slurm memory size ("3900M", "4G", "0", "512K",
// "1T"; a bare number is MB) as megabytes.
func ParseMemoryMB(s string) (int64, error) {
	if s == "" || s == "N/A" {
		return 0, nil
	}
	mult := 1.0
	switch s[len(s)-1] {
	case 'K', 'k':
		mult = 1.0 / 1024
	case 'M', 'm':
	case 'G', 'g':
		mult = 1024
	case 'T', 't':
		mult = 1024 * 1024
	default:
		if s[len(s)-1] < '0' || s[len(s)-1] > '9' {
			return 0, fmt.Errorf("%w: not a memory size", ErrMalformed)
		}
		mult = 0
	}
	num := s
	if mult != 0 {
		num = s[:len(s)-1]
	} else {
		mult = 1
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil || x < 0 || x > 1e12 || strings.ContainsAny(num, "eE+-nNiI") {
		return 0, fmt.Errorf("%w: not a memory size", ErrMalformed)
	}
	return int64(x*mult + 0.5), nil
}

// JobDetailQueryArgs is the argv of the command that gives per-node GRES
// with device indexes (-d) for every job, one line per job (-o), all
// partitions (-a).
var JobDetailQueryArgs = []string{"scontrol", "-a", "-d", "-o", "show", "job"}

// JobDetail is one job of scontrol show job -o -d.
//
// Its free-text fields (Name, Comment, AdminComment, WorkDir) are read on a
// best-effort basis: in this output user text can imitate Slurm's keys, and
// although ParseJobDetails rejects every record where it detects that, a
// Job from squeue (JobQueryArgs, fixed-width framing) is the authority on a
// job's identity and comment. Use JoinDetails to attach details to squeue's
// jobs only where the two agree.
type JobDetail struct {
	JobID       string
	ArrayJobID  string // "" if not an array job
	ArrayTaskID string // a task id, or a pending array's task list ("0,2")
	Name        string
	UserName    string
	UserID      int
	JobState    string
	Reason      string
	Restarts    int
	BatchFlag   int
	// ReqNodeList is the node list the job was pinned to ("" for none);
	// ExcNodeList the excluded nodes; NodeList the allocated nodes.
	ReqNodeList string
	ExcNodeList string
	NodeList    string
	// JobGres is the job's total allocated GRES (JOB_GRES=).
	JobGres []GRES
	// NodeGres is the allocation per group of nodes, with device indexes.
	NodeGres []NodeGRES
	// TresPerNode and TresPerJob are the GRES requests ("gres:gpu:2"), parsed.
	// A job submitted with --gpus has TresPerJob and no TresPerNode.
	TresPerNode []GRES
	TresPerJob  []GRES
	// TresPerTask is --gpus-per-task ("gres:gpu:1", or in 24.11
	// "gres/gpu:1"); NumTasks the job's task count.
	TresPerTask []GRES
	NumTasks    int
	// Partition is the job's partition list ("gpu" or "a,b").
	Partition string
	// Account and QOS are the job's (accounting limits count against
	// them); "" without accounting. Reservation is its --reservation.
	Account, QOS, Reservation string
	// Features is the --constraint expression ("" for none).
	Features string
	// MinCPUsNode is the CPUs the job needs on each node; MinMemoryNodeMB
	// (--mem) or MinMemoryCPUMB (--mem-per-cpu) its memory, 0 if unset.
	MinCPUsNode     int
	MinMemoryNodeMB int64
	MinMemoryCPUMB  int64
	// TimeLimit is the job's --time (0: none or unlimited).
	TimeLimit    time.Duration
	Comment      string
	AdminComment string
	WorkDir      string
	// Incomplete is set when a field failed to parse (see the []error).
	Incomplete bool
}

// NodeGRES is one "Nodes=... CPU_IDs=... Mem=... GRES=..." group of a job.
type NodeGRES struct {
	Nodes  []string
	CPUIDs string
	Gres   []GRES
}

// ID is the id to give scontrol: "<array>_<task>" for an array task, the job id otherwise.
func (d JobDetail) ID() string {
	if d.ArrayJobID != "" && allDigits(d.ArrayTaskID) {
		return d.ArrayJobID + "_" + d.ArrayTaskID
	}
	return d.JobID
}

// jobSpec follows slurm_sprint_job_info (src/api/job_info.c) of 22.05.
var jobSpec = newKVSpec("job",
	[]string{"JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset",
		"JobName", "HetJobIdSet", "UserId", "GroupId", "MCS_label", "Priority", "Nice", "Account", "QOS",
		"WCKey", "JobState", "Reason", "Dependency", "Requeue", "Restarts", "BatchFlag", "Reboot", "ExitCode",
		"DerivedExitCode", "RunTime", "TimeLimit", "TimeMin", "SubmitTime", "EligibleTime", "AccrueTime",
		"ResizeTime", "StartTime", "EndTime", "Deadline", "CronJob", "CrontabSpec", "PreemptEligibleTime",
		"PreemptTime", "SuspendTime", "SecsPreSuspend", "LastSchedEval", "Scheduler", "Partition",
		"AllocNode:Sid", "ReqNodeList", "ExcNodeList", "NodeList", "SchedNodeList", "BatchFeatures",
		"BatchHost", "FedOrigin", "FedViableSiblings", "FedActiveSiblings", "NumNodes", "NumCPUs",
		"NumTasks", "CPUs/Task", "ReqB:S:C:T", "TRES", "Socks/Node", "NtasksPerN:B:S:C",
		"CoreSpec|ThreadSpec", "JOB_GRES", "Nodes", "CPU_IDs", "Mem", "GRES", "MinCPUsNode",
		"MinMemoryNode|MinMemoryCPU", "MinTmpDiskNode", "Features", "DelayBoot", "ClusterFeatures", "Prefer",
		"Reservation", "OverSubscribe", "Contiguous", "Licenses", "Network", "Command", "WorkDir",
		"AdminComment", "SystemComment", "Comment", "StdErr", "StdIn", "StdOut", "Switches", "BurstBuffer",
		"BurstBufferState", "CpuFreqMin", "CpuFreqMax", "CpuFreqGov", "Power",
		"GresEnforceBind|KillOInInvalidDependent|SpreadJob", "CpusPerTres", "MemPerTres", "TresBind",
		"TresFreq", "TresPerJob", "TresPerNode", "TresPerSocket", "TresPerTask", "MailUser", "MailType",
		"NtasksPerTRES", "Container", "SELinuxContext"},
	// Values that may hold spaces or user text.
	[]string{"JobName", "WCKey", "CrontabSpec", "Network", "Command", "WorkDir", "AdminComment",
		"SystemComment", "Comment", "StdErr", "StdIn", "StdOut", "BurstBuffer", "MailUser", "Container",
		"SELinuxContext"},
	[]string{"Nodes", "CPU_IDs", "Mem", "GRES"},
	// Keys hadar reads that must not appear twice in one record.
	[]string{"JobId", "ArrayJobId", "ArrayTaskId", "JobName", "UserId", "JobState", "Reason", "Restarts",
		"BatchFlag", "ReqNodeList", "ExcNodeList", "NodeList", "JOB_GRES", "AdminComment", "Comment",
		"TresPerNode", "TresPerJob", "WorkDir"},
	true)

// ParseJobDetails parses the output of JobDetailQueryArgs (scontrol show job
// -o -d). A record starts on a line beginning "JobId=<digit>"; a line that
// does not is part of the previous record (a name or comment holding a
// newline). Records in which user text poses as Slurm keys (ErrAmbiguous)
// and jobs listed twice (ErrDuplicate, all copies) are skipped and reported.
func ParseJobDetails(r io.Reader) ([]JobDetail, []error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, []error{fmt.Errorf("reading scontrol output: %w", err)}
	}
	recs, junk := splitRecords(string(b), "JobId=")
	var errs errCollector
	for _, j := range junk {
		if strings.HasPrefix(j.text, "No jobs in the system") {
			continue
		}
		errs.add(&ParseError{Line: j.line, Input: snippet(j.text),
			Err: fmt.Errorf("%w: line is not part of a job record", ErrMalformed)})
	}
	type parsed struct {
		d    JobDetail
		line int
	}
	var all []parsed
	count := map[string]int{}
	for _, rec := range recs {
		pairs, err := splitKV(rec.text, jobSpec)
		if err != nil {
			errs.add(&ParseError{Line: rec.line, Record: leadingJobID(rec.text), Input: snippet(rec.text), Err: err})
			continue
		}
		d, derrs, ok := buildJobDetail(pairs)
		for _, e := range derrs {
			e.Line = rec.line
			errs.add(e)
		}
		if !ok {
			continue
		}
		count[d.JobID]++
		all = append(all, parsed{d, rec.line})
	}
	var out []JobDetail
	for _, p := range all {
		if count[p.d.JobID] > 1 {
			errs.add(&ParseError{Line: p.line, Record: p.d.JobID,
				Err: fmt.Errorf("%w: job %s listed %d times", ErrDuplicate, p.d.JobID, count[p.d.JobID])})
			continue
		}
		out = append(out, p.d)
	}
	return out, errs.result()
}

func leadingJobID(s string) string {
	s = strings.TrimPrefix(s, "JobId=")
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	if reJobID.MatchString(s) {
		return s
	}
	return ""
}

func buildJobDetail(pairs []kvPair) (JobDetail, []*ParseError, bool) {
	var d JobDetail
	var errs []*ParseError
	v := firstValues(pairs)
	fail := func(field, input string, err error) {
		errs = append(errs, &ParseError{Record: d.JobID, Field: field, Input: snippet(input), Err: err})
	}
	d.JobID = v["JobId"]
	if !reJobID.MatchString(d.JobID) {
		fail("JobId", d.JobID, fmt.Errorf("%w: job id is not a number", ErrMalformed))
		return d, errs, false
	}
	if a, ok := v["ArrayJobId"]; ok {
		if !reJobID.MatchString(a) {
			fail("ArrayJobId", a, fmt.Errorf("%w: not a number", ErrMalformed))
			return d, errs, false
		}
		d.ArrayJobID = a
		t := v["ArrayTaskId"]
		if !reTaskList.MatchString(t) {
			fail("ArrayTaskId", t, fmt.Errorf("%w: bad task id", ErrMalformed))
			return d, errs, false
		}
		d.ArrayTaskID = t
	}
	d.JobState = v["JobState"]
	if !reState.MatchString(d.JobState) {
		fail("JobState", d.JobState, fmt.Errorf("%w: bad state", ErrMalformed))
		return d, errs, false
	}
	u, ok := v["UserId"]
	name, uid, okU := parseNameID(u)
	if !ok || !okU {
		fail("UserId", u, fmt.Errorf("%w: want name(uid)", ErrMalformed))
		return d, errs, false
	}
	d.UserName, d.UserID = name, uid

	soft := func(field, input string, err error) {
		fail(field, input, err)
		d.Incomplete = true
	}
	d.Name = v["JobName"]
	d.Reason = v["Reason"]
	for _, f := range []struct {
		key string
		dst *int
	}{{"Restarts", &d.Restarts}, {"BatchFlag", &d.BatchFlag}} {
		if s, ok := v[f.key]; ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				soft(f.key, s, fmt.Errorf("not a count"))
			}
			*f.dst = n
		}
	}
	d.ReqNodeList = nullable(v["ReqNodeList"])
	d.ExcNodeList = nullable(v["ExcNodeList"])
	d.NodeList = nullable(v["NodeList"])
	var err error
	if s, ok := v["JOB_GRES"]; ok {
		if d.JobGres, err = ParseGRES(s); err != nil {
			soft("JOB_GRES", s, err)
		}
	}
	if s, ok := v["TresPerNode"]; ok {
		if d.TresPerNode, err = ParseGRES(s); err != nil {
			soft("TresPerNode", s, err)
		}
	}
	if s, ok := v["TresPerJob"]; ok {
		if d.TresPerJob, err = ParseGRES(s); err != nil {
			soft("TresPerJob", s, err)
		}
	}
	for _, p := range pairs {
		switch p.Key {
		case "Nodes":
			nodes, err := ExpandHostlist(p.Val)
			if err != nil {
				soft("Nodes", p.Val, err)
			}
			d.NodeGres = append(d.NodeGres, NodeGRES{Nodes: nodes})
		case "CPU_IDs", "GRES":
			if len(d.NodeGres) == 0 {
				soft(p.Key, p.Val, fmt.Errorf("%w: %s= outside a Nodes= group", ErrMalformed, p.Key))
				continue
			}
			g := &d.NodeGres[len(d.NodeGres)-1]
			if p.Key == "CPU_IDs" {
				g.CPUIDs = p.Val
				continue
			}
			if g.Gres, err = ParseGRES(p.Val); err != nil {
				soft("GRES", p.Val, err)
			}
		}
	}
	if s, ok := v["TresPerTask"]; ok {
		if d.TresPerTask, err = ParseGRES(s); err != nil {
			soft("TresPerTask", s, err)
		}
	}
	d.Partition = nullable(v["Partition"])
	d.Account = nullable(v["Account"])
	d.QOS = nullable(v["QOS"])
	d.Reservation = nullable(v["Reservation"])
	d.Features = nullable(v["Features"])
	for _, f := range []struct {
		key string
		dst *int
	}{{"NumTasks", &d.NumTasks}, {"MinCPUsNode", &d.MinCPUsNode}} {
		if s, ok := v[f.key]; ok && s != "N/A" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				soft(f.key, s, fmt.Errorf("not a count"))
				continue
			}
			*f.dst = n
		}
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"MinMemoryNode", &d.MinMemoryNodeMB}, {"MinMemoryCPU", &d.MinMemoryCPUMB}} {
		if s, ok := v[f.key]; ok {
			mb, err := ParseMemoryMB(s)
			if err != nil {
				soft(f.key, s, err)
				continue
			}
			*f.dst = mb
		}
	}
	if s, ok := v["TimeLimit"]; ok {
		if d.TimeLimit, err = parseSlurmDuration(s); err != nil {
			soft("TimeLimit", s, err)
		}
	}
	d.Comment = v["Comment"]
	d.AdminComment = v["AdminComment"]
	d.WorkDir = v["WorkDir"]
	return d, errs, true
}

// parseNameID reads "alice(1001)".
func parseNameID(s string) (string, int, bool) {
	open := strings.LastIndexByte(s, '(')
	if open <= 0 || !strings.HasSuffix(s, ")") {
		return "", 0, false
	}
	id, err := strconv.Atoi(s[open+1 : len(s)-1])
	if err != nil || id < 0 {
		return "", 0, false
	}
	return s[:open], id, true
}

func nullable(s string) string {
	if s == "(null)" {
		return ""
	}
	return s
}

// JoinDetails attaches details to squeue's jobs, keyed by Job.ID. A detail
// is used only when it is the only one for that job and agrees with the
// squeue row on job id, array ids, user and (when squeue's copy was not cut)
// comment; others are left out, so details can never add a job, change its
// owner or tag it.
func JoinDetails(jobs []Job, details []JobDetail) map[string]JobDetail {
	byID := map[string][]JobDetail{}
	for _, d := range details {
		byID[d.JobID] = append(byID[d.JobID], d)
	}
	out := map[string]JobDetail{}
	for _, j := range jobs {
		ds := byID[j.JobID]
		if len(ds) != 1 {
			continue
		}
		d := ds[0]
		if d.UserName != j.User {
			continue
		}
		if allDigits(j.ArrayTaskID) {
			if d.ArrayJobID != j.ArrayJobID || d.ArrayTaskID != j.ArrayTaskID {
				continue
			}
		} else if d.ArrayJobID != "" && d.ArrayJobID != j.ArrayJobID {
			continue
		}
		if !j.CommentTruncated && strings.TrimRight(d.Comment, " ") != j.Comment {
			continue
		}
		out[j.ID()] = d
	}
	return out
}
