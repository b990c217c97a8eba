package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/slurm"
)

// fakeCluster is an in-memory Slurm for loop tests: tagged jobs on
// job_submit.lua's begin-time lease, placement by NodeList, StartTime=now
// and release that start a job when its nodes have room, holds,
// requeuehold, and per-method / per-job error injection.
type fakeCluster struct {
	mu    sync.Mutex
	nodes []*fakeNode
	jobs  map[string]*fakeJob
	order []string
	calls []string
	// fail makes a whole method fail (key: method name).
	fail map[string]error
	// failJob makes a method fail for one job id (the others proceed, as
	// scontrol does for lists), keyed method -> id.
	failJob map[string]map[string]error
	// jobsCalls and nodesCalls count reads.
	jobsCalls, nodesCalls int
	// noAutoStart leaves released jobs pending (for launch timeouts).
	noAutoStart bool
	nextID      int
	// retypeReplaces: scontrol update Gres= on a pending job replaces its
	// GPU request, as in Slurm 24.11. Otherwise a new type is
	// added to the old one and the job cannot start, as measured on 22.05.
	// The harness serves a fake with it set as fake2411.
	retypeReplaces bool
	// now is the harness's clock, for a running job's TimeUsed (nil: 0).
	now func() time.Time
}

// fake2411 is the fake as Slurm 24.11: it says its version (the bridge
// then uses nodes with several GPU types per type) and replaces a pending
// job's GPU type on Gres=.
type fake2411 struct{ *fakeCluster }

func (f fake2411) SlurmVersion(ctx context.Context) (slurm.Version, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("SlurmVersion"); err != nil {
		return slurm.Version{}, err
	}
	return slurm.Version{Major: 24, Minor: 11, Micro: 5, Raw: "24.11.5"}, nil
}

type fakeNode struct {
	name  string
	gtype string
	gpus  int
	// pools are the GPUs by type of a node with several types (gtype and
	// gpus are then the first type's).
	pools    []fakePool
	state    string
	features []string
	cpus     int   // 0: not reported
	mem      int64 // MB; 0: not reported
}

type fakePool struct {
	site string
	gpus int
}

type fakeJob struct {
	id      string
	user    string
	comment string
	state   string
	reason  string
	gpus    int // per node
	typed   string
	// got is the GPU type the job got on a node with several types (its
	// typed request, or the one Slurm chose).
	got string
	// badGres: a Gres update added a second type (22.05): Slurm cannot
	// start the job.
	badGres  bool
	numNodes int
	reqNodes []string
	nodes    []string
	submit   time.Time
	held     bool
	// account and qos are what it counts against (scontrol show job).
	account, qos string
	// begin is the job's begin time (the lease of a tagged job); prio its
	// priority (squeue %Q).
	begin    time.Time
	prio     int64
	admin    string
	releases int
	// starts counts StartTime=now updates (hadar starting the job).
	starts   int
	restarts int
	// The rest of the request, as scontrol shows it: --gpus (total),
	// --constraint, --exclude, CPUs and memory per node.
	gpusPerJob int
	features   string
	exclude    string
	cpus       int
	mem        int64
	name       string
	timeLimit  time.Duration
	// arrayJob and arrayTask make it an array task ("28", "0"): squeue
	// shows it as 28_0, its own id (SLURM_JOB_ID) stays the fake's id.
	arrayJob, arrayTask string
	// started is when the job last began to run (TimeUsed counts from it).
	started time.Time
}

func newFakeCluster(nodes ...string) *fakeCluster {
	f := &fakeCluster{jobs: map[string]*fakeJob{}, fail: map[string]error{}, failJob: map[string]map[string]error{}, nextID: 100}
	for _, spec := range nodes {
		// "node1:v100:4", or "mix1:v100:2:k80:2" for several types
		p := strings.Split(spec, ":")
		node := &fakeNode{name: p[0], state: "IDLE"}
		for i := 1; i+1 < len(p); i += 2 {
			var n int
			fmt.Sscan(p[i+1], &n)
			node.pools = append(node.pools, fakePool{site: p[i], gpus: n})
		}
		node.gtype, node.gpus = node.pools[0].site, node.pools[0].gpus
		if len(node.pools) == 1 {
			node.pools = nil
		}
		f.nodes = append(f.nodes, node)
	}
	return f
}

// fakeLease is job_submit.lua's lease in the fake (and the bridge's
// default lease).
const fakeLease = 2 * time.Minute

// clock is the fake's time: the harness's, or the zero time.
func (f *fakeCluster) clock() time.Time {
	if f.now == nil {
		return time.Time{}
	}
	return f.now()
}

// leased reports whether job id waits on a lease (a begin time ahead).
func (f *fakeCluster) leased(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	return j != nil && j.state == "PENDING" && j.begin.After(f.clock())
}

// updates counts the scontrol updates of job id that set key (e.g.
// "StartTime=now").
func (f *fakeCluster) updates(id, key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		fs := strings.Fields(c)
		if len(fs) < 3 || fs[0] != "UpdateJobs" || !slices.Contains(strings.Split(fs[1], ","), id) {
			continue
		}
		if slices.Contains(fs[2:], key) {
			n++
		}
	}
	return n
}

// submit adds a job as job_submit.lua would: tagged jobs get a lease.
func (f *fakeCluster) submit(comment string, gpus, numNodes int, at time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprint(f.nextID)
	j := &fakeJob{id: id, user: "alice", comment: comment, state: "PENDING", reason: "Priority",
		gpus: gpus, numNodes: max(numNodes, 1), submit: at}
	if jobproto.IsTagged(comment) {
		// A job "submitted" before the harness's clock was, for the test,
		// waiting for hadar until now: its lease runs from now.
		from := at
		if now := f.clock(); now.After(at) {
			from = now
		}
		j.begin, j.reason = from.Add(fakeLease), "BeginTime"
	}
	f.jobs[id] = j
	f.order = append(f.order, id)
	f.schedule(j)
	return id
}

func (f *fakeCluster) job(id string) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id]
}

// finish completes a running job.
func (f *fakeCluster) finish(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j := f.jobs[id]; j != nil {
		j.state = "COMPLETED"
		j.nodes = nil
	}
}

func (f *fakeCluster) used(node string) int {
	return f.usedOf(node, "")
}

// usedOf is the GPUs running jobs hold on node, of site type site ("":
// any).
func (f *fakeCluster) usedOf(node, site string) int {
	n := 0
	for _, j := range f.jobs {
		if j.state == "RUNNING" && (site == "" || j.got == site) {
			for _, x := range j.nodes {
				if x == node {
					n += j.gpus
				}
			}
		}
	}
	return n
}

// room says whether node n has j's GPUs free, and of which type (on a
// node with several types: the typed request's, or the first that fits,
// as Slurm chooses).
func (f *fakeCluster) room(j *fakeJob, n *fakeNode) (string, bool) {
	if n.pools == nil {
		return n.gtype, n.gpus-f.used(n.name) >= j.gpus
	}
	for _, p := range n.pools {
		if (j.typed == "" || j.typed == p.site) && p.gpus-f.usedOf(n.name, p.site) >= j.gpus {
			return p.site, true
		}
	}
	return "", false
}

// hasType says whether node n has GPUs of site type t.
func (n *fakeNode) hasType(t string) bool {
	if n.pools == nil {
		return n.gtype == t
	}
	for _, p := range n.pools {
		if p.site == t {
			return true
		}
	}
	return false
}

func (f *fakeCluster) node(name string) *fakeNode {
	for _, n := range f.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// schedule starts a released pending job if its nodes (or any node, for
// an unpinned job) have room.
func (f *fakeCluster) schedule(j *fakeJob) {
	if f.noAutoStart || j.held || j.state != "PENDING" {
		return
	}
	if j.begin.After(f.clock()) {
		j.reason = "BeginTime"
		return
	}
	if j.badGres {
		j.reason = "BadConstraints"
		return
	}
	cands := j.reqNodes
	if len(cands) == 0 {
		for _, n := range f.nodes {
			cands = append(cands, n.name)
		}
	}
	var pick []string
	got := ""
	for _, name := range cands {
		n := f.node(name)
		if n != nil && !f.allows(j, n) {
			if len(j.reqNodes) > 0 {
				// Slurm: a job pinned to a node its own request rules out.
				j.reason = "BadConstraints"
				return
			}
			continue
		}
		if n == nil {
			continue
		}
		if t, ok := f.room(j, n); ok && f.cpusFree(n) >= j.cpus && f.memFree(n) >= j.mem &&
			!strings.Contains(n.state, "DRAIN") && !strings.Contains(n.state, "DOWN") {
			pick = append(pick, name)
			got = t
		}
		if len(pick) == j.numNodes {
			break
		}
	}
	if len(pick) < j.numNodes || (len(j.reqNodes) > 0 && len(pick) != len(j.reqNodes)) {
		j.reason = "Resources"
		return
	}
	j.state, j.reason, j.nodes, j.got = "RUNNING", "None", pick, got
	if f.now != nil {
		j.started = f.now()
	}
}

// allows is Slurm's check of a job's own limits against a node.
func (f *fakeCluster) allows(j *fakeJob, n *fakeNode) bool {
	if j.exclude != "" {
		for _, x := range strings.Split(j.exclude, ",") {
			if x == n.name {
				return false
			}
		}
	}
	if j.features != "" && !slices.Contains(n.features, j.features) {
		return false
	}
	if j.typed != "" && !n.hasType(j.typed) {
		return false
	}
	return (n.cpus == 0 || n.cpus >= j.cpus) && (n.mem == 0 || n.mem >= j.mem)
}

func (f *fakeCluster) cpusFree(n *fakeNode) int {
	return int(f.left(n, int64(n.cpus), func(j *fakeJob) int64 { return int64(j.cpus) }))
}

func (f *fakeCluster) memFree(n *fakeNode) int64 {
	return f.left(n, n.mem, func(j *fakeJob) int64 { return j.mem })
}

// left is what running jobs leave of a node's capacity (huge when the node
// reports none).
func (f *fakeCluster) left(n *fakeNode, capacity int64, need func(*fakeJob) int64) int64 {
	if capacity == 0 {
		return 1 << 40
	}
	for _, j := range f.jobs {
		if j.state == "RUNNING" && slices.Contains(j.nodes, n.name) {
			capacity -= need(j)
		}
	}
	return capacity
}

func (f *fakeCluster) record(call string) error {
	f.calls = append(f.calls, call)
	method := strings.Fields(call)[0]
	return f.fail[method]
}

func (f *fakeCluster) jobErr(method, id string) error {
	if m := f.failJob[method]; m != nil {
		return m[id]
	}
	return nil
}

func (f *fakeCluster) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeCluster) resetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func (f *fakeCluster) Jobs(ctx context.Context) ([]slurm.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobsCalls++
	if err := f.fail["Jobs"]; err != nil {
		return nil, err
	}
	var out []slurm.Job
	for _, id := range f.order {
		j := f.jobs[id]
		if j.state != "PENDING" && j.state != "RUNNING" {
			continue
		}
		g := []slurm.GRES{{Name: "gpu", Type: j.typed, Count: j.gpus}}
		if j.gpus == 0 || j.gpusPerJob > 0 {
			g = nil // squeue %b shows N/A for --gpus
		}
		sj := slurm.Job{JobID: id, ArrayJobID: id, User: j.user, State: j.state, NumNodes: j.numNodes,
			SubmitTime: j.submit, Gres: g, Nodes: j.nodes, NodeList: strings.Join(j.nodes, ","), Reason: j.reason, Comment: j.comment,
			Name: j.name}
		if j.state == "RUNNING" && f.now != nil && !j.started.IsZero() {
			sj.TimeUsed = f.now().Sub(j.started).Truncate(time.Second)
		}
		if j.state == "PENDING" {
			if j.begin.After(f.clock()) {
				sj.StartTime = j.begin
			}
			if !j.held {
				sj.Priority = j.prio
			}
		}
		if j.arrayJob != "" {
			sj.ArrayJobID, sj.ArrayTaskID = j.arrayJob, j.arrayTask
		}
		out = append(out, sj)
	}
	return out, nil
}

func (f *fakeCluster) JobDetails(ctx context.Context) ([]slurm.JobDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["JobDetails"]; err != nil {
		return nil, err
	}
	var out []slurm.JobDetail
	for _, id := range f.order {
		j := f.jobs[id]
		if j.state != "PENDING" && j.state != "RUNNING" {
			continue
		}
		d := slurm.JobDetail{JobID: id, UserName: j.user, JobState: j.state, Comment: j.comment,
			NumTasks: 1, Partition: "gpu", Features: j.features, ExcNodeList: j.exclude,
			MinCPUsNode: max(j.cpus, 1), MinMemoryNodeMB: j.mem, Name: j.name, TimeLimit: j.timeLimit, AdminComment: j.admin,
			ArrayJobID: j.arrayJob, ArrayTaskID: j.arrayTask, Account: j.account, QOS: j.qos}
		if j.state == "RUNNING" {
			d.JobGres = []slurm.GRES{{Name: "gpu", Type: j.got, Count: j.gpus * max(len(j.nodes), 1)}}
		}
		switch {
		case j.gpusPerJob > 0:
			d.TresPerJob = []slurm.GRES{{Name: "gpu", Type: j.typed, Count: j.gpusPerJob}}
		case j.gpus > 0:
			d.TresPerNode = []slurm.GRES{{Name: "gpu", Type: j.typed, Count: j.gpus}}
		}
		out = append(out, d)
	}
	return out, nil
}

func (f *fakeCluster) Nodes(ctx context.Context) ([]slurm.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodesCalls++
	if err := f.fail["Nodes"]; err != nil {
		return nil, err
	}
	var out []slurm.Node
	for _, n := range f.nodes {
		st, flags := slurm.ParseNodeState(n.state)
		sn := slurm.Node{Name: n.name, State: st, Flags: flags, RawState: n.state,
			Gres:       []slurm.GRES{{Name: "gpu", Type: n.gtype, Count: n.gpus}},
			GresUsed:   []slurm.GRES{{Name: "gpu", Type: n.gtype, Count: f.used(n.name)}},
			Partitions: []string{"gpu"}, Features: n.features, CPUTot: n.cpus, RealMemory: n.mem}
		if n.pools != nil {
			// GresUsed per type: gpu:v100:2(IDX:0-1),gpu:k80:0(IDX:N/A)
			sn.Gres, sn.GresUsed = nil, nil
			for _, p := range n.pools {
				sn.Gres = append(sn.Gres, slurm.GRES{Name: "gpu", Type: p.site, Count: p.gpus})
				sn.GresUsed = append(sn.GresUsed, slurm.GRES{Name: "gpu", Type: p.site, Count: f.usedOf(n.name, p.site)})
			}
		}
		if n.cpus > 0 {
			sn.CPUAlloc = n.cpus - f.cpusFree(n)
		}
		if n.mem > 0 {
			sn.AllocMem = n.mem - f.memFree(n)
		}
		out = append(out, sn)
	}
	return out, nil
}

func (f *fakeCluster) forEach(method string, ids []string, fn func(j *fakeJob) error) error {
	var errs []error
	for _, id := range ids {
		if err := f.jobErr(method, id); err != nil {
			errs = append(errs, fmt.Errorf("%s: job %s: %w", method, id, err))
			continue
		}
		j := f.jobs[id]
		if j == nil {
			for _, x := range f.jobs {
				if x.arrayJob != "" && x.arrayJob+"_"+x.arrayTask == id {
					j = x
				}
			}
		}
		if j == nil {
			errs = append(errs, fmt.Errorf("%s: job %s: %w", method, id, slurm.ErrInvalidJobID))
			continue
		}
		if err := fn(j); err != nil {
			errs = append(errs, fmt.Errorf("%s: job %s: %w", method, id, err))
		}
	}
	return errors.Join(errs...)
}

func (f *fakeCluster) PlaceOnNodes(ctx context.Context, id string, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(fmt.Sprintf("PlaceOnNodes %s %s", id, strings.Join(nodes, ","))); err != nil {
		return err
	}
	return f.forEach("PlaceOnNodes", []string{id}, func(j *fakeJob) error {
		if j.state != "PENDING" {
			return slurm.ErrInvalidNodeName
		}
		j.reqNodes = append([]string(nil), nodes...)
		return nil
	})
}

func (f *fakeCluster) UpdateJobs(ctx context.Context, ids []string, kv ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(fmt.Sprintf("UpdateJobs %s %s", strings.Join(ids, ","), strings.Join(kv, " "))); err != nil {
		return err
	}
	return f.forEach("UpdateJobs", ids, func(j *fakeJob) error {
		for _, x := range kv {
			if v, ok := strings.CutPrefix(x, "AdminComment="); ok {
				j.admin = v
			}
			if v, ok := strings.CutPrefix(x, "StartTime="); ok {
				if j.state != "PENDING" {
					return slurm.ErrJobNotPending
				}
				at, err := fakeStartTime(v, f.clock())
				if err != nil {
					return err
				}
				j.begin = at
				if v == "now" {
					j.starts++
				}
				if !at.After(f.clock()) && j.reason == "BeginTime" {
					j.reason = "Priority"
				}
				defer f.schedule(j)
			}
			if v, ok := strings.CutPrefix(x, "Gres="); ok {
				if j.state != "PENDING" {
					return slurm.ErrJobNotPending
				}
				g, err := slurm.ParseGRES(v)
				if err != nil || len(g) != 1 {
					return fmt.Errorf("fake: Gres=%q: %w", v, slurm.ErrBadArgument)
				}
				if !f.retypeReplaces && g[0].Type != j.typed {
					// 22.05: the new type is added to the old one.
					j.badGres = true
					continue
				}
				j.typed, j.gpus = g[0].Type, g[0].Count
			}
		}
		return nil
	})
}

// fakeStartTime reads StartTime= as scontrol does: now, now+SECONDS, or a
// local time.
func fakeStartTime(v string, now time.Time) (time.Time, error) {
	if v == "now" {
		return now, nil
	}
	if rest, ok := strings.CutPrefix(v, "now+"); ok {
		var n int
		if _, err := fmt.Sscan(rest, &n); err != nil {
			return time.Time{}, fmt.Errorf("fake: StartTime=%s: %w", v, slurm.ErrBadArgument)
		}
		return now.Add(time.Duration(n) * time.Second), nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("fake: StartTime=%s: %w", v, slurm.ErrBadArgument)
	}
	return t, nil
}

func (f *fakeCluster) Release(ctx context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("Release " + strings.Join(ids, ",")); err != nil {
		return err
	}
	return f.forEach("Release", ids, func(j *fakeJob) error {
		j.releases++
		if j.held {
			j.held = false
			j.reason = "Priority"
			f.schedule(j)
		}
		return nil
	})
}

func (f *fakeCluster) Hold(ctx context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("Hold " + strings.Join(ids, ",")); err != nil {
		return err
	}
	return f.forEach("Hold", ids, func(j *fakeJob) error {
		if j.state != "PENDING" {
			return slurm.ErrJobNotPending
		}
		j.held, j.reason = true, "JobHeldAdmin"
		return nil
	})
}

func (f *fakeCluster) RequeueHold(ctx context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("RequeueHold " + strings.Join(ids, ",")); err != nil {
		return err
	}
	return f.forEach("RequeueHold", ids, func(j *fakeJob) error {
		// Slurm requeues a completed job too (22.05.8, measured: COMPLETED
		// -> PENDING held, Restarts=1), to run it again.
		if j.state != "RUNNING" && j.state != "COMPLETED" {
			return slurm.ErrJobNotPending
		}
		// What squeue's %r shows after scontrol requeuehold in 22.05.
		j.state, j.held, j.reason, j.nodes = "PENDING", true, "job requeued in held state", nil
		j.restarts++
		return nil
	})
}

func (f *fakeCluster) SetAdminComment(ctx context.Context, ids []string, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(fmt.Sprintf("SetAdminComment %s %q", strings.Join(ids, ","), text)); err != nil {
		return err
	}
	return f.forEach("SetAdminComment", ids, func(j *fakeJob) error {
		j.admin = text
		return nil
	})
}

// renderSqueue prints jobs as squeue -o slurm.JobFormat would (fixed-width
// name and comment), so fixture captured with other formats can be served
// under the argv the Client really runs.
func renderSqueue(jobs []slurm.Job) []byte {
	var b strings.Builder
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "N/A"
		}
		return t.Format("2006-01-02T15:04:05")
	}
	for _, j := range jobs {
		task := j.ArrayTaskID
		if task == "" {
			task = "N/A"
		}
		comment := j.Comment
		if comment == "" {
			comment = "(null)"
		}
		used := j.TimeUsed
		elapsed := fmt.Sprintf("%d:%02d", int(used.Minutes()), int(used.Seconds())%60)
		dep := j.Dependency
		if dep == "" {
			dep = "(null)"
		}
		fmt.Fprintf(&b, "%s|%s|%s|%s|%s|%d|%s|%s|%s|%s|%s|%s|%d|%s|%-64.64s|%-512.512s\n",
			j.JobID, j.ArrayJobID, task, j.User, j.State, j.NumNodes, ts(j.SubmitTime), ts(j.StartTime),
			elapsed, orNA(j.GresRaw), j.NodeList, j.Reason, j.Priority, dep, j.Name, comment)
	}
	return []byte(b.String())
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}
