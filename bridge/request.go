package bridge

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// Request is a tagged job's whole request as hadar reads it from squeue and
// scontrol: the shape its gang must take and the nodes it may use. It
// becomes the job's optimizer.Shape, so the policy places only what Slurm
// will run.
type Request struct {
	// NumNodes x GPUsPerNode is the gang.
	NumNodes, GPUsPerNode int
	// Types are the canonical GPU types a typed request (--gres=gpu:TYPE:N,
	// --gpus=TYPE:N) or a constraint naming GPU types allows; nil: any.
	Types []string
	// Eligible are the nodes its features, --exclude and partition allow;
	// nil: any.
	Eligible map[string]bool
	// CPUsPerNode and MemMBPerNode are what it needs on each node.
	CPUsPerNode  int
	MemMBPerNode int64
	// Form says how the job asked for GPUs ("--gres=gpu:2", "--gpus=2",
	// ...), for messages.
	Form string
	// Gres is a --gres request as the user submitted it ("gpu:2",
	// "gpu:v100:1"; "" for other forms), and Site its GPU type in the
	// site's words ("" untyped): what hadar sets back when a job it
	// retyped is placed where no type needs to be named.
	Gres, Site string
	// Retypable: hadar may set the job's GPU type (scontrol update
	// Gres=gpu:TYPE:N) to place it on a node used per type: a one-node,
	// GPU-only per-node request that squeue shows (--gres; on 24.11 also
	// --gpus-per-node, the same TresPerNode field) on a Slurm that
	// replaces the type (ViewInput.Retype).
	Retypable bool
}

// Shape is the request as the optimizer's input.
func (r Request) Shape() optimizer.Shape {
	return optimizer.Shape{Nodes: r.NumNodes, GPUsPerNode: r.GPUsPerNode, Types: r.Types, Eligible: r.Eligible,
		CPUsPerNode: r.CPUsPerNode, MemMBPerNode: r.MemMBPerNode}
}

// gpuRequest reads how many GPUs per node, and of which site type, a job
// asks for: --gres=gpu[:type]:N (squeue %b, TresPerNode), --gpus-per-node,
// --gpus[=type:]N (TresPerJob, spread evenly over its nodes) or
// --gpus-per-task (TresPerTask x tasks per node). site is "" for untyped.
func gpuRequest(j *slurm.Job, d *slurm.JobDetail, numNodes int) (perNode int, site, form string, err error) {
	pick := func(gs []slurm.GRES) (int, string, bool) {
		n, t := 0, ""
		for _, g := range gs {
			if g.Name == "gpu" && g.Count > 0 {
				if t != "" && g.Type != t || n > 0 && g.Type == "" && t == "" {
					return 0, "", false
				}
				n, t = n+g.Count, g.Type
			}
		}
		return n, t, n > 0
	}
	if n, t, ok := pick(j.Gres); ok {
		return n, t, "--gres=gpu:" + typedCount(t, n), nil
	}
	if d == nil {
		return 0, "", "", nil
	}
	if n, t, ok := pick(d.TresPerNode); ok {
		return n, t, "--gpus-per-node=" + typedCount(t, n), nil
	}
	if n, t, ok := pick(d.TresPerJob); ok {
		if n%numNodes != 0 {
			return 0, "", "", fmt.Errorf("--gpus=%s does not split evenly over its %d nodes (use --gpus-per-node)", typedCount(t, n), numNodes)
		}
		return n / numNodes, t, "--gpus=" + typedCount(t, n), nil
	}
	if n, t, ok := pick(d.TresPerTask); ok {
		tasks := max(d.NumTasks, 1)
		if tasks%numNodes != 0 {
			return 0, "", "", fmt.Errorf("--gpus-per-task=%s with %d tasks does not split evenly over its %d nodes", typedCount(t, n), tasks, numNodes)
		}
		return n * tasks / numNodes, t, "--gpus-per-task=" + typedCount(t, n), nil
	}
	return 0, "", "", nil
}

func typedCount(t string, n int) string {
	if t == "" {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%s:%d", t, n)
}

// featureMatch evaluates a --constraint expression on a node's features:
// names joined by & (and) or | (or), & binding tighter, as Slurm reads them.
// Brackets, counts (gpu*2) and other operators are not understood: ok is
// false and the job is passed through, rather than placed where Slurm
// would refuse it.
func featureMatch(expr string, features map[string]bool) (match, ok bool) {
	if strings.ContainsAny(expr, "[]()*,!") {
		return false, false
	}
	for _, alt := range strings.Split(expr, "|") {
		all := true
		for _, f := range strings.Split(alt, "&") {
			f = strings.TrimSpace(f)
			if f == "" {
				return false, false
			}
			all = all && features[f]
		}
		if all {
			return true, true
		}
	}
	return false, true
}

// readRequest builds a tagged job's Request from squeue's row and, when
// scontrol gave one, its detail. It returns why hadar cannot read it.
//
// A job whose Gres hadar rewrote (ViewInput.Requested) is read from what
// its user asked for, so that a type hadar set is never taken for the
// user's constraint.
func (v *View) readRequest(j *slurm.Job, d *slurm.JobDetail, jv *JobView, in ViewInput, nodes []slurm.Node) (Request, string) {
	r := Request{NumNodes: jv.NumNodes}
	jv.GresSite = gresSite(j.Gres)
	if asked, ok := in.Requested[jv.ID]; ok {
		if g, err := slurm.ParseGRES(asked); err == nil && len(g) > 0 {
			own := *j
			own.Gres = g
			j = &own
		}
	}
	perNode, site, form, err := gpuRequest(j, d, r.NumNodes)
	if err != nil {
		return r, err.Error()
	}
	if strings.HasPrefix(form, "--gres=") && len(j.Gres) == 1 {
		r.Gres, r.Site = j.Gres[0].String(), site
		r.Retypable = in.Retype && r.NumNodes == 1
	}
	if perNode <= 0 {
		if d == nil && strings.EqualFold(strings.TrimSpace(j.GresRaw), "N/A") {
			return r, "its GPU request (--gpus, --gpus-per-node or --gpus-per-task) is in scontrol's record, which could not be read this round"
		}
		return r, "the job asks for no GPUs (submit with --gres=gpu:N, --gpus=N, --gpus-per-node=N or --gpus-per-task=N)"
	}
	r.GPUsPerNode, r.Form = perNode, form
	if site != "" {
		t, err := in.ResolveGPU(site)
		if err != nil || t == "" {
			return r, fmt.Sprintf("the job asks for GPU type %q, which hadar does not know (add it to [gres] aliases)", site)
		}
		r.Types = []string{t}
	}
	if d == nil {
		return r, ""
	}
	r.CPUsPerNode = d.MinCPUsNode
	r.MemMBPerNode = d.MinMemoryNodeMB
	if r.MemMBPerNode == 0 && d.MinMemoryCPUMB > 0 {
		r.MemMBPerNode = d.MinMemoryCPUMB * int64(max(d.MinCPUsNode, 1))
	}
	excluded := map[string]bool{}
	if d.ExcNodeList != "" {
		names, err := slurm.ExpandHostlist(d.ExcNodeList)
		if err != nil {
			return r, fmt.Sprintf("its --exclude list %q cannot be read", jobproto.Clip(d.ExcNodeList))
		}
		for _, n := range names {
			excluded[n] = true
		}
	}
	partitions := map[string]bool{}
	for _, p := range strings.Split(d.Partition, ",") {
		if p = strings.TrimSpace(p); p != "" {
			partitions[p] = true
		}
	}
	if len(excluded) == 0 && len(partitions) == 0 && d.Features == "" {
		return r, ""
	}
	r.Eligible = map[string]bool{}
	for _, n := range nodes {
		if excluded[n.Name] {
			continue
		}
		// A node whose partitions scontrol does not list is not ruled
		// out: better a placement Slurm refuses (and hadar takes back)
		// than every job passed through.
		if len(partitions) > 0 && len(n.Partitions) > 0 && !anyIn(n.Partitions, partitions) {
			continue
		}
		if d.Features != "" {
			have := map[string]bool{}
			for _, f := range n.Features {
				have[f] = true
			}
			match, ok := featureMatch(d.Features, have)
			if !ok {
				return r, fmt.Sprintf("its --constraint %q uses operators hadar does not evaluate (only & and |)", jobproto.Clip(d.Features))
			}
			if !match {
				continue
			}
		}
		r.Eligible[n.Name] = true
	}
	return r, ""
}

// gresSite is the GPU type a Gres list names ("" for untyped or none).
func gresSite(gs []slurm.GRES) string {
	for _, g := range gs {
		if g.Name == "gpu" && g.Count > 0 {
			return g.Type
		}
	}
	return ""
}

// keepOffPools rules the nodes used per type out for a job hadar may not
// retype: Slurm, not hadar, would choose its GPU type there.
func (v *View) keepOffPools(r Request) Request {
	if r.Retypable {
		return r
	}
	var pooled []string
	for _, n := range v.Nodes {
		if n.Pools != nil {
			pooled = append(pooled, n.Name)
		}
	}
	if len(pooled) == 0 {
		return r
	}
	eligible := map[string]bool{}
	for _, n := range v.Nodes {
		if r.Eligible == nil || r.Eligible[n.Name] {
			eligible[n.Name] = true
		}
	}
	for _, n := range pooled {
		delete(eligible, n)
	}
	r.Eligible = eligible
	return r
}

func anyIn(xs []string, set map[string]bool) bool {
	for _, x := range xs {
		if set[x] {
			return true
		}
	}
	return false
}

// liveNodes are the nodes a job can hold its gang on at all, whole: those
// hadar uses now, and those that only do not answer for the moment (every
// node does just after slurmctld restarts). Drained or admin-down nodes do
// not count: a job only they could hold would wait for an admin.
func (v *View) liveNodes() []optimizer.Node {
	var out []optimizer.Node
	for _, n := range v.Nodes {
		if !(n.Usable || n.Transient) {
			continue
		}
		for _, p := range n.TypePools() {
			out = append(out, optimizer.Node{Name: n.Name, Type: p.Type, GPUs: p.Total, CPUs: n.CPUTot, MemMB: n.MemTot})
		}
	}
	return out
}

// infeasible says why no live node hadar uses can run the job's request
// at a known rate ("" if some can).
func (v *View) infeasible(jv *JobView, tp optimizer.Throughputs, live []optimizer.Node) string {
	shape := jv.Request.Shape()
	types := map[string]bool{}
	for _, n := range live {
		types[n.Type] = true
	}
	var rated, fits []string
	for t := range types {
		if tp.Rate(jv.Model, t, jv.Workers) <= 0 || !shape.AllowsType(t) {
			continue
		}
		rated = append(rated, t)
		if shape.FitsType(live, t, jv.Workers) {
			fits = append(fits, t)
		}
	}
	if len(fits) > 0 {
		return ""
	}
	sort.Strings(rated)
	req := fmt.Sprintf("%d node(s) x %d GPUs", jv.NumNodes, jv.GPUsPerNode)
	if jv.Request.CPUsPerNode > 0 || jv.Request.MemMBPerNode > 0 {
		req += fmt.Sprintf(" with %d CPUs and %d MB each", jv.Request.CPUsPerNode, jv.Request.MemMBPerNode)
	}
	if len(rated) == 0 {
		if len(jv.Request.Types) > 0 {
			return fmt.Sprintf("no live node hadar uses has GPU type %s with a known rate for %q", strings.Join(jv.Request.Types, ","), jv.Model)
		}
		return fmt.Sprintf("no throughput known for %q with %d GPUs on this cluster's live GPU types", jv.Model, jv.Workers)
	}
	return fmt.Sprintf("no live node hadar uses can hold %s among the nodes it may use (rated types: %s)", req, strings.Join(rated, ", "))
}
