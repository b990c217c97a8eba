package bridge

import (
	"context"
	"strings"
	"testing"
	"time"
)

// beginJob submits a tagged job with comment whose user asked for
// --begin=userBegin: job_submit.lua's begin time is userBegin + the lease.
func beginJob(h *harness, comment string, userBegin time.Time) string {
	id := h.fc.submit(comment, 1, 1, t0)
	h.fc.mu.Lock()
	h.fc.jobs[id].begin = userBegin.Add(fakeLease)
	h.fc.mu.Unlock()
	return id
}

// runPastBegin checks at every step of the clock that job id has not started
// (nor had its begin time moved before userBegin + the lease) while the
// clock is before userBegin (by more than leaseSlack, which hadar allows for
// Slurm's whole seconds), and that it starts once the clock passed it.
func runPastBegin(t *testing.T, h *harness, b *Bridge, id string, userBegin time.Time) {
	t.Helper()
	for _, at := range []time.Time{t0.Add(30 * time.Minute), userBegin.Add(-fakeLease / 2), userBegin.Add(-3 * time.Second)} {
		h.clock.advance(at.Sub(h.clock.Now()))
		h.cycle(b)
		j := h.fc.job(id)
		if j.state != "PENDING" || j.begin.Before(userBegin.Add(fakeLease)) {
			t.Fatalf("at %s (its --begin %s): job %s is %s, begin time %s; want pending until its --begin, with its begin time (the user's + the lease) kept",
				at.Format(time.TimeOnly), userBegin.Format(time.TimeOnly), id, j.state, j.begin.Format(time.TimeOnly))
		}
	}
	h.clock.advance(userBegin.Add(time.Second).Sub(h.clock.Now()))
	h.cycle(b)
	if j := h.fc.job(id); j.state != "RUNNING" {
		t.Errorf("after its --begin job %s is %s %s (begin %s), want it started", id, j.state, j.reason, j.begin.Format(time.TimeOnly))
	}
}

// A clean stop (ReleaseAll) keeps the begin time of a job whose user's
// --begin is ahead: a restarted daemon still reads the user's begin time
// and starts the job after it, not one lease earlier.
func TestUserBeginSurvivesStopAndRestart(t *testing.T) {
	h := newHarness(t, nil)
	userBegin := t0.Add(time.Hour)
	later := beginJob(h, resnet, userBegin)
	b := h.bridge()
	h.cycle(b)
	got, err := b.ReleaseAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range got {
		if id == later {
			t.Errorf("ReleaseAll handed over job %s, whose --begin is ahead", later)
		}
	}
	if j := h.fc.job(later); !j.begin.Equal(userBegin.Add(fakeLease)) {
		t.Fatalf("after ReleaseAll job %s begins at %s, want its begin time kept (%s)", later, j.begin.Format(time.TimeOnly), userBegin.Add(fakeLease).Format(time.TimeOnly))
	}
	b.Close()
	runPastBegin(t, h, h.bridge(), later, userBegin)
}

// A pass-through job whose user's --begin is ahead is handed to Slurm once
// that begin time has passed; its begin time never moves earlier meanwhile.
func TestPassThroughKeepsUserBegin(t *testing.T) {
	h := newHarness(t, nil)
	userBegin := t0.Add(time.Hour)
	bad := beginJob(h, "hadar steps=-5", userBegin)
	b := h.bridge()
	h.cycle(b)
	runPastBegin(t, h, b, bad, userBegin)
	if a := h.fc.job(bad).admin; !strings.Contains(a, "released to Slurm's scheduler") {
		t.Errorf("pass-through job %s: AdminComment %q, want the hand-over's", bad, a)
	}
}
