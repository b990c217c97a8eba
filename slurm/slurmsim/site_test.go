package slurmsim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hadar-sched/hadar/slurm"
)

// accountingSite is the accounting test cluster's site file.
var accountingSite = readSiteFile()

func readSiteFile() string {
	b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "testcluster", "accounting.site.toml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// siteDemo is the demo layout with a site file applied.
func siteDemo(t *testing.T, site string) *Cluster {
	t.Helper()
	l, err := ParseLayout(strings.NewReader(demoLayout), "demo")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSite(strings.NewReader(site), "site.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Layout: l, Start: t0, Timing: Measured(2 * time.Second)}
	if err := s.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	return New(cfg)
}

// counts is how many of ids are in each "STATE REASON" of squeue.
func counts(t *testing.T, c *Cluster, ids []string) map[string]int {
	t.Helper()
	jobs, err := c.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, j := range jobs {
		if slices.Contains(ids, j.JobID) {
			out[j.State+" "+j.Reason]++
		}
	}
	return out
}

// The live review's workload (site-accounting-live.md, b): bob, QOS gpu4
// (4 GPUs a user), submits eight 1-GPU 45 s jobs, alice fourteen, on the
// demo's 20 GPUs. Slurm runs 18 at once and keeps 4 of bob's pending with
// QOSMaxGRESPerUser (measured there), without holding up alice's; bob's
// others start when his first ones end. The cluster had no limits before.
func TestQOSLimitKeepsJobsPending(t *testing.T) {
	c := siteDemo(t, accountingSite)
	var bob, alice []string
	for range 8 {
		bob = append(bob, c.Submit(JobSpec{User: "bob", QOS: "gpu4", GPUsPerNode: 1, Duration: 45 * time.Second}))
	}
	for range 14 {
		alice = append(alice, c.Submit(JobSpec{User: "alice", GPUsPerNode: 1, Duration: 45 * time.Second}))
	}
	c.AdvanceTo(at(5))
	want := map[string]int{"RUNNING None": 4, "PENDING QOSMaxGRESPerUser": 4}
	if diff := cmp.Diff(want, counts(t, c, bob)); diff != "" {
		t.Errorf("bob's jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"RUNNING None": 14}, counts(t, c, alice)); diff != "" {
		t.Errorf("alice's jobs (-want +got):\n%s", diff)
	}
	c.AdvanceTo(at(50))
	if diff := cmp.Diff(map[string]int{"RUNNING None": 4}, counts(t, c, bob)); diff != "" {
		t.Errorf("bob's jobs after his first ended (-want +got):\n%s", diff)
	}
	for c.Step() {
	}
	var last time.Time
	for _, j := range c.Records() {
		if j.State != Completed {
			t.Errorf("job %s: %s", j.ID, j.State)
		}
		if j.End.After(last) {
			last = j.End
		}
	}
	if got := last.Sub(t0); got < 90*time.Second || got > 95*time.Second {
		t.Errorf("makespan %s, want about 92 s (two waves of 45 s and starts; measured 92 s)", got)
	}

	// The daemon reads the limits and the jobs' scopes.
	lim, err := c.Limits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, err := lim.CheckGPUJob(slurm.GPURequest{User: "bob", Account: "acct_b", QOS: "gpu4", GPUs: 5}, nil)
	if err != nil || v == nil || v.Reason != "QOSMaxGRESPerUser" {
		t.Errorf("limits read back: bob's 5 GPUs give %v, %v; want QOSMaxGRESPerUser", v, err)
	}
}

// Every limit the site file sets gives Slurm's pending reason, and a job
// of an account or QOS the site does not have waits as Invalid*.
func TestLimitReasons(t *testing.T) {
	for _, tc := range []struct {
		name, site string
		jobs       []JobSpec
		want       map[string]int
	}{
		{name: "account GrpTRES", site: `
[accounts.a]
max_gpus = 2
[users.u]
account = "a"`, jobs: []JobSpec{{User: "u", GPUsPerNode: 1}, {User: "u", GPUsPerNode: 1}, {User: "u", GPUsPerNode: 1}},
			want: map[string]int{"RUNNING None": 2, "PENDING AssocGrpGRES": 1}},
		{name: "QOS GrpJobs", site: `
[accounts.a]
[users.u]
account = "a"
qos = "few"
[qos.few]
max_jobs = 1`, jobs: []JobSpec{{User: "u", GPUsPerNode: 1}, {User: "u", GPUsPerNode: 1}},
			want: map[string]int{"RUNNING None": 1, "PENDING QOSGrpJobsLimit": 1}},
		{name: "user MaxJobs", site: `
[accounts.a]
[users.u]
account = "a"
max_jobs = 1`, jobs: []JobSpec{{User: "u", GPUsPerNode: 1}, {User: "u", GPUsPerNode: 1}},
			want: map[string]int{"RUNNING None": 1, "PENDING AssocMaxJobsLimit": 1}},
		{name: "unknown user, unknown QOS", site: `
[accounts.a]
[users.u]
account = "a"`, jobs: []JobSpec{{User: "nobody", GPUsPerNode: 1}, {User: "u", QOS: "gold", GPUsPerNode: 1}},
			want: map[string]int{"PENDING InvalidAccount": 1, "PENDING InvalidQOS": 1}},
	} {
		c := siteDemo(t, tc.site)
		var ids []string
		for _, j := range tc.jobs {
			ids = append(ids, c.Submit(j))
		}
		c.AdvanceTo(at(5))
		if diff := cmp.Diff(tc.want, counts(t, c, ids)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// Fairshare: acct_b has used the cluster, so bob's jobs have a lower
// priority than alice's and wait behind them, though submitted first
// (measured on the accounting cluster: alice 6666, bob 3333, alice's 8
// first). Jobs show their account and QOS, and running ones their GPUs.
func TestFairshareOrder(t *testing.T) {
	c := siteDemo(t, accountingSite+"\n")
	c.cfg.Usage = nil
	c.acctUsage["acct_b"] = 1600 // GPU-s
	for _, n := range []string{"node3", "node4", "node5"} {
		c.SetNodeState(n, "DRAIN")
	}
	var blockers, bob, alice []string
	for range 8 {
		blockers = append(blockers, c.Submit(JobSpec{User: "alice", GPUsPerNode: 1, Duration: 15 * time.Second}))
	}
	c.AdvanceTo(at(1))
	for range 10 {
		bob = append(bob, c.Submit(JobSpec{User: "bob", GPUsPerNode: 1, Duration: 20 * time.Second}))
	}
	for range 10 {
		alice = append(alice, c.Submit(JobSpec{User: "alice", GPUsPerNode: 1, Duration: 20 * time.Second}))
	}
	c.AdvanceTo(at(5))
	jobs, err := c.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	prio := map[string]int64{}
	for _, j := range jobs {
		prio[j.JobID] = j.Priority
	}
	if prio[alice[0]] <= prio[bob[0]] || prio[bob[0]] <= 0 {
		t.Errorf("priorities: alice %d, bob %d; want alice's higher, both above 0", prio[alice[0]], prio[bob[0]])
	}
	details, err := c.JobDetails(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range details {
		if d.JobID == blockers[0] {
			want := []slurm.GRES{{Name: "gpu", Type: "v100", Count: 1}}
			if d.Account != "acct_a" || d.QOS != "normal" || !cmp.Equal(want, d.JobGres) {
				t.Errorf("running job's details: account %q, QOS %q, JOB_GRES %v", d.Account, d.QOS, d.JobGres)
			}
		}
		if d.JobID == bob[0] && (d.Account != "acct_b" || d.QOS != "gpu4" || d.JobGres != nil) {
			t.Errorf("bob's pending job's details: account %q, QOS %q, JOB_GRES %v", d.Account, d.QOS, d.JobGres)
		}
	}
	c.AdvanceTo(at(20))
	if diff := cmp.Diff(map[string]int{"RUNNING None": 8, "PENDING Resources": 1, "PENDING Priority": 1}, counts(t, c, alice)); diff != "" {
		t.Errorf("alice's jobs once the blockers ended (-want +got):\n%s", diff)
	}
	if n := counts(t, c, bob)["RUNNING None"]; n != 0 {
		t.Errorf("%d of bob's jobs run before alice's", n)
	}
}

// Without a site, jobs are ordered by age and the cluster has no
// accounting: the daemon plans without limits.
func TestNoSite(t *testing.T) {
	c := demo(t, Measured(2*time.Second))
	if _, err := c.Limits(context.Background()); !errors.Is(err, ErrNoAccounting) {
		t.Errorf("Limits: %v, want ErrNoAccounting", err)
	}
	res, err := c.Reservations(context.Background())
	if err != nil || res != nil {
		t.Errorf("Reservations: %v, %v; want none", res, err)
	}
	for _, n := range []string{"node1", "node2", "node3", "node4", "node5"} {
		c.SetNodeState(n, "DRAIN")
	}
	a := c.Submit(JobSpec{User: "u", GPUsPerNode: 1})
	c.AdvanceTo(at(1))
	b := c.Submit(JobSpec{User: "u", GPUsPerNode: 1})
	jobs, _ := c.Jobs(context.Background())
	if len(jobs) != 2 || jobs[0].JobID != a || jobs[1].JobID != b || jobs[0].Priority != jobs[1].Priority+1 {
		t.Errorf("priorities without a site: %+v, want the older job's 1 above", jobs)
	}
}

// A maintenance reservation on node1 and node2 from t=60 s for 10 min:
// a job whose time limit would run into it does not start there (Slurm
// refuses), a job short enough does, a job pinned there waits with
// ReqNodeNotAvail; the nodes show MAINTENANCE while it is active and are
// used again when it ends.
func TestReservation(t *testing.T) {
	c := siteDemo(t, `
default_time = "5m"
[[reservations]]
name = "maint1"
nodes = "node[1-2]"
start = "60s"
duration = "10m"
flags = ["maint"]
users = ["root"]
`)
	for _, n := range []string{"node3", "node4", "node5"} {
		c.SetNodeState(n, "DRAIN")
	}
	long := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Duration: 20 * time.Second})
	short := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Duration: 20 * time.Second, TimeLimit: 30 * time.Second})
	pinned := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Duration: 20 * time.Second})
	if err := c.PlaceOnNodes(context.Background(), pinned, []string{"node1"}); err != nil {
		t.Fatal(err)
	}
	c.AdvanceTo(at(2))
	for id, want := range map[string]string{long: "PENDING Resources ", short: "RUNNING None node1",
		pinned: "PENDING ReqNodeNotAvail, UnavailableNodes:node1 "} {
		if got := state(t, c, id); got != want {
			t.Errorf("job %s at 2 s: %q, want %q", id, got, want)
		}
	}
	res, err := c.Reservations(context.Background())
	if err != nil || len(res) != 1 || res[0].State != "INACTIVE" || !res[0].HasFlag("MAINT") || !slices.Equal(res[0].Nodes, []string{"node1", "node2"}) {
		t.Errorf("reservations at 2 s: %+v, %v", res, err)
	}
	c.AdvanceTo(at(61))
	nodes, _ := c.Nodes(context.Background())
	if nodes[0].RawState != "IDLE+MAINTENANCE+RESERVED" {
		t.Errorf("node1 in the reservation: %q", nodes[0].RawState)
	}
	if res, _ := c.Reservations(context.Background()); len(res) != 1 || !res[0].Active() {
		t.Errorf("reservations at 61 s: %+v", res)
	}
	c.AdvanceTo(at(60 + 600 + 2))
	if got := state(t, c, long); !strings.HasPrefix(got, "RUNNING") {
		t.Errorf("job %s after the reservation: %q, want RUNNING", long, got)
	}
	if res, _ := c.Reservations(context.Background()); len(res) != 0 {
		t.Errorf("reservations after the end: %+v", res)
	}
}

// A job that runs past its time limit ends in TIMEOUT.
func TestTimeLimit(t *testing.T) {
	c := demo(t, Measured(2*time.Second))
	id := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Duration: time.Minute, TimeLimit: 30 * time.Second})
	for c.Step() {
	}
	if j := c.Job(id); j.State != Timeout || j.End.Sub(j.FirstStart) != 30*time.Second {
		t.Errorf("job: %s after %s, want TIMEOUT after 30s", j.State, j.End.Sub(j.FirstStart))
	}
}

// --begin and sbatch -H: a job waits for its begin time (a tagged one
// for its begin time plus the lease, as job_submit.lua sets it), and a
// held one until released, with priority 0.
func TestBeginAndHold(t *testing.T) {
	c := demo(t, Measured(2*time.Second))
	begin := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Begin: at(30)})
	tagged := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Begin: at(30), Comment: "hadar"})
	held := c.Submit(JobSpec{User: "u", GPUsPerNode: 1, Hold: true})
	c.AdvanceTo(at(10))
	jobs, _ := c.Jobs(context.Background())
	got := map[string]string{}
	for _, j := range jobs {
		starts := "no begin time"
		if !j.StartTime.IsZero() {
			starts = "begins at " + j.StartTime.Sub(t0).String()
		}
		got[j.JobID] = fmt.Sprintf("%s, %s, priority > 0: %v", j.Reason, starts, j.Priority > 0)
	}
	want := map[string]string{begin: "BeginTime, begins at 30s, priority > 0: true",
		tagged: "BeginTime, begins at 2m30s, priority > 0: true", held: "JobHeldUser, no begin time, priority > 0: false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("at 10 s (-want +got):\n%s", diff)
	}
	c.AdvanceTo(at(32))
	if s := state(t, c, begin); !strings.HasPrefix(s, "RUNNING") {
		t.Errorf("job with --begin at 32 s: %q", s)
	}
	if s := state(t, c, held); s != "PENDING JobHeldUser " {
		t.Errorf("held job at 32 s: %q", s)
	}
	if err := c.Release(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	c.AdvanceTo(at(34))
	if s := state(t, c, held); !strings.HasPrefix(s, "RUNNING") {
		t.Errorf("released job: %q", s)
	}
}

// Site files that do not make a site are errors naming what is wrong.
func TestParseSiteErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", "[accounts.a]\nshare = 3\n", "unknown keys: accounts.a.share"},
		{"user without account", "[users.u]\nqos = \"normal\"\n", "users.u: no account"},
		{"user of an unknown account", "[users.u]\naccount = \"x\"\n", `users.u: account "x" is not in [accounts]`},
		{"unknown QOS", "[accounts.a]\n[users.u]\naccount = \"a\"\nqos = \"gold\"\n", `users.u: QOS "gold" is not in [qos]`},
		{"negative limit", "[qos.q]\nmax_gpus_per_user = -1\n", "qos.q.max_gpus_per_user is -1"},
		{"parent loop", "[accounts.a]\nparent = \"b\"\n[accounts.b]\nparent = \"a\"\n", "accounts.a: its parents loop"},
		{"bad duration", "default_time = \"5 minutes\"\n", "is not a duration"},
		{"reservation without nodes", "[[reservations]]\nname = \"m\"\nduration = \"1h\"\n", "reservations[1]: no nodes"},
		{"reservation without duration", "[[reservations]]\nname = \"m\"\nnodes = \"n1\"\n", "reservations[1]: duration must be positive"},
	} {
		_, err := ParseSite(strings.NewReader(tc.text), "site.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	s, err := ParseSite(strings.NewReader("[[reservations]]\nname = \"m\"\nnodes = \"node9\"\nduration = \"1h\"\n"), "site.toml")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ParseLayout(strings.NewReader(demoLayout), "demo")
	if err := s.Apply(&Config{Layout: l}); err == nil || !strings.Contains(err.Error(), "node node9 is not in the layout") {
		t.Errorf("reservation on a node not in the layout: %v", err)
	}
}

// Whatever site file parses applies to a layout or says why not, without
// panicking, and a cluster runs a job under it.
func FuzzParseSite(f *testing.F) {
	f.Add(accountingSite)
	f.Add("default_time = \"5m\"\n[[reservations]]\nname = \"m\"\nnodes = \"node[1-2]\"\nstart = \"1m\"\nduration = \"1h\"\nflags = [\"maint\"]\n")
	f.Add("[accounts.a]\nparent = \"b\"\n[accounts.b]\nshares = 0\nusage_gpu_hours = 1e300\n[users.u]\naccount = \"a\"\nmax_jobs = 0\n")
	l, err := ParseLayout(strings.NewReader(demoLayout), "demo")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSite(strings.NewReader(text), "fuzz")
		if err != nil {
			return
		}
		cfg := Config{Layout: l, Start: t0, Timing: Measured(2 * time.Second)}
		if err := s.Apply(&cfg); err != nil {
			return
		}
		c := New(cfg)
		for u := range s.Users {
			c.Submit(JobSpec{User: u, GPUsPerNode: 1, Duration: time.Second})
		}
		c.Submit(JobSpec{User: "other", GPUsPerNode: 1, Duration: time.Second})
		c.AdvanceTo(at(10))
		if _, err := c.Jobs(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
