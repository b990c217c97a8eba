package containers

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
)

// tagOnly keeps the jobs of q that are among ids.
func tagOnly(q map[string]e2eutil.QueuedJob, ids []string) map[string]e2eutil.QueuedJob {
	out := map[string]e2eutil.QueuedJob{}
	for _, id := range ids {
		if j, ok := q[id]; ok {
			out[id] = j
		}
	}
	return out
}

// waitNodeState waits until node's sinfo state satisfies ok and returns
// how long that took.
func (c *cluster) waitNodeState(t *testing.T, node string, timeout time.Duration, what string, ok func(string) bool) time.Duration {
	t.Helper()
	start := time.Now()
	var st map[string]string
	if !e2eutil.WaitEvery(timeout, time.Second, func() bool {
		var err error
		st, err = c.nodeStates()
		return err == nil && ok(st[node])
	}) {
		t.Fatalf("node %s not %s after %s: %v", node, what, timeout, st)
	}
	return time.Since(start)
}

func isDown(s string) bool { return strings.HasPrefix(s, "down") }
func isUp(s string) bool {
	return s == "idle" || s == "mixed" || s == "allocated"
}

// waitReplaced waits until every job of victims runs again on a node other
// than lost (or has completed after a run elsewhere) and returns how long
// that took.
func (c *cluster) waitReplaced(t *testing.T, victims []string, lost string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var q map[string]e2eutil.QueuedJob
	if !e2eutil.WaitEvery(timeout, time.Second, func() bool {
		var err error
		if q, err = c.queue(victims); err != nil {
			return false
		}
		comp := c.jobcomp(t)
		for _, id := range victims {
			j, queued := q[id]
			if queued && (j.State != "RUNNING" || j.Nodes == lost) {
				return false
			}
			if !queued && !completedElsewhere(comp[id], lost) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("jobs %v of the lost node %s not re-placed elsewhere within %s:\n%s\nhadar-slurmd:\n%s",
			victims, lost, timeout, c.squeueDump(), lastLines(c.hadarLog(), 30))
	}
	return time.Since(start)
}

func completedElsewhere(runs []e2eutil.JobcompRecord, lost string) bool {
	return len(runs) > 0 && runs[len(runs)-1]["JobState"] == "COMPLETED" && runs[len(runs)-1]["NodeList"] != lost
}

// checkRuns checks the finished runs of the victims of a lost node: a
// failed run there first (NODE_FAIL, or the requeue's PENDING record), a
// run on another node after it (waitReplaced saw it start), and one
// COMPLETED run, the last (hadar may migrate a job back to the node when it
// returns, if that is its best GPU type). It returns how many COMPLETED
// records the victims have beyond one each.
func (c *cluster) checkRuns(t *testing.T, victims []string, lost string) (extra int) {
	t.Helper()
	comp := c.jobcomp(t)
	for _, id := range victims {
		runs := comp[id]
		var states []string
		completed, elsewhere := 0, false
		for i, r := range runs {
			states = append(states, r["JobState"]+"@"+r["NodeList"])
			if r["JobState"] == "COMPLETED" {
				completed++
			}
			if i > 0 && r["NodeList"] != lost {
				elsewhere = true
			}
		}
		ok := len(runs) >= 2 && runs[0]["NodeList"] == lost && runs[0]["JobState"] != "COMPLETED" &&
			elsewhere && runs[len(runs)-1]["JobState"] == "COMPLETED"
		if !ok {
			t.Errorf("job %s of the lost node %s: runs %v, want a failed run there, a run elsewhere, COMPLETED last", id, lost, states)
		}
		if completed > 1 {
			t.Errorf("job %s completed %d times: %v", id, completed, states)
			extra += completed - 1
		}
	}
	return extra
}

// 1. A node container killed (the host is gone, with its slurmd and job
// processes) while it runs hadar's jobs: Slurm marks it DOWN and requeues
// them (with a begin time of its own, read by hadar as a lease), hadar
// re-places them on the other nodes, all complete;
// the node comes back when its container is started again. The untagged
// jobs are never touched by hadar.
func TestNodeContainerKilled(t *testing.T) {
	c := need(t)
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	// The untagged jobs first, running before hadar plans: a race between
	// Slurm starting them and hadar's first placement is not what these
	// tests are about (see docs/reliability.md, bugs found).
	untagged := c.untagged(t, 2, 60)
	c.waitRunning(t, untagged, 60*time.Second)
	tagged := c.tagged(t, 8, 60)
	ids = append(append(ids, tagged...), untagged...)
	q := c.waitRunning(t, ids, 90*time.Second)
	node, victims := busiest(tagOnly(q, tagged))
	t.Logf("placements %v; killing %s with hadar jobs %v", byNode(q), node, victims)

	killed := time.Now()
	docker(60*time.Second, "kill", c.container(node)).Must(t)
	t.Cleanup(func() { docker(60*time.Second, "start", c.container(node)) })
	down := c.waitNodeState(t, node, 90*time.Second, "down", isDown)
	replaced := c.waitReplaced(t, victims, node, 150*time.Second)
	t.Logf("%s down %.0fs after the kill; its jobs running elsewhere %.0fs after the kill", node, down.Seconds(), time.Since(killed).Seconds())

	docker(60*time.Second, "start", c.container(node)).Must(t)
	back := c.waitNodeState(t, node, 90*time.Second, "back", isUp)

	c.waitCompleted(t, ids, 4*time.Minute)
	extra := c.checkRuns(t, victims, node)
	c.checkUntouched(t, untagged)
	record(t, "node container %s killed with %d hadar jobs on it: DOWN after %.0fs (SlurmdTimeout=20), its jobs re-placed on other nodes %.0fs after that (%.0fs after the kill), node back %.0fs after docker start; %d tagged + %d untagged jobs all COMPLETED, %d lost, %d completed twice, untagged never acted on",
		node, len(victims), down.Seconds(), replaced.Seconds(), down.Seconds()+replaced.Seconds(), back.Seconds(), len(tagged), len(untagged), 0, extra)
}

// 2. A node cut off the network (docker network disconnect) while it runs
// hadar's jobs: its slurmd and jobs live on, but slurmctld stops hearing
// it. Slurm marks it DOWN and requeues the jobs, hadar re-places them
// elsewhere; when the network returns the node rejoins, the stale copies
// of the jobs there are ended by Slurm, and every job completes once.
func TestNodeCutOff(t *testing.T) {
	c := need(t)
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	// The untagged jobs first, running before hadar plans: a race between
	// Slurm starting them and hadar's first placement is not what these
	// tests are about (see docs/reliability.md, bugs found).
	untagged := c.untagged(t, 2, 60)
	c.waitRunning(t, untagged, 60*time.Second)
	tagged := c.tagged(t, 8, 60)
	ids = append(append(ids, tagged...), untagged...)
	q := c.waitRunning(t, ids, 90*time.Second)
	node, victims := busiest(tagOnly(q, tagged))
	t.Logf("placements %v; cutting %s off with hadar jobs %v", byNode(q), node, victims)

	net := c.name + "-net"
	docker(60*time.Second, "network", "disconnect", net, c.container(node)).Must(t)
	t.Cleanup(func() { docker(60*time.Second, "network", "connect", "--alias", node, net, c.container(node)) })
	down := c.waitNodeState(t, node, 90*time.Second, "down", isDown)
	replaced := c.waitReplaced(t, victims, node, 150*time.Second)
	// The stale copies still run on the cut-off node.
	stale := docker(30*time.Second, "exec", c.container(node), "pgrep", "-c", "-x", "sleep").Stdout
	t.Logf("%s down %.0fs after the cut, its jobs elsewhere %.0fs later; sleep processes still on it: %s",
		node, down.Seconds(), replaced.Seconds(), strings.TrimSpace(stale))

	docker(60*time.Second, "network", "connect", "--alias", node, net, c.container(node)).Must(t)
	back := c.waitNodeState(t, node, 120*time.Second, "back", isUp)
	// Slurm ends the stale copies once the node is back.
	var left string
	staleGone := e2eutil.WaitEvery(60*time.Second, time.Second, func() bool {
		r := docker(30*time.Second, "exec", c.container(node), "pgrep", "-a", "-x", "sleep")
		left = r.Stdout
		return r.Err != nil || onlyCurrentJobs(c, node) // no sleep at all, or only jobs Slurm runs there now
	})

	c.waitCompleted(t, ids, 4*time.Minute)
	extra := c.checkRuns(t, victims, node)
	c.checkUntouched(t, untagged)
	if !staleGone {
		t.Errorf("stale job processes on %s after it rejoined: %s", node, left)
	}
	record(t, "node %s cut off with %d hadar jobs (their processes live on there: %s sleep): DOWN after %.0fs, jobs re-placed elsewhere %.0fs later; reconnected: node back in %.0fs, stale copies ended (%v); %d jobs all COMPLETED, %d lost, %d completed twice, untagged never acted on",
		node, len(victims), strings.TrimSpace(stale), down.Seconds(), replaced.Seconds(), back.Seconds(), staleGone, len(ids), 0, extra)
}

// onlyCurrentJobs reports whether node runs no more sleep processes than
// the jobs Slurm runs there now (the rest would be stale copies of
// requeued jobs).
func onlyCurrentJobs(c *cluster, node string) bool {
	r := docker(30*time.Second, "exec", c.container(node), "pgrep", "-c", "-x", "sleep")
	n, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil {
		return false
	}
	q, err := c.queue(nil)
	if err != nil {
		return false
	}
	here := 0
	for _, j := range q {
		if j.State == "RUNNING" && j.Nodes == node {
			here++
		}
	}
	return n <= here
}

// 3. hadar-slurmd's host cut off from slurmctld: its rounds fail (nothing
// changed) while jobs change under it (two of its running jobs cancelled,
// three new tagged jobs submitted, which wait on their lease). When the
// network returns it observes afresh before acting: the new jobs are placed
// before their lease runs out, and no action ever names the jobs that went
// away during the cut (no action on a stale view).
func TestHadarCutOff(t *testing.T) {
	c := need(t)
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	first := c.tagged(t, 4, 150)
	ids = append(ids, first...)
	c.waitRunning(t, first, 90*time.Second)
	before := len(c.actions(t))

	net := c.name + "-net"
	docker(60*time.Second, "network", "disconnect", net, c.container("hadar")).Must(t)
	t.Cleanup(func() { docker(60*time.Second, "network", "connect", "--alias", "hadar", net, c.container("hadar")) })
	cut := time.Now()
	gone := first[:2]
	c.must(t, "scancel", gone...)
	fresh := c.tagged(t, 3, 30)
	ids = append(ids, fresh...)
	time.Sleep(40 * time.Second)
	logCut := c.hadarLog()
	failed := strings.Count(logCut, "round failed")
	during := c.actions(t)[before:]
	var done []e2eutil.Action
	for _, a := range during {
		if a.Done() {
			done = append(done, a)
		}
	}
	if len(done) > 0 {
		t.Errorf("hadar-slurmd carried out %d actions while cut off from slurmctld: %+v", len(done), done)
	}
	if failed == 0 {
		t.Errorf("no failed round logged during %s cut off:\n%s", time.Since(cut).Round(time.Second), lastLines(logCut, 20))
	}
	leases, err := c.leases(fresh)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range fresh {
		if !leases[id].onLease() {
			t.Errorf("job %s submitted during the cut: %+v, want PENDING on its lease (BeginTime ahead)", id, leases[id])
		}
	}

	docker(60*time.Second, "network", "connect", "--alias", "hadar", net, c.container("hadar")).Must(t)
	reconnected := time.Now()
	// before their lease (120 s from submission, ~40 s ago) runs out: placed
	// by hadar, not started by Slurm alone
	c.waitRunning(t, fresh, 60*time.Second)
	recovered := time.Since(reconnected)
	c.checkPlaced(t, fresh)
	if !strings.Contains(c.hadarLog(), "rounds work again") {
		t.Errorf("hadar-slurmd did not log that its rounds work again")
	}
	c.waitCompleted(t, append(slices.Clone(first[2:]), fresh...), 4*time.Minute)
	var stale []e2eutil.Action
	for _, a := range c.actions(t)[before:] {
		for _, id := range strings.Split(a.JobIDs, ",") {
			if slices.Contains(gone, id) {
				stale = append(stale, a)
			}
		}
	}
	if len(stale) > 0 {
		t.Errorf("actions on jobs cancelled during the cut (a stale view): %+v", stale)
	}
	record(t, "hadar-slurmd cut off %.0fs: %d failed rounds logged, %d actions attempted (%d carried out) while cut; %d jobs cancelled and %d submitted meanwhile; after reconnecting, the new jobs placed in %.1fs, no action on the cancelled jobs; all COMPLETED",
		reconnected.Sub(cut).Seconds(), failed, len(during), len(done), len(gone), len(fresh), recovered.Seconds())
}

// 4. The slurmctld container restarted (docker restart) with hadar's jobs
// running and more waiting on their lease: running jobs go on (slurmd keeps them, the state
// is on the shared volume), hadar's rounds fail while slurmctld is away and
// work again after, and every job completes.
func TestSlurmctldRestart(t *testing.T) {
	c := need(t)
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	untagged := c.untagged(t, 2, 45)
	c.waitRunning(t, untagged, 60*time.Second)
	running := c.tagged(t, 12, 45)
	ids = append(append(ids, running...), untagged...)
	q := c.waitRunning(t, ids, 90*time.Second)
	queued := c.tagged(t, 8, 15) // 22 GPUs asked of 20: some wait, on a lease hadar renews
	ids = append(ids, queued...)

	start := time.Now()
	docker(90*time.Second, "restart", "-t", "10", c.container("slurmctld")).Must(t)
	if !e2eutil.WaitEvery(90*time.Second, 500*time.Millisecond, func() bool {
		r := c.slurm(10*time.Second, "scontrol", "ping")
		return r.Err == nil && strings.Contains(r.Stdout, "is UP")
	}) {
		t.Fatal("slurmctld not UP within 90 s of its restart")
	}
	outage := time.Since(start)
	after, err := c.queue(ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range append(slices.Clone(running), untagged...) {
		if j, ok := after[id]; ok && (j.State != "RUNNING" || j.Nodes != q[id].Nodes) {
			t.Errorf("job %s was running on %s before the restart, now %+v", id, q[id].Nodes, j)
		}
	}
	c.waitCompleted(t, ids, 5*time.Minute)
	log := c.hadarLog()
	if !strings.Contains(log, "rounds work again") && strings.Contains(log, "round failed") {
		t.Errorf("hadar-slurmd's rounds failed and never worked again:\n%s", lastLines(log, 20))
	}
	comp := c.jobcomp(t)
	restarted := 0
	for _, id := range running {
		if len(comp[id]) > 1 {
			restarted++
		}
	}
	c.checkUntouched(t, untagged)
	record(t, "slurmctld container restarted with %d jobs running and %d more submitted: slurmctld answered again after %.1fs; running jobs kept their nodes (%d restarted); %d failed rounds logged by hadar-slurmd; all %d jobs COMPLETED, none lost, untagged never acted on",
		len(running)+len(untagged), len(queued), outage.Seconds(), restarted, strings.Count(log, "round failed"), len(ids))
}

// 5. The hadar-slurmd container killed -9 (docker kill -s KILL: the daemon
// and its fail-open guardian die together, as when its host dies) with jobs
// running, then more tagged jobs submitted: they wait on their lease
// (nothing of hadar runs). Started again before the lease runs out, the
// daemon resumes from its state database and places them; every job
// completes once.
func TestHadarKilled(t *testing.T) {
	c := need(t)
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	first := c.tagged(t, 6, 40)
	ids = append(ids, first...)
	c.waitRunning(t, first, 90*time.Second)
	rounds, err := c.stateDB(t).Rounds()
	if err != nil {
		t.Fatal(err)
	}

	docker(60*time.Second, "kill", "-s", "KILL", c.container("hadar")).Must(t)
	killed := time.Now()
	more := c.tagged(t, 4, 20)
	ids = append(ids, more...)
	time.Sleep(15 * time.Second)
	leases, err := c.leases(more)
	if err != nil {
		t.Fatal(err)
	}
	waiting := 0
	for _, id := range more {
		if leases[id].onLease() {
			waiting++
		} else {
			t.Errorf("job %s submitted while hadar-slurmd was dead: %+v, want PENDING on its lease", id, leases[id])
		}
	}
	docker(60*time.Second, "start", c.container("hadar")).Must(t)
	started := time.Now()
	// within the rest of the lease (~100 s): placed by hadar, not by Slurm
	// alone once the lease ran out
	c.waitRunning(t, more, 75*time.Second)
	placed := time.Since(started)
	c.checkPlaced(t, more)
	c.waitCompleted(t, ids, 4*time.Minute)
	after, err := c.stateDB(t).Rounds()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) <= len(rounds) || after[0].Number != rounds[0].Number {
		t.Errorf("state database: %d rounds before the kill (first %d), %d after (first %d): not resumed", len(rounds), rounds[0].Number, len(after), after[0].Number)
	}
	comp := c.jobcomp(t)
	for _, id := range ids {
		n := 0
		for _, r := range comp[id] {
			if r["JobState"] == "COMPLETED" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("job %s completed %d times", id, n)
		}
	}
	record(t, "hadar-slurmd container killed -9 with %d jobs running; %d of %d jobs submitted meanwhile waited on their lease while it was down (%.0fs); after docker start it resumed its state database (%d rounds before, %d after) and placed them in %.1fs; all %d jobs COMPLETED once",
		len(first), waiting, len(more), started.Sub(killed).Seconds(), len(rounds), len(after), placed.Seconds(), len(ids))
}

// 6. Fail-open: the hadar-slurmd container killed -9 (daemon and guardian
// at once) and not started again. The tagged jobs submitted then wait on
// their lease, which no one renews, and Slurm starts them alone when it
// runs out: 120 s after their submission plus the scheduler's delay, not
// before. hadar-slurmd never acts on them, and they all complete.
func TestFailOpen(t *testing.T) {
	const lease = 120 * time.Second // job_submit.lua's HADAR_LEASE_SECONDS
	c := need(t)
	c.startHadar(t)
	var ids []string
	c.cancelOnCleanup(t, &ids)
	docker(60*time.Second, "kill", "-s", "KILL", c.container("hadar")).Must(t)
	submitted := time.Now()
	jobs := c.tagged(t, 4, 10)
	ids = append(ids, jobs...)
	leases, err := c.leases(jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range jobs {
		// the lease runs from the submission, give or take the clock's second
		if l := leases[id]; l.State != "PENDING" || l.Left < lease-10*time.Second || l.Left > lease+2*time.Second {
			t.Errorf("job %s just submitted: %+v, want PENDING with a lease of ~%s left", id, l, lease)
		}
	}
	// Not before the lease ends: still waiting a while before it does.
	time.Sleep(lease - 20*time.Second - time.Since(submitted))
	early, err := c.queue(jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range jobs {
		if early[id].State != "PENDING" {
			t.Errorf("job %s is %+v %.0fs after its submission, before its lease ran out", id, early[id], time.Since(submitted).Seconds())
		}
	}
	margin := 30 * time.Second
	c.waitRunning(t, jobs, lease+margin-time.Since(submitted))
	ran := time.Since(submitted)
	c.waitCompleted(t, jobs, 90*time.Second)
	c.checkUntouched(t, jobs)
	record(t, "hadar-slurmd container killed -9 and left dead: %d tagged jobs submitted then all RUNNING under Slurm alone %.1fs after their submission (lease %s, bound %s); all COMPLETED, none touched by hadar-slurmd",
		len(jobs), ran.Seconds(), lease, lease+margin)
}
