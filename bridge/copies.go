package bridge

// HadarE copies on Slurm (docs/hadare-slurm.md).
//
// A copies job is a job array whose tag allows copies:
//
//	sbatch --array=0-3 --gres=gpu:1 --comment="hadar copies=4 model=... steps=..." train.sh
//
// Every task of the array is one copy (job_submit.lua holds them all). The
// bridge groups the tasks into one CopyGroup, which the policy sees as one
// job (ID: the array id) allowed min(copies=, tasks) copies; each round the
// plan's copies are carried out task by task with the ordinary actions:
// a copy the plan keeps goes on running, a new copy is a held task placed
// on its node (NodeList) and released, and a copy the plan drops is
// stopped (requeuehold: the task is held again, to be placed later). The
// copies synchronize through files in spool_dir/copies/<array id>/; the
// bridge writes plan.json there every round (jobproto.CopyPlan): the copies it
// runs, their GPU types, rates and step shares. Everything else in that
// directory is the copies' (contrib/examples/hadare/hadar_copies.py).

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// copiesOnSlurm is HadarE on Slurm as the round meets it: the one seam
// between the round (BuildView, BuildSnapshot, Derive, fail-open) and this
// file, where a copies job is a job array with one task per copy. The
// round calls nothing else of this file but the View's CopyGroup lookups.
type copiesOnSlurm interface {
	// group gathers the copies jobs of a view (View.Groups).
	group(v *View)
	// snapshotJobs are the copies jobs as the policy sees them.
	snapshotJobs(v *View, tp optimizer.Throughputs, progress map[string]JobProgress, p SnapshotParams) []optimizer.Job
	// derive is Derive's work on the copies: it decides first which running
	// copies go on (their GPUs taken in occ) or stop, then places new copies
	// (placeCopies) and gives their plan files (plans).
	derive(v *View, s *optimizer.Snapshot, plan *optimizer.Plan, p DeriveParams, nodeType map[string]string,
		capacity, occ map[string]int, d *Derivation) *copyDerivation
	// check verifies a derivation's copies invariants (CheckCopies).
	check(v *View, d Derivation) error
	// failOpen trims the held jobs fail-open releases (ids) so that a
	// copies job goes on without hadar as one copy.
	failOpen(jobs []slurm.Job, ids []string) []string
}

// hadarE is how this bridge runs copies: job arrays.
var hadarE copiesOnSlurm = jobArrays{}

// jobArrays runs each copies job as a Slurm job array, one task per copy.
type jobArrays struct{}

func (jobArrays) check(v *View, d Derivation) error { return CheckCopies(v, d) }

// DecideStopCopy: a running copy of a copies job is stopped (requeued and
// held, to be placed again later) because the plan drops it; the job goes
// on with its other copies.
const DecideStopCopy DecisionKind = "stop-copy"

// CopyGroup is a copies job: the tasks of one job array whose tag allows
// copies (copies=K, K >= 2), each task one copy.
type CopyGroup struct {
	// ID is the array's job id: the job's id for the policy, its progress
	// report and its sync directory.
	ID    string
	User  string
	Tag   jobproto.Tag
	Model string
	// GPUsPerNode is what each task asks for (--gres=gpu:N, one node).
	GPUsPerNode int
	Submit      time.Time
	// Tasks are the array's tasks in the queue, by task index.
	Tasks []*JobView
	// Job is the group seen as one job (running while any copy runs), for
	// progress and the state database. It is not in View.Jobs (the bridge
	// never acts on it) but View.Job(ID) returns it.
	Job *JobView
}

func (g *CopyGroup) tasks(c JobClass) []*JobView {
	var out []*JobView
	for _, t := range g.Tasks {
		if t.Class == c {
			out = append(out, t)
		}
	}
	return out
}

// Limit is the number of copies the policy may run this round:
// min(copies=, waiting + running tasks), less the copies launching or
// pinned (they count against copies= but are not the plan's), and never
// below the copies running now.
func (g *CopyGroup) Limit() int {
	running, waiting := len(g.tasks(ClassRunning)), len(g.tasks(ClassWaiting))
	busy := len(g.tasks(ClassLaunching)) + len(g.tasks(ClassPinned))
	return max(min(g.Tag.Copies-busy, waiting+running), running)
}

// CopyGroup returns the copies job with id id, or nil.
func (v *View) CopyGroup(id string) *CopyGroup {
	for _, g := range v.Groups {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// group gathers the tasks of copies jobs into CopyGroups (part of
// BuildView, after every job is classified). A copies array whose tasks
// ask for more than one node is passed through: a copy is one node.
func (jobArrays) group(v *View) {
	byID := map[string]*CopyGroup{}
	for _, jv := range v.Jobs {
		if !jv.Tagged || jv.Problem != "" || jv.Tag.Copies < 2 || jobproto.TaskIndex(jv.ID) < 0 {
			continue
		}
		id, _, _ := strings.Cut(jv.ID, "_")
		g := byID[id]
		if g == nil {
			g = &CopyGroup{ID: id, User: jv.User, Tag: jv.Tag, Model: jv.Model, GPUsPerNode: jv.GPUsPerNode, Submit: jv.Submit}
			byID[id] = g
			v.Groups = append(v.Groups, g)
		}
		if !jv.Submit.IsZero() && (g.Submit.IsZero() || jv.Submit.Before(g.Submit)) {
			g.Submit = jv.Submit
		}
		g.Tasks = append(g.Tasks, jv)
	}
	kept := v.Groups[:0]
	for _, g := range v.Groups {
		multi := false
		for _, t := range g.Tasks {
			multi = multi || t.NumNodes > 1
		}
		if multi {
			for _, t := range g.Tasks {
				t.Problem = "a copies job (copies=) runs one copy per node: ask for --nodes=1"
				t.Class = ClassPassThrough
			}
			continue
		}
		sort.SliceStable(g.Tasks, func(a, b int) bool { return jobproto.TaskIndex(g.Tasks[a].ID) < jobproto.TaskIndex(g.Tasks[b].ID) })
		job := &JobView{ID: g.ID, User: g.User, Tagged: true, Tag: g.Tag, Model: g.Model, NumNodes: 1,
			GPUsPerNode: g.GPUsPerNode, Workers: g.GPUsPerNode, Submit: g.Submit, State: "PENDING", Class: ClassWaiting}
		for _, t := range g.Tasks {
			t.CopyOf = g.ID
			// A copy's --time is the job's estimate, as an ordinary job's;
			// its model is the group's, prior-only in every task or none.
			job.TimeLimit = max(job.TimeLimit, t.TimeLimit)
			job.PriorOnly = job.PriorOnly || t.PriorOnly
			if t.Class == ClassRunning || (t.Class == ClassPinned && t.State == "RUNNING") {
				job.Class, job.State = ClassRunning, "RUNNING"
				job.Nodes = append(job.Nodes, t.Nodes...)
				job.TimeUsed = max(job.TimeUsed, t.TimeUsed)
			}
		}
		g.Job = job
		if _, taken := v.byID[g.ID]; !taken {
			v.byID[g.ID] = job
		}
		kept = append(kept, g)
	}
	v.Groups = kept
}

// copyJobViews are the copies jobs as jobs, for progress.
func (v *View) copyJobViews() []*JobView {
	out := make([]*JobView, 0, len(v.Groups))
	for _, g := range v.Groups {
		out = append(out, g.Job)
	}
	return out
}

// withoutCopies drops the copies' tasks from a job list: Derive carries
// them out through their group.
func withoutCopies(jobs []*JobView) []*JobView {
	return slices.DeleteFunc(jobs, func(j *JobView) bool { return j.CopyOf != "" })
}

// copyRate is a copies job's progress rate now: the sum of its running
// copies' rates. gpuType is always "": a copies job's reports (the steps
// its rounds committed, from copies that come and go) never teach the
// throughput database a rate.
func (g *CopyGroup) copyRate(v *View, tp optimizer.Throughputs) (gpuType string, rate float64) {
	for _, t := range g.Tasks {
		if t.State != "RUNNING" || len(t.Nodes) != 1 {
			continue
		}
		if nv := v.Node(t.Nodes[0]); nv != nil && nv.Type != "" {
			rate += tp.Rate(g.Model, nv.Type, g.GPUsPerNode)
		}
	}
	return "", rate
}

// snapshotJobs are the copies jobs as the policy sees them: one job per
// group with MaxCopies = Limit and Current = its running copies (numbered
// 1..k), when it has a copy running or a task to place.
func (jobArrays) snapshotJobs(v *View, tp optimizer.Throughputs, progress map[string]JobProgress, p SnapshotParams) []optimizer.Job {
	capacity := usableCapacity(v)
	// Copies are array tasks hadar does not retype: a node used per type
	// is not theirs (Slurm would choose the type).
	offPools := v.keepOffPools(Request{}).Eligible
	var out []optimizer.Job
	for _, g := range v.Groups {
		running := g.tasks(ClassRunning)
		limit := g.Limit()
		if len(running) == 0 && (len(g.tasks(ClassWaiting)) == 0 || limit < 1) {
			continue
		}
		pr := progress[g.ID]
		total, remaining := plannedWork(g.Job, pr.Done, tp, capacity, p.DefaultDuration)
		weight := jobWeight(p.SiteWeights, g.ID, g.Tag.Weight)
		arrival := g.Submit
		if arrival.IsZero() {
			arrival = v.Now
		}
		j := optimizer.Job{ID: g.ID, Type: g.Model, Workers: g.GPUsPerNode, Arrival: arrival,
			TotalSteps: total, RemainingSteps: remaining, Weight: weight,
			Attained: pr.Attained, Executed: pr.Executed, MaxCopies: limit}
		j.Shape.Eligible = offPools
		for i, t := range running {
			if n := v.Node(t.Nodes[0]); n != nil {
				j.Current = append(j.Current, optimizer.Task{Node: n.Name, Type: n.Type, GPUs: g.GPUsPerNode, Copy: i + 1})
			}
		}
		out = append(out, j)
	}
	return out
}

// copyDerivation is Derive's work on the copies jobs of a round.
type copyDerivation struct {
	v        *View
	s        *optimizer.Snapshot
	nodeType map[string]string
	groups   []*groupWork
	// stops are the running copies to requeuehold; places/placeNodes the
	// tasks to place and release.
	stops      []string
	places     []string
	placeNodes map[string][]string
}

type groupWork struct {
	g       *CopyGroup
	planned bool
	kept    []*JobView // running copies that go on
	want    []string   // nodes where the plan wants a new copy, best first
	placed  []*JobView
	at      map[string]string // placed task -> node
}

// derive is Derive's first step for copies jobs, before running
// jobs are kept or moved: which running copies go on (their GPUs are added
// to occ) and which are stopped, and where new copies are wanted.
//
// A running copy goes on if the plan has a copy on its node, or if the plan
// drops it but gives its GPUs to no other job (a copy is never stopped
// just to start a faster one elsewhere: that would cost its round's work
// and a start). A copy whose GPUs the plan gives to other jobs is stopped,
// unless the plan keeps none of the job's running copies and preemption is
// off: then the fastest one goes on (a job is never stopped by shrinking
// it). Whatever the plan, a copy is stopped if
// another copy of the job holds its node, or if the job holds more copies
// than its tag allows (the slowest go; both only happen after Slurm ran
// the tasks itself, e.g. after a fail-open). New copies go only to nodes
// that hold none of the job's copies (running, launching, pinned or being
// stopped), and never beyond copies=, counting every copy of the job that
// holds or is about to hold GPUs.
func (jobArrays) derive(v *View, s *optimizer.Snapshot, plan *optimizer.Plan, p DeriveParams, nodeType map[string]string,
	capacity, occ map[string]int, d *Derivation) *copyDerivation {
	cd := &copyDerivation{v: v, s: s, nodeType: nodeType, placeNodes: map[string][]string{}}
	inSnap := map[string]bool{}
	for _, j := range s.Jobs {
		inSnap[j.ID] = true
	}
	for _, g := range v.Groups {
		w := &groupWork{g: g, at: map[string]string{}}
		cd.groups = append(cd.groups, w)
		rate := func(t *JobView) float64 {
			return s.Throughput.Rate(g.Model, nodeType[t.Nodes[0]], g.GPUsPerNode)
		}
		var tasks []optimizer.Task
		if plan != nil && inSnap[g.ID] {
			tasks = plan.Assignments[g.ID]
			w.planned = true
		}
		nodes := copyNodes(tasks, g)
		onPlan := map[string]bool{}
		for _, n := range nodes {
			onPlan[n] = true
		}
		// Nodes the job holds with copies hadar does not re-plan now.
		taken := map[string]bool{}
		fixed := 0
		for _, t := range g.Tasks {
			if t.Class == ClassLaunching || t.Class == ClassPinned {
				fixed++
				for _, n := range t.Nodes {
					taken[n] = true
				}
			}
		}
		type stop struct {
			t      *JobView
			reason string
		}
		// GPUs the plan gives other jobs, per node.
		others := map[string]int{}
		if plan != nil {
			for id, ts := range plan.Assignments {
				if id != g.ID {
					for _, t := range ts {
						others[t.Node] += t.GPUs
					}
				}
			}
		}
		var stops []stop
		var dropped []*JobView
		spared := map[string]bool{}
		for _, t := range g.tasks(ClassRunning) {
			switch n := t.Nodes[0]; {
			case taken[n]:
				stops = append(stops, stop{t, "another copy of the job holds its node"})
			case !w.planned || onPlan[n]:
				w.kept = append(w.kept, t)
				taken[n] = true
			case others[n]+g.GPUsPerNode <= capacity[slotKey(n, nodeType[n])]:
				w.kept = append(w.kept, t)
				taken[n] = true
				spared[t.ID] = true
			default:
				dropped = append(dropped, t)
			}
		}
		lastKept := ""
		if len(w.kept) == 0 && len(dropped) > 0 && !p.Preemption {
			// The job's last copies: keep the fastest one running.
			sort.SliceStable(dropped, func(a, b int) bool { return rate(dropped[a]) > rate(dropped[b]) })
			for i, t := range dropped {
				if !taken[t.Nodes[0]] {
					w.kept = append(w.kept, t)
					taken[t.Nodes[0]] = true
					lastKept = t.ID
					dropped = slices.Delete(dropped, i, i+1)
					break
				}
			}
		}
		for _, t := range dropped {
			stops = append(stops, stop{t, "the plan gives its GPUs to other jobs; the job goes on with its other copies"})
		}
		if over := len(w.kept) + fixed - g.Tag.Copies; over > 0 {
			sort.SliceStable(w.kept, func(a, b int) bool { return rate(w.kept[a]) > rate(w.kept[b]) })
			cut := max(0, len(w.kept)-over)
			for _, t := range w.kept[cut:] {
				stops = append(stops, stop{t, fmt.Sprintf("the job holds more copies than copies=%d allows", g.Tag.Copies)})
			}
			w.kept = w.kept[:cut]
		}
		sort.SliceStable(w.kept, func(a, b int) bool { return jobproto.TaskIndex(w.kept[a].ID) < jobproto.TaskIndex(w.kept[b].ID) })
		for _, t := range w.kept {
			occ[slotKey(t.Nodes[0], nodeType[t.Nodes[0]])] += g.GPUsPerNode
			reason := fmt.Sprintf("copy of job %s: the plan keeps it here", g.ID)
			switch {
			case spared[t.ID]:
				reason = fmt.Sprintf("copy of job %s: the plan drops it, but gives its GPUs to no other job", g.ID)
			case t.ID == lastKept:
				reason = fmt.Sprintf("copy of job %s: the plan drops it, but it is the job's last running copy and preemption is off", g.ID)
			case !w.planned:
				reason = fmt.Sprintf("copy of job %s: no plan for the job this round", g.ID)
			}
			d.Decisions = append(d.Decisions, copyDecision(t, DecideKeep, nodeType, reason))
		}
		for _, st := range stops {
			cd.stops = append(cd.stops, st.t.ID)
			d.Decisions = append(d.Decisions, Decision{JobID: st.t.ID, Kind: DecideStopCopy,
				From: placementString(st.t.Nodes, g.GPUsPerNode), To: "-",
				Reason: fmt.Sprintf("copy of job %s: %s; the task is held, to be placed again later", g.ID, st.reason)})
			taken[st.t.Nodes[0]] = true // not this round: it is still stopping
		}
		slots := g.Tag.Copies - len(w.kept) - fixed
		for _, n := range nodes {
			if slots <= 0 {
				break
			}
			if !taken[n] {
				w.want = append(w.want, n)
				taken[n] = true
				slots--
			}
		}
	}
	return cd
}

// placeCopies is Derive's last step for copies jobs, after the other
// waiting jobs: held tasks go to the nodes where new copies are wanted, if
// their GPUs are still free (occ against capacity), lowest task index
// first. Then every group's copies enter the plan, numbered 1..k.
func (cd *copyDerivation) placeCopies(capacity, occ map[string]int, d *Derivation) {
	for _, w := range cd.groups {
		g := w.g
		waiting := g.tasks(ClassWaiting)
		next := 0
		var busy []string // planned nodes whose GPUs are not free after all
		for _, n := range w.want {
			if next >= len(waiting) {
				break
			}
			if occ[slotKey(n, cd.nodeType[n])]+g.GPUsPerNode > capacity[slotKey(n, cd.nodeType[n])] {
				busy = append(busy, n)
				continue
			}
			t := waiting[next]
			next++
			occ[slotKey(n, cd.nodeType[n])] += g.GPUsPerNode
			w.placed = append(w.placed, t)
			w.at[t.ID] = n
			cd.places = append(cd.places, t.ID)
			cd.placeNodes[t.ID] = []string{n}
			d.Decisions = append(d.Decisions, Decision{JobID: t.ID, Kind: DecidePlace, From: "-",
				To: placementString([]string{n}, g.GPUsPerNode), ToNodes: []string{n}, GPUType: cd.nodeType[n],
				Reason: fmt.Sprintf("copy of job %s (HadarE), copy %d of at most %d", g.ID, len(w.kept)+len(w.placed), g.Tag.Copies)})
		}
		for i, t := range waiting[next:] {
			if i < len(busy) {
				d.Decisions = append(d.Decisions, Decision{JobID: t.ID, Kind: DecideDefer, From: "-", To: "-",
					Reason: fmt.Sprintf("copy of job %s: planned on %s, whose GPUs are not free (running jobs kept)", g.ID, busy[i])})
				continue
			}
			d.Decisions = append(d.Decisions, Decision{JobID: t.ID, Kind: DecideWait, From: "-", To: "-",
				Reason: fmt.Sprintf("copy of job %s: not needed this round", g.ID)})
		}
		if !w.planned {
			continue
		}
		k := 0
		for _, t := range w.kept {
			k++
			d.Plan.Assign(g.ID, optimizer.Task{Node: t.Nodes[0], Type: cd.nodeType[t.Nodes[0]], GPUs: g.GPUsPerNode, Copy: k})
		}
		for _, t := range w.placed {
			k++
			n := w.at[t.ID]
			d.Plan.Assign(g.ID, optimizer.Task{Node: n, Type: cd.nodeType[n], GPUs: g.GPUsPerNode, Copy: k})
		}
	}
}

// plans are the copies plans of the round, as derived (before execution):
// every copy running, launching or placed, with its share.
func (cd *copyDerivation) plans(round time.Duration) []jobproto.CopyPlan {
	rem := map[string]float64{}
	for _, j := range cd.s.Jobs {
		rem[j.ID] = j.RemainingSteps
	}
	tp := cd.s.Throughput
	var out []jobproto.CopyPlan
	for _, w := range cd.groups {
		g := w.g
		cp := jobproto.CopyPlan{Job: g.ID, User: g.User, RoundSeconds: round.Seconds(), Model: g.Model, TotalSteps: g.Tag.Steps,
			RemainingSteps: rem[g.ID], Allowed: g.Tag.Copies, Copies: []jobproto.CopyMember{}}
		add := func(t *JobView, node, state string) {
			typ := cd.v.nodeTypeOf(node, cd.nodeType)
			cp.Copies = append(cp.Copies, jobproto.CopyMember{Index: jobproto.TaskIndex(t.ID), Task: t.ID, Node: node, GPUType: typ,
				GPUs: g.GPUsPerNode, Rate: tp.Rate(g.Model, typ, g.GPUsPerNode), State: state})
		}
		for _, t := range w.kept {
			add(t, t.Nodes[0], "running")
		}
		for _, t := range g.tasks(ClassLaunching) {
			if len(t.Nodes) == 1 {
				add(t, t.Nodes[0], "launching")
			}
		}
		for _, t := range w.placed {
			add(t, w.at[t.ID], "placed")
		}
		sort.SliceStable(cp.Copies, func(a, b int) bool { return cp.Copies[a].Index < cp.Copies[b].Index })
		shareSteps(cp.Copies, rem[g.ID], round.Seconds())
		out = append(out, cp)
	}
	return out
}

// shareSteps splits min(remaining, summed rates x round) among copies in
// proportion to their rates (HadarE's rule, optimizer/hadare.go). With no
// remaining estimate (the job is not in the snapshot) each copy gets a
// round's worth.
func shareSteps(copies []jobproto.CopyMember, remaining, round float64) {
	sum := 0.0
	for _, c := range copies {
		sum += c.Rate
	}
	if sum <= 0 {
		return
	}
	total := sum * round
	if remaining > 0 {
		total = math.Min(total, remaining)
	}
	for i := range copies {
		copies[i].Steps = math.Round(total*copies[i].Rate/sum*1000) / 1000
	}
}

func (v *View) nodeTypeOf(node string, nodeType map[string]string) string {
	if t := nodeType[node]; t != "" {
		return t
	}
	if n := v.Node(node); n != nil {
		return n.Type
	}
	return ""
}

// copyNodes reads a planned placement of a copies job as the nodes of its
// copies, in plan order (deduplicated: one copy per node). A gang plan (a
// policy that does not fork, or a limit of 1) is one copy when it is one
// node holding the job's GPUs; otherwise nothing Slurm can run.
func copyNodes(tasks []optimizer.Task, g *CopyGroup) []string {
	var out []string
	seen := map[string]bool{}
	if len(tasks) > 0 && tasks[0].Copy == 0 {
		if len(tasks) == 1 && tasks[0].GPUs == g.GPUsPerNode {
			return []string{tasks[0].Node}
		}
		return nil
	}
	for _, t := range slices.SortedStableFunc(slices.Values(tasks), func(a, b optimizer.Task) int { return cmp.Compare(a.Copy, b.Copy) }) {
		if !seen[t.Node] {
			seen[t.Node] = true
			out = append(out, t.Node)
		}
	}
	return out
}

func copyDecision(t *JobView, k DecisionKind, nodeType map[string]string, reason string) Decision {
	p := placementString(t.Nodes, t.GPUsPerNode)
	return Decision{JobID: t.ID, Kind: k, From: p, To: p, ToNodes: t.Nodes, GPUType: typesOf(t.Nodes, nodeType), Reason: reason}
}

// CheckCopies verifies what a round leaves for every copies job, as Slurm
// will see it: no two copies of a job on one node, and no more copies than
// its tag allows, counting its copies running on (not stopped), launching,
// pinned and placed now. Only copies hadar placed earlier and cannot
// re-plan now (launching, pinned) may break it, and only if they did
// before the round (Slurm ran them itself): the round adds nothing to such
// a job. Derive returns an error rather than a derivation that breaks it.
func CheckCopies(v *View, d Derivation) error {
	stopped := map[string]bool{}
	placed := map[string][]string{}
	for _, a := range d.Actions {
		switch a.Kind {
		case ActRequeueHold:
			for _, id := range a.JobIDs {
				stopped[id] = true
			}
		case ActPlace:
			placed[a.JobIDs[0]] = a.Nodes
		}
	}
	for _, g := range v.Groups {
		holder := map[string]*JobView{}
		count, ours := 0, 0
		for _, t := range g.Tasks {
			on := t.Nodes
			mine := false // running on or placed: the round's doing
			switch {
			case placed[t.ID] != nil:
				on, mine = placed[t.ID], true
			case t.Class == ClassRunning && !stopped[t.ID]:
				mine = true
			case t.Class == ClassLaunching || t.Class == ClassPinned:
			default:
				continue
			}
			count++
			if mine {
				ours++
			}
			for _, n := range on {
				if other := holder[n]; other != nil && (mine || other.Class == ClassRunning || placed[other.ID] != nil) {
					return fmt.Errorf("%w: copies %s and %s of job %s on node %s", optimizer.ErrInvariant, other.ID, t.ID, g.ID, n)
				}
				holder[n] = t
			}
		}
		if count > g.Tag.Copies && ours > 0 {
			return fmt.Errorf("%w: job %s would run %d copies, allowed %d", optimizer.ErrInvariant, g.ID, count, g.Tag.Copies)
		}
	}
	return nil
}

// copyArray returns the array id of j when j is a task of a copies job
// (tagged copies=K >= 2).
func copyArray(j slurm.Job) (string, bool) {
	if !jobproto.IsTagged(j.Comment) || jobproto.TaskIndex(j.ID()) < 0 {
		return "", false
	}
	tag, err := jobproto.ParseTag(j.Comment)
	if err != nil || tag.Copies < 2 {
		return "", false
	}
	a, _, _ := strings.Cut(j.ID(), "_")
	return a, true
}

// failOpen trims the held tasks that ReleaseAll hands to Slurm: a
// copies job (array tasks tagged copies=K >= 2) keeps its copies on
// distinct nodes only under hadar, so Slurm gets one task of it, the
// lowest held one, and none if a copy already runs. The job then goes on
// as one copy (the copies helper makes its own rounds without hadar's
// plan); the other tasks stay held until hadar is back, and the copies
// cancel them when the job is done.
func (jobArrays) failOpen(jobs []slurm.Job, ids []string) []string {
	type arr struct {
		running bool
		first   string
	}
	arrays := map[string]*arr{}
	held := map[string]bool{}
	for _, id := range ids {
		held[id] = true
	}
	for _, j := range jobs {
		a, ok := copyArray(j)
		if !ok {
			continue
		}
		if arrays[a] == nil {
			arrays[a] = &arr{}
		}
		if j.State != "PENDING" {
			arrays[a].running = true
		} else if held[j.ID()] && (arrays[a].first == "" || jobproto.TaskIndex(j.ID()) < jobproto.TaskIndex(arrays[a].first)) {
			arrays[a].first = j.ID()
		}
	}
	out := ids[:0:0]
	for _, j := range jobs {
		if !held[j.ID()] {
			continue
		}
		if a, ok := copyArray(j); ok && (arrays[a].running || arrays[a].first != j.ID()) {
			continue
		}
		out = append(out, j.ID())
	}
	return out
}

// writeCopyPlans writes every copies job's plan.json after the round's
// actions ran: copies whose place or release failed are left out. Errors
// are logged, never fatal: copies go on with the last plan they have.
func (b *Bridge) writeCopyPlans(cfg config.Config, round int64, plans []jobproto.CopyPlan, results []ActionResult, now time.Time) []error {
	if len(plans) == 0 {
		// Every round, copies job or not: solo jobs using the copies
		// helper checkpoint under spool_dir/copies too.
		if err := jobproto.EnsureCopiesDir(cfg.SpoolDir); err != nil {
			return []error{fmt.Errorf("copies directory: %w", err)}
		}
		return nil
	}
	failed := map[string]bool{}
	for _, r := range results {
		if r.Action.Kind != ActPlace && r.Action.Kind != ActRelease && r.Action.Kind != ActStartNow {
			continue
		}
		bad := append(append([]string(nil), r.Skipped...), r.Refused...)
		if r.Err != nil {
			bad = append(bad, r.Sent...)
		}
		for _, id := range bad {
			failed[id] = true
		}
	}
	var errs []error
	for _, cp := range plans {
		cp.Generation = round
		cp.WrittenAt = now.UTC()
		cp.WrittenUnix = float64(now.UnixNano()) / 1e9
		cp.Copies = slices.DeleteFunc(cp.Copies, func(c jobproto.CopyMember) bool { return c.State == "placed" && failed[c.Task] })
		uid, err := b.uidOf(cp.User)
		if err != nil {
			errs = append(errs, fmt.Errorf("copies plan of job %s: user %q: %w", cp.Job, cp.User, err))
			continue
		}
		if err := jobproto.WriteCopyPlan(cfg.SpoolDir, uid, cp); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (b *Bridge) uidOf(user string) (int, error) {
	if uid, ok := b.uids[user]; ok {
		return uid, nil
	}
	uid, err := b.deps.LookupUID(user)
	if err != nil {
		return 0, err
	}
	b.uids[user] = uid
	return uid, nil
}
