package bridge

import (
	"errors"
	"fmt"
	"github.com/hadar-sched/hadar/internal/statedb"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// JobClass says how the bridge treats a job in a round.
type JobClass string

const (
	// ClassUntagged: not a hadar job. Never touched.
	ClassUntagged JobClass = "untagged"
	// ClassPassThrough: tagged, but hadar cannot schedule it (bad tag,
	// unknown model, no GPUs, ...). If held, it is released to Slurm's own
	// scheduler once, with the reason in its AdminComment; otherwise it is
	// Slurm's and its GPUs count as others' work.
	ClassPassThrough JobClass = "pass-through"
	// ClassWaiting: tagged, pending, and hadar's to place: on hadar's
	// lease (job_submit.lua's begin time, renewed by hadar), a lease that
	// ran out before Slurm started the job (hadar takes it back), or in
	// hadar's own hold of a migration (requeuehold).
	ClassWaiting JobClass = "waiting"
	// ClassLaunching: tagged, placed and started by hadar (StartTime=now),
	// not running yet. Its GPUs are reserved; it is not re-planned (unless
	// it overstays launch_timeout, when it gets a lease again).
	ClassLaunching JobClass = "launching"
	// ClassHeld: tagged and held by its owner or an admin (sbatch -H,
	// scontrol hold: JobHeldUser, JobHeldAdmin). Not hadar's hold: hadar
	// never releases it and does not plan it; it keeps its lease, so that
	// once released it waits for hadar again.
	ClassHeld JobClass = "held"
	// ClassNotReady: tagged and pending, but Slurm would not start it yet:
	// its user's own begin time (--begin) is ahead, or it waits for a
	// dependency. Not planned; JobView.Waits says why.
	ClassNotReady JobClass = "not-ready"
	// ClassRunning: tagged and running on nodes hadar schedules: the policy
	// may keep, move or (with preemption) stop it.
	ClassRunning JobClass = "running"
	// ClassPinned: tagged and holding GPUs hadar cannot re-plan (suspended,
	// completing, or on a node hadar does not use). Left alone.
	ClassPinned JobClass = "pinned"
)

// hadarHoldReasons are the pending reasons of a job in hadar's own hold:
// scontrol requeuehold leaves "job requeued in held state" (squeue %r;
// scontrol show job prints it with underscores): a job hadar requeued to
// migrate it shows it until released, so a migration cut short (a failed
// place, a killed daemon) must still read as hadar's, or the job would
// never be released again, not even by fail-open. When a launch fails on a
// node (seen on 24.11 when a node came back from a network cut just as
// hadar placed a job there), Slurm drains the node and holds the job with
// "launch failed requeued held": hadar placed the job, so it takes it back
// and places it again, on another node.
var hadarHoldReasons = map[string]bool{"job requeued in held state": true, "job_requeued_in_held_state": true,
	"launch failed requeued held": true, "launch_failed_requeued_held": true}

// ownerHoldReasons are the holds of a job's owner (sbatch -H, scontrol
// hold by the user: JobHeldUser) and of an admin (JobHeldAdmin). hadar
// never releases them.
var ownerHoldReasons = map[string]bool{"JobHeldUser": true, "JobHeldAdmin": true}

// heldReasons are every hold, hadar's or not: Slurm starts none of these
// jobs until someone releases it.
var heldReasons = map[string]bool{"JobHeldUser": true, "JobHeldAdmin": true,
	"job requeued in held state": true, "job_requeued_in_held_state": true,
	"launch failed requeued held": true, "launch_failed_requeued_held": true}

// dependencyReasons are the pending reasons of a job whose dependency is
// not met.
var dependencyReasons = map[string]bool{"Dependency": true, "DependencyNeverSatisfied": true}

// leaseSlack is how far past its submission (or hadar's last renewal) a
// lease may end before hadar reads the difference as the user's own
// --begin: job_submit.lua's clock and slurmctld's submit time may differ by
// a second, and Slurm prints whole seconds.
const leaseSlack = 2 * time.Second

// Lease is what hadar reads of a pending job's begin time, for the lease
// of job_submit.lua (begin = max(the user's --begin, submit) + lease).
type Lease struct {
	// Until is when the lease runs out (the job's begin time); zero when
	// it has none in the future.
	Until time.Time
	// UserBegin is the user's own begin time, when it is still ahead
	// (Until minus the lease); zero otherwise.
	UserBegin time.Time
}

// ReadLease reads job j's lease at now, for a lease of length lease.
func ReadLease(j slurm.Job, now time.Time, lease time.Duration) Lease {
	if j.State != "PENDING" || !j.StartTime.After(now) {
		return Lease{}
	}
	l := Lease{Until: j.StartTime}
	// A user's begin is after the submission as well as ahead of now (a
	// lease from the submission, or renewed by hadar, is neither).
	begin := j.StartTime.Add(-lease)
	if begin.After(now.Add(leaseSlack)) && (j.SubmitTime.IsZero() || begin.After(j.SubmitTime.Add(leaseSlack))) {
		l.UserBegin = begin
	}
	return l
}

// JobView is one job of the queue as the bridge understands it.
type JobView struct {
	// ID is the id scontrol takes ("123", or "45_6" for an array task);
	// RawID is the job's own id (%A), what SLURM_JOB_ID says inside it.
	ID    string
	RawID string
	User  string
	State string
	// Reason is Slurm's pending reason.
	Reason string
	// Tagged is true when the comment is a hadar tag (IsTagged).
	Tagged bool
	Tag    jobproto.Tag
	// Model is the resolved job type (a row of the matrix).
	Model string
	// Problem is why a tagged job is passed through to Slurm ("" if none).
	Problem string
	Class   JobClass
	// Held is true for a pending job hadar holds (ClassWaiting, or a
	// pass-through job not yet handed to Slurm): on a lease, or in hadar's
	// own hold (PriorityHeld).
	Held bool
	// PriorityHeld is true for a job in hadar's own priority-0 hold (see
	// hadarHoldReasons): placing it takes a release besides StartTime=now.
	PriorityHeld bool
	// Lease is the job's begin time as hadar reads it (ReadLease).
	Lease Lease
	// Priority is the job's priority in the site's policy (squeue %Q):
	// the order in which hadar starts waiting jobs.
	Priority int64
	// Waits says why a held or not-ready job waits ("" otherwise).
	Waits string
	// NumNodes and GPUsPerNode are the job's request (--nodes,
	// --gres=gpu:N); Workers is their product, the gang size.
	NumNodes    int
	GPUsPerNode int
	Workers     int
	// Nodes are the job's allocated nodes (running) or the nodes hadar
	// placed it on (launching).
	Nodes []string
	// Submit is when the job was submitted; TimeUsed its run time so far.
	Submit   time.Time
	TimeUsed time.Duration
	// ReleasedAt is when hadar released it (launching jobs).
	ReleasedAt time.Time
	// RanOn are the nodes this daemon last saw the job running on (nil
	// if it never did since it started).
	RanOn []string
	// Stranded says why a released job (launching or released) cannot
	// start where it is pinned, so hadar must take it back (hold it and
	// re-place it): its node went down or was drained, or Slurm requeued
	// it on its own (a node failure with JobRequeue=1, a plain requeue)
	// and would restart it without hadar. "" otherwise.
	Stranded string
	// CopyOf is the copies job (CopyGroup.ID, the array id) this array
	// task is a copy of; "" for other jobs (copies.go).
	CopyOf string
	// Request is the tagged job's whole request (request.go).
	Request Request
	// GresSite is the GPU type its Gres names now (squeue %b; "" for
	// untyped): the user's, or the one hadar set to place it on a node
	// used per type.
	GresSite string
	// TimeLimit is the job's --time as scontrol shows it (0: unknown).
	TimeLimit time.Duration
	// PriorOnly: its model is one no matrix knows and nothing was learned
	// of yet, so it is planned with the cross-model prior, whose ratios
	// between GPU types are an estimate but whose steps/s are the median
	// model's, not this one's (plannedWork plans its duration by time).
	PriorOnly bool
	// AdminComment is the job's admin comment when scontrol's record was
	// read (AdminCommentKnown), so that the round updates it only when its
	// text changes.
	AdminComment      string
	AdminCommentKnown bool
}

// NodeView is one node as the bridge understands it.
type NodeView struct {
	Name  string
	State string
	// Schedulable is slurm.Node.Schedulable: not drained, down, ...
	Schedulable bool
	// SiteTypes are the configured GPUs by the site's type names.
	SiteTypes map[string]int
	// Type is the canonical GPU type when the node has exactly one GPU type
	// and its name resolves; "" otherwise.
	Type string
	// Pools are the GPU types of a node with several, one per type, when
	// hadar can tell Slurm which type a job gets (ViewInput.Retype): each
	// is offered to the policy as a node of its own type. Nil otherwise.
	Pools []GPUPool
	// Total GPUs configured; Used allocated to any job; Hadar allocated to
	// running hadar jobs hadar may re-plan; Reserved held for launching
	// hadar jobs.
	Total, Used, Hadar, Reserved int
	// StaleUsed are GPUs Slurm's GresUsed counts on a node that runs no
	// job (no CPU allocated, no job of the queue on it): counted free, not
	// in Used (slurmctld 22.05 leaves them after a restart when jobs ended
	// while it was down, while its scheduler does use them).
	StaleUsed int
	// Usable says whether hadar places work here; Why says why not.
	Usable bool
	Why    string
	// Transient: not usable now only because it does not answer (not
	// drained, not down by an admin): it counts for what jobs can run.
	Transient bool
	// CPUTot/CPUAlloc and MemTot/MemAlloc (MB) are Slurm's figures (0: not
	// reported); HadarCPUs/HadarMem are held by running hadar jobs hadar may
	// re-plan, ReservedCPUs/ReservedMem by launching ones.
	CPUTot, CPUAlloc, HadarCPUs, ReservedCPUs int
	MemTot, MemAlloc, HadarMem, ReservedMem   int64
}

// GPUPool is one GPU type of a node with several types.
type GPUPool struct {
	// Site is the node's own name of the type (its gres.conf Type=), what
	// a job's Gres must name; Type is the canonical type.
	Site, Type string
	// Total, Used, Hadar and Reserved are NodeView's figures for this
	// type alone (Used from the node's GresUsed, which Slurm counts per
	// type).
	Total, Used, Hadar, Reserved int
}

// TypePools are the node's GPUs by canonical type: its Pools, or the one
// type of a single-type node (none when its type is unknown).
func (n NodeView) TypePools() []GPUPool {
	if n.Pools != nil {
		return n.Pools
	}
	if n.Type == "" {
		return nil
	}
	site := ""
	for s := range n.SiteTypes {
		site = s
	}
	return []GPUPool{{Site: site, Type: n.Type, Total: n.Total, Used: n.Used, Hadar: n.Hadar, Reserved: n.Reserved}}
}

// pool is the node's pool of canonical type t, or nil.
func (n *NodeView) pool(t string) *GPUPool {
	for i := range n.Pools {
		if n.Pools[i].Type == t {
			return &n.Pools[i]
		}
	}
	return nil
}

// AvailableOf is Available for one of TypePools.
func (n NodeView) AvailableOf(p GPUPool) int {
	if !n.Usable {
		return 0
	}
	return availableGPUs(p.Total, p.Used, p.Hadar, p.Reserved)
}

// AvailableCPUs is the CPUs the policy may hand out on the node (0: not
// tracked), and whether any are left.
func (n NodeView) AvailableCPUs() (int, bool) {
	if n.CPUTot <= 0 {
		return 0, true
	}
	a := max(n.CPUTot-(n.CPUAlloc-n.HadarCPUs)-n.ReservedCPUs, n.HadarCPUs)
	return max(a, 0), a > 0 || n.Hadar > 0
}

// AvailableMem is AvailableCPUs for memory (MB).
func (n NodeView) AvailableMem() (int64, bool) {
	if n.MemTot <= 0 {
		return 0, true
	}
	a := max(n.MemTot-(n.MemAlloc-n.HadarMem)-n.ReservedMem, n.HadarMem)
	return max(a, 0), a > 0 || n.Hadar > 0
}

// Available is the number of GPUs the policy may hand out on the node:
// everything but other people's work and launching jobs.
func (n NodeView) Available() int {
	if !n.Usable {
		return 0
	}
	return availableGPUs(n.Total, n.Used, n.Hadar, n.Reserved)
}

// availableGPUs is what the policy may hand out of total GPUs: everything
// but other people's work (used - hadar) and launching jobs.
func availableGPUs(total, used, hadar, reserved int) int {
	a := total - (used - hadar) - reserved
	// The GPUs of hadar's running jobs are always the policy's to hand
	// out: a launching job that started between squeue and scontrol show
	// node is counted in Used and in Reserved, and must not push a node
	// with running hadar jobs out of the round.
	return max(0, hadar, min(a, total))
}

// View is one round's observation, classified.
type View struct {
	Now   time.Time
	Nodes []NodeView
	// Jobs in squeue order; byID indexes them.
	Jobs []*JobView
	byID map[string]*JobView
	node map[string]*NodeView

	// Groups are the copies jobs (HadarE on Slurm, copies.go).
	Groups []*CopyGroup

	// newTypes are the job types of unknown models this round may create
	// (ViewInput.NewTypes); nil: no bound.
	newTypes map[string]bool
}

// Job returns the job with scontrol id id, or nil.
func (v *View) Job(id string) *JobView { return v.byID[id] }

// Node returns the node named name, or nil.
func (v *View) Node(name string) *NodeView { return v.node[name] }

// TaggedIDs is the set of ids of tagged jobs in this observation: the only
// jobs the bridge may act on.
func (v *View) TaggedIDs() map[string]bool {
	out := map[string]bool{}
	for _, j := range v.Jobs {
		if j.Tagged {
			out[j.ID] = true
		}
	}
	return out
}

// Placed is what the state database remembers of a job hadar released.
type Placed = statedb.Placement

// ViewInput is what BuildView classifies.
type ViewInput struct {
	Now   time.Time
	Jobs  []slurm.Job
	Nodes []slurm.Node
	// ResolveGPU maps a site GRES type name to a canonical GPU type.
	ResolveGPU func(site string) (string, error)
	// Models resolves model= names; DefaultModel is used for jobs whose
	// model is missing or unknown. Without one, an unknown model is a new
	// job type planned with PriorFor's rates (the cross-model prior) until
	// its progress teaches hadar its own; with neither, it is passed
	// through.
	Models       *jobproto.ModelResolver
	DefaultModel string
	PriorFor     func(jobType string) map[string]map[int]float64
	// Throughput is the matrix: a model with no rate on any usable GPU
	// type is passed through.
	Throughput optimizer.Throughputs
	// Details are scontrol's records of the jobs, by Job.ID
	// (slurm.JoinDetails); nil when they could not be read this round, and
	// then requests are read from squeue alone (no --gpus, features,
	// --exclude, CPUs or memory).
	Details map[string]slurm.JobDetail
	// Placed are the jobs hadar placed and released, from the state
	// database (launching jobs).
	Placed map[string]Placed
	// RanOn are the nodes each job was last seen running on by this
	// daemon (Bridge keeps them in memory; nil after a restart).
	RanOn map[string][]string
	// Notes receives messages worth logging (default model used, ...).
	Notes func(jobID, msg string)
	// Retype is set when Slurm replaces a pending job's GPU type on
	// `scontrol update Gres=` (Slurm 24.11; 22.05 adds the new type to the
	// old one): nodes with several GPU types are then used per type
	// (NodeView.Pools), and hadar sets the type of a job it places there.
	Retype bool
	// NewTypes bounds the job types of unknown models (planned with
	// PriorFor's rates) the round may create; zero: no bound.
	NewTypes NewTypeLimits
	// Requested are the GPU requests (squeue %b, e.g. "gpu:2") of the jobs
	// whose Gres hadar rewrote, as their users submitted them (the state
	// database's record): the job's request is read from these, not from
	// the type hadar set.
	Requested map[string]string
	// Lease is the length of job_submit.lua's begin-time lease (hadar.toml
	// lease): a pending tagged job's begin time minus it is its user's own
	// --begin (ReadLease). Zero: jobproto.DefaultLease.
	Lease time.Duration
}

// NewTypeLimits bound the job types a round creates for models no matrix
// knows ([models] new_per_round, new_per_user): each stays in the
// throughput database once learned, so users' names must not grow it
// without bound. Zero: no bound.
type NewTypeLimits struct {
	PerRound, PerUser int
}

// unknownModel is the job type a tagged job's model gets when no matrix
// knows it and the round plans it with the prior (classifyTagged), or "".
func unknownModel(j *slurm.Job, in ViewInput) string {
	if in.DefaultModel != "" || in.PriorFor == nil {
		return ""
	}
	tag, err := jobproto.ParseTag(j.Comment)
	if err != nil {
		return ""
	}
	model := tag.Model
	if model == "" {
		model = strings.TrimSpace(j.Name)
	}
	if model == "" {
		return ""
	}
	if in.Models != nil {
		if _, err := in.Models.Resolve(model); err == nil || errors.Is(err, jobproto.ErrAmbiguousModel) {
			return ""
		}
	}
	return jobproto.UnknownModelType(model)
}

// grantNewTypes picks the new job types of unknown models the round may
// create within in.NewTypes, oldest job first: a type already in the
// matrix is not new, and one granted for a job serves every job of that
// model. nil when there is no bound.
func grantNewTypes(in ViewInput) map[string]bool {
	lim := in.NewTypes
	if lim.PerRound <= 0 && lim.PerUser <= 0 {
		return nil
	}
	type want struct {
		jobType, user, id string
		submit            time.Time
	}
	var wants []want
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if !jobproto.IsTagged(j.Comment) {
			continue
		}
		jt := unknownModel(j, in)
		if _, known := in.Throughput[jt]; jt == "" || known {
			continue
		}
		wants = append(wants, want{jt, j.User, j.ID(), j.SubmitTime})
	}
	sort.SliceStable(wants, func(a, b int) bool {
		if !wants[a].submit.Equal(wants[b].submit) {
			return wants[a].submit.Before(wants[b].submit)
		}
		return wants[a].id < wants[b].id
	})
	granted, perUser := map[string]bool{}, map[string]int{}
	for _, w := range wants {
		if granted[w.jobType] ||
			(lim.PerRound > 0 && len(granted) >= lim.PerRound) || (lim.PerUser > 0 && perUser[w.user] >= lim.PerUser) {
			continue
		}
		granted[w.jobType] = true
		perUser[w.user]++
	}
	return granted
}

// BuildView classifies an observation. It is pure.
func BuildView(in ViewInput) *View {
	v := &View{Now: in.Now, byID: map[string]*JobView{}, node: map[string]*NodeView{}, newTypes: grantNewTypes(in)}
	if in.Lease <= 0 {
		in.Lease = jobproto.DefaultLease
	}
	note := in.Notes
	if note == nil {
		note = func(string, string) {}
	}
	occupied := OccupiedNodes(in.Jobs)
	for _, n := range in.Nodes {
		v.Nodes = append(v.Nodes, nodeView(n, in, occupied[n.Name]))
	}
	sort.Slice(v.Nodes, func(a, b int) bool { return v.Nodes[a].Name < v.Nodes[b].Name })
	for i := range v.Nodes {
		v.node[v.Nodes[i].Name] = &v.Nodes[i]
	}

	live := v.liveNodes()

	for i := range in.Jobs {
		j := &in.Jobs[i]
		jv := &JobView{ID: j.ID(), RawID: j.JobID, User: j.User, State: j.State, Reason: j.Reason,
			NumNodes: max(j.NumNodes, 1), Submit: j.SubmitTime, TimeUsed: j.TimeUsed}
		jv.Lease = ReadLease(*j, in.Now, in.Lease)
		jv.PriorityHeld = j.State == "PENDING" && hadarHoldReasons[j.Reason]
		jv.Priority = j.Priority
		if _, dup := v.byID[jv.ID]; dup {
			continue // the parser already drops duplicates; be safe
		}
		v.byID[jv.ID] = jv
		v.Jobs = append(v.Jobs, jv)
		if !jobproto.IsTagged(j.Comment) {
			jv.Class = ClassUntagged
			jv.Nodes = j.Nodes
			continue
		}
		jv.Tagged = true
		jv.RanOn = in.RanOn[jv.ID]
		var detail *slurm.JobDetail
		if d, ok := in.Details[jv.ID]; ok {
			detail = &d
		}
		jv.Problem = v.classifyTagged(j, detail, jv, in, in.Nodes, live, note)
		if jv.Problem != "" {
			jv.Class = ClassPassThrough
			jv.Nodes = j.Nodes
			// hadar still holds it while its lease or hadar's own hold
			// is on: handing it to Slurm ends them (passThroughActions).
			// Not before its user's begin time: its begin time is then
			// the user's plus the lease, kept until the user's passed.
			jv.Held = jv.PriorityHeld || !jv.Lease.Until.IsZero() && jv.Lease.UserBegin.IsZero()
			continue
		}
		p, placed := in.Placed[jv.ID]
		placed = placed && len(p.Nodes) > 0
		switch {
		case j.State != "PENDING":
		case ownerHoldReasons[j.Reason]:
			jv.Class = ClassHeld
			jv.Waits = "held by its owner or an admin (" + j.Reason + "); hadar plans it once they release it"
		case jv.PriorityHeld:
			jv.Class, jv.Held = ClassWaiting, true
		case placed:
			jv.Class = ClassLaunching
			jv.Nodes = p.Nodes
			jv.ReleasedAt = p.ReleasedAt
			for _, name := range p.Nodes {
				if n := v.node[name]; n == nil || !n.Usable {
					jv.Stranded = fmt.Sprintf("node %s, where it was placed, is not usable", name)
					if n != nil {
						jv.Stranded += " (" + n.Why + ")"
					}
					break
				}
			}
			if jv.Stranded == "" && nodesUnavailable(j.Reason) {
				jv.Stranded = fmt.Sprintf("Slurm cannot start it on the node(s) it is pinned to (%s)", j.Reason)
			}
		case j.Dependency != "" || dependencyReasons[j.Reason]:
			jv.Class = ClassNotReady
			jv.Waits = "waits for its dependency"
			if j.Dependency != "" {
				jv.Waits += " (" + j.Dependency + ")"
			}
		case !jv.Lease.UserBegin.IsZero():
			jv.Class = ClassNotReady
			jv.Waits = "begins at " + jv.Lease.UserBegin.Format(time.DateTime) + " (its --begin)"
		default:
			// On hadar's lease, or a lease that ran out before Slurm
			// started the job: hadar's to place either way.
			jv.Class, jv.Held = ClassWaiting, true
		}
		switch {
		case j.State == "PENDING":
		case j.State == "RUNNING" || j.State == "CONFIGURING":
			jv.Nodes = j.Nodes
			jv.Class = ClassRunning
			if len(j.Nodes) != jv.NumNodes {
				jv.Class = ClassPinned
			}
			for _, name := range j.Nodes {
				if n := v.node[name]; n == nil || !n.Usable || v.typeOn(jv, name) == "" {
					// Not on a node hadar uses, or on a node used per
					// type with a request that names none of its types
					// (Slurm chose the type): hadar cannot re-plan it.
					jv.Class = ClassPinned
				}
			}
		default:
			jv.Nodes = j.Nodes
			jv.Class = ClassPinned
		}
	}
	hadarE.group(v)
	for _, jv := range v.Jobs {
		for _, name := range jv.Nodes {
			n := v.node[name]
			if n == nil {
				continue
			}
			p := n.pool(v.typeOn(jv, name))
			switch jv.Class {
			case ClassRunning:
				n.Hadar += jv.GPUsPerNode
				n.HadarCPUs += jv.Request.CPUsPerNode
				n.HadarMem += jv.Request.MemMBPerNode
				if p != nil {
					p.Hadar += jv.GPUsPerNode
				}
			case ClassLaunching:
				n.Reserved += jv.GPUsPerNode
				n.ReservedCPUs += jv.Request.CPUsPerNode
				n.ReservedMem += jv.Request.MemMBPerNode
				if p != nil {
					p.Reserved += jv.GPUsPerNode
				}
			}
		}
	}
	return v
}

// OccupiedNodes returns the nodes a job of the queue that is not pending
// is on.
func OccupiedNodes(jobs []slurm.Job) map[string]bool {
	occupied := map[string]bool{}
	for _, j := range jobs {
		if j.State != "PENDING" {
			for _, name := range j.Nodes {
				occupied[name] = true
			}
		}
	}
	return occupied
}

// StaleGresUsed reports whether the GPUs Slurm's GresUsed counts on n are a
// stale count, free in truth: every job holds at least one CPU, so GPUs
// counted used on a node with none allocated and no job on it (occupied:
// OccupiedNodes) belong to no job. slurmctld 22.05 leaves such counts after
// a restart when jobs ended while it was down, and its scheduler starts jobs
// on those GPUs (checked on 22.05.8).
func StaleGresUsed(n slurm.Node, occupied bool) bool {
	return n.CPUAlloc == 0 && !occupied
}

// nodeView is what the round sees of node n: its GPUs by site type, its
// canonical type or per-type pools, and why hadar does not use it, if so.
// occupied: a job of the queue (not pending) is on the node.
func nodeView(n slurm.Node, in ViewInput, occupied bool) NodeView {
	nv := NodeView{Name: n.Name, State: n.State, Schedulable: n.Schedulable(), SiteTypes: map[string]int{},
		CPUTot: n.CPUTot, CPUAlloc: n.CPUAlloc, MemTot: n.RealMemory, MemAlloc: n.AllocMem}
	for site, c := range slurm.GPUsByType(n.Gres) {
		nv.SiteTypes[site] += c
		nv.Total += c
	}
	used := n.GresUsed
	for _, c := range slurm.GPUsByType(used) {
		nv.Used += c
	}
	if nv.Used > 0 && StaleGresUsed(n, occupied) {
		nv.StaleUsed, nv.Used, used = nv.Used, 0, nil
	}
	switch {
	case nv.Total == 0:
		nv.Why = "no GPUs"
	case !nv.Schedulable:
		nv.Why = "not schedulable (" + n.RawState + ")"
		nv.Transient = transientNode(n)
		// Its type still counts for what the cluster can run (a node
		// is down or drained for a while, e.g. every node answers
		// late just after slurmctld restarts): jobs wait for it
		// rather than being handed to Slurm for good.
		if len(nv.SiteTypes) == 1 {
			for site := range nv.SiteTypes {
				if t, err := in.ResolveGPU(site); site != "" && err == nil {
					nv.Type = t
				}
			}
		} else if in.Retype {
			nv.Pools, _ = typePools(nv.SiteTypes, used, in.ResolveGPU)
		}
	case len(nv.SiteTypes) > 1 && !in.Retype:
		nv.Why = "several GPU types (Slurm would choose the type)"
	case len(nv.SiteTypes) > 1:
		nv.Pools, nv.Why = typePools(nv.SiteTypes, used, in.ResolveGPU)
	default:
		for site := range nv.SiteTypes {
			if site == "" {
				nv.Why = "untyped GPU GRES (type unknown)"
				break
			}
			t, err := in.ResolveGPU(site)
			if err != nil || t == "" {
				nv.Why = fmt.Sprintf("GPU type %q unknown (add it to [gres] aliases)", site)
				break
			}
			nv.Type = t
		}
	}
	nv.Usable = nv.Why == ""
	return nv
}

// typePools reads a node with several GPU types as one pool per type.
// Every type must resolve, to distinct canonical types: a job's Gres
// names one site type, and hadar must know which canonical type it gets.
func typePools(sites map[string]int, used []slurm.GRES, resolve func(string) (string, error)) ([]GPUPool, string) {
	usedBy := slurm.GPUsByType(used)
	var pools []GPUPool
	seen := map[string]string{}
	for _, site := range slices.Sorted(maps.Keys(sites)) {
		if site == "" {
			return nil, "untyped GPU GRES beside typed ones (type unknown)"
		}
		t, err := resolve(site)
		if err != nil || t == "" {
			return nil, fmt.Sprintf("GPU type %q unknown (add it to [gres] aliases)", site)
		}
		if other, dup := seen[t]; dup {
			return nil, fmt.Sprintf("GPU types %q and %q are both %s", other, site, t)
		}
		seen[t] = site
		pools = append(pools, GPUPool{Site: site, Type: t, Total: sites[site], Used: usedBy[site]})
	}
	sort.Slice(pools, func(a, b int) bool { return pools[a].Type < pools[b].Type })
	return pools, ""
}

// typeOn is the canonical GPU type job jv holds (or is placed to hold) on
// node name: the node's one type or, on a node used per type, the pool its
// Gres names; "" when that is not known.
func (v *View) typeOn(jv *JobView, name string) string {
	n := v.node[name]
	if n == nil {
		return ""
	}
	if n.Pools == nil {
		return n.Type
	}
	for _, p := range n.Pools {
		if p.Site == jv.GresSite && jv.GresSite != "" {
			return p.Type
		}
	}
	return ""
}

// nodesUnavailable reports whether a pending reason says the job's
// required nodes are down, drained or gone.
func nodesUnavailable(reason string) bool {
	return strings.HasPrefix(reason, "ReqNodeNotAvail") || reason == "NodeDown" ||
		strings.HasPrefix(reason, "Nodes_required_for_job_are_DOWN")
}

// classifyTagged reads a tagged job's tag and request and returns why
// hadar cannot schedule it ("" if it can).
func (v *View) classifyTagged(j *slurm.Job, d *slurm.JobDetail, jv *JobView, in ViewInput, nodes []slurm.Node,
	live []optimizer.Node, note func(string, string)) string {
	if j.CommentTruncated {
		return "the comment is longer than squeue shows (512 bytes); shorten the tag"
	}
	if j.Incomplete {
		return "Slurm's record of the job could not be fully read"
	}
	tag, err := jobproto.ParseTag(j.Comment)
	if err != nil {
		return err.Error()
	}
	jv.Tag = tag
	req, problem := v.readRequest(j, d, jv, in, nodes)
	req = v.keepOffPools(req)
	jv.Request = req
	if problem != "" {
		return problem
	}
	jv.GPUsPerNode = req.GPUsPerNode
	jv.Workers = jv.GPUsPerNode * jv.NumNodes
	if d != nil {
		jv.TimeLimit = d.TimeLimit
		jv.AdminComment, jv.AdminCommentKnown = d.AdminComment, true
	}
	model := tag.Model
	if model == "" {
		// The job name names the model when the tag does not
		// (sbatch -J resnet50 --comment=hadar).
		model = strings.TrimSpace(j.Name)
	}
	var jt string
	if model == "" {
		err = fmt.Errorf("no model= in the tag and no job name")
	} else if in.Models != nil {
		jt, err = in.Models.Resolve(model)
	} else {
		err = fmt.Errorf("unknown model %q", jobproto.Clip(model))
	}
	if err != nil {
		switch {
		case in.DefaultModel != "":
			note(jv.ID, fmt.Sprintf("%v: using default_model %q", err, in.DefaultModel))
			jt = in.DefaultModel
		case in.PriorFor != nil && model != "" && !errors.Is(err, jobproto.ErrAmbiguousModel):
			// A model no matrix knows: a job type of its own, on the
			// prior's rates, learned from its progress.
			jt = jobproto.UnknownModelType(model)
			if jt == "" {
				return err.Error()
			}
			_, known := in.Throughput[jt]
			if !known && v.newTypes != nil && !v.newTypes[jt] {
				return fmt.Sprintf("%v, and no new job type may be made for it this round (at most %d a round, %d per user)",
					err, in.NewTypes.PerRound, in.NewTypes.PerUser)
			}
			jv.PriorOnly = true
			if !known {
				for gt, byW := range in.PriorFor(jt) {
					for w, r := range byW {
						in.Throughput.Set(jt, gt, w, r)
					}
				}
			}
			note(jv.ID, fmt.Sprintf("%v: planned with the cross-model prior until its progress is learned", err))
		default:
			return err.Error()
		}
	}
	jv.Model = jt
	return v.infeasible(jv, in.Throughput, live)
}

// transientNode reports whether a node is out only because it does not
// answer: not responding or down with no admin's drain, as every node is
// for a while after slurmctld restarts.
func transientNode(n slurm.Node) bool {
	notResponding := false
	for _, f := range n.Flags {
		switch f {
		case "DRAIN", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN":
			return false
		case "NOT_RESPONDING":
			notResponding = true
		}
	}
	return notResponding && n.State != "drained" && n.State != "draining"
}

// placementString renders a node list with GPUs per node, for logs and the
// database: "node1:2,node2:2", or "-" for none.
func placementString(nodes []string, perNode int) string {
	if len(nodes) == 0 {
		return "-"
	}
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s:%d", n, perNode)
	}
	return strings.Join(parts, ",")
}
