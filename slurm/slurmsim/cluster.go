package slurmsim

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/slurm"
)

// RateFunc is the truth: the steps/s a job of model runs at on workers GPUs
// of gpuType (a site GRES type, as the node names it); 0 when it cannot run
// there (toyjob then fails, as `hadar profiles rate` finds no rate).
type RateFunc func(model, gpuType string, workers int) float64

// Timing are the delays of Slurm and of the jobs, in virtual time.
type Timing struct {
	// SchedDelay is the time from an event (submission, release, update,
	// job end) to the scheduling pass that may start jobs (measured: a
	// released job RUNNING in 0.4-1 s).
	SchedDelay time.Duration
	// BackfillInterval is bf_interval: jobs behind one that cannot start
	// are started by the backfill pass, at multiples of it (default 2 s).
	BackfillInterval time.Duration
	// RequeueDelay is how long a requeued job's old allocation lasts
	// (its processes are killed, the node cleans up) after requeuehold.
	RequeueDelay time.Duration
	// EligibleDelay is the begin time a requeue sets when it completes,
	// counted from then (22.05: 120 s, cred_expire).
	EligibleDelay time.Duration
	// StartupDelay is the time from RUNNING to the job's first tick
	// (slurmstepd, toyjob reading its GPU type and rate).
	StartupDelay time.Duration
	// Tick is toyjob's TOYJOB_TICK (default 2 s); TickOverhead what each
	// tick costs beyond its sleep (its awk and `hadar report`).
	Tick, TickOverhead time.Duration
	// CommandDelay is what each command (squeue, scontrol) takes.
	CommandDelay time.Duration
	// Lease is job_submit.lua's begin-time lease of a tagged job
	// (HADAR_LEASE_SECONDS; default jobproto.DefaultLease).
	Lease time.Duration
}

// Measured is the timing measured on the test cluster (Slurm 22.05 on
// this project's 2-core machine) with toyjob at TOYJOB_TICK=tick: a
// released job runs 0.4-1 s later (bf_interval=2); a requeue completes
// within about a second, then sets a begin time 120 s on; toyjob's start
// (slurmstepd, squeue, scontrol, `hadar profiles rate`) takes about a
// second and each tick's awk and `hadar report` 20-90 ms beyond its sleep
// (the demo's 24 s jobs run 26-29 s on their fastest type; its 4-GPU
// k80 job, 250 ticks, ran 263 s with the machine at load 19); squeue and
// scontrol take 10-100 ms.
func Measured(tick time.Duration) Timing {
	return Timing{SchedDelay: 500 * time.Millisecond, BackfillInterval: 2 * time.Second,
		RequeueDelay: time.Second, EligibleDelay: 120 * time.Second, StartupDelay: time.Second,
		Tick: tick, TickOverhead: 50 * time.Millisecond, CommandDelay: 30 * time.Millisecond}
}

// Config configures a Cluster.
type Config struct {
	// Layout are the nodes; each gets CPUs CPUs and MemoryMB of memory
	// (defaults 8 and 4000, as contrib/testcluster renders them), in
	// partition "gpu", with its GPU types as features.
	Layout   Layout
	CPUs     int
	MemoryMB int64
	// Start is the virtual time the cluster starts at.
	Start time.Time
	// Spool, if set, is where training jobs report their progress
	// (Spool/progress/ID.json), as `hadar report --spool` writes it.
	Spool string
	// Rate is the truth for training jobs (JobSpec.Model).
	Rate RateFunc
	// Startup, if set, is a training job's start-up by its model, in place
	// of Timing.StartupDelay (a real model's is longer than toyjob's).
	Startup func(model string) time.Duration
	Timing

	// Limits are the site's accounting limits (sacctmgr's associations
	// and QOS, enforced as AccountingStorageEnforce=limits,qos does); nil
	// for a cluster without accounting. Jobs count against them by their
	// user, account and QOS (JobSpec).
	Limits *slurm.Limits
	// Priority is priority/multifactor's fairshare and age; zero: jobs
	// are ordered by age alone.
	Priority Multifactor
	// Usage is the accounts' past usage at Start, in decayed GPU-seconds
	// (sshare's RawUsage, in GPU-seconds), for the fairshare factor.
	Usage map[string]float64
	// Reservations are the site's reservations (Name, Start, End, Nodes,
	// Flags, Users); State is set as time passes.
	Reservations []slurm.Reservation
	// DefaultTime is the partition's DefaultTime: the time limit of a job
	// submitted without one (0: none). A job that runs past its time limit
	// ends in state TIMEOUT.
	DefaultTime time.Duration
}

// JobSpec is what sbatch is given.
type JobSpec struct {
	Name, User string
	// Account and QOS are --account and --qos; with accounting (Config.Limits)
	// a job without them gets its user's association's account and its
	// default QOS.
	Account, QOS string
	// Begin is --begin (zero: none): the job is not started before it.
	// Hold is sbatch -H: the job is held by its user (JobHeldUser).
	Begin time.Time
	Hold  bool
	// Comment is --comment; a hadar tag makes job_submit.lua give the job
	// a begin-time lease (Timing.Lease).
	Comment string
	// NumNodes (default 1) and GPUsPerNode: --nodes and --gres=gpu:N, or
	// --gres=gpu:TYPE:N with GPUType. GPUsPerJob is --gpus instead.
	NumNodes, GPUsPerNode, GPUsPerJob int
	GPUType                           string
	// Features is --constraint (one feature), Exclude --exclude (a comma
	// list), CPUs and MemoryMB per node (defaults 1 and 0).
	Features, Exclude string
	CPUs              int
	MemoryMB          int64
	TimeLimit         time.Duration
	// ArrayJob and ArrayTask make the job a task of an array ("28", "0"):
	// squeue shows it as 28_0, its own id stays its JobID.
	ArrayJob, ArrayTask string
	// Model and Steps make it a training job (toyjob MODEL STEPS): it runs
	// until it has done Steps steps at the cluster's Rate. Otherwise it
	// runs for Duration (0: until Finish).
	Model    string
	Steps    float64
	Duration time.Duration
}

// Job states.
const (
	Pending   = "PENDING"
	Running   = "RUNNING"
	Completed = "COMPLETED"
	Failed    = "FAILED"
	Cancelled = "CANCELLED"
	Timeout   = "TIMEOUT"
)

// Held reasons, as squeue's %r shows them.
const (
	ReasonHeldUser  = "JobHeldUser"
	ReasonHeldAdmin = "JobHeldAdmin"
	ReasonRequeued  = "job requeued in held state"
)

// Run is one run of a job: where, from when to when.
type Run struct {
	Nodes []string
	// GPUs are the GPUs it held by type; Type is the GPU type of its first
	// node (the one toyjob paces itself by).
	GPUs       map[string]int
	Type       string
	Start, End time.Time
}

// Job is a job as the cluster keeps it.
type Job struct {
	ID    string
	Spec  JobSpec
	State string
	// Reason is why it waits (squeue's %r), "None" when it runs.
	Reason       string
	Held         bool
	heldReason   string
	Submit       time.Time
	Begin        time.Time
	FirstStart   time.Time
	End          time.Time
	ReqNodes     []string
	Nodes        []string
	AdminComment string
	Restarts     int
	Releases     int
	// Runs are its runs so far, the current one last.
	Runs []Run

	prio       int
	gresRaw    string // squeue's %b, once asked for
	alloc      []grant
	gen        int
	completing time.Time // a requeue's old allocation lasts until then
	// requeuedAt and requeuedFrom: the last requeue's time and nodes (a
	// launch there in the same second fails, see start).
	requeuedAt   time.Time
	requeuedFrom []string
	// training progress: resume is the steps at the start of the run, done
	// the steps of its last report.
	resume, rate float64
	tickStart    time.Time
	done         float64
	doneAt       time.Time
	written      time.Time
}

// grant is part of an allocation: count GPUs of one group of a node.
type grant struct {
	node, group, gpus, cpus int
	mem                     int64
}

type node struct {
	LayoutNode
	raw      string // admin state flags ("DRAIN", "DOWN"), "" for none
	features []string
	cpus     int
	mem      int64
}

// Cluster is the in-memory Slurm. It is safe for concurrent use.
type Cluster struct {
	mu       sync.Mutex
	cfg      Config
	now      time.Time
	nodes    []*node
	jobs     map[string]*Job
	order    []string
	active   []string // the ids of order that may be pending or running (liveOrder)
	ghosts   []ghost
	events   eventQueue
	seq      int
	nextID   int
	nextPrio int
	schedAt  time.Time // pending scheduling pass (zero: none)
	bfAt     time.Time // pending backfill pass
	// use is what the live allocations take of each node, nil when an
	// allocation changed since it was counted (usage).
	use []nodeUse
	// live counts the jobs pending or running.
	live int
	// acctUsage is the accounts' decayed usage in GPU-seconds at usageAt
	// (accrue).
	acctUsage map[string]float64
	usageAt   time.Time
}

// nodeUse is what the live allocations take of one node.
type nodeUse struct {
	gpus   []int // per GPU group
	cpus   int
	mem    int64
	grants int
}

// ghost is the allocation of a requeued job until its requeue completes.
type ghost struct {
	job   *Job
	gen   int
	until time.Time
	alloc []grant
}

// New returns a cluster of cfg's layout at cfg.Start.
func New(cfg Config) *Cluster {
	if cfg.CPUs <= 0 {
		cfg.CPUs = 8
	}
	if cfg.MemoryMB <= 0 {
		cfg.MemoryMB = 4000
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 2 * time.Second
	}
	if cfg.BackfillInterval <= 0 {
		cfg.BackfillInterval = 2 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = jobproto.DefaultLease
	}
	c := &Cluster{cfg: cfg, now: cfg.Start, jobs: map[string]*Job{}, nextID: 100, nextPrio: 1 << 30,
		acctUsage: map[string]float64{}, usageAt: cfg.Start}
	for a, u := range cfg.Usage {
		c.acctUsage[a] = u
	}
	for _, r := range cfg.Reservations {
		c.push(event{at: r.End, kind: evBegin}) // its nodes are free again
	}
	for _, ln := range cfg.Layout {
		n := &node{LayoutNode: ln, cpus: cfg.CPUs, mem: cfg.MemoryMB}
		for _, g := range ln.GPUs {
			n.features = append(n.features, g.Type)
		}
		c.nodes = append(c.nodes, n)
	}
	return c
}

// SetNodeState sets a node's admin state ("DRAIN", "DOWN", "" for none),
// shown after its allocation state ("IDLE+DRAIN"); jobs do not start on a
// drained or down node.
func (c *Cluster) SetNodeState(name, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.node(name); n != nil {
		n.raw = state
	}
	c.kick()
}

// Now is the cluster's virtual time (bridge.Clock).
func (c *Cluster) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After advances the virtual time by d, running everything that happens
// meanwhile, and returns a channel that holds the new time (bridge.Clock).
func (c *Cluster) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.advance(c.now.Add(d))
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

// AdvanceTo advances the virtual time to t (no earlier than now).
func (c *Cluster) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(t)
}

// Step advances the virtual time to the next event and runs it; false when
// nothing more will happen.
func (c *Cluster) Step() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		return false
	}
	c.advance(c.events[0].at)
	return true
}

// Busy reports whether a job is pending or running, or a submission is to come.
func (c *Cluster) Busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if e.kind == evSubmit {
			return true
		}
	}
	for _, j := range c.jobs {
		if j.State == Pending || j.State == Running {
			return true
		}
	}
	return false
}

// Submit submits a job now, as sbatch would, and returns its id.
func (c *Cluster) Submit(spec JobSpec) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.submit(spec)
}

// SubmitAt submits a job at virtual time at (now if it has passed); its id
// is given when it is submitted, in the order of submission, and returned
// by Records.
func (c *Cluster) SubmitAt(at time.Time, spec JobSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !at.After(c.now) {
		c.submit(spec)
		return
	}
	s := spec
	c.push(event{at: at, kind: evSubmit, spec: &s})
}

func (c *Cluster) submit(spec JobSpec) string {
	c.nextID++
	id := fmt.Sprint(c.nextID)
	spec.NumNodes = max(spec.NumNodes, 1)
	spec.CPUs = max(spec.CPUs, 1)
	if spec.User == "" {
		spec.User = "root"
	}
	if spec.TimeLimit <= 0 {
		spec.TimeLimit = c.cfg.DefaultTime
	}
	c.account(&spec)
	j := &Job{ID: id, Spec: spec, State: Pending, Reason: "Priority", Submit: c.now, Begin: c.now}
	if spec.Begin.After(c.now) {
		j.Begin = spec.Begin
	}
	if tagged(spec.Comment) {
		j.Begin = j.Begin.Add(c.cfg.Lease)
	}
	if j.Begin.After(c.now) {
		c.push(event{at: j.Begin, kind: evBegin})
	}
	if spec.Hold {
		j.Held, j.heldReason = true, ReasonHeldUser
	}
	c.prioritize(j)
	c.jobs[id] = j
	c.order = append(c.order, id)
	c.active = append(c.active, id)
	c.live++
	c.kick()
	return id
}

// tagged is job_submit.lua's rule for hadar's jobs.
func tagged(comment string) bool { return comment == "hadar" || strings.HasPrefix(comment, "hadar ") }

// prioritize gives a job priority/basic's next priority: lower than every
// job's before it (a release gives a new one, so it lowers the job's).
func (c *Cluster) prioritize(j *Job) {
	c.nextPrio--
	j.prio = c.nextPrio
}

// Job returns a copy of job id's record (nil if there is none).
func (c *Cluster) Job(id string) *Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[id]
	if j == nil {
		return nil
	}
	cp := *j
	cp.Runs = slices.Clone(j.Runs)
	return &cp
}

// Records returns every job ever submitted, in submission order (copies).
func (c *Cluster) Records() []Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Job, 0, len(c.order))
	for _, id := range c.order {
		cp := *c.jobs[id]
		cp.Runs = slices.Clone(cp.Runs)
		out = append(out, cp)
	}
	return out
}

// Finish ends a running job now (it completes), as if it had exited.
func (c *Cluster) Finish(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := c.jobs[id]; j != nil && j.State == Running {
		c.end(j, Completed)
	}
}

// --- events ---

type eventKind int

const (
	evSubmit eventKind = iota
	evSched
	evBackfill
	evEnd
	evRequeued
	evBegin
	evTimeout
)

type event struct {
	at   time.Time
	seq  int
	kind eventKind
	job  *Job
	gen  int
	spec *JobSpec
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(a, b int) bool {
	if !q[a].at.Equal(q[b].at) {
		return q[a].at.Before(q[b].at)
	}
	return q[a].seq < q[b].seq
}
func (q eventQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (c *Cluster) push(e event) {
	c.seq++
	e.seq = c.seq
	heap.Push(&c.events, e)
}

// advance runs every event up to t, then sets the time to t.
func (c *Cluster) advance(t time.Time) {
	for len(c.events) > 0 && !c.events[0].at.After(t) {
		e := heap.Pop(&c.events).(event)
		if e.at.After(c.now) {
			c.now = e.at
		}
		c.handle(e)
	}
	if t.After(c.now) {
		c.now = t
	}
}

func (c *Cluster) handle(e event) {
	switch e.kind {
	case evSubmit:
		c.submit(*e.spec)
	case evSched:
		c.schedAt = time.Time{}
		c.schedule(false)
	case evBackfill:
		c.bfAt = time.Time{}
		c.schedule(true)
	case evEnd:
		if e.job.gen == e.gen && e.job.State == Running {
			state := Completed
			if e.job.Spec.Model != "" && e.job.rate <= 0 {
				state = Failed
			}
			c.end(e.job, state)
		}
	case evRequeued:
		c.requeued(e.job, e.gen)
	case evBegin:
		c.kick()
	case evTimeout:
		if e.job.gen == e.gen && e.job.State == Running {
			c.end(e.job, Timeout)
		}
	}
}

// kick asks for a scheduling pass SchedDelay from now (one at a time).
func (c *Cluster) kick() {
	at := c.now.Add(c.cfg.SchedDelay)
	if !c.schedAt.IsZero() && !c.schedAt.After(at) {
		return
	}
	c.schedAt = at
	c.push(event{at: at, kind: evSched})
}

// backfillLater asks for the next backfill pass.
func (c *Cluster) backfillLater() {
	bf := c.cfg.BackfillInterval
	k := c.now.Sub(c.cfg.Start)/bf + 1
	at := c.cfg.Start.Add(k * bf)
	if !c.bfAt.IsZero() && !c.bfAt.After(at) {
		return
	}
	c.bfAt = at
	c.push(event{at: at, kind: evBackfill})
}

// liveOrder returns the ids of the pending and running jobs in submission
// order: the jobs squeue, scontrol and the scheduler look at, which in a
// long trace are a small part of all jobs. A job that ended never runs
// again (a requeue is of a running job), so the list only shrinks.
func (c *Cluster) liveOrder() []string {
	if len(c.active) != c.live {
		c.active = slices.DeleteFunc(c.active, func(id string) bool {
			st := c.jobs[id].State
			return st != Pending && st != Running
		})
	}
	return c.active
}

// --- scheduling ---

// schedule is Slurm's pass: pending jobs that are not held and whose begin
// time has come, in priority order; each starts if it fits, until the first
// that does not (the main scheduler) or through all of them (backfill).
func (c *Cluster) schedule(backfill bool) {
	var queue []*Job
	for _, id := range c.liveOrder() {
		j := c.jobs[id]
		if j.State != Pending || j.Held {
			continue
		}
		if j.Begin.After(c.now) {
			j.Reason = "BeginTime"
			continue
		}
		if c.now.Before(j.completing) {
			j.Reason = "Resources"
			continue
		}
		queue = append(queue, j)
	}
	if c.cfg.Priority.On() {
		c.accrue()
		prio := make(map[*Job]int64, len(queue))
		for _, j := range queue {
			prio[j] = c.multifactor(j)
		}
		// Equal priorities: submission order (queue's).
		slices.SortStableFunc(queue, func(a, b *Job) int { return cmp.Compare(prio[b], prio[a]) })
	} else {
		slices.SortStableFunc(queue, func(a, b *Job) int { return b.prio - a.prio })
	}
	blocked := false
	for _, j := range queue {
		alloc, reason := c.fit(j)
		if why := c.overLimit(j, alloc); why != "" {
			// A job over a limit waits without holding up the queue.
			j.Reason = why
			continue
		}
		switch {
		case alloc == nil:
			j.Reason = reason
			if !blocked {
				blocked = true
			} else if j.Reason == "Resources" {
				j.Reason = "Priority"
			}
		case blocked && !backfill:
			j.Reason = "Priority"
			c.backfillLater()
		default:
			c.start(j, alloc)
		}
	}
}

// fit returns where job j would run now, or nil and why it cannot.
func (c *Cluster) fit(j *Job) ([]grant, string) {
	if len(j.ReqNodes) > 0 {
		var alloc []grant
		for _, name := range j.ReqNodes {
			i := c.nodeIndex(name)
			if i < 0 || !c.allows(j, c.nodes[i]) {
				return nil, "BadConstraints"
			}
			if c.reserved(j, c.nodes[i]) {
				return nil, "ReqNodeNotAvail, UnavailableNodes:" + name
			}
			g := c.room(j, i)
			if g == nil {
				return nil, "Resources"
			}
			alloc = append(alloc, g...)
		}
		return alloc, ""
	}
	// select/cons_tres's best fit: the usable nodes with the fewest free
	// CPUs first (in layout order among equals), as many as the job needs.
	type cand struct {
		grants []grant
		cpus   int
	}
	var cands []cand
	possible := false
	for i, n := range c.nodes {
		if !c.allows(j, n) {
			continue
		}
		possible = true
		if c.reserved(j, n) {
			continue
		}
		if g := c.room(j, i); g != nil {
			cands = append(cands, cand{g, c.freeCPUs(i)})
		}
	}
	if len(cands) < j.Spec.NumNodes {
		if !possible {
			return nil, "BadConstraints"
		}
		return nil, "Resources"
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return a.cpus - b.cpus })
	var alloc []grant
	for _, cd := range cands[:j.Spec.NumNodes] {
		alloc = append(alloc, cd.grants...)
	}
	return alloc, ""
}

// gpusPerNode is what the job takes on each of its nodes.
func (j *Job) gpusPerNode() int {
	if j.Spec.GPUsPerNode > 0 || j.Spec.GPUsPerJob == 0 {
		return j.Spec.GPUsPerNode
	}
	return (j.Spec.GPUsPerJob + j.Spec.NumNodes - 1) / j.Spec.NumNodes
}

// allows is Slurm's check of the job's own limits against a node (not its
// current load).
func (c *Cluster) allows(j *Job, n *node) bool {
	if j.Spec.Exclude != "" && slices.Contains(strings.Split(j.Spec.Exclude, ","), n.Name) {
		return false
	}
	if j.Spec.Features != "" && !slices.Contains(n.features, j.Spec.Features) {
		return false
	}
	total := 0
	for _, g := range n.GPUs {
		if j.Spec.GPUType == "" || g.Type == j.Spec.GPUType {
			total += g.Count
		}
	}
	if total < j.gpusPerNode() {
		return false
	}
	return (n.cpus == 0 || n.cpus >= j.Spec.CPUs) && (n.mem == 0 || n.mem >= j.Spec.MemoryMB)
}

// room returns the grants of node i for job j, or nil if it has no room now.
func (c *Cluster) room(j *Job, i int) []grant {
	n := c.nodes[i]
	if strings.Contains(n.raw, "DRAIN") || strings.Contains(n.raw, "DOWN") {
		return nil
	}
	if c.freeCPUs(i) < j.Spec.CPUs || (n.mem > 0 && n.mem-c.usedMem(i) < j.Spec.MemoryMB) {
		return nil
	}
	want := j.gpusPerNode()
	var out []grant
	first := true
	for g, grp := range n.GPUs {
		if want == 0 {
			break
		}
		if j.Spec.GPUType != "" && grp.Type != j.Spec.GPUType {
			continue
		}
		free := grp.Count - c.usedGPUs(i, g)
		if take := min(free, want); take > 0 {
			out = append(out, grant{node: i, group: g, gpus: take})
			want -= take
		}
	}
	if want > 0 {
		return nil
	}
	if len(out) == 0 {
		out = append(out, grant{node: i, group: -1})
	}
	for k := range out {
		if first {
			out[k].cpus, out[k].mem = j.Spec.CPUs, j.Spec.MemoryMB
			first = false
		}
	}
	return out
}

// allocs calls fn with every live allocation (running jobs and requeues
// still completing).
func (c *Cluster) allocs(fn func(grant)) {
	for _, j := range c.jobs {
		if j.State == Running {
			for _, g := range j.alloc {
				fn(g)
			}
		}
	}
	for _, gh := range c.ghosts {
		for _, g := range gh.alloc {
			fn(g)
		}
	}
}

// usage is what the live allocations take of each node, counted once
// after every change of an allocation (a scheduling pass and every poll
// look at every node).
func (c *Cluster) usage() []nodeUse {
	if c.use != nil {
		return c.use
	}
	use := make([]nodeUse, len(c.nodes))
	for i, n := range c.nodes {
		use[i].gpus = make([]int, len(n.GPUs))
	}
	c.allocs(func(g grant) {
		u := &use[g.node]
		if g.group >= 0 {
			u.gpus[g.group] += g.gpus
		}
		u.cpus += g.cpus
		u.mem += g.mem
		u.grants++
	})
	c.use = use
	return use
}

// changed marks the nodes' usage to be counted again.
func (c *Cluster) changed() { c.use = nil }

func (c *Cluster) usedGPUs(i, group int) int { return c.usage()[i].gpus[group] }

func (c *Cluster) freeCPUs(i int) int {
	n := c.nodes[i].cpus
	if n == 0 {
		return math.MaxInt32
	}
	return n - c.usage()[i].cpus
}

func (c *Cluster) usedMem(i int) int64 { return c.usage()[i].mem }

func (c *Cluster) node(name string) *node {
	if i := c.nodeIndex(name); i >= 0 {
		return c.nodes[i]
	}
	return nil
}

func (c *Cluster) nodeIndex(name string) int {
	for i, n := range c.nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// start runs job j on alloc.
func (c *Cluster) start(j *Job, alloc []grant) {
	c.accrue()
	j.State, j.Reason, j.alloc = Running, "None", alloc
	c.changed()
	j.Nodes = nil
	r := Run{GPUs: map[string]int{}, Start: c.now}
	for _, g := range alloc {
		name := c.nodes[g.node].Name
		if !slices.Contains(j.Nodes, name) {
			j.Nodes = append(j.Nodes, name)
		}
		if g.group >= 0 {
			t := c.nodes[g.node].GPUs[g.group].Type
			r.GPUs[t] += g.gpus
			if r.Type == "" {
				r.Type = t
			}
		}
	}
	r.Nodes = slices.Clone(j.Nodes)
	j.Runs = append(j.Runs, r)
	if j.FirstStart.IsZero() {
		j.FirstStart = c.now
	}
	j.gen++
	// A node's slurmd refuses a launch credential created in the second
	// the job was requeued from it ("Killing non-startable batch JobId=N:
	// Job credential revoked", seen on 24.11): the job fails.
	if c.now.Unix() <= j.requeuedAt.Unix() &&
		slices.ContainsFunc(j.Nodes, func(n string) bool { return slices.Contains(j.requeuedFrom, n) }) {
		j.rate = 0 // it never trained: no report from the last run's rate
		c.end(j, Failed)
		return
	}
	var end time.Time
	switch {
	case j.Spec.Model != "":
		end = c.startTraining(j, r.Type)
	case j.Spec.Duration > 0:
		end = c.now.Add(c.cfg.StartupDelay + j.Spec.Duration)
	default:
		end = time.Time{} // runs until Finish
	}
	if !end.IsZero() {
		c.push(event{at: end, kind: evEnd, job: j, gen: j.gen})
	}
	if j.Spec.TimeLimit > 0 {
		c.push(event{at: c.now.Add(j.Spec.TimeLimit), kind: evTimeout, job: j, gen: j.gen})
	}
}

// end stops a running job in state.
func (c *Cluster) end(j *Job, state string) {
	c.accrue()
	if j.Spec.Model != "" {
		c.report(j, c.now)
	}
	j.State, j.Reason, j.End = state, "None", c.now
	c.live--
	j.Runs[len(j.Runs)-1].End = c.now
	j.alloc = nil
	c.changed()
	j.gen++
	c.kick()
}

// requeued completes a requeue: the old allocation ends and the job's begin
// time is set EligibleDelay on (over any StartTime given meanwhile).
func (c *Cluster) requeued(j *Job, gen int) {
	c.ghosts = slices.DeleteFunc(c.ghosts, func(g ghost) bool { return g.job == j && g.gen == gen })
	c.changed()
	if j.State == Pending {
		j.Begin = c.now.Add(c.cfg.EligibleDelay)
		c.push(event{at: j.Begin, kind: evBegin})
	}
	c.kick()
}
