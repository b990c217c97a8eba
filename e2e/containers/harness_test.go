package containers

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// The cluster under test, checked once by TestMain.
var (
	enabled  bool
	setupErr error
	ct       *cluster
)

func TestMain(m *testing.M) {
	if os.Getenv("HADAR_E2E_CONTAINERS") == "1" {
		enabled = true
		ct, setupErr = newCluster(e2eutil.EnvOr("HADAR_DOCKER_NAME", "hadar-ct"))
		if setupErr != nil {
			fmt.Fprintln(os.Stderr, "containers: setup:", setupErr)
		}
	}
	os.Exit(m.Run())
}

// need skips unless HADAR_E2E_CONTAINERS=1 and fails if the setup did; it
// returns the cluster with its nodes all idle and an empty queue.
func need(t *testing.T) *cluster {
	t.Helper()
	if !enabled {
		t.Skip("cross-host fault test: set HADAR_E2E_CONTAINERS=1 with a running container cluster (make e2e-containers)")
	}
	if setupErr != nil {
		t.Fatalf("setup: %v", setupErr)
	}
	if err := ct.waitIdle(90 * time.Second); err != nil {
		t.Fatalf("cluster not ready: %v", err)
	}
	return ct
}

// cluster is a running contrib/docker cluster.
type cluster struct {
	name   string   // HADAR_DOCKER_NAME: containers NAME-slurmctld, NAME-node1, ...
	repo   string   // the repository (its contrib/docker/cluster runs it)
	shared string   // the host path of the shared volume (mounted at /shared inside)
	nodes  []string // the layout's nodes
}

const inConf = "/shared/cluster/slurm.conf"

func newCluster(name string) (*cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the container tests need root (docker, the shared volume)")
	}
	repo, err := e2eutil.RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &cluster{name: name, repo: repo}
	r := e2eutil.Run(30*time.Second, nil, "docker", "volume", "inspect", "-f", "{{.Mountpoint}}", name+"-shared")
	if r.Err != nil {
		return nil, fmt.Errorf("no container cluster %s (start it with contrib/docker/cluster up): %w", name, r.Err)
	}
	c.shared = strings.TrimSpace(r.Stdout)
	l, err := e2eutil.ReadLayout(c.hostPath("/shared/cluster"))
	if err != nil {
		return nil, err
	}
	c.nodes = l.Nodes
	if r := c.slurm(15*time.Second, "scontrol", "ping"); r.Err != nil || !strings.Contains(r.Stdout, "is UP") {
		return nil, fmt.Errorf("slurmctld of %s does not answer: %v %s", name, r.Err, r.Output())
	}
	return c, nil
}

// hostPath is where the host sees a path of the shared volume.
func (c *cluster) hostPath(inside string) string {
	rel, ok := strings.CutPrefix(inside, "/shared")
	if !ok {
		panic("not on the shared volume: " + inside)
	}
	return filepath.Join(c.shared, rel)
}

// container is the docker name of a host of the cluster.
func (c *cluster) container(host string) string { return c.name + "-" + host }

// docker runs the docker CLI.
func docker(timeout time.Duration, args ...string) e2eutil.Result {
	return e2eutil.Run(timeout, nil, "docker", args...)
}

// slurm runs a Slurm command on the login host.
func (c *cluster) slurm(timeout time.Duration, name string, args ...string) e2eutil.Result {
	argv := append([]string{"exec", "-e", "SLURM_CONF=" + inConf, "-w", "/shared/cluster/jobs", c.container("client"), name}, args...)
	return docker(timeout, argv...)
}

func (c *cluster) must(t *testing.T, name string, args ...string) string {
	t.Helper()
	return c.slurm(60*time.Second, name, args...).Must(t)
}

// sbatch submits a job from the login host and returns its id.
func (c *cluster) sbatch(t *testing.T, args ...string) string {
	t.Helper()
	out := c.must(t, "sbatch", append([]string{"--parsable", "-o", "/dev/null"}, args...)...)
	id, err := e2eutil.ParseJobID(out)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// queue is squeue's view of ids (of every job when ids is nil).
func (c *cluster) queue(ids []string) (map[string]e2eutil.QueuedJob, error) {
	args := []string{"-h", "-o", "%i|%T|%r|%N"}
	if ids != nil {
		if len(ids) == 0 {
			return map[string]e2eutil.QueuedJob{}, nil
		}
		args = append(args, "-j", strings.Join(ids, ","))
	}
	r := c.slurm(30*time.Second, "squeue", args...)
	if r.Err != nil {
		if ids != nil && strings.Contains(r.Stderr, "Invalid job id") {
			return map[string]e2eutil.QueuedJob{}, nil
		}
		return nil, r.Err
	}
	return e2eutil.ParseQueue(r.Stdout), nil
}

// leaseReading is what squeue says of a job waiting on a begin time.
type leaseReading struct {
	State, Reason string
	// Left is how long until its begin time (%S), by the login host's clock
	// read in the same command: the rest of its lease (negative when past).
	Left time.Duration
}

// onLease reports whether the job waits on its lease alone: PENDING with
// reason BeginTime, its begin time still ahead.
func (l leaseReading) onLease() bool {
	return l.State == "PENDING" && l.Reason == "BeginTime" && l.Left > 0
}

// leases reads the state, reason and begin time of the jobs ids.
func (c *cluster) leases(ids []string) (map[string]leaseReading, error) {
	// squeue prints %S in the login host's local time: read its clock in
	// the same local time, so the difference does not depend on time zones.
	const layout = "2006-01-02T15:04:05"
	script := `date +%Y-%m-%dT%H:%M:%S && squeue -h -o '%i|%T|%r|%S' -j "$1"`
	r := c.slurm(30*time.Second, "sh", "-c", script, "sh", strings.Join(ids, ","))
	if r.Err != nil {
		return nil, fmt.Errorf("squeue: %w: %s", r.Err, r.Output())
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	now, err := time.Parse(layout, strings.TrimSpace(lines[0]))
	if err != nil {
		return nil, fmt.Errorf("the login host's clock: %w", err)
	}
	out := map[string]leaseReading{}
	for _, l := range lines[1:] {
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) != 4 {
			return nil, fmt.Errorf("squeue line %q", l)
		}
		rd := leaseReading{State: f[1], Reason: f[2]}
		if begin, err := time.Parse(layout, f[3]); err == nil {
			rd.Left = begin.Sub(now)
		}
		out[f[0]] = rd
	}
	return out, nil
}

func (c *cluster) squeueDump() string {
	return c.slurm(20*time.Second, "squeue", "-a", "-o", "%.6i %.24j %.10T %.8M %.20R %.40k").Output()
}

// nodeStates is sinfo's state of each node ("idle", "mixed", "down*", ...).
func (c *cluster) nodeStates() (map[string]string, error) {
	r := c.slurm(30*time.Second, "sinfo", "-h", "-N", "-o", "%N %T")
	if r.Err != nil {
		return nil, r.Err
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	return out, nil
}

// waitIdle waits until every node is idle and the queue is empty.
func (c *cluster) waitIdle(timeout time.Duration) error {
	var st map[string]string
	var q map[string]e2eutil.QueuedJob
	var err error
	if e2eutil.WaitEvery(timeout, time.Second, func() bool {
		if st, err = c.nodeStates(); err != nil {
			return false
		}
		for _, n := range c.nodes {
			if st[n] != "idle" {
				return false
			}
		}
		q, err = c.queue(nil)
		return err == nil && len(q) == 0
	}) {
		return nil
	}
	return fmt.Errorf("after %s: nodes %v, %d jobs queued (%v)", timeout, st, len(q), err)
}

// jobcomp reads the finished runs of every job, by job id.
func (c *cluster) jobcomp(t *testing.T) map[string][]e2eutil.JobcompRecord {
	t.Helper()
	recs, err := e2eutil.ReadJobcomp(c.hostPath("/shared/cluster/log/jobcomp.log"))
	if err != nil {
		t.Fatal(err)
	}
	return e2eutil.JobcompByJob(recs)
}

// waitCompleted waits until the last run of every job of ids is COMPLETED
// and none is in the queue any more.
func (c *cluster) waitCompleted(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	var missing []string
	if !e2eutil.WaitEvery(timeout, 2*time.Second, func() bool {
		q, err := c.queue(ids)
		if err != nil || len(q) > 0 {
			return false
		}
		missing = missing[:0]
		comp := c.jobcomp(t)
		for _, id := range ids {
			if runs := comp[id]; len(runs) == 0 || runs[len(runs)-1]["JobState"] != "COMPLETED" {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	}) {
		t.Fatalf("jobs not all COMPLETED after %s (not: %v):\n%s", timeout, missing, c.squeueDump())
	}
}

// cancelOnCleanup cancels the jobs when the test ends and waits until the
// queue is empty and the nodes idle, so that the next test starts clean.
func (c *cluster) cancelOnCleanup(t *testing.T, ids *[]string) {
	t.Helper()
	t.Cleanup(func() {
		if len(*ids) > 0 {
			c.slurm(30*time.Second, "scancel", *ids...)
		}
		// A fault test that failed midway can leave a node drained (Slurm
		// drains a node where a launch failed): resume it, so that one
		// failure does not fail every later test as "cluster not ready".
		if st, err := c.nodeStates(); err == nil {
			for _, n := range c.nodes {
				if strings.Contains(st[n], "drain") {
					t.Logf("cleanup: node %s is %s; resuming it", n, st[n])
					c.slurm(30*time.Second, "scontrol", "update", "NodeName="+n, "State=RESUME")
				}
			}
		}
		if err := c.waitIdle(120 * time.Second); err != nil {
			t.Logf("cleanup: %v\n%s", err, c.squeueDump())
		}
	})
}

// daemonConfig is hadar-slurmd's config in the hadar container: short
// rounds, its state on the shared volume (so the host reads it).
const daemonConfig = `policy = "hadar"
round = "10s"
poll_interval = "2s"
min_round_gap = "2s"
migration_penalty = "5s"
data_dir = "/shared/hadar-data"
spool_dir = "/shared/spool"
[metrics]
listen = ""
`

// startHadar (re)starts hadar-slurmd in its container with a fresh state
// database and stops it when the test ends.
func (c *cluster) startHadar(t *testing.T) {
	t.Helper()
	if err := os.RemoveAll(c.hostPath("/shared/hadar-data")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "hadar.toml")
	if err := os.WriteFile(cfg, []byte(daemonConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e2eutil.Run(2*time.Minute, []string{"HADAR_DOCKER_NAME=" + c.name},
		filepath.Join(c.repo, "contrib", "docker", "cluster"), "hadar-up", "--config", cfg)
	if r.Err != nil {
		t.Fatalf("hadar-up: %v\n%s", r.Err, r.Output())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hadar-slurmd log (last 40 lines):\n%s", lastLines(c.hadarLog(), 40))
		}
		// SIGTERM: the daemon's clean stop ends its leases (the jobs are Slurm's)
		docker(60*time.Second, "stop", "-t", "30", c.container("hadar"))
		docker(30*time.Second, "rm", "-f", c.container("hadar"))
	})
	if !e2eutil.WaitEvery(60*time.Second, time.Second, func() bool {
		return strings.Contains(c.hadarLog(), "msg=round ")
	}) {
		t.Fatalf("hadar-slurmd did no round within 60 s:\n%s", lastLines(c.hadarLog(), 30))
	}
}

// hadarLog is what hadar-slurmd logged in its container.
func (c *cluster) hadarLog() string {
	return docker(30*time.Second, "logs", c.container("hadar")).Output()
}

// stateDB opens hadar-slurmd's state database (on the shared volume).
func (c *cluster) stateDB(t *testing.T) *e2eutil.StateDB {
	t.Helper()
	db, err := e2eutil.OpenStateDB(c.hostPath("/shared/hadar-data/state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// actions are hadar-slurmd's stored Slurm actions.
func (c *cluster) actions(t *testing.T) []e2eutil.Action {
	t.Helper()
	a, err := c.stateDB(t).Actions()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkPlaced fails the test unless hadar-slurmd placed each job of ids
// (NodeList=) and started it (StartTime=now), both carried out.
func (c *cluster) checkPlaced(t *testing.T, ids []string) {
	t.Helper()
	done := map[string]map[string]bool{} // kind -> job ids
	for _, a := range c.actions(t) {
		if !a.Done() {
			continue
		}
		if done[a.Kind] == nil {
			done[a.Kind] = map[string]bool{}
		}
		for _, id := range a.Jobs() {
			done[a.Kind][id] = true
		}
	}
	for _, id := range ids {
		if !done["place"][id] || !done["start-now"][id] {
			t.Errorf("job %s: placed by hadar-slurmd %v, started by it %v; want both", id, done["place"][id], done["start-now"][id])
		}
	}
}

// checkUntouched fails the test if hadar-slurmd ever acted on one of ids.
func (c *cluster) checkUntouched(t *testing.T, ids []string) {
	t.Helper()
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	for _, a := range c.actions(t) {
		for _, id := range strings.Split(a.JobIDs, ",") {
			if set[id] {
				t.Errorf("hadar-slurmd acted on job %s, which it must leave alone: %+v", id, a)
			}
		}
	}
}

// tagged submits n tagged jobs of one GPU each that sleep secs.
func (c *cluster) tagged(t *testing.T, n, secs int) []string {
	t.Helper()
	models := []string{"resnet50-bs64", "resnet18-bs128", "lm-bs20", "a3c"}
	var ids []string
	for i := range n {
		ids = append(ids, c.sbatch(t, "--job-name=ct-"+models[i%len(models)],
			fmt.Sprintf("--comment=hadar model=%s steps=1000", models[i%len(models)]),
			"--gres=gpu:1", "--wrap", fmt.Sprintf("sleep %d", secs)))
	}
	return ids
}

// untagged submits n jobs that hadar must leave to Slurm.
func (c *cluster) untagged(t *testing.T, n, secs int) []string {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, c.sbatch(t, "--job-name=ct-untagged", "--gres=gpu:1", "--wrap", fmt.Sprintf("sleep %d", secs)))
	}
	return ids
}

// waitRunning waits until every job of ids runs and returns where.
func (c *cluster) waitRunning(t *testing.T, ids []string, timeout time.Duration) map[string]e2eutil.QueuedJob {
	t.Helper()
	var q map[string]e2eutil.QueuedJob
	if !e2eutil.WaitEvery(timeout, time.Second, func() bool {
		var err error
		if q, err = c.queue(ids); err != nil {
			return false
		}
		for _, id := range ids {
			if q[id].State != "RUNNING" {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("jobs %v not all RUNNING after %s:\n%s\nhadar-slurmd:\n%s", ids, timeout, c.squeueDump(), lastLines(c.hadarLog(), 20))
	}
	return q
}

// byNode groups running jobs by node.
func byNode(q map[string]e2eutil.QueuedJob) map[string][]string {
	out := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(q)) {
		if q[id].State == "RUNNING" {
			out[q[id].Nodes] = append(out[q[id].Nodes], id)
		}
	}
	return out
}

// busiest is the node that runs the most of ids.
func busiest(q map[string]e2eutil.QueuedJob) (string, []string) {
	var node string
	var jobs []string
	for n, ids := range byNode(q) {
		if len(ids) > len(jobs) || len(ids) == len(jobs) && n < node {
			node, jobs = n, ids
		}
	}
	return node, jobs
}

// record logs a measured result as "RESULT ..." (go test -v shows it;
// docs/reliability.md quotes them).
func record(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("RESULT %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
