package optimizer

import (
	"fmt"
	"maps"
	"sort"
)

// siteOrdered wraps a policy so that the site's priority (Job.Priority)
// decides which waiting jobs start when GPUs are short, and the policy
// decides where they run (Options.SiteOrder): it plans on the snapshot
// without the jobs SiteOrder puts behind others, and its plan says why
// they wait.
type siteOrdered struct {
	Policy
}

// siteOrderedCopies is siteOrdered for a policy that forks copies, keeping
// its CopyLimiter visible to drivers.
type siteOrderedCopies struct {
	siteOrdered
	CopyLimiter
}

// inSiteOrder wraps p (see siteOrdered).
func inSiteOrder(p Policy) Policy {
	o := siteOrdered{p}
	if l, ok := p.(CopyLimiter); ok {
		return siteOrderedCopies{o, l}
	}
	return o
}

// Unwrap implements unwrapper.
func (o siteOrdered) Unwrap() Policy { return o.Policy }

// Plan implements Policy.
func (o siteOrdered) Plan(s *Snapshot) (*Plan, error) {
	behind := SiteOrder(s)
	if len(behind) == 0 {
		return o.Policy.Plan(s)
	}
	cut := *s
	cut.Jobs = make([]Job, 0, len(s.Jobs)-len(behind))
	for _, j := range s.Jobs {
		if _, ok := behind[j.ID]; !ok {
			cut.Jobs = append(cut.Jobs, j)
		}
	}
	p, err := o.Policy.Plan(&cut)
	if err != nil || p == nil {
		return p, err
	}
	if p.Waits == nil {
		p.Waits = map[string]string{}
	}
	maps.Copy(p.Waits, behind)
	return p, nil
}

// SiteOrder returns the waiting jobs of s (no Current) that the site's
// priority puts behind others this round, each with why. It walks the
// waiting jobs from the highest Priority down, tier by tier (jobs of equal
// priority form a tier, among which the policy chooses), and hands each
// tier the GPUs that are free now (not held by running jobs, which keep
// theirs) on nodes its shape allows, of types it runs on. A job that fits
// on what the tiers above it left goes to the policy and takes those GPUs;
// one that fits only on what its tier-mates took goes to the policy too; one
// that would fit on the free GPUs but not on what the tiers above it left
// is behind; one that fits on none of the free GPUs even alone cannot start
// now whoever goes first, and goes to the policy (whose own rules for wide
// jobs see it). It is pure.
func SiteOrder(s *Snapshot) map[string]string {
	free := map[string]int{}
	for _, n := range s.Nodes {
		free[nodeKey(n.Name, n.Type)] += n.GPUs
	}
	var waiting []*Job
	for i := range s.Jobs {
		j := &s.Jobs[i]
		for _, t := range j.Current {
			free[nodeKey(t.Node, t.Type)] -= t.GPUs
		}
		if len(j.Current) == 0 && j.Workers > 0 {
			waiting = append(waiting, j)
		}
	}
	sort.SliceStable(waiting, func(a, b int) bool {
		if waiting[a].Priority != waiting[b].Priority {
			return waiting[a].Priority > waiting[b].Priority
		}
		if !waiting[a].Arrival.Equal(waiting[b].Arrival) {
			return waiting[a].Arrival.Before(waiting[b].Arrival)
		}
		return waiting[a].ID < waiting[b].ID
	})
	behind := map[string]string{}
	left := maps.Clone(free)
	limits := maps.Clone(s.Limits)
	for i := 0; i < len(waiting); {
		k := i
		for k < len(waiting) && waiting[k].Priority == waiting[i].Priority {
			k++
		}
		above := maps.Clone(left)
		for _, j := range waiting[i:k] {
			if ok, why := limitsAdmit(j, limits, false); !ok {
				// Slurm would not start it either (counting the jobs of
				// higher priority that start first).
				behind[j.ID] = "would exceed a limit of the site: " + why
				continue
			}
			switch {
			case s.fitsFree(j, left, true):
				limitsAdmit(j, limits, true)
			case s.fitsFree(j, above, false):
				limitsAdmit(j, limits, true)
			case s.fitsFree(j, free, false):
				behind[j.ID] = fmt.Sprintf("waits for jobs of higher priority in the site's order (its priority: %d)", j.Priority)
			}
		}
		i = k
	}
	return behind
}

// fitsFree reports whether job j's gang fits on the GPUs of avail (by
// nodeKey) on one type, on nodes its shape allows, of a type it runs on;
// with take, the GPUs are taken from avail, on its fastest type that holds
// it (the nodes with the fewest free GPUs that hold a worker's share first).
func (s *Snapshot) fitsFree(j *Job, avail map[string]int, take bool) bool {
	types := s.typesOf()
	sort.SliceStable(types, func(a, b int) bool {
		return s.Throughput.Rate(j.Type, types[a], j.Workers) > s.Throughput.Rate(j.Type, types[b], j.Workers)
	})
	for _, t := range types {
		if s.Throughput.Rate(j.Type, t, j.Workers) <= 0 || !j.Shape.AllowsType(t) {
			continue
		}
		var nodes []Node
		for _, n := range s.Nodes {
			if n.Type == t && avail[nodeKey(n.Name, t)] > 0 && j.Shape.AllowsNode(n) {
				m := n
				m.GPUs = avail[nodeKey(n.Name, t)]
				nodes = append(nodes, m)
			}
		}
		if !j.Shape.FitsType(nodes, t, j.Workers) {
			continue
		}
		if take {
			takeGang(j, nodes, avail)
		}
		return true
	}
	return false
}

// takeGang takes job j's workers from avail on nodes (all of one type that
// hold it, FitsType): per node GPUsPerNode on the fullest-used nodes first,
// or any split.
func takeGang(j *Job, nodes []Node, avail map[string]int) {
	sort.SliceStable(nodes, func(a, b int) bool { return nodes[a].GPUs < nodes[b].GPUs })
	need := j.Workers
	for _, n := range nodes {
		if need <= 0 {
			break
		}
		k := nodeKey(n.Name, n.Type)
		g := min(n.GPUs, need)
		if per := j.Shape.GPUsPerNode; per > 0 {
			if n.GPUs < per {
				continue
			}
			g = per
		}
		avail[k] -= g
		need -= g
	}
}

// typesOf is the GPU types of the snapshot's nodes, sorted.
func (s *Snapshot) typesOf() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range s.Nodes {
		if !seen[n.Type] {
			seen[n.Type] = true
			out = append(out, n.Type)
		}
	}
	sort.Strings(out)
	return out
}

// KeepLimits takes out of plan the jobs it would start beyond the site's
// limits (Snapshot.Limits), lowest priority last to keep (the order Slurm
// would start them in), and says why they wait: Slurm would leave them
// pending, their GPUs idle, until launch_timeout. Running jobs count in
// Limits already. plan is modified.
func KeepLimits(s *Snapshot, plan *Plan) *Plan {
	if len(s.Limits) == 0 {
		return plan
	}
	var starting []*Job
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if len(j.Current) == 0 && len(plan.Assignments[j.ID]) > 0 && len(j.Limits) > 0 {
			starting = append(starting, j)
		}
	}
	sort.SliceStable(starting, func(a, b int) bool {
		if starting[a].Priority != starting[b].Priority {
			return starting[a].Priority > starting[b].Priority
		}
		return starting[a].ID < starting[b].ID
	})
	left := maps.Clone(s.Limits)
	for _, j := range starting {
		if ok, why := limitsAdmit(j, left, true); !ok {
			delete(plan.Assignments, j.ID)
			if plan.Waits == nil {
				plan.Waits = map[string]string{}
			}
			plan.Waits[j.ID] = "would exceed a limit of the site: " + why
		}
	}
	return plan
}
