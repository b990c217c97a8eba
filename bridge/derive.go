package bridge

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// DecisionKind is what the bridge decided for one job in a round.
type DecisionKind string

const (
	// DecidePlace: a waiting job is placed (NodeList) and started
	// (StartTime=now, which ends its lease).
	DecidePlace DecisionKind = "place"
	// DecideMigrate: a running job is requeued, placed elsewhere, released.
	DecideMigrate DecisionKind = "migrate"
	// DecidePreempt: a running job is requeued and held (preemption = true).
	DecidePreempt DecisionKind = "preempt"
	// DecideKeep: a running job stays where it is.
	DecideKeep DecisionKind = "keep"
	// DecideWait: a waiting job keeps its lease (the policy did not
	// schedule it).
	DecideWait DecisionKind = "wait"
	// DecideDefer: the policy scheduled a waiting job, but its placement
	// could not be carried out in Slurm (see the reason); it stays held.
	DecideDefer DecisionKind = "defer"
	// DecidePassThrough: a held tagged job hadar cannot schedule is released
	// to Slurm's own scheduler, after the jobs hadar released have started
	// (see Derive).
	DecidePassThrough DecisionKind = "pass-through"
	// DecideRehold: a job hadar started has not started within
	// launch_timeout; it gets a lease again, to be re-planned.
	DecideRehold DecisionKind = "re-hold"
	// DecideStartNow: a job hadar released waits for a begin time Slurm set
	// (22.05 sets EligibleTime to now+120 s when a requeue completes, after
	// the StartTime=now sent with the migration): StartTime=now again.
	DecideStartNow DecisionKind = "start-now"
)

// Decision is one job's outcome of a round; the bridge logs one line per
// decision that changes something (and at debug level the others).
type Decision struct {
	JobID string
	Kind  DecisionKind
	// From and To are placements as "node:gpus,..." ("-" for none).
	From, To string
	// ToNodes are the nodes of To; GPUType their GPU type(s).
	ToNodes []string
	GPUType string
	Reason  string
}

// ActionKind is one kind of Slurm update.
type ActionKind string

const (
	// ActComment: scontrol update JobId=a,b AdminComment=<Text>.
	ActComment ActionKind = "comment"
	// ActLease: scontrol update JobId=a,b StartTime=now+<Lease>: the jobs
	// wait for hadar for another lease (job_submit.lua's begin-time lease,
	// renewed; a job hadar started that did not start, taken back).
	ActLease ActionKind = "lease"
	// ActRequeueHold: scontrol requeuehold a,b.
	ActRequeueHold ActionKind = "requeuehold"
	// ActRetype: scontrol update JobId=a,b Gres=<Gres>: the GPU type (and
	// count) of pending jobs, before they are placed (Slurm 24.11; see
	// ViewInput.Retype).
	ActRetype ActionKind = "retype"
	// ActPlace: scontrol update JobId=a NodeList=<Nodes> (one job).
	ActPlace ActionKind = "place"
	// ActStartNow: scontrol update JobId=a,b StartTime=now (and
	// AdminComment=<Text>, when set).
	ActStartNow ActionKind = "start-now"
	// ActRelease: scontrol release a,b.
	ActRelease ActionKind = "release"
	// ActAwaitStart: look at the queue (squeue) until none of the jobs is
	// pending and released, i.e. each one runs, is held or has left the
	// queue; a bounded number of looks (Executor.AwaitTries). If it does not
	// succeed, every later action of the round is skipped: only the
	// pass-through jobs' comment and release come after it.
	ActAwaitStart ActionKind = "await-start"
	// ActSettle: wait RequeueSettle before the release of jobs moved
	// within a node they run on (a node used per type, Slurm 24.11). The
	// node's slurmd refuses a launch credential created in the same second
	// as the job's requeue ("Job credential revoked": the job fails), which
	// Slurm's own 120 s begin time after a requeue guards against.
	ActSettle ActionKind = "settle"
)

// RequeueSettle is how long ActSettle waits: past the second of the
// requeue, with room for the slurmd to have seen it.
const RequeueSettle = 1100 * time.Millisecond

// Action is one Slurm update of a round. Actions run in order; a place,
// start-now or release is skipped for a job whose earlier requeuehold or
// place failed in the same round, and every action after an await-start
// that did not succeed is skipped (see Executor).
type Action struct {
	Kind   ActionKind
	JobIDs []string
	// Nodes are the target nodes of a place.
	Nodes []string
	// Gres is the GPU request a retype sets ("gpu:tesla_v100:2", "gpu:2").
	Gres string
	// Text is the admin comment of a comment action.
	Text string
	// Lease is the length of a lease action; At the begin time of a begin
	// action.
	Lease time.Duration
	At    time.Time
}

// LeaseArg is the StartTime= value of a lease of length d.
func LeaseArg(d time.Duration) string {
	return fmt.Sprintf("StartTime=now+%d", int64(d.Round(time.Second)/time.Second))
}

// String renders the action as the scontrol command it stands for.
func (a Action) String() string {
	ids := strings.Join(a.JobIDs, ",")
	switch a.Kind {
	case ActComment:
		return fmt.Sprintf("scontrol update JobId=%s AdminComment=%q", ids, a.Text)
	case ActPlace:
		return fmt.Sprintf("scontrol update JobId=%s NodeList=%s", ids, strings.Join(a.Nodes, ","))
	case ActRetype:
		return fmt.Sprintf("scontrol update JobId=%s Gres=%s", ids, a.Gres)
	case ActLease:
		return fmt.Sprintf("scontrol update JobId=%s %s", ids, LeaseArg(a.Lease))
	case ActStartNow:
		if a.Text != "" {
			return fmt.Sprintf("scontrol update JobId=%s StartTime=now AdminComment=%q", ids, a.Text)
		}
		return fmt.Sprintf("scontrol update JobId=%s StartTime=now", ids)
	case ActAwaitStart:
		return fmt.Sprintf("squeue until jobs %s are not pending (started, held or gone)", ids)
	case ActSettle:
		return fmt.Sprintf("wait %s: jobs %s start again on a node they were requeued from", RequeueSettle, ids)
	default:
		return fmt.Sprintf("scontrol %s %s", a.Kind, ids)
	}
}

// DeriveParams tune Derive.
type DeriveParams struct {
	// MigrationPenalty is what the decisions of migrations cite (the plan
	// weighed it: optimizer.KeepNoStop).
	MigrationPenalty time.Duration
	// Preemption allows stopping running jobs the plan drops.
	Preemption bool
	// LaunchTimeout: a started job still pending after this gets a lease
	// again.
	LaunchTimeout time.Duration
	// Lease is the length of the begin-time lease hadar gives and renews
	// (hadar.toml lease); a lease is renewed once less than half of it is
	// left. Zero: jobproto.DefaultLease.
	Lease time.Duration
}

// Derivation is what a round will do.
type Derivation struct {
	// Plan is the plan as it will be carried out: running jobs kept where
	// they are unless moved, placements adjusted to what Slurm can do. It
	// passed optimizer.Check.
	Plan      *optimizer.Plan
	Decisions []Decision
	Actions   []Action
	// Copies are the copies jobs' plans for their copies (copies.go).
	Copies []jobproto.CopyPlan
	// HeldBack is set when the round ignored the plan (placed, moved and
	// stopped nothing) so that an overdue pass-through job can go first.
	HeldBack bool
	// Requested are the users' own GPU requests ("gpu:2") of the jobs the
	// round retypes (ActRetype), by job: the state database keeps them so
	// that the next rounds read the request the user made, not the type
	// hadar set.
	Requested map[string]string
}

// PassThroughComment is the AdminComment of a job handed to Slurm.
func PassThroughComment(reason string) string {
	return "hadar: " + reason + "; released to Slurm's scheduler"
}

// Derive turns the observed state and the policy's plan into decisions and
// the Slurm actions that carry them out. It is pure: the same inputs give
// the same output. plan may be nil (the policy failed or its plan broke an
// invariant): then only pass-throughs and re-holds are derived.
//
// Pass-through jobs never compete with hadar's placements: they are
// released last, in their own release, and only after an await-start has
// seen every job hadar released (this round or earlier) leave the pending
// state (see passThroughActions). A held pass-through job older than
// launch_timeout makes the round ignore the plan (HeldBack), so that no new
// placement can keep delaying it.
//
// Rules (see the package doc): a running job keeps its nodes unless the
// plan moves it (the plan weighed the move against the migration penalty:
// optimizer.KeepNoStop); a running job the plan drops is preempted only
// with Preemption; a waiting
// job is placed only on a shape Slurm can enforce (its own request: one
// node with all its GPUs, or its --nodes nodes with --gres GPUs each),
// re-shaped onto free nodes of the planned GPU type when the plan's
// placement is not such a shape, and deferred otherwise; only held jobs
// are released, so no job is released twice.
func Derive(v *View, s *optimizer.Snapshot, plan *optimizer.Plan, p DeriveParams) (Derivation, error) {
	if p.Lease <= 0 {
		p.Lease = jobproto.DefaultLease
	}
	r := newDeriver(v, s, plan, p)
	r.holdBackForPassThrough()
	r.running()
	r.waiting()
	if err := optimizer.Check(s, r.d.Plan); err != nil {
		return Derivation{}, fmt.Errorf("enforceable plan: %w", err)
	}
	for _, jv := range r.passThrough {
		r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecidePassThrough, From: "-", To: "-", Reason: jv.Problem})
	}
	rehold, kick := r.relaunch()
	r.actions(rehold, kick)
	if err := hadarE.check(v, r.d); err != nil {
		return Derivation{}, fmt.Errorf("enforceable plan: %w", err)
	}
	return r.d, nil
}

// deriver is one Derive: the observation, the plan, and what the round has
// decided so far (GPUs taken per node, jobs to requeue and place).
type deriver struct {
	v    *View
	s    *optimizer.Snapshot
	plan *optimizer.Plan
	p    DeriveParams
	d    Derivation

	// capacity and occ are GPUs per node and type (slotKey): a node used
	// per type has one slot per type. nodeType is the type of each node
	// with one (none for a node used per type).
	capacity map[string]int
	nodeType map[string]string
	snapJobs map[string]*optimizer.Job
	occ      map[string]int
	requeue  []string
	places   []string
	// settle are the moved jobs whose target shares a node with where
	// they run (ActSettle).
	settle     []string
	placeTasks map[string][]optimizer.Task
	copies     *copyDerivation
	// passThrough are the held jobs hadar cannot schedule; noPlan says why
	// the plan is not followed, when it is not.
	passThrough []*JobView
	noPlan      string
}

func newDeriver(v *View, s *optimizer.Snapshot, plan *optimizer.Plan, p DeriveParams) *deriver {
	r := &deriver{v: v, s: s, plan: plan, p: p, d: Derivation{Plan: optimizer.NewPlan()},
		capacity: map[string]int{}, nodeType: map[string]string{}, snapJobs: map[string]*optimizer.Job{},
		occ: map[string]int{}, placeTasks: map[string][]optimizer.Task{}, noPlan: "no plan this round"}
	for _, n := range s.Nodes {
		r.capacity[slotKey(n.Name, n.Type)] += n.GPUs
		if nv := v.Node(n.Name); nv == nil || nv.Pools == nil {
			r.nodeType[n.Name] = n.Type
		}
	}
	for i := range s.Jobs {
		r.snapJobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	return r
}

func (r *deriver) assigned(id string) []optimizer.Task {
	if r.plan == nil {
		return nil
	}
	return r.plan.Assignments[id]
}

// slotKey names a node's GPUs of one type: capacity and occ are kept per
// node and type, as the optimizer's are.
func slotKey(node, gpuType string) string { return node + "\x00" + gpuType }

// occupy adds (or with sign -1 takes back) a job's tasks to occ.
func (r *deriver) occupy(tasks []optimizer.Task, sign int) {
	for _, t := range tasks {
		r.occ[slotKey(t.Node, t.Type)] += sign * t.GPUs
	}
}

// holdBackForPassThrough collects the held jobs hadar cannot schedule. They
// wait for hadar's released jobs to start (passThroughActions); while they
// wait, new placements could keep them waiting, so once one has waited
// launch_timeout (a released job is started or held again within that),
// the round releases no new job: the plan is ignored, as if there were none.
func (r *deriver) holdBackForPassThrough() {
	for _, jv := range r.v.Jobs {
		if jv.Class == ClassPassThrough && jv.Held {
			r.passThrough = append(r.passThrough, jv)
		}
	}
	if r.plan == nil || r.p.LaunchTimeout <= 0 {
		return
	}
	for _, jv := range r.passThrough {
		// Submit is reset by a requeue; unknown counts as overdue.
		if jv.Submit.IsZero() || r.v.Now.Sub(jv.Submit) >= r.p.LaunchTimeout {
			r.plan, r.d.HeldBack = nil, true
			r.noPlan = fmt.Sprintf("held back this round: pass-through job %s has waited launch_timeout (%s) and goes first", jv.ID, r.p.LaunchTimeout)
			return
		}
	}
}

func (r *deriver) keep(jv *JobView, reason string) {
	cur := currentTasks(r.v, jv)
	r.d.Plan.Assign(jv.ID, cur...)
	r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideKeep,
		From: placementString(jv.Nodes, jv.GPUsPerNode), To: placementString(jv.Nodes, jv.GPUsPerNode),
		ToNodes: jv.Nodes, GPUType: typesOfTasks(cur), Reason: reason})
}

// running decides keep, migrate or preempt for each running job: it keeps
// its nodes unless the plan moves it and the estimated gain exceeds the
// migration penalty; a job the plan drops is preempted only with
// Preemption. Moves are taken largest gain first, while their GPUs are free.
func (r *deriver) running() {
	type candidate struct {
		jv     *JobView
		target []optimizer.Task
		gain   float64
	}
	var cands []candidate
	running := withoutCopies(jobsOfClass(r.v, ClassRunning))
	for _, jv := range running {
		r.occupy(currentTasks(r.v, jv), 1)
	}
	// Copies jobs (copies.go): running copies go on or stop first.
	r.copies = hadarE.derive(r.v, r.s, r.plan, r.p, r.nodeType, r.capacity, r.occ, &r.d)
	r.requeue = append(r.requeue, r.copies.stops...)
	for _, jv := range running {
		tasks := r.assigned(jv.ID)
		if len(tasks) == 0 {
			if r.plan != nil && r.p.Preemption {
				r.occupy(currentTasks(r.v, jv), -1)
				r.requeue = append(r.requeue, jv.ID)
				r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecidePreempt,
					From: placementString(jv.Nodes, jv.GPUsPerNode), To: "-", Reason: "the policy gives its GPUs to other jobs"})
				continue
			}
			reason := "the policy did not schedule it this round; preemption is off"
			if r.plan == nil {
				reason = r.noPlan
			}
			r.keep(jv, reason)
			continue
		}
		target, _, ok := enforceable(tasks, jv, r.s.Throughput)
		cur := currentTasks(r.v, jv)
		switch {
		case ok && sameTasks(target, cur):
			r.keep(jv, "the policy keeps it here")
		case !ok:
			r.keep(jv, "the planned move cannot be carried out in Slurm")
		default:
			// The policy's moves are made as planned: the plan weighed
			// them (a job that may not be stopped moves only when that
			// saves more than migration_penalty, optimizer.KeepNoStop;
			// hadar weighs its own moves the same way), and a move to a
			// slower type frees GPUs the plan gives to another job.
			gain := migrationGain(r.s.Throughput, r.snapJobs[jv.ID], jv.Model, jv.Workers, cur, target)
			cands = append(cands, candidate{jv, target, gain})
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].gain > cands[b].gain })
	moved := r.movable(len(cands), func(i int) ([]optimizer.Task, []optimizer.Task) {
		return currentTasks(r.v, cands[i].jv), cands[i].target
	})
	for i, c := range cands {
		jv := c.jv
		if !moved[i] {
			r.keep(jv, fmt.Sprintf("the GPUs of %s are not free", tasksPlacement(c.target)))
			continue
		}
		r.requeue = append(r.requeue, jv.ID)
		r.places = append(r.places, jv.ID)
		r.placeTasks[jv.ID] = c.target
		if slices.ContainsFunc(taskNodes(c.target), func(n string) bool { return slices.Contains(jv.Nodes, n) }) {
			r.settle = append(r.settle, jv.ID)
		}
		r.d.Plan.Assign(jv.ID, c.target...)
		r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideMigrate,
			From: placementString(jv.Nodes, jv.GPUsPerNode), To: tasksPlacement(c.target),
			ToNodes: taskNodes(c.target), GPUType: typesOfTasks(c.target),
			Reason: fmt.Sprintf("saves about %s (migration penalty %s)", fmtSeconds(c.gain), r.p.MigrationPenalty)})
	}
}

// movable decides which of n planned moves (move i: from cur to target,
// in priority order) are made, and leaves occ with the GPUs the round's
// running jobs then hold. The round requeues every moved job before it
// places any, so a move may take GPUs another move frees: plans that swap
// jobs or move them in a chain are carried out as planned. A move whose
// target is not free stays where it is; its GPUs are then taken back, and a
// move that needed them is given up too (the least important first), until
// no GPU is booked twice.
func (r *deriver) movable(n int, move func(i int) (cur, target []optimizer.Task)) []bool {
	ok := make([]bool, n)
	for i := range n {
		cur, _ := move(i)
		r.occupy(cur, -1)
	}
	fits := func(tasks []optimizer.Task) bool {
		for _, t := range tasks {
			if r.occ[slotKey(t.Node, t.Type)]+t.GPUs > r.capacity[slotKey(t.Node, t.Type)] {
				return false
			}
		}
		return true
	}
	for i := range n {
		if _, target := move(i); fits(target) {
			r.occupy(target, 1)
			ok[i] = true
		}
	}
	for i := range n {
		if !ok[i] {
			cur, _ := move(i)
			r.occupy(cur, 1)
		}
	}
	overbooked := func(tasks []optimizer.Task) bool {
		for _, t := range tasks {
			if k := slotKey(t.Node, t.Type); r.occ[k] > r.capacity[k] {
				return true
			}
		}
		return false
	}
	for {
		undo := -1
		for i := n - 1; i >= 0 && undo < 0; i-- {
			if _, target := move(i); ok[i] && overbooked(target) {
				undo = i
			}
		}
		if undo < 0 {
			return ok
		}
		cur, target := move(undo)
		r.occupy(target, -1)
		r.occupy(cur, 1)
		ok[undo] = false
	}
}

// waiting places the waiting jobs the plan schedules, in the site's
// priority order (then oldest first), on the
// plan's nodes when Slurm can enforce them and they are free, else by the
// optimizer's placement rule on free nodes of the planned types; a job that
// fits nowhere there is deferred to the next round (no other GPU type: the
// type is the policy's decision). New copies come last: they use what the
// other jobs leave.
func (r *deriver) waiting() {
	waiting := withoutCopies(jobsOfClass(r.v, ClassWaiting))
	sort.SliceStable(waiting, func(a, b int) bool {
		if waiting[a].Priority != waiting[b].Priority {
			return waiting[a].Priority > waiting[b].Priority
		}
		if !waiting[a].Submit.Equal(waiting[b].Submit) {
			return waiting[a].Submit.Before(waiting[b].Submit)
		}
		return waiting[a].ID < waiting[b].ID
	})
	fits := func(tasks []optimizer.Task) bool {
		for _, t := range tasks {
			if k := slotKey(t.Node, t.Type); r.occ[k]+t.GPUs > r.capacity[k] {
				return false
			}
		}
		return len(tasks) > 0
	}
	for _, jv := range waiting {
		tasks := r.assigned(jv.ID)
		if len(tasks) == 0 {
			reason := "the policy did not schedule it this round"
			switch {
			case r.plan == nil:
				reason = r.noPlan
			case r.plan.Waits[jv.ID] != "":
				reason = r.plan.Waits[jv.ID]
			}
			r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideWait, From: "-", To: "-", Reason: reason})
			continue
		}
		target, types, ok := enforceable(tasks, jv, r.s.Throughput)
		reason := "the policy's placement"
		if !ok || !fits(target) {
			planned := tasksString(tasks)
			free := freeNodes(r.s, r.d.Plan, r.snapJobs, r.occ, r.capacity)
			target = fitNodes(r.snapJobs[jv.ID], free, types)
			reason = fmt.Sprintf("planned %s; re-shaped to the job's request of %d node(s) x %d GPUs", planned, jv.NumNodes, jv.GPUsPerNode)
			if target == nil {
				r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideDefer, From: "-", To: "-",
					Reason: fmt.Sprintf("planned %s, which is not free or which Slurm cannot enforce for a request of %d node(s) x %d GPUs, and no free node(s) of that type hold it", planned, jv.NumNodes, jv.GPUsPerNode)})
				continue
			}
		}
		r.occupy(target, 1)
		r.places = append(r.places, jv.ID)
		r.placeTasks[jv.ID] = target
		r.d.Plan.Assign(jv.ID, target...)
		r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecidePlace, From: "-",
			To: tasksPlacement(target), ToNodes: taskNodes(target), GPUType: typesOfTasks(target), Reason: reason})
	}
	r.copies.placeCopies(r.capacity, r.occ, &r.d)
	r.places = append(r.places, r.copies.places...)
	for id, nodes := range r.copies.placeNodes {
		tasks := make([]optimizer.Task, len(nodes))
		for i, n := range nodes {
			tasks[i] = optimizer.Task{Node: n, Type: r.nodeType[n]}
		}
		r.placeTasks[id] = tasks
	}
	r.d.Copies = r.copies.plans(r.s.Round)
}

// relaunch decides for the jobs hadar released that have not started:
// held again (rehold) when launch_timeout passed, when they are stranded
// (their node went down or was drained; Slurm requeued them on its own), or
// when a requeue after they started left them with a begin time; started
// now (kick) when the begin time is the end of hadar's own migration.
func (r *deriver) relaunch() (rehold, kick []string) {
	for _, jv := range jobsOfClass(r.v, ClassLaunching) {
		if r.p.LaunchTimeout > 0 && !jv.ReleasedAt.IsZero() && r.v.Now.Sub(jv.ReleasedAt) > r.p.LaunchTimeout {
			rehold = append(rehold, jv.ID)
			r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideRehold,
				From: placementString(jv.Nodes, jv.GPUsPerNode), To: "-",
				Reason: fmt.Sprintf("released %s ago and still pending (launch_timeout %s)", fmtSeconds(r.v.Now.Sub(jv.ReleasedAt).Seconds()), r.p.LaunchTimeout)})
		}
	}
	for _, jv := range r.v.Jobs {
		if jv.Class == ClassLaunching && jv.Stranded != "" && !slices.Contains(rehold, jv.ID) {
			rehold = append(rehold, jv.ID)
			r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideRehold,
				From: placementString(jv.Nodes, jv.GPUsPerNode), To: "-", Reason: jv.Stranded + "; given a lease again, to be re-placed"})
		}
	}
	// A begin time on a job hadar released: a requeue completed after our
	// StartTime=now. Start it now if this is hadar's migration to other
	// nodes than the job last ran on. Otherwise (it started where hadar
	// placed it and someone requeued it, or this daemon never saw it run)
	// it is held and placed again next round: starting a job again on the
	// node it was just requeued from races the node's revocation of its old
	// credential ("Job credential revoked": the job fails), which Slurm's
	// own 120 s begin time guards against.
	for _, jv := range jobsOfClass(r.v, ClassLaunching) {
		if jv.Lease.Until.IsZero() || slices.Contains(rehold, jv.ID) {
			continue
		}
		if len(jv.RanOn) == 0 || sameNodes(jv.RanOn, jv.Nodes) {
			rehold = append(rehold, jv.ID)
			r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideRehold,
				From: placementString(jv.Nodes, jv.GPUsPerNode), To: "-",
				Reason: "requeued after it started (or not seen running since it was placed); given a lease again, to be placed again once its old run has ended"})
			continue
		}
		kick = append(kick, jv.ID)
		r.d.Decisions = append(r.d.Decisions, Decision{JobID: jv.ID, Kind: DecideStartNow,
			From: placementString(jv.Nodes, jv.GPUsPerNode), To: placementString(jv.Nodes, jv.GPUsPerNode),
			ToNodes: jv.Nodes, GPUType: typesOfTasks(currentTasks(r.v, jv)),
			Reason: "released, but Slurm delays its start (BeginTime, set when its requeue completed)"})
	}
	return rehold, kick
}

// actions turns the decisions into Slurm updates, in execution order.
// A placed job is started by StartTime=now, which ends its lease; only a
// job in hadar's own hold (a migration's requeuehold) is also released.
func (r *deriver) actions(rehold, kick []string) {
	d := &r.d
	if lease := r.leases(rehold); len(lease) > 0 {
		d.Actions = append(d.Actions, Action{Kind: ActLease, JobIDs: lease, Lease: r.p.Lease})
	}
	if len(r.requeue) > 0 {
		d.Actions = append(d.Actions, Action{Kind: ActRequeueHold, JobIDs: r.requeue})
	}
	places := r.places
	sort.Strings(places)
	d.Actions = append(d.Actions, r.retypes(places)...)
	for _, id := range places {
		d.Actions = append(d.Actions, Action{Kind: ActPlace, JobIDs: []string{id}, Nodes: taskNodes(r.placeTasks[id])})
	}
	if start := append(append([]string(nil), places...), kick...); len(start) > 0 {
		sort.Strings(start)
		d.Actions = append(d.Actions, Action{Kind: ActStartNow, JobIDs: start, Text: PlacedComment})
	}
	if len(r.settle) > 0 {
		sort.Strings(r.settle)
		d.Actions = append(d.Actions, Action{Kind: ActSettle, JobIDs: r.settle})
	}
	var release []string
	for _, id := range places {
		if jv := r.v.Job(id); slices.Contains(r.requeue, id) || (jv != nil && jv.PriorityHeld) {
			release = append(release, id)
		}
	}
	if len(release) > 0 {
		d.Actions = append(d.Actions, Action{Kind: ActRelease, JobIDs: release})
	}
	// Every job hadar released and that may still be pending: this
	// round's placements and kicks, and the launching jobs (those held
	// again above count as held once the hold ran). A launching job with
	// no release time (a damaged state database) is never timed out, so
	// it is not waited for either.
	var await []string
	await = append(await, places...)
	await = append(await, kick...)
	for _, jv := range jobsOfClass(r.v, ClassLaunching) {
		if !jv.ReleasedAt.IsZero() && !slices.Contains(await, jv.ID) {
			await = append(await, jv.ID)
		}
	}
	sort.Strings(await)
	d.Actions = append(d.Actions, statusComments(r.v, r.s, d.Decisions)...)
	d.Actions = append(d.Actions, passThroughActions(r.passThrough, await)...)
}

// leases are the jobs whose lease the round gives or renews: rehold, and
// the jobs hadar keeps waiting (waiting and not placed, held by their owner,
// waiting for a dependency) whose lease ran out or has less than half of it
// left. A job whose user's own begin time is ahead keeps it: its lease ends
// a lease after that.
func (r *deriver) leases(rehold []string) []string {
	out := slices.Clone(rehold)
	for _, jv := range r.v.Jobs {
		switch jv.Class {
		case ClassWaiting:
			if jv.PriorityHeld || slices.Contains(r.places, jv.ID) {
				continue
			}
		case ClassHeld, ClassNotReady:
		default:
			continue
		}
		if !jv.Lease.UserBegin.IsZero() || slices.Contains(out, jv.ID) {
			continue
		}
		if LeaseDue(jv.Lease.Until, r.v.Now, r.p.Lease) {
			out = append(out, jv.ID)
		}
	}
	sort.Strings(out)
	return out
}

// LeaseDue reports whether a lease that ends at until (zero: none) must be
// renewed at now: less than half of a lease of length d is left.
func LeaseDue(until, now time.Time, d time.Duration) bool {
	return until.Sub(now) < d/2
}

// WaitingComment is the AdminComment of a job hadar keeps waiting for want
// of GPUs, so that squeue -O AdminComment and scontrol show job say why it
// waits (reason BeginTime alone reads as if the user had asked for it). It names no job,
// so that one scontrol update sets it for every job waiting for the same
// types.
func WaitingComment(types []string) string {
	what := "free GPUs"
	if len(types) > 0 {
		what = "free " + strings.Join(types, " or ") + " GPUs"
	}
	return fmt.Sprintf("hadar: waiting for %s (on hadar's lease, in the site's priority order); `hadar explain JOBID` says why", what)
}

// PlacedComment is the AdminComment of a job hadar placed or started: one
// text for all, set in the same scontrol update as their StartTime=now, so
// it costs no command of its own.
const PlacedComment = "hadar: placed by hadar-slurmd; `hadar explain JOBID` says where and why"

// statusComments keep the admin comment of hadar's waiting and placed jobs
// saying what hadar does with them: one update per distinct text, only for
// jobs whose comment differs (so a steady queue costs nothing).
func statusComments(v *View, s *optimizer.Snapshot, decisions []Decision) []Action {
	snapJobs := map[string]*optimizer.Job{}
	for i := range s.Jobs {
		snapJobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	byText := map[string][]string{}
	var texts []string
	fastestFirst := sync.OnceValue(s.TypesFastestFirst)
	for _, dec := range decisions {
		jv := v.Job(dec.JobID)
		if jv == nil || !jv.AdminCommentKnown || jv.CopyOf != "" {
			continue
		}
		var text string
		switch dec.Kind {
		case DecideWait, DecideDefer:
			var types []string
			if j := snapJobs[jv.ID]; j != nil {
				for _, t := range fastestFirst() {
					if s.JobRate(j, t, j.Workers) > 0 {
						types = append(types, t)
					}
				}
			}
			text = WaitingComment(types)
		default:
			continue
		}
		text = slurm.SanitizeComment(text, slurm.MaxAdminComment)
		if jv.AdminComment == text {
			continue
		}
		if _, ok := byText[text]; !ok {
			texts = append(texts, text)
		}
		byText[text] = append(byText[text], jv.ID)
	}
	sort.Strings(texts)
	var out []Action
	for _, t := range texts {
		ids := byText[t]
		sort.Strings(ids)
		out = append(out, Action{Kind: ActComment, JobIDs: ids, Text: t})
	}
	return out
}

// passThroughActions hands the pass-through jobs hadar still holds to
// Slurm's scheduler: their AdminComment (one update per distinct reason),
// then the end of their lease (StartTime=now) and the release of those in
// hadar's own hold; a hold of their owner stays. A job whose user's begin
// time is ahead is not held (view.go) and keeps its begin time: the user's
// plus the lease, which hadar could not tell from a lease if it gave the
// user's back. If jobs hadar released may still be pending (await), an
// await-start comes first, and the Executor runs the comment and release
// only once it has seen each of them running, held or gone.
//
// Why: a pass-through job released while a job hadar placed is still
// pending can be started by Slurm on the GPUs hadar chose (Slurm's
// scheduler takes jobs in priority order, and a job released more than
// once has a lower one), and the placed job then waits until
// launch_timeout. A running job holds its GPUs and a held one takes none,
// so after the await the pass-through job can only get GPUs no hadar job
// is waiting for. A failed await leaves the jobs held for the next round.
func passThroughActions(passThrough []*JobView, await []string) []Action {
	if len(passThrough) == 0 {
		return nil
	}
	var out []Action
	if len(await) > 0 {
		out = append(out, Action{Kind: ActAwaitStart, JobIDs: await})
	}
	byText := map[string][]string{}
	var texts []string
	var h handOver
	for _, jv := range passThrough {
		t := slurm.SanitizeComment(PassThroughComment(jv.Problem), slurm.MaxAdminComment)
		if _, ok := byText[t]; !ok {
			texts = append(texts, t)
		}
		byText[t] = append(byText[t], jv.ID)
		h.add(jv.ID, jv.Lease, jv.PriorityHeld)
	}
	for _, t := range texts {
		out = append(out, Action{Kind: ActComment, JobIDs: byText[t], Text: t})
	}
	return append(out, h.actions()...)
}

// handOver collects jobs hadar hands to Slurm's scheduler: the end of
// their lease (StartTime=now) and the release of those in hadar's own hold.
// A job whose user's own begin time is ahead keeps its begin time (the
// user's plus the lease): given back the user's alone, hadar would read it
// as a lease on top of a begin time one lease earlier.
type handOver struct {
	now, release []string
}

// add adds a job with lease l, in hadar's own hold or not, and reports
// whether it is handed over.
func (h *handOver) add(id string, l Lease, hadarHold bool) bool {
	if !l.UserBegin.IsZero() && !hadarHold {
		return false // Slurm's at its begin time plus the lease
	}
	if l.UserBegin.IsZero() && !l.Until.IsZero() {
		h.now = append(h.now, id)
	}
	if hadarHold {
		h.release = append(h.release, id)
	}
	return true
}

// actions are the updates: one StartTime=now, one release.
func (h *handOver) actions() []Action {
	var out []Action
	if len(h.now) > 0 {
		sort.Strings(h.now)
		out = append(out, Action{Kind: ActStartNow, JobIDs: h.now})
	}
	if len(h.release) > 0 {
		sort.Strings(h.release)
		out = append(out, Action{Kind: ActRelease, JobIDs: h.release})
	}
	return out
}

// enforceable reads a planned placement as one task per node if Slurm can
// carry it out for the job's request: one node holding all its GPUs
// (--nodes=1), or exactly --nodes nodes with --gres GPUs each, one GPU type
// on each. HadarE copies become the single fastest copy that holds the
// whole gang. types lists the GPU types of the plan, the job's fastest
// first, for re-shaping. The tasks are sorted by node.
func enforceable(tasks []optimizer.Task, jv *JobView, tp optimizer.Throughputs) (target []optimizer.Task, types []string, ok bool) {
	seenType := map[string]bool{}
	for _, t := range tasks {
		if !seenType[t.Type] {
			seenType[t.Type] = true
			types = append(types, t.Type)
		}
	}
	sort.SliceStable(types, func(a, b int) bool {
		ra, rb := tp.Rate(jv.Model, types[a], jv.Workers), tp.Rate(jv.Model, types[b], jv.Workers)
		if ra != rb {
			return ra > rb
		}
		return types[a] < types[b]
	})
	if len(tasks) > 0 && tasks[0].Copy > 0 {
		// Slurm runs one allocation per job: keep the fastest copy that
		// holds the gang, if any.
		var best *optimizer.Task
		bestRate := -1.0
		for i, t := range tasks {
			if t.GPUs == jv.Workers && jv.NumNodes == 1 {
				if r := tp.Rate(jv.Model, t.Type, jv.Workers); r > bestRate {
					best, bestRate = &tasks[i], r
				}
			}
		}
		if best == nil {
			return nil, types, false
		}
		return []optimizer.Task{{Node: best.Node, Type: best.Type, GPUs: jv.Workers}}, types, true
	}
	perNode := map[string]*optimizer.Task{}
	split := false
	for _, t := range tasks {
		if n, seen := perNode[t.Node]; seen {
			// Two types on one node: Slurm gives a job one type per node.
			split = split || n.Type != t.Type
			n.GPUs += t.GPUs
			continue
		}
		perNode[t.Node] = &optimizer.Task{Node: t.Node, Type: t.Type, GPUs: t.GPUs}
	}
	for _, n := range slices.Sorted(maps.Keys(perNode)) {
		target = append(target, *perNode[n])
	}
	if split || len(target) != jv.NumNodes {
		return target, types, false
	}
	for _, t := range target {
		if t.GPUs != jv.GPUsPerNode {
			return target, types, false
		}
	}
	return target, types, true
}

// retypes are the Gres updates the round's placements need (one per
// distinct request): a job placed on a node used per type must name the
// pool's type in the node's own words; a job hadar retyped before and now
// placed elsewhere gets its user's request back. A job whose Gres already
// says the right thing gets none, so jobs that never touch a node used per
// type never get one. The users' requests of the retyped jobs go to
// Derivation.Requested, for the state database.
func (r *deriver) retypes(places []string) []Action {
	byGres := map[string][]string{}
	for _, id := range places {
		jv := r.v.Job(id)
		if jv == nil || jv.CopyOf != "" || !jv.Request.Retypable {
			continue
		}
		want := jv.Request.Site
		for _, t := range r.placeTasks[id] {
			if n := r.v.Node(t.Node); n != nil && n.Pools != nil {
				if p := n.pool(t.Type); p != nil {
					want = p.Site
				}
			}
		}
		if want == jv.GresSite {
			continue
		}
		g := slurm.GRES{Name: "gpu", Type: want, Count: jv.GPUsPerNode}.String()
		byGres[g] = append(byGres[g], id)
		if r.d.Requested == nil {
			r.d.Requested = map[string]string{}
		}
		r.d.Requested[id] = jv.Request.Gres
	}
	var out []Action
	for _, g := range slices.Sorted(maps.Keys(byGres)) {
		out = append(out, Action{Kind: ActRetype, JobIDs: byGres[g], Gres: g})
	}
	return out
}

// freeNodes is what is left of the snapshot's nodes (one entry per node
// and type) once the plan so far (d.Plan) and occ hold their GPUs: GPUs
// from occ, CPUs and memory from the shapes of the jobs in the plan.
func freeNodes(s *optimizer.Snapshot, plan *optimizer.Plan, jobs map[string]*optimizer.Job, occ, capacity map[string]int) []optimizer.Node {
	cpus, mem := map[string]int{}, map[string]int64{}
	for id, tasks := range plan.Assignments {
		j := jobs[id]
		if j == nil {
			continue
		}
		for _, t := range tasks {
			cpus[t.Node] += j.Shape.CPUsPerNode
			mem[t.Node] += j.Shape.MemMBPerNode
		}
	}
	var out []optimizer.Node
	for _, n := range s.Nodes {
		f := capacity[slotKey(n.Name, n.Type)] - occ[slotKey(n.Name, n.Type)]
		c, m := n.CPUs-cpus[n.Name], n.MemMB-mem[n.Name]
		if f <= 0 || (n.CPUs > 0 && c <= 0) || (n.MemMB > 0 && m <= 0) {
			continue
		}
		if n.CPUs == 0 {
			c = 0
		}
		if n.MemMB == 0 {
			m = 0
		}
		out = append(out, optimizer.Node{Name: n.Name, Type: n.Type, GPUs: f, CPUs: c, MemMB: m})
	}
	return out
}

// fitNodes places the job's request on the free nodes, trying types in
// order, by the optimizer's one placement rule; it returns the tasks,
// sorted by node, or nil.
func fitNodes(j *optimizer.Job, free []optimizer.Node, types []string) []optimizer.Task {
	if j == nil {
		return nil
	}
	tasks := optimizer.PlaceOn(j, free, types)
	if tasks == nil {
		return nil
	}
	out := slices.Clone(tasks)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Node < out[b].Node })
	return out
}

// migrationGain is optimizer.MoveGain for a running job of the snapshot
// (0 for a job the snapshot lacks).
func migrationGain(tp optimizer.Throughputs, sj *optimizer.Job, model string, workers int, cur, next []optimizer.Task) float64 {
	if sj == nil {
		return 0
	}
	return optimizer.MoveGain(tp, model, workers, sj.RemainingSteps, cur, next)
}

func jobsOfClass(v *View, c JobClass) []*JobView {
	var out []*JobView
	for _, j := range v.Jobs {
		if j.Class == c {
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

func sameNodes(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func typesOf(nodes []string, nodeType map[string]string) string {
	tasks := make([]optimizer.Task, len(nodes))
	for i, n := range nodes {
		tasks[i] = optimizer.Task{Node: n, Type: nodeType[n]}
	}
	return typesOfTasks(tasks)
}

// typesOfTasks is the GPU types of tasks, "v100" or "k80+v100".
func typesOfTasks(tasks []optimizer.Task) string {
	var ts []string
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.Type != "" && !seen[t.Type] {
			seen[t.Type] = true
			ts = append(ts, t.Type)
		}
	}
	sort.Strings(ts)
	return strings.Join(ts, "+")
}

// sameTasks reports whether two placements hold the same nodes and types.
func sameTasks(a, b []optimizer.Task) bool {
	key := func(ts []optimizer.Task) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = slotKey(t.Node, t.Type)
		}
		return out
	}
	return sameNodes(key(a), key(b))
}

// taskNodes are the nodes of tasks, in order.
func taskNodes(tasks []optimizer.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.Node
	}
	return out
}

// tasksPlacement renders tasks as placementString does.
func tasksPlacement(tasks []optimizer.Task) string {
	if len(tasks) == 0 {
		return "-"
	}
	return placementString(taskNodes(tasks), tasks[0].GPUs)
}

func tasksString(tasks []optimizer.Task) string {
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = fmt.Sprintf("%s:%d(%s)", t.Node, t.GPUs, t.Type)
	}
	return strings.Join(parts, ",")
}

func fmtSeconds(s float64) string {
	if math.IsInf(s, 1) {
		return "an unbounded time"
	}
	if math.IsInf(s, -1) || math.IsNaN(s) {
		return "nothing"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
