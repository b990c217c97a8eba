package optimizer

import (
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
	// FastestFirst optionally caches TypesFastestFirst for drivers that plan
	// many rounds over the same matrix and cluster; nil means compute it.
	FastestFirst []string
}

// Plan assigns tasks to jobs for the next round. A job absent from
// Assignments does not run in that round.
type Plan struct {
	Assignments map[string][]Task
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
