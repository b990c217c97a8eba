package reliability

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hadar-sched/hadar/internal/e2eutil"
	"github.com/hadar-sched/hadar/slurm"
)

// 7. Load: 2,000 pending tagged jobs (two job arrays of 1,000 tasks, on
// job_submit.lua's lease). Every round still finishes; each round runs one
// squeue and one node query plus batched updates (one NodeList update per
// placed job, bounded by the free GPUs), never a command per queued job;
// the polls between rounds are one squeue each. Round times are recorded.
// Then fail-open (SIGTERM) hands the ~1,980 waiting tasks to Slurm in one
// update (StartTime=now).
func TestLoad2000PendingJobs(t *testing.T) {
	tc := need(t)
	const tasks = 1000
	for range 2 {
		tc.submit(job{Comment: "hadar model=resnet50-bs64 steps=1000000", GPUs: 1, Seconds: 900, Name: "rel-load",
			Extra: []string{fmt.Sprintf("--array=0-%d", tasks-1)}})
	}
	total := 2 * tasks
	if !e2eutil.WaitFor(60*time.Second, func() bool { return len(queue(t)) >= total }) {
		t.Fatalf("only %d of %d array tasks in the queue", len(queue(t)), total)
	}
	cfg := defaultDaemonConfig()
	cfg.Round = "5s"
	d := tc.newDaemon("d", cfg)
	d.start()
	const rounds = 6
	if !d.waitRounds(rounds+1, 150*time.Second) {
		t.Fatalf("only %d rounds in 150 s with %d jobs", len(d.rounds()), total)
	}

	// Per round: the commands logged since the previous round's end.
	type seg struct {
		squeue, nodes, details, updates, places, site, other int
		seconds, observe, solve, enforce                     float64
		jobs                                                 int
	}
	var segs []seg
	cur := seg{}
	var perJob []string
	versionReads, limitReads := 0, 0
	for _, e := range d.log() {
		switch e.str("msg") {
		case "slurm command":
			argv := e.str("argv")
			switch {
			case strings.HasPrefix(argv, "squeue -h -a -r -t PD,R,S,CG,CF -o "):
				cur.squeue++
			case argv == "scontrol -a -d -o show node":
				cur.nodes++
			case argv == "scontrol -a -d -o show job":
				cur.details++
			case argv == "scontrol --version":
				versionReads++ // once per daemon: whether types can be rewritten
			case argv == strings.Join(slurm.ReservationQueryArgs, " "):
				cur.site++ // the site's reservations: one a round
			case argv == strings.Join(slurm.AssocQueryArgs, " ") || argv == strings.Join(slurm.QOSQueryArgs, " "):
				limitReads++ // the site's limits: at most every 5 minutes
			case strings.HasPrefix(argv, "scontrol update JobId=") && strings.Contains(argv, " NodeList="):
				cur.places++
			case strings.HasPrefix(argv, "scontrol update ") || strings.HasPrefix(argv, "scontrol release ") ||
				strings.HasPrefix(argv, "scontrol hold ") || strings.HasPrefix(argv, "scontrol requeuehold "):
				cur.updates++
			default:
				cur.other++
				perJob = append(perJob, argv)
			}
		case "round":
			cur.observe, cur.solve, cur.enforce = e.num("observe")/1e9, e.num("solve")/1e9, e.num("enforce")/1e9
			cur.seconds = cur.observe + cur.solve + cur.enforce
			cur.jobs = int(e.num("jobs"))
			segs = append(segs, cur)
			cur = seg{}
		}
	}
	if len(perJob) > 0 {
		t.Errorf("the daemon ran commands other than the round's reads and updates: %q", perJob[:min(len(perJob), 5)])
	}
	if versionReads > 1 {
		t.Errorf("the daemon read Slurm's version %d times; once is enough", versionReads)
	}
	if limitReads > 4 {
		t.Errorf("the daemon read the accounting limits %d times; at most every 5 minutes (2 commands each)", limitReads)
	}
	for i, sg := range segs {
		if sg.site > 1 {
			t.Errorf("round %d read the reservations %d times, want once", i+1, sg.site)
		}
	}
	poll, _ := time.ParseDuration(cfg.Poll)
	round, _ := time.ParseDuration(cfg.Round)
	maxPolls := int(math.Ceil(round.Seconds()/poll.Seconds())) + 1
	var times []float64
	maxCmds, maxPlaces, maxUpd := 0, 0, 0
	for i, s := range segs {
		// One node query per round, and one per poll (a node drained or
		// resumed starts a round early, as a job's arrival does); one read
		// of the jobs' requests (scontrol show job) per round.
		if s.nodes < 1 || s.nodes > 1+maxPolls || s.nodes > s.squeue {
			t.Errorf("round %d (with the polls before it) ran %d node queries for %d squeue, want 1..%d and no more than squeue", i+1, s.nodes, s.squeue, 1+maxPolls)
		}
		if s.details != 1 {
			t.Errorf("round %d ran %d scontrol show job, want 1", i+1, s.details)
		}
		if s.squeue < 1 || s.squeue > 1+maxPolls {
			t.Errorf("round %d (with the polls before it) ran %d squeue, want 1..%d", i+1, s.squeue, 1+maxPolls)
		}
		if s.places > 20 {
			t.Errorf("round %d placed %d jobs on a 20-GPU cluster", i+1, s.places)
		}
		if s.updates > 5 {
			t.Errorf("round %d ran %d batched updates, want at most 5 (comment, lease, requeuehold, start-now, release)", i+1, s.updates)
		}
		if s.jobs < total-10 {
			t.Errorf("round %d saw %d jobs, want ~%d", i+1, s.jobs, total)
		}
		maxCmds = max(maxCmds, s.squeue+s.nodes+s.places+s.updates)
		maxPlaces, maxUpd = max(maxPlaces, s.places), max(maxUpd, s.updates)
		if i > 0 { // the first round places the first 20 tasks
			times = append(times, s.seconds)
		}
		if s.seconds > round.Seconds() {
			t.Errorf("round %d took %.2fs, longer than a round (%s)", i+1, s.seconds, round)
		}
	}
	var obs, solve []float64
	for _, s := range segs[1:] {
		obs, solve = append(obs, s.observe), append(solve, s.solve)
	}
	first := segs[0]
	calls := d.shimCalls()

	// Fail-open with ~1,980 waiting tasks.
	waiting := 0
	for _, j := range queue(t) {
		if waitsForHadar(j) {
			waiting++
		}
	}
	sent := time.Now()
	if code := d.term(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	stopTook := time.Since(sent)
	// Slurm updates a pending job's reason at its next scheduling pass.
	left := 0
	e2eutil.WaitFor(20*time.Second, func() bool {
		left = 0
		for _, j := range queue(t) {
			if waitsForHadar(j) {
				left++
			}
		}
		return left == 0
	})
	if left != 0 {
		t.Errorf("%d of %d waiting tasks still on hadar's lease 20s after fail-open", left, waiting)
	}
	var endCmd string
	for _, e := range d.log() {
		if argv := e.str("argv"); e.str("msg") == "slurm command" && e.time().After(sent) &&
			strings.HasPrefix(argv, "scontrol update JobId=") && strings.HasSuffix(argv, " StartTime=now") {
			endCmd = fmt.Sprintf("%d ids in one command, %.2fs", strings.Count(argv, ",")+1, e.num("duration")/1e9)
		}
	}
	if endCmd == "" {
		t.Errorf("no StartTime=now of the waiting tasks in the daemon's log after SIGTERM")
	}
	d.assertHealthyLog()
	record(t, "%d pending tagged jobs (2 arrays): %d rounds all finished; first round (placed %d) %.2fs (observe %.2fs, enforce %.2fs); later rounds p50 %.3fs max %.3fs (observe p50 %.3fs, solve p50 %.3fs); per round 1 node query and 1 scontrol show job (+1 node query per poll), 1 squeue + <=%d polls, at most %d NodeList updates and %d batched updates (max %d commands); %d Slurm commands in all",
		total, len(segs), first.places, first.seconds, first.observe, first.enforce, percentile(times, 0.5), maxOf(times),
		percentile(obs, 0.5), percentile(solve, 0.5), maxPolls, maxPlaces, maxUpd, maxCmds, len(calls))
	record(t, "fail-open with %d tasks on hadar's lease: all leases ended (%s), daemon exited %.2fs after SIGTERM", waiting, endCmd, stopTook.Seconds())
}
