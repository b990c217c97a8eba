package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/slurm"
)

// explainOutput is `hadar explain JOBID --json`.
type explainOutput struct {
	Job    string `json:"job"`
	User   string `json:"user"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Tagged bool   `json:"tagged"`
	// Class is how hadar-slurmd treats the job (bridge.JobClass): waiting,
	// launching, released, running, pinned, pass-through or untagged.
	Class   string `json:"class"`
	Comment string `json:"comment,omitempty"`
	// Daemon says whether hadar-slurmd runs (from its status file);
	// DaemonAlive is false when it does not or nobody can tell.
	Daemon      string `json:"daemon"`
	DaemonAlive bool   `json:"daemon_alive"`
	// Summary is the answer in one line; Details add to it.
	Summary string   `json:"summary"`
	Details []string `json:"details,omitempty"`
	// Tag is the parsed tag; Problem why hadar passes the job through.
	Tag     *explainTag `json:"tag,omitempty"`
	Problem string      `json:"problem,omitempty"`
	// Model is what model= resolved to (a job type of the matrix).
	ModelAsked string `json:"model_asked,omitempty"`
	Model      string `json:"model,omitempty"`
	// Request: --nodes x --gres=gpu:N.
	Nodes       int `json:"nodes"`
	GPUsPerNode int `json:"gpus_per_node"`
	GPUs        int `json:"gpus"`
	// Placement is where it runs, or where hadar released it to.
	Placement []string `json:"placement"`
	// Types are the GPU types hadar plans with, the job's fastest first.
	Types    []explainType    `json:"types,omitempty"`
	Progress *explainProgress `json:"progress,omitempty"`
	Decision *planDecision    `json:"decision,omitempty"`
	// Actions are the commands hadar-slurmd would run for it this round.
	Actions []string `json:"actions"`
}

type explainTag struct {
	Model  string  `json:"model,omitempty"`
	Steps  float64 `json:"steps,omitempty"`
	Copies int     `json:"copies,omitempty"`
	Weight float64 `json:"weight,omitempty"`
}

type explainType struct {
	Type      string   `json:"type"`
	SiteNames []string `json:"site_names"`
	// Rate is the job's steps/s with its GPUs on this type (0: cannot run
	// there); Relative is Rate over its best rate.
	Rate     float64 `json:"rate"`
	Relative float64 `json:"relative"`
	// Nodes hadar uses of this type, and how many could hold the job's
	// per-node request if empty.
	Nodes    int `json:"nodes"`
	FitNodes int `json:"fit_nodes"`
	// FreeNow is what the policy could hand out this round (idle GPUs plus
	// those of running hadar jobs); FreeAfterPlan what is left after this
	// round's plan; MaxFreeOnNode the most left on one node.
	FreeNow       int `json:"free_now"`
	FreeAfterPlan int `json:"free_after_plan"`
	MaxFreeOnNode int `json:"max_free_on_node"`
	// FitFreeNodes are the nodes with the job's per-node GPUs free after
	// the plan.
	FitFreeNodes int `json:"fit_free_nodes"`
	// Total GPUs of the type; Others of them allocated to work hadar does
	// not manage; Reserved for tagged jobs released but not started yet;
	// PlannedFor the tagged jobs this round's plan gives GPUs of the type.
	Total      int      `json:"total"`
	Others     int      `json:"others"`
	Reserved   int      `json:"reserved"`
	PlannedFor []string `json:"planned_for"`
}

type explainProgress struct {
	TotalSteps     float64 `json:"total_steps"`
	RemainingSteps float64 `json:"remaining_steps"`
}

func explainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "say why a job is where it is, or why it waits",
		ArgsUsage: "JOBID",
		Description: "Runs the same dry round as `hadar plan` (nothing changes) and explains one job: whether\n" +
			"hadar manages it, its tag, how model= was resolved, the GPUs it asked for, the GPU types it\n" +
			"can use with its throughput on each and how many of their GPUs are free, and what this\n" +
			"round's plan gives it and why. Untagged jobs are Slurm's alone: hadar does not manage them.",
		Flags: dryRoundFlags(),
		Action: func(c *cli.Context) error {
			// Flags stop at JOBID; --json after it is accepted too.
			jsonOut := c.Bool("json")
			var ids []string
			for _, a := range c.Args().Slice() {
				switch {
				case a == "--json" || a == "-json":
					jsonOut = true
				case strings.HasPrefix(a, "-"):
					return usageErrorf(c, "%s: flags go before JOBID", a)
				default:
					ids = append(ids, a)
				}
			}
			if len(ids) != 1 {
				return usageErrorf(c, "want one JOBID, got %d", len(ids))
			}
			id := ids[0]
			dr, err := runDryRound(c)
			if err != nil {
				return fmt.Errorf("explain: %w", err)
			}
			out, err := buildExplain(dr, id)
			if err != nil {
				return fmt.Errorf("explain: %w", err)
			}
			if jsonOut {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			printExplain(c.App.Writer, out)
			return nil
		},
	}
}

// buildExplain is the pure part of `hadar explain`: what this dry round
// would do for the job, said together with whether the daemon runs and what
// its own last round decided, so a user never reads a plan as a fact.
func buildExplain(dr *dryRound, id string) (explainOutput, error) {
	out, err := explainRound(dr, id)
	if err != nil || !out.Tagged {
		return out, err
	}
	now := dr.Report.Started
	if dr.Report.View != nil {
		now = dr.Report.View.Now
	}
	switch {
	case dr.Daemon == nil:
		out.Daemon = fmt.Sprintf("cannot tell whether hadar-slurmd runs: its status file %s is %s",
			filepath.Join(dr.Config.SpoolDir, bridge.StatusFile), dr.DaemonErr)
	default:
		out.DaemonAlive, out.Daemon = dr.Daemon.Liveness(now)
	}
	if !out.DaemonAlive {
		switch bridge.JobClass(out.Class) {
		case bridge.ClassWaiting, bridge.ClassLaunching, bridge.ClassRunning:
			if dr.Daemon != nil {
				out.Summary = out.Daemon + "; nothing hadar decides happens until it runs again. If it ran now: " + out.Summary
			}
		}
		return out, nil
	}
	if js, ok := dr.Daemon.Jobs[out.Job]; ok {
		line := fmt.Sprintf("hadar-slurmd's own last round (%s ago): %s", now.Sub(dr.Daemon.LastRound).Round(time.Second), js.Class)
		if js.Decision != "" {
			line += fmt.Sprintf(", %s", js.Decision)
			if js.To != "" && js.To != "-" {
				line += " to " + js.To
			}
		}
		if js.Reason != "" {
			line += ": " + js.Reason
		}
		out.Details = append([]string{line}, out.Details...)
		if out.Class == string(bridge.ClassWaiting) && (js.Class == bridge.ClassLaunching || js.Decision == bridge.DecidePlace) {
			out.Summary = fmt.Sprintf("started by hadar-slurmd on %s; Slurm has not started it yet (%s)", js.To, out.Reason)
		}
	}
	return out, nil
}

func explainRound(dr *dryRound, id string) (explainOutput, error) {
	rep := dr.Report
	v := rep.View
	if v == nil {
		return explainOutput{}, fmt.Errorf("the round observed nothing")
	}
	var raw *slurm.Job
	for i := range dr.Jobs {
		if j := &dr.Jobs[i]; j.ID() == id || j.JobID == id {
			raw = j
			break
		}
	}
	if raw == nil {
		return explainOutput{}, fmt.Errorf("job %s is not in the queue (finished, cancelled or unknown): squeue does not list it", printable(id))
	}
	jv := v.Job(raw.ID())
	if jv == nil {
		return explainOutput{}, fmt.Errorf("job %s is in the queue but the round could not read it", printable(id))
	}
	out := explainOutput{Job: jv.ID, User: printable(jv.User), State: jv.State, Reason: jv.Reason, Tagged: jv.Tagged,
		Class: string(jv.Class), Comment: printable(raw.Comment), Placement: append([]string{}, jv.Nodes...), Actions: []string{}}
	perNode := 0
	for _, c := range slurm.GPUsByType(raw.Gres) {
		perNode += c
	}
	out.Nodes, out.GPUsPerNode = max(1, raw.NumNodes), perNode
	if len(raw.Nodes) > 0 {
		out.Nodes = len(raw.Nodes)
	}
	out.GPUs = out.Nodes * out.GPUsPerNode
	if !jv.Tagged {
		out.Summary = "not managed by hadar: its comment is not a hadar tag, so Slurm's own scheduler handles it"
		out.Details = append(out.Details, "hadar never changes it; it only counts the GPUs it holds as other work",
			`to let hadar place a job, submit it with --comment="hadar model=MODEL steps=N" and an untyped --gres=gpu:N`)
		if len(raw.Nodes) > 0 {
			out.Details = append(out.Details, "runs on "+placeWithTypes(v, raw.Nodes, perNode))
		}
		return out, nil
	}
	if t, err := jobproto.ParseTag(raw.Comment); err == nil {
		out.Tag = &explainTag{Model: printable(t.Model), Steps: t.Steps, Copies: t.Copies, Weight: t.Weight}
		out.ModelAsked = printable(t.Model)
	}
	out.Problem = printable(jv.Problem)
	out.Model = jv.Model
	if jv.GPUsPerNode > 0 {
		out.GPUsPerNode, out.Nodes = jv.GPUsPerNode, jv.NumNodes
		out.GPUs = jv.Workers
	}
	for _, d := range rep.Decisions {
		if d.JobID == jv.ID {
			pd := planDecision{Job: d.JobID, Decision: string(d.Kind), From: d.From, To: d.To, Nodes: d.ToNodes, GPUType: d.GPUType, Reason: d.Reason}
			if pd.Nodes == nil {
				pd.Nodes = []string{}
			}
			out.Decision = &pd
		}
	}
	for _, a := range rep.Actions {
		for _, j := range a.JobIDs {
			if j == jv.ID {
				out.Actions = append(out.Actions, printable(a.String()))
			}
		}
	}
	if rep.Snapshot != nil {
		for _, sj := range rep.Snapshot.Jobs {
			if sj.ID == jv.ID {
				out.Progress = &explainProgress{TotalSteps: sj.TotalSteps, RemainingSteps: sj.RemainingSteps}
			}
		}
	}
	var tp optimizer.Throughputs
	if rep.Snapshot != nil {
		tp = rep.Snapshot.Throughput
	}
	if jv.Model != "" && jv.Workers > 0 {
		out.Types = typeTable(rep, jv, tp)
	}
	explainClass(&out, rep, jv)
	return out, nil
}

// typeTable lists the GPU types hadar plans with, for one job.
func typeTable(rep bridge.RoundReport, jv *bridge.JobView, tp optimizer.Throughputs) []explainType {
	v := rep.View
	after := freeAfterPlan(rep)
	byType := map[string]*explainType{}
	var order []string
	for _, n := range v.Nodes {
		if !n.Usable {
			continue
		}
		// A node used per GPU type (Slurm 24.11) counts under each type.
		for _, p := range n.TypePools() {
			et := byType[p.Type]
			if et == nil {
				et = &explainType{Type: p.Type, SiteNames: []string{}, PlannedFor: []string{}, Rate: tp.Rate(jv.Model, p.Type, jv.Workers)}
				byType[p.Type] = et
				order = append(order, p.Type)
			}
			if !hasString(et.SiteNames, p.Site) {
				et.SiteNames = append(et.SiteNames, p.Site)
			}
			free := after[poolKey(n.Name, p.Type)]
			et.Nodes++
			if p.Total >= jv.GPUsPerNode {
				et.FitNodes++
			}
			et.FreeNow += n.AvailableOf(p)
			et.FreeAfterPlan += free
			et.MaxFreeOnNode = max(et.MaxFreeOnNode, free)
			if free >= jv.GPUsPerNode {
				et.FitFreeNodes++
			}
			et.Total += p.Total
			et.Others += max(0, p.Used-p.Hadar)
			et.Reserved += p.Reserved
		}
	}
	for _, d := range rep.Decisions {
		switch d.Kind {
		case bridge.DecideKeep, bridge.DecideMigrate, bridge.DecidePlace:
		default:
			continue
		}
		for _, name := range d.ToNodes {
			if n := v.Node(name); n != nil && n.Usable {
				if et := byType[decisionType(n, d)]; et != nil && !hasString(et.PlannedFor, d.JobID) {
					et.PlannedFor = append(et.PlannedFor, d.JobID)
				}
			}
		}
	}
	best := 0.0
	for _, et := range byType {
		best = max(best, et.Rate)
	}
	out := make([]explainType, 0, len(order))
	for _, t := range order {
		et := byType[t]
		sort.Strings(et.SiteNames)
		if best > 0 {
			et.Relative = math.Round(et.Rate/best*100) / 100
		}
		out = append(out, *et)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Rate != out[b].Rate {
			return out[a].Rate > out[b].Rate
		}
		return out[a].Type < out[b].Type
	})
	return out
}

// freeAfterPlan is, per node hadar uses and GPU type (poolKey), the GPUs
// the policy could hand out this round minus what the round's decisions
// give to tagged jobs (kept, moved and placed ones).
func freeAfterPlan(rep bridge.RoundReport) map[string]int {
	v := rep.View
	free := map[string]int{}
	for _, n := range v.Nodes {
		if n.Usable {
			for _, p := range n.TypePools() {
				free[poolKey(n.Name, p.Type)] = n.AvailableOf(p)
			}
		}
	}
	for _, d := range rep.Decisions {
		switch d.Kind {
		case bridge.DecideKeep, bridge.DecideMigrate, bridge.DecidePlace:
		default:
			continue
		}
		jv := v.Job(d.JobID)
		if jv == nil {
			continue
		}
		for _, name := range d.ToNodes {
			n := v.Node(name)
			if n == nil {
				continue
			}
			if k := poolKey(name, decisionType(n, d)); n.Usable {
				if _, ok := free[k]; ok {
					free[k] = max(0, free[k]-jv.GPUsPerNode)
				}
			}
		}
	}
	return free
}

// poolKey names a node's GPUs of one type (freeAfterPlan).
func poolKey(node, gpuType string) string { return node + "\x00" + gpuType }

// decisionType is the GPU type a decision's job holds on node n: the
// node's one type, or on a node used per type the decision's (one-node
// jobs only go there).
func decisionType(n *bridge.NodeView, d bridge.Decision) string {
	if n.Pools != nil {
		return d.GPUType
	}
	return n.Type
}

// explainClass writes the summary and details for a tagged job.
func explainClass(out *explainOutput, rep bridge.RoundReport, jv *bridge.JobView) {
	v := rep.View
	d := out.Decision
	add := func(format string, args ...any) { out.Details = append(out.Details, fmt.Sprintf(format, args...)) }
	if out.ModelAsked != "" && out.Model != "" && out.ModelAsked != out.Model {
		add("model=%s is the job type %q of the throughput matrix", out.ModelAsked, out.Model)
	}
	if out.ModelAsked == "" && out.Model != "" {
		add("no model= in the tag: default_model %q is used", out.Model)
	}
	if out.Model != "" && rep.Measured != nil && rep.Measured[out.Model] == nil {
		add("%q is in no matrix: it is planned with the cross-model prior (the median model's rates) until its progress reports teach hadar its own", out.Model)
	}
	var usable []string
	for _, t := range out.Types {
		if t.Rate > 0 {
			usable = append(usable, t.Type)
		}
	}
	switch jv.Class {
	case bridge.ClassPassThrough:
		if d != nil && d.Decision == string(bridge.DecidePassThrough) {
			out.Summary = "passed through to Slurm's scheduler: " + out.Problem
			add("hadar-slurmd ends its lease once (StartTime=now, or its own --begin), with AdminComment %q, and never touches it again: right after the jobs it placed that round have started (or, if they are slow to start, in a later round: at most 2 x launch_timeout after submission)", bridge.PassThroughComment(out.Problem))
		} else {
			out.Summary = "Slurm's scheduler has it: hadar cannot schedule it (" + out.Problem + ")"
			add("its AdminComment (scontrol show job %s) says so; hadar does not touch it", jv.ID)
		}
	case bridge.ClassWaiting:
		switch {
		case d == nil:
			out.Summary = "waits on hadar's lease; this round made no decision for it"
		case d.Decision == string(bridge.DecidePlace):
			out.Summary = fmt.Sprintf("placed now on %s (%s): %s", d.To, d.GPUType, d.Reason)
			add("hadar-slurmd sets its NodeList (which fixes the GPU type) and StartTime=now, which ends its lease")
		case d.Decision == string(bridge.DecideDefer):
			out.Summary = "waits (deferred): " + d.Reason
		default:
			out.Summary = waitSummary(out, usable, d.Reason)
			for _, t := range out.Types {
				if t.Rate <= 0 {
					continue
				}
				var parts []string
				if t.Others > 0 {
					parts = append(parts, fmt.Sprintf("%d busy with work hadar does not manage", t.Others))
				}
				if t.Reserved > 0 {
					parts = append(parts, fmt.Sprintf("%d reserved for tagged jobs about to start", t.Reserved))
				}
				if len(t.PlannedFor) > 0 {
					sort.Slice(t.PlannedFor, func(a, b int) bool { return lessJobID(t.PlannedFor[a], t.PlannedFor[b]) })
					parts = append(parts, fmt.Sprintf("%d given to tagged job(s) %s", t.FreeNow-t.FreeAfterPlan, strings.Join(t.PlannedFor, ",")))
				}
				if t.FreeAfterPlan > 0 {
					parts = append(parts, fmt.Sprintf("%d left free (at most %d on one node)", t.FreeAfterPlan, t.MaxFreeOnNode))
				}
				if t.FitNodes == 0 {
					parts = append(parts, fmt.Sprintf("no node has %d GPUs", out.GPUsPerNode))
				}
				add("%s (%.0f%% of its best rate): %d GPUs: %s", t.Type, t.Relative*100, t.Total, strings.Join(parts, "; "))
			}
		}
		add("it waits on hadar's lease (reason BeginTime) until hadar places it, in the site's priority order (its priority: %d); if hadar-slurmd stops, Slurm schedules it alone once the lease runs out; scancel, hold, release and nice work as for any job", jv.Priority)
	case bridge.ClassRunning:
		where := placeWithTypes(v, jv.Nodes, jv.GPUsPerNode)
		switch {
		case d == nil:
			out.Summary = "runs on " + where
		case d.Decision == string(bridge.DecideMigrate):
			out.Summary = fmt.Sprintf("runs on %s and moves to %s (%s): %s", where, d.To, d.GPUType, d.Reason)
			add("hadar-slurmd requeues and holds it, sets its NodeList and StartTime=now, and releases it; it restarts from its last checkpoint")
		case d.Decision == string(bridge.DecidePreempt):
			out.Summary = fmt.Sprintf("runs on %s and is stopped (requeued and held): %s", where, d.Reason)
		default:
			out.Summary = fmt.Sprintf("runs on %s and stays there: %s", where, d.Reason)
		}
		if len(out.Types) > 0 && len(jv.Nodes) > 0 {
			if n := v.Node(jv.Nodes[0]); n != nil {
				for _, t := range out.Types {
					if t.Type == n.Type && t.Relative > 0 {
						add("on %s it runs at %.3g steps/s, %.0f%% of its rate on its fastest type %s", t.Type, t.Rate, t.Relative*100, out.Types[0].Type)
					}
				}
			}
		}
	case bridge.ClassLaunching:
		ago := ""
		if !jv.ReleasedAt.IsZero() {
			ago = " " + v.Now.Sub(jv.ReleasedAt).Round(time.Second).String() + " ago"
		}
		out.Summary = fmt.Sprintf("started by hadar on %s%s; Slurm has not started it yet (%s)", placeWithTypes(v, jv.Nodes, jv.GPUsPerNode), ago, jv.Reason)
		if d != nil {
			add("this round: %s: %s", d.Decision, d.Reason)
		}
	case bridge.ClassHeld, bridge.ClassNotReady:
		out.Summary = "waits, and hadar does not plan it yet: " + jv.Waits
		add("hadar keeps its lease; once Slurm could start it, hadar places it in the site's priority order")
	case bridge.ClassPinned:
		why := "its state is " + jv.State
		if jv.State == "RUNNING" || jv.State == "CONFIGURING" {
			why = "it runs on nodes hadar does not place work on"
			for _, name := range jv.Nodes {
				if n := v.Node(name); n == nil {
					why = fmt.Sprintf("it runs on %s, which is not in the node list", name)
				} else if !n.Usable {
					why = fmt.Sprintf("it runs on %s, which hadar does not use (%s)", name, n.Why)
				}
			}
			if len(jv.Nodes) != jv.NumNodes {
				why = fmt.Sprintf("it holds %d nodes, not the %d it asked for", len(jv.Nodes), jv.NumNodes)
			}
		}
		out.Summary = fmt.Sprintf("holds GPUs on %s that hadar does not re-plan: %s", strings.Join(jv.Nodes, ","), why)
	default:
		out.Summary = "class " + string(jv.Class)
	}
}

// waitSummary explains a held job the policy did not schedule:
// "waits: 8 GPUs requested, 4 free of types it can use".
func waitSummary(out *explainOutput, usable []string, reason string) string {
	free, fitNodes := 0, 0
	var parts []string
	for _, t := range out.Types {
		if t.Rate <= 0 {
			continue
		}
		free += t.FreeAfterPlan
		fitNodes += t.FitFreeNodes
		if t.FreeAfterPlan > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", t.Type, t.FreeAfterPlan))
		}
	}
	s := fmt.Sprintf("waits: %d GPUs requested, %d free of types it can use", out.GPUs, free)
	if out.Nodes > 1 {
		s = fmt.Sprintf("waits: %d GPUs requested (%d nodes x %d), %d free of types it can use", out.GPUs, out.Nodes, out.GPUsPerNode, free)
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	switch {
	case len(usable) == 0:
		s += "; it has no throughput on any GPU type hadar uses"
	case free < out.GPUs:
		s += "; the rest are busy with other jobs or given to other tagged jobs this round"
	case fitNodes < out.Nodes:
		s += fmt.Sprintf("; %d node(s) have %d GPUs free and it needs %d", fitNodes, out.GPUsPerNode, out.Nodes)
	default:
		s += "; the policy did not give them to it this round (" + reason + ")"
	}
	return s
}

// placeWithTypes renders "node1:2 (v100)".
func placeWithTypes(v *bridge.View, nodes []string, perNode int) string {
	if len(nodes) == 0 {
		return "-"
	}
	var parts []string
	types := map[string]bool{}
	var ts []string
	for _, name := range nodes {
		parts = append(parts, fmt.Sprintf("%s:%d", name, perNode))
		if n := v.Node(name); n != nil {
			t := n.Type
			if t == "" {
				for site := range n.SiteTypes {
					t = site
				}
			}
			if t != "" && !types[t] {
				types[t] = true
				ts = append(ts, t)
			}
		}
	}
	s := strings.Join(parts, ",")
	if len(ts) > 0 {
		sort.Strings(ts)
		s += " (" + strings.Join(ts, "+") + ")"
	}
	return s
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func printExplain(w io.Writer, out explainOutput) {
	fmt.Fprintf(w, "job %s: %s\n", out.Job, printable(out.Summary))
	if out.Daemon != "" {
		fmt.Fprintf(w, "  %-11s %s\n", "daemon", printable(out.Daemon))
	}
	for _, d := range out.Details {
		fmt.Fprintf(w, "  - %s\n", printable(d))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	state := out.State
	if out.Reason != "" && out.Reason != "None" {
		state += " (" + out.Reason + ")"
	}
	fmt.Fprintf(tw, "state\t%s, user %s\n", state, out.User)
	managed := "no (untagged)"
	if out.Tagged {
		managed = "yes, class " + out.Class
	}
	fmt.Fprintf(tw, "hadar\t%s\n", managed)
	if out.Comment != "" {
		fmt.Fprintf(tw, "comment\t%s\n", out.Comment)
	}
	if out.Tagged {
		if out.Problem != "" {
			fmt.Fprintf(tw, "problem\t%s\n", out.Problem)
		}
		model := "-"
		switch {
		case out.Model != "" && out.ModelAsked != "":
			model = fmt.Sprintf("%s -> %s", out.ModelAsked, out.Model)
		case out.Model != "":
			model = out.Model
		case out.ModelAsked != "":
			model = out.ModelAsked + " (not resolved)"
		}
		fmt.Fprintf(tw, "model\t%s\n", model)
		if out.Tag != nil {
			var ks []string
			if out.Tag.Steps > 0 {
				ks = append(ks, fmt.Sprintf("steps=%g", out.Tag.Steps))
			}
			if out.Tag.Copies > 0 {
				ks = append(ks, fmt.Sprintf("copies=%d", out.Tag.Copies))
			}
			if out.Tag.Weight > 0 {
				ks = append(ks, fmt.Sprintf("weight=%g", out.Tag.Weight))
			}
			if len(ks) > 0 {
				fmt.Fprintf(tw, "tag\t%s\n", strings.Join(ks, " "))
			}
		}
	}
	fmt.Fprintf(tw, "request\t%d GPUs (%d node(s) x gpu:%d)\n", out.GPUs, out.Nodes, out.GPUsPerNode)
	if len(out.Placement) > 0 {
		fmt.Fprintf(tw, "placement\t%s\n", strings.Join(out.Placement, ","))
	}
	if p := out.Progress; p != nil {
		fmt.Fprintf(tw, "progress\t%.0f of %.0f steps left\n", p.RemainingSteps, p.TotalSteps)
	}
	if d := out.Decision; d != nil {
		fmt.Fprintf(tw, "this round\t%s %s -> %s: %s\n", d.Decision, d.From, d.To, printable(d.Reason))
	}
	tw.Flush()
	if len(out.Types) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GPU TYPE\tSITE NAME\tSTEPS/S\tVS BEST\tNODES (FIT)\tFOR HADAR NOW\tFREE AFTER PLAN")
		for _, t := range out.Types {
			rate, rel := "-", "cannot run"
			if t.Rate > 0 {
				rate, rel = fmt.Sprintf("%.4g", t.Rate), fmt.Sprintf("%.2f", t.Relative)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d (%d)\t%d\t%d\n", t.Type, strings.Join(t.SiteNames, ","), rate, rel, t.Nodes, t.FitNodes, t.FreeNow, t.FreeAfterPlan)
		}
		tw.Flush()
	}
	if len(out.Actions) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "hadar-slurmd would run:")
		for _, a := range out.Actions {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
}
