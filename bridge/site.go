package bridge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// SiteReader is what a Cluster may offer of the site's policy besides the
// queue: its accounting limits (sacctmgr) and its reservations (scontrol
// show reservation). slurm.Client has both; a Cluster without them (the
// in-memory Slurm) has no limits and no reservations.
type SiteReader interface {
	Limits(ctx context.Context) (slurm.Limits, error)
	Reservations(ctx context.Context) ([]slurm.Reservation, error)
}

// limitsMaxAge is how long the daemon plans with the limits it read last:
// sacctmgr asks slurmdbd, and limits change when an admin changes them.
const limitsMaxAge = 5 * time.Minute

// site reads the limits (at most every limitsMaxAge, keeping the last ones
// it read when a read fails) and the reservations (every round). A cluster
// without accounting has no limits; that is logged once.
func (b *Bridge) site(ctx context.Context) (*slurm.Limits, []slurm.Reservation) {
	r, ok := b.deps.Cluster.(SiteReader)
	if !ok {
		return nil, nil
	}
	now := b.deps.Clock.Now()
	if b.limitsRead.IsZero() || now.Sub(b.limitsRead) >= limitsMaxAge {
		lim, err := r.Limits(ctx)
		switch {
		case err == nil:
			b.limits, b.limitsErr = &lim, ""
		case b.limitsErr != err.Error():
			b.limitsErr = err.Error()
			b.log.Info("no accounting limits read; planning without them (a site without slurmdbd has none)", "err", err)
		}
		b.limitsRead = now
	}
	res, err := r.Reservations(ctx)
	if err != nil {
		b.log.Warn("could not read the reservations; nodes in one may be planned this round", "err", err)
	}
	return b.limits, res
}

// siteLimits are limitBudgets' results, for the round's snapshot.
type siteLimits struct {
	budgets map[string]optimizer.Limit
	jobs    map[string][]string
	// weights are the site's weights of the jobs (siteWeights).
	weights map[string]float64
}

// jobScope is what a job counts against: its user, account and QOS, and
// the GPUs it holds (scontrol's JOB_GRES; 0 while it has none).
type jobScope struct {
	user, account, qos string
	gpus               int64
}

// limitBudgets turns the site's limits into the optimizer's
// (Snapshot.Limits, Job.Limits): for each limit on GPUs (gres/gpu) or on
// running jobs that a waiting tagged job counts against (its QOS's
// GrpTRES, GrpJobs, MaxTRESPerUser, MaxJobsPerUser, MaxTRESPerAccount,
// MaxJobsPerAccount, MaxTRESPerJob; its association's and every ancestor's
// GrpTRES and GrpJobs; its own association's MaxJobs and the nearest
// MaxTRESPerJob), what the running jobs in its scope (and the jobs hadar
// started that have not started yet) leave. A QOS limit on a resource
// replaces the associations' (Slurm's default). Limits on one GPU type
// (gres/gpu:v100) are not predicted: Slurm still enforces them, and a job
// it holds back for one is taken back after launch_timeout. scopes are the
// jobs' user, account and QOS by job id (scontrol show job); a job without
// an account (no accounting) counts against nothing. It is pure.
func limitBudgets(lim *slurm.Limits, v *View, scopes map[string]jobScope) (map[string]optimizer.Limit, map[string][]string) {
	if lim == nil {
		return nil, nil
	}
	qos := map[string]*slurm.QOS{}
	for i := range lim.QOS {
		qos[lim.QOS[i].Name] = &lim.QOS[i]
	}
	assoc := map[[2]string]*slurm.Association{}
	for i := range lim.Associations {
		a := &lim.Associations[i]
		if a.Partition == "" {
			assoc[[2]string{a.Account, a.User}] = a
		}
	}
	limits := map[string]optimizer.Limit{}
	set := func(key string, gpus, jobs int64, reason string) {
		limits[key] = optimizer.Limit{GPUs: gpus, Jobs: jobs, Reason: reason}
	}
	// keys lists the limits of a job's scope (and records their values);
	// perJob is the limit on one job's GPUs, -1 for none.
	keys := func(sc jobScope) (out []string, perJob int64) {
		perJob = -1
		q := qos[sc.qos]
		qosGrpGPU := false
		// scoped adds a scope's GPU and running-job limits, if set.
		scoped := func(scope string, tres slurm.TRES, jobs slurm.Limit, gpuReason, jobsReason string) {
			if g, ok := tres["gres/gpu"]; ok {
				set(scope, g, -1, gpuReason)
				out = append(out, scope)
			}
			if jobs.Set() {
				set(scope+" jobs", -1, int64(jobs), jobsReason)
				out = append(out, scope+" jobs")
			}
		}
		if q != nil {
			_, qosGrpGPU = q.GrpTRES["gres/gpu"]
			scoped("qos "+q.Name, q.GrpTRES, q.GrpJobs, "QOSGrpGRES", "QOSGrpJobsLimit")
			scoped("qos "+q.Name+" user "+sc.user, q.MaxTRESPerUser, q.MaxJobsPerUser, "QOSMaxGRESPerUser", "QOSMaxJobsPerUserLimit")
			scoped("qos "+q.Name+" account "+sc.account, q.MaxTRESPerAccount, q.MaxJobsPerAccount, "QOSMaxGRESPerAccount", "QOSMaxJobsPerAccount")
			if g, ok := q.MaxTRESPerJob["gres/gpu"]; ok {
				perJob = g
			}
		}
		a := assoc[[2]string{sc.account, sc.user}]
		if a != nil && a.MaxJobs.Set() {
			k := "assoc " + sc.account + "/" + sc.user + " jobs per user"
			set(k, -1, int64(a.MaxJobs), "AssocMaxJobsLimit")
			out = append(out, k)
		}
		name := sc.account + "/" + sc.user
		for depth := 0; a != nil && depth < 64; depth++ {
			if g, ok := a.MaxTRESPerJob["gres/gpu"]; ok && perJob < 0 {
				perJob = g
			}
			grp := a.GrpTRES
			if qosGrpGPU {
				grp = nil // the QOS's GrpTRES replaces the associations'
			}
			scoped("assoc "+name, grp, a.GrpJobs, "AssocGrpGRES", "AssocGrpJobsLimit")
			if a.User != "" {
				name, a = a.Account, assoc[[2]string{a.Account, ""}]
			} else if a.ParentAccount != "" {
				name, a = a.ParentAccount, assoc[[2]string{a.ParentAccount, ""}]
			} else {
				a = nil
			}
		}
		return out, perJob
	}

	jobKeys := map[string][]string{}
	inUse := map[string][2]int64{}
	for _, jv := range v.Jobs {
		sc, ok := scopes[jv.ID]
		if !ok || sc.account == "" {
			continue
		}
		ks, perJob := keys(sc)
		switch {
		case jv.State == "RUNNING" || jv.State == "CONFIGURING" || jv.Class == ClassLaunching:
			gpus := sc.gpus
			if jv.Class == ClassLaunching {
				gpus = int64(jv.Workers) // starting: its GPUs count already
			}
			for _, k := range ks {
				u := inUse[k]
				inUse[k] = [2]int64{u[0] + gpus, u[1] + 1}
			}
		case jv.Class == ClassWaiting && jv.CopyOf == "":
			if perJob >= 0 {
				k := fmt.Sprintf("job %s max", jv.ID)
				set(k, perJob, -1, "MaxGRESPerJob")
				ks = append(ks, k)
			}
			jobKeys[jv.ID] = ks
		}
	}
	for k, l := range limits {
		u := inUse[k]
		if l.GPUs >= 0 {
			l.GPUs = max(l.GPUs-u[0], 0)
		}
		if l.Jobs >= 0 {
			l.Jobs = max(l.Jobs-u[1], 0)
		}
		limits[k] = l
	}
	return limits, jobKeys
}

// siteScopes are the user, account and QOS of every job scontrol showed.
func siteScopes(details map[string]slurm.JobDetail) map[string]jobScope {
	out := make(map[string]jobScope, len(details))
	for id, d := range details {
		var gpus int64
		for _, n := range slurm.GPUsByType(d.JobGres) {
			gpus += int64(n)
		}
		out[id] = jobScope{user: d.UserName, account: d.Account, qos: d.QOS, gpus: gpus}
	}
	return out
}

// reservedNodes says, for a job that would start now and run for d, which
// nodes a reservation keeps from it: a reservation that is active or
// starts before the job would end, unless the job runs in it (its
// --reservation). A job of a reservation runs only on its nodes (only
// names the nodes it may use, nil for any). It is pure.
func reservedNodes(res []slurm.Reservation, jobReservation string, now time.Time, d time.Duration) (excluded map[string]string, only map[string]bool) {
	for _, r := range res {
		if r.Name == jobReservation && jobReservation != "" {
			only = map[string]bool{}
			for _, n := range r.Nodes {
				only[n] = true
			}
			continue
		}
		if !r.End.IsZero() && !r.End.After(now) {
			continue
		}
		if !r.Active() && !r.Start.IsZero() && d > 0 && !r.Start.Before(now.Add(d)) {
			continue // it begins after the job would end
		}
		for _, n := range r.Nodes {
			if excluded == nil {
				excluded = map[string]string{}
			}
			excluded[n] = fmt.Sprintf("reservation %s (%s from %s)", r.Name, strings.Join(r.Flags, ","), r.Start.Format(time.DateTime))
		}
	}
	return excluded, only
}

// applyReservations keeps the waiting and running tagged jobs off the nodes
// a reservation holds from them (reservedNodes), by narrowing their
// requests' eligible nodes; a running job keeps the nodes it runs on. A job
// runs for its --time (its TimeLimit) as far as a reservation is concerned,
// as Slurm counts it; without one, any reservation ahead keeps it off.
func applyReservations(v *View, res []slurm.Reservation, details map[string]slurm.JobDetail) {
	if len(res) == 0 {
		return
	}
	for _, jv := range v.Jobs {
		if jv.Class != ClassWaiting && jv.Class != ClassRunning {
			continue
		}
		excluded, only := reservedNodes(res, details[jv.ID].Reservation, v.Now, jv.TimeLimit)
		if excluded == nil && only == nil {
			continue
		}
		eligible := map[string]bool{}
		for _, n := range v.Nodes {
			_, out := excluded[n.Name]
			if (jv.Request.Eligible == nil || jv.Request.Eligible[n.Name]) && (only == nil || only[n.Name]) && !out {
				eligible[n.Name] = true
			}
		}
		for _, n := range jv.Nodes {
			if jv.Class == ClassRunning {
				eligible[n] = true
			}
		}
		jv.Request.Eligible = eligible
	}
}
