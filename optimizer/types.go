package optimizer

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Node is a set of GPUs of one type that the policy may hand out this round.
// A site node with two GPU types is presented as one Node per type by the
// bridge; GPUs used by work hadar does not manage are already subtracted.
type Node struct {
	Name string
	// Type is the canonical GPU type (a key of the throughput matrix).
	Type string
	// GPUs is the number of GPUs of Type on this node available to hadar.
	GPUs int
	// CPUs and MemMB are the node's CPUs and memory (MB) available to
	// hadar's jobs; 0 means not tracked (no limit). A node listed once per
	// GPU type gives the same figures on each entry.
	CPUs  int   `json:",omitempty"`
	MemMB int64 `json:",omitempty"`
}

// Shape is how a job's gang must be laid out, as its Slurm request says;
// the zero value lets the policy split the gang over nodes freely (Gavel's
// model, the simulator's traces).
type Shape struct {
	// Nodes and GPUsPerNode ask for exactly Nodes nodes with GPUsPerNode
	// GPUs each (--nodes x --gres=gpu:N); GPUsPerNode 0 means any split.
	Nodes       int `json:",omitempty"`
	GPUsPerNode int `json:",omitempty"`
	// Types are the GPU types the job may run on (a typed request, or
	// features that name GPU types); empty means any.
	Types []string `json:",omitempty"`
	// Eligible are the nodes the job may run on (its features, --exclude,
	// --nodelist and partition); nil means any.
	Eligible map[string]bool `json:",omitempty"`
	// CPUsPerNode and MemMBPerNode are what the job needs on each of its
	// nodes; 0 means nothing to check.
	CPUsPerNode  int   `json:",omitempty"`
	MemMBPerNode int64 `json:",omitempty"`
}

// Free reports whether the shape leaves the layout to the policy.
func (sh *Shape) Free() bool {
	return sh.GPUsPerNode <= 0 && len(sh.Types) == 0 && sh.Eligible == nil && sh.CPUsPerNode <= 0 && sh.MemMBPerNode <= 0
}

// AllowsType reports whether the job may run on GPU type h.
func (sh *Shape) AllowsType(h string) bool {
	if len(sh.Types) == 0 {
		return true
	}
	for _, t := range sh.Types {
		if t == h {
			return true
		}
	}
	return false
}

// AllowsNode reports whether the job may use node n at all: its type and
// name are allowed, and, where the node tracks them, it has the CPUs and
// memory one of the job's nodes needs.
func (sh *Shape) AllowsNode(n Node) bool {
	if !sh.AllowsType(n.Type) || (sh.Eligible != nil && !sh.Eligible[n.Name]) {
		return false
	}
	if sh.CPUsPerNode > 0 && n.CPUs > 0 && n.CPUs < sh.CPUsPerNode {
		return false
	}
	if sh.MemMBPerNode > 0 && n.MemMB > 0 && n.MemMB < sh.MemMBPerNode {
		return false
	}
	return true
}

// FitsType reports whether a gang of workers GPUs of this shape can be laid
// out on the nodes of type h among nodes, taking each node's GPUs as free.
// It is the one feasibility rule: the policies use it on the round's free
// GPUs, the bridge on whole live nodes to pass through a job no node can
// ever hold.
func (sh *Shape) FitsType(nodes []Node, h string, workers int) bool {
	if !sh.AllowsType(h) || workers <= 0 {
		return false
	}
	if sh.GPUsPerNode <= 0 {
		total := 0
		for _, n := range nodes {
			if n.Type == h && sh.AllowsNode(n) {
				total += n.GPUs
			}
		}
		return total >= workers
	}
	count := 0
	for _, n := range nodes {
		if n.Type == h && n.GPUs >= sh.GPUsPerNode && sh.AllowsNode(n) {
			count++
		}
	}
	return count >= max(sh.Nodes, 1)
}

// Task is one piece of a job's placement: GPUs GPUs of type Type on node Node.
type Task struct {
	Node string
	Type string
	GPUs int
	// Copy numbers a HadarE copy (1..k); 0 for an ordinary job, whose tasks
	// together form one synchronous gang.
	Copy int `json:",omitempty"`
	// Steps is a HadarE copy's share of the job's steps this round.
	Steps float64 `json:",omitempty"`
}

// RemainingEstimate is the work a job estimated at est steps in all is taken
// to have left once it has done done steps: est - done within its estimate;
// past it (a user's steps= too low, a time limit taken for the duration) as
// much again as it has overrun so far, and never less than 5% of the
// estimate. Job lengths are heavy-tailed, so a job that has outrun its
// estimate is likely to run on; a fixed floor made it look about to finish
// round after round, and so neither critical nor worth a faster type. The
// daemon (bridge.BuildSnapshot, for ordinary and copies jobs) and the
// simulator's noisy estimates (sim.Config.StepNoise) all use it.
func RemainingEstimate(est, done float64) float64 {
	return math.Max(est-done, math.Max(0.05*est, done-est))
}

// Job is a job as the policy sees it at the start of a round.
type Job struct {
	ID string
	// Type is the job type, the row of the throughput matrix ("ResNet-50 (batch size 64)").
	Type string
	// Workers is the gang size the job asked for (Gavel's scale factor).
	Workers int
	Arrival time.Time
	// TotalSteps and RemainingSteps measure the job's work in training steps.
	TotalSteps     float64
	RemainingSteps float64
	// Weight is the job's priority weight (1 unless set).
	Weight float64
	// Attained is the service received so far in GPU-seconds (LAS, Tiresias).
	Attained float64
	// Executed is the wall time the job has run so far, in seconds.
	Executed float64
	// Current is the placement the job holds now (empty if it is not running).
	Current []Task
	// MaxCopies bounds the number of HadarE copies (0 or 1: no copies).
	MaxCopies int
	// Shape is the layout the job's request allows (zero: any).
	Shape Shape `json:",omitempty"`
	// NoStop: a running job may be moved but not stopped (the site's
	// preemption is off): every plan keeps it running (see Guard).
	NoStop bool `json:",omitempty"`
	// Limits are the keys of the site's limits (Snapshot.Limits) the job
	// counts against: its QOS's, its association's and its ancestors'.
	Limits []string `json:",omitempty"`
	// Priority is the site's priority of the job (Slurm's, higher first):
	// with Options.SiteOrder it decides which waiting jobs start when GPUs
	// are short (SiteOrder). Jobs of equal priority form a tier among
	// which the policy chooses.
	Priority int64 `json:",omitempty"`
	// NoMove: a running job that cannot resume where it is moved (it
	// reports no progress, so it may not checkpoint): every plan keeps it
	// where it runs, whatever a move would save (KeepNoStop). It implies
	// NoStop.
	NoMove bool `json:",omitempty"`
}

// Snapshot is everything a policy may look at.
type Snapshot struct {
	// Now is the start of the round being planned.
	Now time.Time
	// Round is the length of a round.
	Round time.Duration
	Nodes []Node
	// Jobs are the jobs waiting or running, in no particular order.
	Jobs       []Job
	Throughput Throughputs
	// Confirmed holds the cells of Throughput that this cluster measured
	// (learned values that took over from the prior's or an imported
	// one); nil when the driver does not say, which turns Hadar's probes
	// off.
	Confirmed Throughputs
	// FastestFirst optionally caches TypesFastestFirst for drivers that plan
	// many rounds over the same matrix and cluster; nil means compute it.
	FastestFirst []string
	// MidRound says the driver plans again within the round it planned
	// last (the daemon looks again soon after a requeue, or on an arrival,
	// to start what waited). A policy that works in whole rounds (Gavel's
	// mechanism) keeps its last round's choices then; event-driven
	// policies plan as in any round.
	MidRound bool
	// Limits are what the site's GPU and running-job limits (QOS and
	// association: MaxTRESPerUser, GrpTRES, MaxJobsPerUser, GrpJobs, ...)
	// leave for jobs that start now, by key (Job.Limits); nil: none known.
	// No plan starts jobs beyond them (KeepLimits), since Slurm would not
	// start them: their GPUs would idle until launch_timeout.
	Limits map[string]Limit `json:",omitempty"`
	// NoPreemption: the site stops no running job (hadar-slurmd with
	// preemption = false, its default), so a job started now keeps its
	// GPUs until it ends, unless a move saves more than the migration
	// penalty; every running job is then NoStop.
	NoPreemption bool
}

// Limit is what one of the site's limits leaves for jobs that start now.
type Limit struct {
	// GPUs and Jobs left; -1: that resource is not limited.
	GPUs, Jobs int64
	// Reason is Slurm's pending reason for a job over it
	// (QOSMaxGRESPerUser, AssocGrpGRES, ...).
	Reason string
}

// limitsAdmit reports whether starting job j leaves every limit it counts
// against within bounds, and if not, why; with take, it charges them.
func limitsAdmit(j *Job, left map[string]Limit, take bool) (bool, string) {
	for _, k := range j.Limits {
		l, ok := left[k]
		if !ok {
			continue
		}
		if (l.GPUs >= 0 && l.GPUs < int64(j.Workers)) || l.Jobs == 0 {
			return false, fmt.Sprintf("%s (%s)", l.Reason, k)
		}
	}
	if take {
		for _, k := range j.Limits {
			l, ok := left[k]
			if !ok {
				continue
			}
			if l.GPUs >= 0 {
				l.GPUs -= int64(j.Workers)
			}
			if l.Jobs > 0 {
				l.Jobs--
			}
			left[k] = l
		}
	}
	return true, ""
}

// JobRate is job j's whole-job rate on GPU type h with workers GPUs, or 0
// when its shape does not allow h or no nodes of type h in the snapshot can
// hold its gang: the rate every policy ranks types by.
func (s *Snapshot) JobRate(j *Job, h string, workers int) float64 {
	if !j.Shape.Free() && !j.Shape.FitsType(s.Nodes, h, j.Workers) {
		return 0
	}
	return s.Throughput.Rate(j.Type, h, workers)
}

// Plan assigns tasks to jobs for the next round. A job absent from
// Assignments does not run in that round.
type Plan struct {
	Assignments map[string][]Task
	// Waits says why a waiting job the plan does not start waits, where a
	// rule outside the policy decided it (SiteOrder); nil otherwise.
	Waits map[string]string `json:",omitempty"`
}

// NewPlan returns an empty plan.
func NewPlan() *Plan { return &Plan{Assignments: map[string][]Task{}} }

// Assign adds tasks to job id.
func (p *Plan) Assign(id string, tasks ...Task) {
	p.Assignments[id] = append(p.Assignments[id], tasks...)
}

// GPUs returns the number of GPUs assigned to job id.
func (p *Plan) GPUs(id string) int { return TaskGPUs(p.Assignments[id]) }

// TaskGPUs sums the GPUs of tasks.
func TaskGPUs(tasks []Task) int {
	n := 0
	for _, t := range tasks {
		n += t.GPUs
	}
	return n
}

// Capacity returns the number of GPUs per type over all nodes.
func (s *Snapshot) Capacity() map[string]int {
	c := map[string]int{}
	for _, n := range s.Nodes {
		c[n.Type] += n.GPUs
	}
	return c
}

// Types returns the GPU types present in the snapshot's nodes, sorted by
// name for determinism.
func (s *Snapshot) Types() []string {
	var ts []string
	for t := range s.Capacity() {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// TypesFastestFirst orders the snapshot's GPU types by their mean throughput
// over the jobs' types, fastest first (v100, p100, k80 on Gavel's data).
func (s *Snapshot) TypesFastestFirst() []string {
	if s.FastestFirst != nil {
		return append([]string(nil), s.FastestFirst...)
	}
	types := s.Types()
	score := map[string]float64{}
	for _, h := range types {
		score[h] = s.Throughput.TypeSpeed(h)
	}
	sort.SliceStable(types, func(a, b int) bool {
		if score[types[a]] != score[types[b]] {
			return score[types[a]] > score[types[b]]
		}
		return types[a] < types[b]
	})
	return types
}

// Elapsed returns the time from the job's arrival to the snapshot, in seconds.
func (s *Snapshot) Elapsed(j *Job) float64 { return s.Now.Sub(j.Arrival).Seconds() }
