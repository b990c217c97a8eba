package slurm

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fixtureOutput(t testing.TB, rel string) string {
	t.Helper()
	fx, err := LoadFixture(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(fx.Output)
}

func TestAccountingQueryArgs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"reservations", ReservationQueryArgs, []string{"scontrol", "-o", "show", "reservation"}},
		{"associations", AssocQueryArgs, []string{"sacctmgr", "show", "assoc", "--parsable2", "--noheader",
			"format=Cluster,Account,User,Partition,ParentName,Share,GrpTRES,GrpJobs,GrpSubmitJobs,MaxTRES,MaxTRESPerNode,MaxJobs,MaxSubmitJobs,MaxWall,QOS,DefaultQOS,Priority"}},
		{"qos", QOSQueryArgs, []string{"sacctmgr", "show", "qos", "--parsable2", "--noheader",
			"format=Name,Priority,Flags,GrpTRES,GrpJobs,GrpSubmitJobs,MaxTRES,MaxTRESPerNode,MaxTRESPerUser,MaxJobsPerUser,MaxSubmitJobsPerUser,MaxTRESPerAccount,MaxJobsPerAccount,MaxSubmitJobsPerAccount,MaxWall,MinTRES,UsageFactor"}},
		{"shares", SharesQueryArgs, []string{"sshare", "-a", "-P"}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	// The fixtures were captured with the same formats.
	for rel, format := range map[string]string{
		"sacctmgr-show-assoc/22.05-site.txt": AssocFormat,
		"sacctmgr-show-qos/22.05-site.txt":   QOSFormat,
	} {
		fx, err := LoadFixture(filepath.Join("testdata", rel))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(fx.Command, "format="+format) {
			t.Errorf("%s was captured with %q, not format=%s", rel, fx.Command, format)
		}
	}
}

func TestParseReservations(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		input   string
		want    []Reservation
		wantErr []string
	}{
		{name: "22.05 none", input: fixtureOutput(t, "scontrol-show-reservation/22.05-none.txt")},
		{name: "22.05 maint in the future, accounts+partition active, users+partition", input: fixtureOutput(t, "scontrol-show-reservation/22.05-three.txt"),
			want: []Reservation{
				{Name: "maint1", Start: at("2026-12-07T15:23:34"), End: at("2026-12-07T16:23:34"), Nodes: []string{"node1"},
					Flags: []string{"MAINT", "SPEC_NODES"}, Users: []string{"root"}, State: "INACTIVE"},
				{Name: "team_a", Start: at("2026-12-07T14:23:34"), End: at("2026-12-07T16:23:34"), Nodes: []string{"node3"},
					Partition: "gpu", Flags: []string{"SPEC_NODES"}, Accounts: []string{"acct_a"}, State: "ACTIVE"},
				{Name: "bob_short", Start: at("2026-12-07T14:33:35"), End: at("2026-12-07T15:03:35"), Nodes: []string{"node4", "node5"},
					Partition: "short", Flags: []string{"IGNORE_JOBS", "SPEC_NODES"}, Users: []string{"alice", "bob"}, State: "INACTIVE"},
			}},
		// hand-written inputs below
		{name: "hand-written: bad state and junk",
			input:   "junk\nReservationName=r1 StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T01:00:00 Nodes=n1 State=PLANNED\n",
			wantErr: []string{"not a reservation record", "neither ACTIVE nor INACTIVE"}},
		{name: "hand-written: end before start",
			input:   "ReservationName=r1 StartTime=2026-01-01T02:00:00 EndTime=2026-01-01T01:00:00 Nodes=n1 State=ACTIVE\n",
			wantErr: []string{"EndTime before StartTime"}},
		{name: "hand-written: twice",
			input: "ReservationName=r1 StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T01:00:00 Nodes=n[1-2] State=ACTIVE\n" +
				"ReservationName=r1 StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T01:00:00 Nodes=n1 State=ACTIVE\n",
			want:    []Reservation{{Name: "r1", Start: at("2026-01-01T00:00:00"), End: at("2026-01-01T01:00:00"), Nodes: []string{"n1", "n2"}, State: "ACTIVE"}},
			wantErr: []string{"already listed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseReservations(strings.NewReader(tc.input))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkErrTexts(t, errs, tc.wantErr)
		})
	}
}

func checkErrTexts(t *testing.T, errs []error, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d matching %q", errs, len(want), want)
	}
	for i, e := range errs {
		if !strings.Contains(e.Error(), want[i]) {
			t.Errorf("error %d %q, want it to contain %q", i, e, want[i])
		}
	}
}

func TestReservationFlags(t *testing.T) {
	rs, errs := ParseReservations(strings.NewReader(fixtureOutput(t, "scontrol-show-reservation/22.05-three.txt")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !rs[0].HasFlag("MAINT") || rs[0].Active() || rs[1].HasFlag("MAINT") || !rs[1].Active() {
		t.Errorf("maint1 MAINT and inactive, team_a neither: %+v", rs[:2])
	}
}

func TestParseTRES(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    TRES
		wantErr bool
	}{
		{in: ""},
		{in: "gres/gpu=4", want: TRES{"gres/gpu": 4}},
		{in: "cpu=16,gres/gpu:v100=2", want: TRES{"cpu": 16, "gres/gpu:v100": 2}},
		{in: "mem=8G,node=1", want: TRES{"mem": 8192, "node": 1}},
		{in: "gres/gpu=", wantErr: true},
		{in: "gres/gpu=-1", wantErr: true},
		{in: "gres/gpu=1,gres/gpu=2", wantErr: true},
		{in: "cpu=4x", wantErr: true},
		{in: "mem=99999999999999999P", wantErr: true},
	} {
		got, err := ParseTRES(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseTRES(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseTRES(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	if n, ok := (TRES{"gres/gpu": 4, "gres/gpu:v100": 2}).GPUs("v100"); !ok || n != 2 {
		t.Errorf("GPUs(v100) = %d, %v", n, ok)
	}
	if _, ok := (TRES{"cpu": 4}).GPUs(""); ok {
		t.Error("GPUs() of a cpu-only TRES is set")
	}
}

func TestParseAssociationsAndQOS(t *testing.T) {
	assoc, errs := ParseAssociations(strings.NewReader(fixtureOutput(t, "sacctmgr-show-assoc/22.05-limits.txt")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	none := Association{GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobs: NoLimit, MaxSubmitJobs: NoLimit, Priority: NoLimit,
		Cluster: "hadar", Shares: 1, QOS: []string{"normal"}}
	row := func(f func(*Association)) Association { a := none; f(&a); return a }
	want := []Association{
		row(func(a *Association) { a.Account = "root" }),
		row(func(a *Association) { a.Account, a.User = "root", "root" }),
		row(func(a *Association) { a.Account, a.ParentAccount, a.Shares = "acct_a", "root", 3 }),
		row(func(a *Association) {
			a.Account, a.User, a.MaxTRESPerJob, a.MaxJobs, a.MaxSubmitJobs = "acct_a", "alice", TRES{"gres/gpu": 2}, 3, 10
			a.QOS = []string{"normal", "typed"}
		}),
		row(func(a *Association) { a.Account, a.ParentAccount, a.GrpTRES = "acct_b", "root", TRES{"gres/gpu": 6} }),
		row(func(a *Association) { a.Account, a.User, a.QOS = "acct_b", "bob", []string{"gpu4", "normal"} }),
	}
	if diff := cmp.Diff(want, assoc); diff != "" {
		t.Errorf("associations (-want +got):\n%s", diff)
	}

	qos, errs := ParseQOS(strings.NewReader(fixtureOutput(t, "sacctmgr-show-qos/22.05-limits.txt")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	unset := QOS{GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobsPerUser: NoLimit, MaxSubmitJobsPerUser: NoLimit,
		MaxJobsPerAccount: NoLimit, MaxSubmitJobsPerAccount: NoLimit, UsageFactor: 1}
	q := func(f func(*QOS)) QOS { v := unset; f(&v); return v }
	wantQ := []QOS{
		q(func(v *QOS) { v.Name = "normal" }),
		q(func(v *QOS) { v.Name, v.MaxTRESPerUser = "gpu4", TRES{"gres/gpu": 4} }),
		q(func(v *QOS) {
			v.Name, v.Priority, v.Flags, v.GrpTRES, v.MaxTRESPerJob = "typed", 100, []string{"DenyOnLimit"}, TRES{"gres/gpu": 8}, TRES{"gres/gpu": 2}
			v.MaxTRESPerUser, v.MaxJobsPerUser, v.MaxSubmitJobsPerUser = TRES{"cpu": 16, "gres/gpu:v100": 2}, 2, 5
			v.MaxTRESPerAccount, v.MaxJobsPerAccount = TRES{"gres/gpu": 6}, 4
		}),
	}
	if diff := cmp.Diff(wantQ, qos); diff != "" {
		t.Errorf("QOS (-want +got):\n%s", diff)
	}

	// hand-written rows that must be reported, not misread
	_, errs = ParseAssociations(strings.NewReader("hadar|a||||1|gres/gpu=x||||||||||\nhadar|a|\n" +
		"hadar||x|||1" + strings.Repeat("|", 11) + "\n"))
	checkErrTexts(t, errs, []string{"GrpTRES", "has 3 fields", "without an account"})
	_, errs = ParseQOS(strings.NewReader("normal|0|||||||||||||||1.0\nnormal|0|||||||||||||||1.0\nq|0|||x||||||||||||\n"))
	checkErrTexts(t, errs, []string{"already listed", "GrpJobs"})
}

func TestParseShares(t *testing.T) {
	for _, rel := range []string{"sshare/22.05-all.txt", "sshare/22.05-long.txt"} {
		got, errs := ParseShares(strings.NewReader(fixtureOutput(t, rel)))
		if len(errs) > 0 {
			t.Fatal(rel, errs)
		}
		want := []Share{
			{Account: "root", RawUsage: 1291, EffectiveUsage: 1},
			{Account: "root", Depth: 1, User: "root", RawShares: "1", NormShares: 0.2, FairShare: 1, HasFairShare: true},
			{Account: "acct_a", Depth: 1, RawShares: "3", NormShares: 0.6, RawUsage: 400, EffectiveUsage: 0.310345},
			{Account: "acct_a", Depth: 2, User: "alice", RawShares: "1", NormShares: 1, RawUsage: 400, EffectiveUsage: 1, FairShare: 0.666667, HasFairShare: true},
			{Account: "acct_b", Depth: 1, RawShares: "1", NormShares: 0.2, RawUsage: 890, EffectiveUsage: 0.689655},
			{Account: "acct_b", Depth: 2, User: "bob", RawShares: "1", NormShares: 1, RawUsage: 890, EffectiveUsage: 1, FairShare: 0.333333, HasFairShare: true},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", rel, diff)
		}
	}
}

// siteLimits are the accounting cluster's limits after capture-fixtures
// added its extra ones (sacctmgr-show-*/22.05-limits.txt).
func siteLimits(t *testing.T) Limits {
	t.Helper()
	assoc, errs := ParseAssociations(strings.NewReader(fixtureOutput(t, "sacctmgr-show-assoc/22.05-limits.txt")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	qos, errs := ParseQOS(strings.NewReader(fixtureOutput(t, "sacctmgr-show-qos/22.05-limits.txt")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return Limits{Associations: assoc, QOS: qos}
}

func TestCheckGPUJob(t *testing.T) {
	l := siteLimits(t)
	run := func(user, account, qos, gpuType string, n int64) RunningJob {
		return RunningJob{User: user, Account: account, QOS: qos, GPUs: map[string]int64{gpuType: n}}
	}
	bob4 := []RunningJob{run("bob", "acct_b", "gpu4", "v100", 1), run("bob", "acct_b", "gpu4", "v100", 1),
		run("bob", "acct_b", "gpu4", "k80", 1), run("bob", "acct_b", "gpu4", "k80", 1)}
	for _, tc := range []struct {
		name    string
		req     GPURequest
		running []RunningJob
		want    *LimitViolation
		wantErr error
	}{
		{name: "bob under gpu4 with 3 running: fits",
			req: GPURequest{User: "bob", Account: "acct_b", QOS: "gpu4", GPUType: "v100", GPUs: 1}, running: bob4[:3]},
		{name: "bob under gpu4 with 4 running: QOSMaxGRESPerUser (the live test's case)",
			req: GPURequest{User: "bob", Account: "acct_b", QOS: "gpu4", GPUType: "p100", GPUs: 1}, running: bob4,
			want: &LimitViolation{Reason: "QOSMaxGRESPerUser", Scope: "qos gpu4", TRES: "gres/gpu", Limit: 4, InUse: 4, Requested: 1}},
		{name: "alice's running jobs do not count against bob's per-user cap",
			req:     GPURequest{User: "bob", Account: "acct_b", QOS: "gpu4", GPUType: "v100", GPUs: 2},
			running: append(bob4[:2:2], run("alice", "acct_a", "gpu4", "v100", 4))},
		{name: "bob under normal: acct_b's GrpTRES gres/gpu=6",
			req: GPURequest{User: "bob", Account: "acct_b", QOS: "normal", GPUType: "k80", GPUs: 3}, running: bob4,
			want: &LimitViolation{Reason: "AssocGrpGRES", Scope: "association acct_b", TRES: "gres/gpu", Limit: 6, InUse: 4, Requested: 3}},
		{name: "alice: MaxTRES per job gres/gpu=2",
			req:  GPURequest{User: "alice", Account: "acct_a", QOS: "normal", GPUType: "v100", GPUs: 3},
			want: &LimitViolation{Reason: "AssocMaxGRESPerJob", Scope: "association acct_a/alice", TRES: "gres/gpu", Limit: 2, Requested: 3}},
		{name: "alice: MaxJobs=3",
			req:     GPURequest{User: "alice", Account: "acct_a", QOS: "normal", GPUType: "v100", GPUs: 1},
			running: []RunningJob{run("alice", "acct_a", "normal", "v100", 1), run("alice", "acct_a", "normal", "v100", 1), run("alice", "acct_a", "normal", "k80", 1)},
			want:    &LimitViolation{Reason: "AssocMaxJobsLimit", Scope: "association acct_a/alice", Limit: 3, InUse: 3, Requested: 1}},
		{name: "typed QOS: per-user gres/gpu:v100=2 counts v100 only",
			req:     GPURequest{User: "alice", Account: "acct_a", QOS: "typed", GPUType: "v100", GPUs: 1},
			running: []RunningJob{run("alice", "acct_a", "typed", "v100", 2)},
			want:    &LimitViolation{Reason: "QOSMaxGRESPerUser", Scope: "qos typed", TRES: "gres/gpu:v100", Limit: 2, InUse: 2, Requested: 1}},
		{name: "typed QOS: k80 is not limited per user",
			req:     GPURequest{User: "alice", Account: "acct_a", QOS: "typed", GPUType: "k80", GPUs: 1},
			running: []RunningJob{run("alice", "acct_a", "typed", "v100", 1)}},
		{name: "typed QOS: MaxTRES per job 2 replaces alice's association limit of 2 (same), 3 is over it",
			req:  GPURequest{User: "alice", Account: "acct_a", QOS: "typed", GPUType: "k80", GPUs: 3},
			want: &LimitViolation{Reason: "QOSMaxGRESPerJob", Scope: "qos typed", TRES: "gres/gpu", Limit: 2, Requested: 3}},
		{name: "typed QOS: MaxJobsPerUser=2 replaces alice's MaxJobs=3",
			req:     GPURequest{User: "alice", Account: "acct_a", QOS: "typed", GPUType: "k80", GPUs: 1},
			running: []RunningJob{run("alice", "acct_a", "typed", "k80", 1), run("alice", "acct_a", "typed", "k80", 1)},
			want:    &LimitViolation{Reason: "QOSMaxJobsPerUserLimit", Scope: "qos typed", Limit: 2, InUse: 2, Requested: 1}},
		{name: "typed QOS and no GPU type chosen: unpredictable",
			req: GPURequest{User: "alice", Account: "acct_a", QOS: "typed", GPUs: 1}, wantErr: ErrUnpredictable},
		{name: "typed limit and a running job of unknown type: unpredictable",
			req:     GPURequest{User: "alice", Account: "acct_a", QOS: "typed", GPUType: "v100", GPUs: 1},
			running: []RunningJob{run("alice", "acct_a", "typed", "", 1)}, wantErr: ErrUnpredictable},
		{name: "unknown QOS", req: GPURequest{User: "bob", Account: "acct_b", QOS: "nope", GPUs: 1}, wantErr: ErrUnpredictable},
		{name: "no association", req: GPURequest{User: "bob", Account: "acct_a", QOS: "normal", GPUs: 1}, wantErr: ErrUnpredictable},
		{name: "root: no limits", req: GPURequest{User: "root", Account: "root", QOS: "normal", GPUs: 20}, running: bob4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.CheckGPUJob(tc.req, tc.running)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseReservations(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "scontrol" && hasWord(argv, "reservation") })
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, _ := ParseReservations(bytes.NewReader(in))
		for _, r := range rs {
			if r.Name == "" || r.End.Before(r.Start) || (r.State != "ACTIVE" && r.State != "INACTIVE") {
				t.Fatalf("accepted a bad reservation %+v", r)
			}
		}
	})
}

func FuzzParseAssociations(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "sacctmgr" && hasWord(argv, "assoc") })
	f.Fuzz(func(t *testing.T, in []byte) {
		as, _ := ParseAssociations(bytes.NewReader(in))
		for _, a := range as {
			if a.Account == "" {
				t.Fatalf("association without an account: %+v", a)
			}
		}
	})
}

func FuzzParseQOS(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "sacctmgr" && hasWord(argv, "qos") })
	f.Fuzz(func(t *testing.T, in []byte) {
		qs, _ := ParseQOS(bytes.NewReader(in))
		for _, q := range qs {
			for _, tres := range []TRES{q.GrpTRES, q.MaxTRESPerJob, q.MaxTRESPerUser, q.MaxTRESPerAccount} {
				for k, v := range tres {
					if k == "" || v < 0 {
						t.Fatalf("bad TRES %q=%d in %+v", k, v, q)
					}
				}
			}
		}
	})
}

func FuzzParseShares(f *testing.F) {
	seedFixtures(f, func(argv []string) bool { return argv[0] == "sshare" })
	f.Fuzz(func(t *testing.T, in []byte) {
		ss, _ := ParseShares(bytes.NewReader(in))
		for _, s := range ss {
			if s.FairShare < 0 || s.FairShare > 1 || s.Account == "" {
				t.Fatalf("bad share row %+v", s)
			}
		}
	})
}
