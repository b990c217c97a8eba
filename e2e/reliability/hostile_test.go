package reliability

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hadar-sched/hadar/internal/e2eutil"
	"github.com/hadar-sched/hadar/slurm"
)

// canaries are the files a hostile job text would create if anything ran
// it through a shell.
func canaries(tc *tcase, dirs ...string) []string {
	var out []string
	for _, d := range append([]string{"/tmp", "/", jobsDir, repoRoot, tc.dir, clusterDir}, dirs...) {
		m, _ := filepath.Glob(filepath.Join(d, "hadar-rel-pwned*"))
		out = append(out, m...)
	}
	return out
}

// refusedAsUser runs scontrol as the unprivileged user and reports whether
// Slurm refused it: with the access-denied message of job_submit.lua, or
// (Slurm 24.11, for an update of another user's job) with slurmctld's own
// "Invalid user id for job N" before job_submit.lua runs.
func refusedAsUser(args ...string) (bool, string) {
	r := asTestUser().Run("scontrol", args...)
	msg := r.Stdout
	if r.Err != nil {
		msg = r.Err.Error()
	}
	return r.Err != nil && isRefusal(msg), msg
}

// reInvalidUser is Slurm 24.11's refusal of another user's update.
var reInvalidUser = regexp.MustCompile(`Invalid user id for job [0-9]+`)

// isRefusal reports whether scontrol's message is a refusal of the
// change: job_submit.lua's "Access/permission denied" (22.05 and 24.11),
// slurmctld's "Invalid user id for job N" (24.11), or its refusal of a
// user's higher priority ("change nice instead").
func isRefusal(msg string) bool {
	return strings.Contains(msg, "Access/permission denied") || reInvalidUser.MatchString(msg) ||
		strings.Contains(msg, "Changes to job priority are not persistent, change nice instead")
}

// 8. Hostile and bad input on the real cluster: shell metacharacters,
// quotes, newlines, escape sequences, long and non-UTF-8 text in job
// names, work dirs and comments; malformed tags; untagged jobs alongside;
// and an unprivileged user holding, releasing and shortening his own tagged
// job, and trying to take it from hadar or re-target it.
func TestHostileInput(t *testing.T) {
	tc := need(t)
	cfg := defaultDaemonConfig()
	cfg.LogFormat, cfg.LogLevel = "text", "debug" // the default format: check its escaping
	d := tc.newDaemon("d", cfg)
	ok := "hadar model=resnet50-bs64 steps=500"
	// Work dirs whose names are shell code.
	dir1 := filepath.Join(tc.dir, "w;touch hadar-rel-pwned-wd1;")
	dir2 := filepath.Join(tc.dir, "w$(touch hadar-rel-pwned-wd2)|`touch hadar-rel-pwned-wd3` 'q\" & x")
	for _, p := range []string{dir1, dir2} {
		if err := os.MkdirAll(p, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o777)
	}
	long := strings.Repeat("x", 600)
	type hj struct {
		j          job
		scheduled  bool   // hadar places it; else it is passed through
		adminWants string // AdminComment must contain this (passed through)
	}
	cases := map[string]hj{
		"V1":                {j: job{Comment: ok, GPUs: 1, Seconds: 3, Name: "valid-1"}, scheduled: true},
		"V2":                {j: job{Comment: ok, GPUs: 2, Seconds: 3, Name: "valid-2"}, scheduled: true},
		"V3":                {j: job{Comment: ok, GPUs: 1, Seconds: 3, Name: "valid-3", User: testUser}, scheduled: true},
		"H1-name-subst":     {j: job{Comment: ok, GPUs: 1, Seconds: 3, Name: "$(touch /tmp/hadar-rel-pwned-name)", Chdir: dir1}, scheduled: true},
		"H2-name-backticks": {j: job{Comment: ok, GPUs: 1, Seconds: 3, Name: "`touch /tmp/hadar-rel-pwned-bt`;|&\"' >x", Chdir: dir2, User: testUser}, scheduled: true},
		"H3-name-bytes":     {j: job{Comment: ok, GPUs: 1, Seconds: 3, Name: "esc\x1b[31mred\r\xff\xfe" + long}, scheduled: true},
		"H4-comment-subst": {j: job{Comment: ok + " note=$(touch /tmp/hadar-rel-pwned-c)", GPUs: 1, Seconds: 3},
			adminWants: "unknown key"},
		// A model no matrix knows is scheduled on the cross-model prior:
		// its name is data, never run.
		"H5-model-subst": {j: job{Comment: `hadar model="$(touch /tmp/hadar-rel-pwned-m)" steps=5`, GPUs: 1, Seconds: 3}, scheduled: true},
		"H6-comment-newline": {j: job{Comment: ok + "\nlevel=ERROR msg=forged", GPUs: 1, Seconds: 3},
			adminWants: "control character"},
		"H7-forged-record": {j: job{Comment: "hadar model=x|\n99999|99999|N/A|root|PENDING|1|2026-01-01T00:00:00|N/A|0:00|gres:gpu:1||JobHeldUser|forged|hadar model=resnet50-bs64", GPUs: 1, Seconds: 3},
			adminWants: "hadar:"},
		"H8-long-comment": {j: job{Comment: "hadar model=resnet50-bs64 steps=500 " + long, GPUs: 1, Seconds: 3},
			adminWants: "longer than squeue shows"},
		"H9-not-utf8": {j: job{Comment: ok + " \xff\xfe", GPUs: 1, Seconds: 3},
			adminWants: "not valid UTF-8"},
		"H10-backticks": {j: job{Comment: ok + " `touch /tmp/hadar-rel-pwned-b` ; | & ' \"", GPUs: 1, Seconds: 3},
			adminWants: "hadar:"},
		"M1-negative-steps": {j: job{Comment: "hadar steps=-5", GPUs: 1, Seconds: 3},
			adminWants: `bad hadar tag: steps: "-5": want a number > 0`},
		"M2-unknown-model": {j: job{Comment: "hadar model=nosuchmodel steps=100", GPUs: 1, Seconds: 3}, scheduled: true},
		"M3-copies": {j: job{Comment: "hadar model=resnet50-bs64 copies=999", GPUs: 1, Seconds: 3},
			adminWants: "copies"},
	}
	ids := map[string]string{}
	var all []string
	for name, c := range cases {
		ids[name] = tc.submit(c.j)
		all = append(all, ids[name])
	}
	// Untagged jobs alongside, one of them with GPUs it asks by type.
	untagged := map[string]string{
		"U1": tc.submit(job{GPUs: 1, Seconds: 4, Name: "untagged-1"}),
		"U2": tc.submit(job{GPUs: 2, Seconds: 4, Name: "untagged-2", User: testUser}),
		"U3": tc.submit(job{Seconds: 4, Name: "untagged-cpu"}),
		"U4": tc.submit(job{Comment: "hadarx not a tag", GPUs: 1, Seconds: 4, Name: "untagged-4"}),
	}
	// The unprivileged user's own tagged job: on hadar's lease; he may hold
	// and release it and shorten its time limit, but not take it from
	// hadar, re-target it or raise its priority.
	mine := tc.submit(job{Comment: ok, GPUs: 1, Seconds: 12, Name: "users-own", User: testUser})
	all = append(all, mine)
	uheld := tc.submit(job{GPUs: 1, Seconds: 2, Name: "users-untagged-held", User: testUser, Extra: []string{"--hold"}})
	time.Sleep(time.Second)
	q := byID(queue(t))
	if !waitsForHadar(q[mine]) {
		t.Fatalf("the user's tagged job %s is not on hadar's lease at submission: %+v", mine, q[mine])
	}
	allowed := 0
	for _, step := range []struct {
		args []string
		want func(slurm.Job) bool
	}{
		{[]string{"hold", mine}, isHeld},
		{[]string{"release", mine}, waitsForHadar},
		{[]string{"update", "JobId=" + mine, "TimeLimit=5"}, waitsForHadar},
	} {
		if r := asTestUser().Run("scontrol", step.args...); r.Err != nil {
			t.Errorf("user %s: `scontrol %s`: %v", testUser, strings.Join(step.args, " "), r.Err)
			continue
		}
		var j slurm.Job
		if !e2eutil.WaitFor(10*time.Second, func() bool { j = byID(queue(t))[mine]; return step.want(j) }) {
			t.Errorf("after the user's `scontrol %s` his job is %s %s", strings.Join(step.args, " "), j.State, j.Reason)
		}
		allowed++
	}
	denied := 0
	for _, args := range [][]string{
		{"update", "JobId=" + mine, "NodeList=node1"},
		{"update", "JobId=" + mine, "Comment=not hadar any more"},
		{"update", "JobId=" + mine, "Priority=100000"},
		{"update", "JobId=" + ids["M1-negative-steps"], "Comment=hadar model=resnet50-bs64 steps=5"},
		{"update", "JobId=" + uheld, "Comment=hadar"},
	} {
		if refused, msg := refusedAsUser(args...); !refused {
			t.Errorf("user %s was not refused `scontrol %s`: %s", testUser, strings.Join(args, " "), msg)
		} else {
			denied++
		}
	}
	if j := byID(queue(t))[mine]; !waitsForHadar(j) || j.Comment != ok {
		t.Errorf("after the refused attempts the user's job is %s %s %q", j.State, j.Reason, j.Comment)
	}
	e2eutil.Run(0, nil, "scancel", uheld)

	d.start()
	// The user requeues their running tagged job (not a job update: the
	// lua hook does not see it): hadar takes it back and places it again.
	var requeued bool
	var requeueErr error
	if e2eutil.WaitFor(30*time.Second, func() bool { return byID(queue(t))[mine].State == "RUNNING" }) {
		// Retried: the job may be between two states (a migration).
		requeued = e2eutil.WaitFor(6*time.Second, func() bool {
			requeueErr = asTestUser().Run("scontrol", "requeue", mine).Err
			return requeueErr == nil
		})
		if !requeued {
			t.Logf("the user's requeue was refused: %v", requeueErr)
		}
	} else {
		t.Error("the user's tagged job did not start")
	}
	var uids []string
	for _, id := range untagged {
		uids = append(uids, id)
	}
	waitDone(t, append(append([]string(nil), all...), uids...), 180*time.Second)
	d.term()

	if c := canaries(tc, dir1, dir2, d.dir, filepath.Dir(dir1)); len(c) > 0 {
		t.Errorf("hostile text was executed: %v", c)
	}
	assertAllCompleted(t, append(append([]string(nil), all...), uids...))
	dec := d.dbDecisions()
	acts := d.actions()
	placed, passed := 0, 0
	for name, c := range cases {
		id := ids[name]
		kinds := strings.Join(dec[id], " | ")
		if c.scheduled {
			if !strings.Contains(kinds, "place: ") {
				t.Errorf("%s (job %s) was not scheduled by hadar: %s", name, id, kinds)
			} else {
				placed++
			}
			continue
		}
		if !strings.Contains(kinds, "pass-through: ") {
			t.Errorf("%s (job %s) was not passed through with a reason: %s", name, id, kinds)
			continue
		}
		passed++
		out := mustRun(t, "scontrol", "show", "job", id)
		i := strings.Index(out, "AdminComment=")
		admin := ""
		if i >= 0 {
			admin = out[i+len("AdminComment="):]
			admin, _, _ = strings.Cut(admin, "\n")
		}
		if !strings.Contains(admin, c.adminWants) || !strings.HasPrefix(admin, "hadar: ") || !strings.Contains(admin, "released to Slurm's scheduler") {
			t.Errorf("%s (job %s): AdminComment %q, want it to say %q", name, id, admin, c.adminWants)
		}
		if name[0] == 'M' {
			record(t, "%s: user sees AdminComment=%q; released, COMPLETED", name, strings.TrimSpace(admin))
		}
	}
	// The forged record's id never reaches scontrol.
	for _, a := range acts {
		for _, id := range strings.Split(a.JobIDs, ",") {
			if id == "99999" {
				t.Errorf("acted on the forged job id 99999: %+v", a)
			}
		}
	}
	// Untagged jobs: never named by hadar, never updated, held or requeued
	// by anyone, one run each.
	ev := ctldEvents(t)
	comp := jobcompRecords(t)
	for name, id := range untagged {
		for _, a := range acts {
			for _, x := range strings.Split(a.JobIDs, ",") {
				if x == id {
					t.Errorf("untagged %s (job %s) named by a hadar action: %+v", name, id, a)
				}
			}
		}
		for _, e := range ev[id] {
			if e.Kind != "submit" && e.Kind != "start" && e.Kind != "done" {
				t.Errorf("untagged %s (job %s): slurmctld logged %s at %s", name, id, e.Kind, e.At)
			}
		}
		out := mustRun(t, "scontrol", "show", "job", id)
		if !strings.Contains(out, " Restarts=0 ") {
			t.Errorf("untagged %s (job %s) was restarted: %s", name, id, out)
		}
		if r := comp[id]; len(r) != 1 || r[0] != "COMPLETED" {
			t.Errorf("untagged %s (job %s) runs: %v", name, id, r)
		}
	}
	if requeued {
		if k := strings.Join(dec[mine], " | "); !strings.Contains(k, "re-hold") {
			t.Errorf("the user's requeued job %s was not taken back by hadar: %s", mine, k)
		}
	}
	// The log: one record per line (nothing a job wrote could start a line
	// of its own), valid UTF-8, no raw control characters, comments quoted.
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) {
		t.Error("the daemon's log is not valid UTF-8 (raw bytes of a job's text?)")
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("time=")) {
			t.Errorf("log line %d is not a log record: %q", i+1, line)
		}
		if bytes.IndexFunc(line, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
			t.Errorf("log line %d holds a raw control character: %q", i+1, line)
		}
	}
	if bytes.Contains(b, []byte("\nlevel=ERROR msg=forged")) {
		t.Error("a job's comment forged a log line")
	}
	record(t, "%d hostile/malformed jobs + %d valid + %d untagged: no canary file created; %d scheduled by hadar, %d passed through with an AdminComment reason; the forged squeue record never acted on; untagged jobs never named, updated, held or requeued (Restarts=0, one run); log one record per line, valid UTF-8, no raw control chars",
		len(cases)-3, 3, len(untagged), placed, passed)
	record(t, "user %s: hold, release and TimeLimit=5 of his own tagged job done (%d of 3; back on hadar's lease after the release); %d of 5 attempts to re-target/re-tag/re-prioritise it (or tag an untagged one) refused (Access/permission denied, Slurm's \"change nice instead\", or 24.11's Invalid user id); its own requeue of the running job was %s",
		testUser, allowed, denied, map[bool]string{true: "taken back by hadar (re-hold, re-placed), job COMPLETED", false: "refused"}[requeued])
}

// TestIsRefusal: the refusals of both Slurm versions count, a failure of
// another kind does not. The messages are verbatim scontrol stderr.
func TestIsRefusal(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"scontrol update JobId=12 NodeList=node2: exit status 1: Access/permission denied for job 12", true},
		{"scontrol release 12: exit status 1: Access/permission denied for job 12\nslurm_suspend error: Access/permission denied", true},
		{"scontrol update JobId=57 NodeList=node2: exit status 1: Invalid user id for job 57", true},
		{"scontrol update JobId=11 Priority=100: exit status 1: Changes to job priority are not persistent, change nice instead for job 11", true},
		{"scontrol update JobId=57 NodeList=node2: exit status 1: Invalid job id specified", false},
		{"scontrol update JobId=57 NodeList=node2: exit status 1: Invalid user id for job", false},
		{"", false},
	} {
		if got := isRefusal(tc.msg); got != tc.want {
			t.Errorf("isRefusal(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
