package slurm

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnpredictable: a limit check cannot be answered from what it was
// given (an unknown QOS or association, a GPU type it needs but lacks).
var ErrUnpredictable = errors.New("limit cannot be predicted")

// Limits are a cluster's accounting limits (ParseAssociations, ParseQOS).
type Limits struct {
	Associations []Association
	QOS          []QOS
}

// RunningJob is what a running job counts against limits.
type RunningJob struct {
	User, Account, QOS string
	// GPUs by type; "" holds GPUs of an unknown type.
	GPUs map[string]int64
}

// GPURequest is a job hadar may start: N GPUs of GPUType ("" when the type
// is not chosen yet) by User in Account under QOS.
type GPURequest struct {
	User, Account, QOS string
	GPUType            string
	GPUs               int64
}

// LimitViolation says which limit a job would exceed.
type LimitViolation struct {
	// Reason is the pending reason Slurm gives for it, such as
	// QOSMaxGRESPerUser or AssocGrpGRES.
	Reason string
	// Scope names the limit's owner: "qos gpu4", "association acct_b/bob",
	// "association acct_b".
	Scope string
	// TRES is the limited resource ("gres/gpu", "gres/gpu:v100"); "" for
	// job counts.
	TRES string
	// Limit, InUse (by running jobs in scope) and Requested (by this job).
	Limit, InUse, Requested int64
}

func (v *LimitViolation) String() string {
	what := "jobs"
	if v.TRES != "" {
		what = v.TRES
	}
	return fmt.Sprintf("%s: %s %s limit %d, %d in use, %d requested", v.Reason, v.Scope, what, v.Limit, v.InUse, v.Requested)
}

// CheckGPUJob says whether starting req now, next to the running jobs,
// would exceed a GPU or running-job limit of its QOS or of its association
// and the association's ancestors, and which one (nil when none would).
// The order is Slurm's: the QOS first (GrpTRES, MaxTRES per job,
// MaxTRESPerUser, MaxTRESPerAccount, GrpJobs, MaxJobsPerUser,
// MaxJobsPerAccount), then the associations from the user's up to root
// (GrpTRES, GrpJobs at every level; MaxTRES per job and MaxJobs from the
// nearest association that sets them). As in Slurm's default hierarchy, a
// limit the QOS sets for a TRES replaces the associations' same limit.
// Typed limits (gres/gpu:v100) need req.GPUType and running jobs of known
// types; otherwise the answer is ErrUnpredictable, as it is for a QOS or
// association that is not in l. CPU, memory, submit, wall-time and
// partition-QOS limits are not checked.
func (l Limits) CheckGPUJob(req GPURequest, running []RunningJob) (*LimitViolation, error) {
	if req.GPUs < 0 {
		return nil, fmt.Errorf("%w: negative GPU count %d", ErrUnpredictable, req.GPUs)
	}
	var qos *QOS
	for i := range l.QOS {
		if l.QOS[i].Name == req.QOS {
			qos = &l.QOS[i]
		}
	}
	if qos == nil {
		return nil, fmt.Errorf("%w: no QOS %q", ErrUnpredictable, req.QOS)
	}
	chain, err := l.assocChain(req.User, req.Account)
	if err != nil {
		return nil, err
	}
	// accounts under each account, to count a Grp limit's jobs
	parent := map[string]string{}
	for _, a := range l.Associations {
		if a.User == "" && a.Partition == "" {
			parent[a.Account] = a.ParentAccount
		}
	}
	under := func(acct, ancestor string) bool {
		for i := 0; acct != "" && i < 64; i++ {
			if acct == ancestor {
				return true
			}
			acct = parent[acct]
		}
		return false
	}

	gpuKeys := []string{"gres/gpu"}
	if req.GPUType != "" {
		gpuKeys = append(gpuKeys, "gres/gpu:"+req.GPUType)
	}
	// check compares one TRES limit set; counted says which running jobs count.
	var verr error
	check := func(limits TRES, reason, scope string, skip TRES, counted func(RunningJob) bool) *LimitViolation {
		for _, key := range typedGPUKeys(limits) {
			if _, overridden := skip[key]; overridden {
				continue
			}
			if req.GPUType == "" {
				verr = fmt.Errorf("%w: %s has a limit on %s and the job's GPU type is not known", ErrUnpredictable, scope, key)
				return nil
			}
		}
		for _, key := range gpuKeys {
			max, ok := limits[key]
			if !ok {
				continue
			}
			if _, overridden := skip[key]; overridden {
				continue
			}
			var inUse int64
			for _, j := range running {
				if !counted(j) {
					continue
				}
				n, err := jobGPUs(j, key)
				if err != nil {
					verr = fmt.Errorf("%s %s: %w", scope, key, err)
					return nil
				}
				inUse += n
			}
			if inUse+req.GPUs > max {
				return &LimitViolation{Reason: reason, Scope: scope, TRES: key, Limit: max, InUse: inUse, Requested: req.GPUs}
			}
		}
		return nil
	}
	checkJobs := func(max Limit, reason, scope string, counted func(RunningJob) bool) *LimitViolation {
		if !max.Set() {
			return nil
		}
		var inUse int64
		for _, j := range running {
			if counted(j) {
				inUse++
			}
		}
		if inUse+1 > int64(max) {
			return &LimitViolation{Reason: reason, Scope: scope, Limit: int64(max), InUse: inUse, Requested: 1}
		}
		return nil
	}
	perJob := func(limits TRES, reason, scope string, skip TRES) *LimitViolation {
		return check(limits, reason, scope, skip, func(RunningJob) bool { return false })
	}

	qscope := "qos " + qos.Name
	inQOS := func(j RunningJob) bool { return j.QOS == qos.Name }
	for _, v := range []func() *LimitViolation{
		func() *LimitViolation { return check(qos.GrpTRES, "QOSGrpGRES", qscope, nil, inQOS) },
		func() *LimitViolation { return perJob(qos.MaxTRESPerJob, "QOSMaxGRESPerJob", qscope, nil) },
		func() *LimitViolation {
			return check(qos.MaxTRESPerUser, "QOSMaxGRESPerUser", qscope, nil,
				func(j RunningJob) bool { return inQOS(j) && j.User == req.User })
		},
		func() *LimitViolation {
			return check(qos.MaxTRESPerAccount, "MaxGRESPerAccount", qscope, nil,
				func(j RunningJob) bool { return inQOS(j) && j.Account == req.Account })
		},
		func() *LimitViolation { return checkJobs(qos.GrpJobs, "QOSGrpJobsLimit", qscope, inQOS) },
		func() *LimitViolation {
			return checkJobs(qos.MaxJobsPerUser, "QOSMaxJobsPerUserLimit", qscope,
				func(j RunningJob) bool { return inQOS(j) && j.User == req.User })
		},
		func() *LimitViolation {
			return checkJobs(qos.MaxJobsPerAccount, "MaxJobsPerAccount", qscope,
				func(j RunningJob) bool { return inQOS(j) && j.Account == req.Account })
		},
	} {
		if viol := v(); viol != nil || verr != nil {
			return viol, verr
		}
	}

	// Associations, the user's first. Max* limits: the nearest one set.
	var maxPerJob TRES
	maxPerJobScope := ""
	maxJobs := NoLimit
	maxJobsScope := ""
	for _, a := range chain {
		scope := "association " + a.Account
		counted := func(j RunningJob) bool { return under(j.Account, a.Account) }
		if a.User != "" {
			scope += "/" + a.User
			counted = func(j RunningJob) bool { return j.Account == a.Account && j.User == a.User }
		}
		if viol := check(a.GrpTRES, "AssocGrpGRES", scope, qos.GrpTRES, counted); viol != nil || verr != nil {
			return viol, verr
		}
		if !qos.GrpJobs.Set() {
			if viol := checkJobs(a.GrpJobs, "AssocGrpJobsLimit", scope, counted); viol != nil {
				return viol, nil
			}
		}
		for key, v := range a.MaxTRESPerJob {
			if maxPerJob == nil {
				maxPerJob = TRES{}
			}
			if _, set := maxPerJob[key]; !set {
				maxPerJob[key] = v
				if maxPerJobScope == "" {
					maxPerJobScope = scope
				}
			}
		}
		if !maxJobs.Set() && a.MaxJobs.Set() {
			maxJobs, maxJobsScope = a.MaxJobs, scope
		}
	}
	if viol := perJob(maxPerJob, "AssocMaxGRESPerJob", maxPerJobScope, qos.MaxTRESPerJob); viol != nil || verr != nil {
		return viol, verr
	}
	if !qos.MaxJobsPerUser.Set() {
		user := chain[0]
		if viol := checkJobs(maxJobs, "AssocMaxJobsLimit", maxJobsScope,
			func(j RunningJob) bool { return j.Account == user.Account && j.User == user.User }); viol != nil {
			return viol, nil
		}
	}
	return nil, nil
}

// assocChain is the user's association in account, then the account's and
// its ancestors' up to root.
func (l Limits) assocChain(user, account string) ([]Association, error) {
	find := func(acct, usr string) (Association, bool) {
		for _, a := range l.Associations {
			if a.Account == acct && a.User == usr && a.Partition == "" {
				return a, true
			}
		}
		return Association{}, false
	}
	ua, ok := find(account, user)
	if !ok {
		return nil, fmt.Errorf("%w: no association of user %q in account %q", ErrUnpredictable, user, account)
	}
	chain := []Association{ua}
	acct := account
	for i := 0; acct != ""; i++ {
		if i >= 64 {
			return nil, fmt.Errorf("%w: account tree above %q is deeper than 64 or a loop", ErrUnpredictable, account)
		}
		a, ok := find(acct, "")
		if !ok {
			return nil, fmt.Errorf("%w: no association of account %q", ErrUnpredictable, acct)
		}
		chain = append(chain, a)
		acct = a.ParentAccount
	}
	return chain, nil
}

// typedGPUKeys are the gres/gpu:TYPE names of a TRES set.
func typedGPUKeys(t TRES) []string {
	var out []string
	for key := range t {
		if len(key) > len("gres/gpu:") && key[:len("gres/gpu:")] == "gres/gpu:" {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// jobGPUs is what a running job counts against a GPU TRES key.
func jobGPUs(j RunningJob, key string) (int64, error) {
	var total int64
	for _, n := range j.GPUs {
		total += n
	}
	if key == "gres/gpu" {
		return total, nil
	}
	if j.GPUs[""] > 0 {
		return 0, fmt.Errorf("%w: a running job of %s has GPUs of unknown type", ErrUnpredictable, j.User)
	}
	return j.GPUs[key[len("gres/gpu:"):]], nil
}
