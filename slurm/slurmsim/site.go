package slurmsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hadar-sched/hadar/slurm"
)

// The site's policy: accounting limits (sacctmgr's associations and QOS),
// priority/multifactor's fairshare and age, and reservations.

// Multifactor are the weights of priority/multifactor that slurmsim
// models (slurm.conf's PriorityWeightFairshare, PriorityWeightAge,
// PriorityMaxAge, PriorityDecayHalfLife). The zero value is no multifactor:
// jobs are ordered by age alone (Cluster.sitePriority).
type Multifactor struct {
	WeightFairshare, WeightAge int64
	// MaxAge is the age at which the age factor reaches 1 (Slurm's
	// default 7 days).
	MaxAge time.Duration
	// DecayHalfLife is the half-life of past usage (0: no decay).
	DecayHalfLife time.Duration
}

// On reports whether the multifactor priority is configured.
func (m Multifactor) On() bool { return m.WeightFairshare > 0 || m.WeightAge > 0 }

// ErrNoAccounting is what Limits returns on a cluster without accounting
// (sacctmgr fails without slurmdbd).
var ErrNoAccounting = errors.New("sacctmgr: no accounting storage (slurmdbd) on this cluster")

// Limits is sacctmgr show assoc and show qos (bridge.SiteReader): the
// cluster's accounting limits, or ErrNoAccounting without them.
func (c *Cluster) Limits(ctx context.Context) (slurm.Limits, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.command()
	if c.cfg.Limits == nil {
		return slurm.Limits{}, ErrNoAccounting
	}
	l := *c.cfg.Limits
	return slurm.Limits{Associations: slices.Clone(l.Associations), QOS: slices.Clone(l.QOS)}, nil
}

// Reservations is scontrol show reservation (bridge.SiteReader): the
// reservations that have not ended, ACTIVE once they have begun.
func (c *Cluster) Reservations(ctx context.Context) ([]slurm.Reservation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.command()
	var out []slurm.Reservation
	for _, r := range c.cfg.Reservations {
		if !r.End.After(c.now) {
			continue
		}
		r.State = "INACTIVE"
		if !r.Start.After(c.now) {
			r.State = "ACTIVE"
		}
		r.Nodes, r.Flags, r.Users, r.Accounts = slices.Clone(r.Nodes), slices.Clone(r.Flags), slices.Clone(r.Users), slices.Clone(r.Accounts)
		out = append(out, r)
	}
	return out, nil
}

// account resolves a submitted job's account and QOS as slurmctld does
// with accounting: no --account is the user's (first) association's
// account, no --qos that association's default QOS, else "normal".
func (c *Cluster) account(spec *JobSpec) {
	if c.cfg.Limits == nil {
		return
	}
	var assoc *slurm.Association
	for i := range c.cfg.Limits.Associations {
		a := &c.cfg.Limits.Associations[i]
		if a.User == spec.User && a.Partition == "" && (spec.Account == "" || a.Account == spec.Account) {
			assoc = a
			break
		}
	}
	if assoc == nil {
		return // the limit check says InvalidAccount
	}
	if spec.Account == "" {
		spec.Account = assoc.Account
	}
	if spec.QOS == "" {
		spec.QOS = assoc.DefaultQOS
		if spec.QOS == "" {
			spec.QOS = "normal"
		}
	}
}

// overLimit says which accounting limit starting job j now would exceed
// (slurm.Limits.CheckGPUJob), as the pending reason Slurm gives: "" when
// none would, InvalidAccount or InvalidQOS for a job whose association or
// QOS the site does not have. alloc is where it would run (nil: it has no
// room now), which gives its GPU type for limits on one type; a typed
// limit of a job with no room yet is checked once it has.
func (c *Cluster) overLimit(j *Job, alloc []grant) string {
	if c.cfg.Limits == nil {
		return ""
	}
	i := slices.IndexFunc(c.cfg.Limits.Associations, func(a slurm.Association) bool {
		return a.User == j.Spec.User && a.Account == j.Spec.Account && a.Partition == ""
	})
	if i < 0 {
		return "InvalidAccount"
	}
	if qos := c.cfg.Limits.Associations[i].QOS; !c.hasQOS(j.Spec.QOS) || (len(qos) > 0 && !slices.Contains(qos, j.Spec.QOS)) {
		return "InvalidQOS"
	}
	var running []slurm.RunningJob
	for _, id := range c.liveOrder() {
		r := c.jobs[id]
		if r.State == Running {
			running = append(running, slurm.RunningJob{User: r.Spec.User, Account: r.Spec.Account, QOS: r.Spec.QOS, GPUs: r.gpusByType(c)})
		}
	}
	req := slurm.GPURequest{User: j.Spec.User, Account: j.Spec.Account, QOS: j.Spec.QOS,
		GPUs: int64(j.gpusPerNode() * j.Spec.NumNodes), GPUType: j.Spec.GPUType}
	types := map[string]bool{}
	for _, g := range alloc {
		if g.group >= 0 {
			types[c.nodes[g.node].GPUs[g.group].Type] = true
		}
	}
	if len(types) == 1 {
		for t := range types {
			req.GPUType = t
		}
	}
	v, err := c.cfg.Limits.CheckGPUJob(req, running)
	if err != nil || v == nil {
		return "" // err: a typed limit and no type yet (the account was checked above)
	}
	return v.Reason
}

func (c *Cluster) hasQOS(name string) bool {
	return slices.ContainsFunc(c.cfg.Limits.QOS, func(q slurm.QOS) bool { return q.Name == name })
}

// gpusByType is what a running job holds, by GPU type.
func (j *Job) gpusByType(c *Cluster) map[string]int64 {
	out := map[string]int64{}
	for _, g := range j.alloc {
		if g.group >= 0 {
			out[c.nodes[g.node].GPUs[g.group].Type] += int64(g.gpus)
		}
	}
	return out
}

// reserved reports whether a reservation keeps job j off node n now: one
// that has begun, or begins before the job's time limit would end it (any
// that has not ended, for a job without one), and that is not the job's
// user's. A reservation that ends no longer does.
func (c *Cluster) reserved(j *Job, n *node) bool {
	for _, r := range c.cfg.Reservations {
		if !r.End.After(c.now) || !slices.Contains(r.Nodes, n.Name) || slices.Contains(r.Users, j.Spec.User) {
			continue
		}
		if !r.Start.After(c.now) || j.Spec.TimeLimit <= 0 || r.Start.Before(c.now.Add(j.Spec.TimeLimit)) {
			return true
		}
	}
	return false
}

// reservationFlags is what scontrol show node adds to a node's state while
// a reservation on it is active: +MAINTENANCE+RESERVED for a MAINT one,
// +RESERVED for others.
func (c *Cluster) reservationFlags(n *node) string {
	flags := ""
	for _, r := range c.cfg.Reservations {
		if r.Start.After(c.now) || !r.End.After(c.now) || !slices.Contains(r.Nodes, n.Name) {
			continue
		}
		if r.HasFlag("MAINT") {
			return "+MAINTENANCE+RESERVED"
		}
		flags = "+RESERVED"
	}
	return flags
}

// accrue brings the accounts' decayed usage (GPU-seconds) up to now: each
// running job adds its GPUs every second, and all usage halves every
// DecayHalfLife.
func (c *Cluster) accrue() {
	if !c.cfg.Priority.On() {
		return
	}
	dt := c.now.Sub(c.usageAt).Seconds()
	c.usageAt = c.now
	if dt <= 0 {
		return
	}
	rate := map[string]float64{}
	for _, id := range c.liveOrder() {
		if j := c.jobs[id]; j.State == Running {
			for _, g := range j.alloc {
				if g.group >= 0 {
					rate[j.Spec.Account] += float64(g.gpus)
				}
			}
		}
	}
	decay, gain := 1.0, dt
	if h := c.cfg.Priority.DecayHalfLife.Seconds(); h > 0 {
		lambda := math.Ln2 / h
		decay = math.Exp(-lambda * dt)
		gain = (1 - decay) / lambda
	}
	for a, u := range c.acctUsage {
		c.acctUsage[a] = u * decay
	}
	for a, r := range rate {
		c.acctUsage[a] += r * gain
	}
}

// fairshare is the classic fairshare factor of an account, 2^(-U/S): S its
// normalized shares (its share of its siblings', times its parent's, up to
// root), U its usage (its own and its sub-accounts') as a part of all
// usage; 1 while nothing has been used. Every user of an account has the
// account's factor.
func (c *Cluster) fairshare(account string) float64 {
	if c.cfg.Limits == nil {
		return 1
	}
	parent := map[string]string{}
	shares := map[string]float64{}
	for _, a := range c.cfg.Limits.Associations {
		if a.User == "" && a.Partition == "" {
			parent[a.Account] = a.ParentAccount
			shares[a.Account] = float64(max(a.Shares, 0))
		}
	}
	s := 1.0
	for acct, i := account, 0; acct != "" && acct != "root" && i < 64; acct, i = parent[acct], i+1 {
		sum := 0.0
		for sib, p := range parent {
			if p == parent[acct] && sib != "root" {
				sum += shares[sib]
			}
		}
		if sum <= 0 || shares[acct] <= 0 {
			return 0
		}
		s *= shares[acct] / sum
	}
	total, mine := 0.0, 0.0
	for a, u := range c.acctUsage {
		total += u
		for x, i := a, 0; x != "" && i < 64; x, i = parent[x], i+1 {
			if x == account {
				mine += u
				break
			}
		}
	}
	if total <= 0 {
		return 1
	}
	return math.Pow(2, -(mine/total)/s)
}

// multifactor is the job's priority/multifactor priority now: fairshare
// plus age (the time since it became eligible, its begin time, up to
// MaxAge), weighted.
func (c *Cluster) multifactor(j *Job) int64 {
	m := c.cfg.Priority
	age := 0.0
	if m.MaxAge > 0 && c.now.After(j.Begin) {
		age = math.Min(c.now.Sub(j.Begin).Seconds()/m.MaxAge.Seconds(), 1)
	}
	// Slurm gives a job that may run at least 1 (0 is a held job).
	return max(int64(float64(m.WeightFairshare)*c.fairshare(j.Spec.Account)+float64(m.WeightAge)*age), 1)
}

// CheckSite reports what in cfg's site a cluster cannot run with: a
// reservation without a name, nodes, or an end after its start, or on a
// node the layout does not have.
func CheckSite(cfg Config) error {
	nodes := map[string]bool{}
	for _, n := range cfg.Layout {
		nodes[n.Name] = true
	}
	var errs []error
	for i, r := range cfg.Reservations {
		switch {
		case r.Name == "":
			errs = append(errs, fmt.Errorf("reservation %d: no name", i+1))
		case len(r.Nodes) == 0:
			errs = append(errs, fmt.Errorf("reservation %s: no nodes", r.Name))
		case !r.End.After(r.Start):
			errs = append(errs, fmt.Errorf("reservation %s: ends at or before it starts", r.Name))
		}
		for _, n := range r.Nodes {
			if !nodes[n] {
				errs = append(errs, fmt.Errorf("reservation %s: node %s is not in the layout", r.Name, n))
			}
		}
	}
	return errors.Join(errs...)
}
