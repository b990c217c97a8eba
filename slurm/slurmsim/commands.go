package slurmsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/slurm"
)

// The verbs hadar-slurmd uses (bridge.Cluster), each as the Slurm command
// would do it. Every command takes Timing.CommandDelay of virtual time.

// Jobs is squeue (slurm.JobQueryArgs): pending and running jobs, in
// submission order.
func (c *Cluster) Jobs(ctx context.Context) ([]slurm.Job, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.command()
	c.accrue()
	out := make([]slurm.Job, 0, c.live)
	for _, id := range c.liveOrder() {
		j := c.jobs[id]
		if j.State != Pending && j.State != Running {
			continue
		}
		sj := slurm.Job{JobID: id, ArrayJobID: id, User: j.Spec.User, State: j.State, NumNodes: j.Spec.NumNodes,
			SubmitTime: j.Submit, Nodes: slices.Clone(j.Nodes), NodeList: strings.Join(j.Nodes, ","),
			Reason: c.reason(j), Name: j.Spec.Name, Comment: j.Spec.Comment, GresRaw: "N/A"}
		if j.Spec.ArrayJob != "" {
			sj.ArrayJobID, sj.ArrayTaskID = j.Spec.ArrayJob, j.Spec.ArrayTask
		}
		if j.Spec.GPUsPerNode > 0 && j.Spec.GPUsPerJob == 0 {
			if j.gresRaw == "" { // the request does not change: written once
				j.gresRaw = "gres:" + slurm.GRES{Name: "gpu", Type: j.Spec.GPUType, Count: j.Spec.GPUsPerNode}.String()
			}
			sj.Gres, sj.GresRaw = []slurm.GRES{{Name: "gpu", Type: j.Spec.GPUType, Count: j.Spec.GPUsPerNode}}, j.gresRaw
		}
		if j.State == Running {
			sj.StartTime = j.Runs[len(j.Runs)-1].Start
			sj.TimeUsed = c.now.Sub(sj.StartTime)
		}
		if j.State == Pending {
			if j.Begin.After(c.now) {
				sj.StartTime = j.Begin
			}
			if !j.Held {
				sj.Priority = c.sitePriority(j)
			}
		}
		out = append(out, sj)
	}
	return out, nil
}

// reason is squeue's %r.
func (c *Cluster) reason(j *Job) string {
	switch {
	case j.State != Pending:
		return "None"
	case j.Held:
		return j.heldReason
	case j.Begin.After(c.now):
		return "BeginTime"
	}
	return j.Reason
}

// JobDetails is scontrol show job (slurm.JobDetailQueryArgs). It also
// brings the running training jobs' progress reports up to date, as if they
// had been writing them every tick: the daemon reads the spool once a
// round, right after this command, so it sees the files it would see live,
// and the polls between rounds (squeue) cost no file writes.
func (c *Cluster) JobDetails(ctx context.Context) ([]slurm.JobDetail, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.command()
	c.syncReports()
	out := make([]slurm.JobDetail, 0, c.live)
	for _, id := range c.liveOrder() {
		j := c.jobs[id]
		if j.State != Pending && j.State != Running {
			continue
		}
		s := j.Spec
		d := slurm.JobDetail{JobID: id, ArrayJobID: s.ArrayJob, ArrayTaskID: s.ArrayTask, Name: s.Name, UserName: s.User,
			JobState: j.State, Reason: c.reason(j), Restarts: j.Restarts, BatchFlag: 1,
			ReqNodeList: strings.Join(j.ReqNodes, ","), ExcNodeList: s.Exclude, NodeList: strings.Join(j.Nodes, ","),
			NumTasks: 1, Partition: "gpu", Features: s.Features, MinCPUsNode: s.CPUs, MinMemoryNodeMB: s.MemoryMB,
			TimeLimit: s.TimeLimit, Comment: s.Comment, AdminComment: j.AdminComment, Account: s.Account, QOS: s.QOS}
		if j.State == Running {
			for _, t := range slices.Sorted(maps.Keys(j.gpusByType(c))) {
				d.JobGres = append(d.JobGres, slurm.GRES{Name: "gpu", Type: t, Count: int(j.gpusByType(c)[t])})
			}
		}
		switch {
		case s.GPUsPerJob > 0:
			d.TresPerJob = []slurm.GRES{{Name: "gpu", Type: s.GPUType, Count: s.GPUsPerJob}}
		case s.GPUsPerNode > 0:
			d.TresPerNode = []slurm.GRES{{Name: "gpu", Type: s.GPUType, Count: s.GPUsPerNode}}
		}
		out = append(out, d)
	}
	return out, nil
}

// Nodes is scontrol show node (slurm.NodeQueryArgs).
func (c *Cluster) Nodes(ctx context.Context) ([]slurm.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.command()
	out := make([]slurm.Node, 0, len(c.nodes))
	for i, n := range c.nodes {
		sn := slurm.Node{Name: n.Name, Partitions: []string{"gpu"}, Features: slices.Clone(n.features),
			CPUTot: n.cpus, RealMemory: n.mem}
		used := 0
		for g, grp := range n.GPUs {
			u := c.usedGPUs(i, g)
			used += u
			sn.Gres = append(sn.Gres, slurm.GRES{Name: "gpu", Type: grp.Type, Count: grp.Count})
			sn.GresUsed = append(sn.GresUsed, slurm.GRES{Name: "gpu", Type: grp.Type, Count: u})
		}
		if n.cpus > 0 {
			sn.CPUAlloc = n.cpus - c.freeCPUs(i)
		}
		if n.mem > 0 {
			sn.AllocMem = c.usedMem(i)
		}
		busy := c.usage()[i].grants
		raw := "IDLE"
		switch {
		case busy > 0 && n.cpus > 0 && sn.CPUAlloc >= n.cpus:
			raw = "ALLOCATED"
		case busy > 0:
			raw = "MIXED"
		}
		switch {
		case strings.HasPrefix(n.raw, "DOWN"):
			raw = n.raw
		case n.raw != "":
			raw += "+" + n.raw
		}
		raw += c.reservationFlags(n)
		sn.RawState = raw
		sn.State, sn.Flags = slurm.ParseNodeState(raw)
		out = append(out, sn)
	}
	return out, nil
}

// command runs what happens while a command runs.
func (c *Cluster) command() { c.advance(c.now.Add(c.cfg.CommandDelay)) }

// each applies fn to every job of ids as scontrol does for a list: the
// others go on when one fails; the errors are joined.
func (c *Cluster) each(verb string, ids []string, fn func(j *Job) error) error {
	c.command()
	var errs []error
	for _, id := range ids {
		j := c.lookup(id)
		if j == nil || (j.State != Pending && j.State != Running) {
			errs = append(errs, fmt.Errorf("%s: job %s: %w", verb, id, slurm.ErrInvalidJobID))
			continue
		}
		if err := fn(j); err != nil {
			errs = append(errs, fmt.Errorf("%s: job %s: %w", verb, id, err))
		}
	}
	return errors.Join(errs...)
}

// lookup finds a job by its id or as ARRAY_TASK.
func (c *Cluster) lookup(id string) *Job {
	if j := c.jobs[id]; j != nil {
		return j
	}
	for _, k := range c.order {
		if j := c.jobs[k]; j.Spec.ArrayJob != "" && j.Spec.ArrayJob+"_"+j.Spec.ArrayTask == id {
			return j
		}
	}
	return nil
}

// PlaceOnNodes is scontrol update JobId=ID NodeList=...: a pending job then
// runs exactly there.
func (c *Cluster) PlaceOnNodes(ctx context.Context, id string, nodes []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.each("update", []string{id}, func(j *Job) error {
		if j.State != Pending {
			return slurm.ErrInvalidNodeName
		}
		for _, n := range nodes {
			if c.node(n) == nil {
				return slurm.ErrInvalidNodeName
			}
		}
		j.ReqNodes = slices.Clone(nodes)
		c.kick()
		return nil
	})
}

// UpdateJobs is scontrol update JobId=a,b,c KEY=VALUE...: StartTime=now,
// now+SECONDS or a time (Slurm's 2006-01-02T15:04:05 in local time, or RFC
// 3339), AdminComment= and Comment=.
func (c *Cluster) UpdateJobs(ctx context.Context, ids []string, kv ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.each("update", ids, func(j *Job) error {
		for _, x := range kv {
			k, v, _ := strings.Cut(x, "=")
			switch k {
			case "StartTime":
				if j.State != Pending {
					return slurm.ErrJobNotPending
				}
				at, err := parseStartTime(v, c.now)
				if err != nil {
					return err
				}
				j.Begin = at
				if !at.After(c.now) && j.Reason == "BeginTime" {
					j.Reason = "Priority"
				}
				c.push(event{at: at, kind: evBegin})
			case "AdminComment":
				j.AdminComment = v
			case "Comment":
				j.Spec.Comment = v
			default:
				return fmt.Errorf("%w: %s", slurm.ErrBadArgument, k)
			}
		}
		c.kick()
		return nil
	})
}

// Release is scontrol release: a held job gets a new priority (below every
// job's before it) and Slurm may start it; releasing a job that is not held
// lowers its priority, as in 22.05.
func (c *Cluster) Release(ctx context.Context, ids ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.each("release", ids, func(j *Job) error {
		j.Releases++
		if j.State == Pending {
			j.Held = false
			j.Reason = "Priority"
			c.prioritize(j)
			c.kick()
		}
		return nil
	})
}

// Hold is scontrol hold (by root: JobHeldAdmin).
func (c *Cluster) Hold(ctx context.Context, ids ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.each("hold", ids, func(j *Job) error {
		if j.State != Pending {
			return slurm.ErrJobNotPending
		}
		j.Held, j.heldReason = true, ReasonHeldAdmin
		return nil
	})
}

// RequeueHold is scontrol requeuehold: a running job is pending and held at
// once (its training resumes from its last report when it runs again);
// its old allocation ends RequeueDelay later, and then its begin time is
// set EligibleDelay on.
func (c *Cluster) RequeueHold(ctx context.Context, ids ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.each("requeuehold", ids, func(j *Job) error {
		if j.State != Running {
			return slurm.ErrJobNotPending
		}
		c.accrue()
		if j.Spec.Model != "" {
			c.report(j, c.now)
		}
		j.Runs[len(j.Runs)-1].End = c.now
		j.gen++
		gen := j.gen
		until := c.now.Add(c.cfg.RequeueDelay)
		c.ghosts = append(c.ghosts, ghost{job: j, gen: gen, until: until, alloc: j.alloc})
		j.requeuedAt, j.requeuedFrom = c.now, j.Nodes
		j.State, j.Held, j.heldReason, j.alloc, j.Nodes = Pending, true, ReasonRequeued, nil, nil
		c.changed()
		j.completing = until
		j.Restarts++
		c.push(event{at: until, kind: evRequeued, job: j, gen: gen})
		return nil
	})
}

// SetAdminComment is scontrol update JobId=... AdminComment=TEXT.
func (c *Cluster) SetAdminComment(ctx context.Context, ids []string, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.each("update", ids, func(j *Job) error {
		j.AdminComment = text
		return nil
	})
}

// parseStartTime reads the StartTime= values hadar sends: now, now+SECONDS,
// a local time in Slurm's format, or RFC 3339.
func parseStartTime(v string, now time.Time) (time.Time, error) {
	if v == "now" {
		return now, nil
	}
	if rest, ok := strings.CutPrefix(v, "now+"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("%w: StartTime=%s", slurm.ErrBadArgument, v)
		}
		return now.Add(time.Duration(n) * time.Second), nil
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: StartTime=%s", slurm.ErrBadArgument, v)
	}
	return t, nil
}

// sitePriority is squeue's %Q of a pending job that is not held: with
// Config.Priority, priority/multifactor's (fairshare and age); without, its
// age, as Slurm's multifactor age factor orders jobs (earlier first, jobs
// submitted in the same second alike); the simulator orders trace jobs the
// same way (sim.Run).
func (c *Cluster) sitePriority(j *Job) int64 {
	if c.cfg.Priority.On() {
		return c.multifactor(j)
	}
	return 1<<40 - int64(j.Submit.Sub(c.cfg.Start)/time.Second)
}
