package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os/user"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/bridge"
	"github.com/hadar-sched/hadar/jobproto"
	"github.com/hadar-sched/hadar/slurm"
)

// statusOutput is `hadar status --json`.
type statusOutput struct {
	// Daemon says whether hadar-slurmd runs (its status file in the spool).
	Daemon      string       `json:"daemon"`
	DaemonAlive bool         `json:"daemon_alive"`
	Nodes       []statusNode `json:"nodes"`
	Jobs        []statusJob  `json:"jobs"`
}

// jobFilter is squeue's job selection: -u/--user, --me, -j/--jobs,
// -t/--states (each a comma-separated list; empty: all).
type jobFilter struct {
	users, ids, states, partitions map[string]bool
	// partitionOf is each job's partition list (from scontrol show job),
	// read only when -p is given.
	partitionOf map[string]string
}

func newJobFilter(c *cli.Context) (jobFilter, error) {
	set := func(v string, upper bool) map[string]bool {
		if v == "" {
			return nil
		}
		out := map[string]bool{}
		for _, x := range strings.Split(v, ",") {
			if x = strings.TrimSpace(x); x != "" {
				if upper {
					x = strings.ToUpper(x)
				}
				out[x] = true
			}
		}
		return out
	}
	f := jobFilter{users: set(c.String("user"), false), ids: set(c.String("jobs"), false), states: set(c.String("states"), true),
		partitions: set(c.String("partition"), false)}
	if c.Bool("me") {
		u, err := user.Current()
		if err != nil {
			return f, fmt.Errorf("--me: %w", err)
		}
		if f.users == nil {
			f.users = map[string]bool{}
		}
		f.users[u.Username] = true
	}
	for s := range f.states {
		if long, ok := squeueStates[s]; ok {
			f.states[long] = true
			continue
		}
		if !isSqueueState(s) {
			return f, usageErrorf(c, "--states: unknown job state %q (squeue's: PD, R, CG, ... or PENDING, RUNNING, COMPLETING, ...)", s)
		}
	}
	return f, nil
}

// squeueStates are squeue's short job state names (squeue(1), JOB STATE
// CODES), by their long names.
var squeueStates = map[string]string{
	"BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "CF": "CONFIGURING", "CG": "COMPLETING",
	"DL": "DEADLINE", "F": "FAILED", "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY", "PD": "PENDING",
	"PR": "PREEMPTED", "R": "RUNNING", "RD": "RESV_DEL_HOLD", "RF": "REQUEUE_FED", "RH": "REQUEUE_HOLD",
	"RQ": "REQUEUED", "RS": "RESIZING", "RV": "REVOKED", "SI": "SIGNALING", "SE": "SPECIAL_EXIT",
	"SO": "STAGE_OUT", "ST": "STOPPED", "S": "SUSPENDED", "TO": "TIMEOUT",
}

func isSqueueState(long string) bool {
	for _, l := range squeueStates {
		if l == long {
			return true
		}
	}
	return false
}

func (f jobFilter) keep(j slurm.Job) bool {
	inPartition := f.partitions == nil
	for _, p := range strings.Split(f.partitionOf[j.ID()], ",") {
		inPartition = inPartition || f.partitions[p]
	}
	return (f.users == nil || f.users[j.User]) &&
		(f.ids == nil || f.ids[j.ID()] || f.ids[j.JobID] || f.ids[j.ArrayJobID]) &&
		(f.states == nil || f.states[j.State]) && inPartition
}

type statusNode struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// GPUs are keyed by the site's own GRES type name ("" for untyped GRES).
	GPUs map[string]statusGPUs `json:"gpus"`
	// Schedulable says whether hadar may place work there.
	Schedulable bool `json:"schedulable"`
}

type statusGPUs struct {
	Total int `json:"total"`
	Used  int `json:"used"`
	// Stale are GPUs Slurm counts used on a node that runs no job
	// (bridge.StaleGresUsed): not in Used, since hadar-slurmd and Slurm's
	// own scheduler both start jobs on them.
	Stale int `json:"stale,omitempty"`
}

type statusJob struct {
	ID        string            `json:"id"`
	User      string            `json:"user"`
	State     string            `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	Tagged    bool              `json:"tagged"`
	Model     string            `json:"model,omitempty"`
	TagError  string            `json:"tag_error,omitempty"`
	GPUs      int               `json:"gpus"`
	Placement []statusPlacement `json:"placement"`
}

type statusPlacement struct {
	Node string `json:"node"`
	Type string `json:"type,omitempty"`
	GPUs int    `json:"gpus"`
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show nodes, GPU types, free and used GPUs, and the jobs in the queue",
		Description: "Reads the cluster with one squeue and one scontrol call, like any Slurm client (it\n" +
			"finds the cluster through SLURM_CONF and PATH, and needs no hadar config). GPU types are\n" +
			"shown under the site's own GRES type names; used = GPUs allocated to any job. GPUs that\n" +
			"Slurm counts as used on a node that runs no job (slurmctld 22.05 after a restart) are\n" +
			"shown as stale, not used: hadar-slurmd and Slurm's scheduler both start jobs on them.\n" +
			"Every job in the queue is listed, tagged (--comment=hadar ...) or not.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only jobs of these users (comma-separated), as squeue -u"},
			&cli.BoolFlag{Name: "me", Usage: "only your own jobs, as squeue --me"},
			&cli.StringFlag{Name: "jobs", Aliases: []string{"j"}, Usage: "only these job ids (comma-separated; an array id selects its tasks), as squeue -j"},
			&cli.StringFlag{Name: "states", Aliases: []string{"t"}, Usage: "only jobs in these states (PD, R, ... or PENDING, RUNNING, ...), as squeue -t"},
			&cli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "only jobs of these partitions (comma-separated), as squeue -p"},
			&cli.BoolFlag{Name: "noheader", Usage: "print no header lines, as squeue --noheader"},
			&cli.StringFlag{Name: "spool", EnvVars: []string{"HADAR_SPOOL"}, Value: jobproto.DefaultSpoolDir, Usage: "hadar-slurmd's spool_dir, where its status file says whether it runs"},
			&cli.StringFlag{Name: "slurm-bin-dir", EnvVars: []string{"HADAR_SLURM_BIN_DIR"}, Usage: "directory of the Slurm client binaries (default: PATH)"},
		},
		Action: func(c *cli.Context) error {
			filter, err := newJobFilter(c)
			if err != nil {
				return err
			}
			client := slurm.NewClient(slurmRunner(c.String("slurm-bin-dir")), slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn})))
			nodes, err := client.Nodes(c.Context)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			jobs, err := client.Jobs(c.Context)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			if filter.partitions != nil {
				details, err := client.JobDetails(c.Context)
				if err != nil {
					return fmt.Errorf("status: -p: %w", err)
				}
				filter.partitionOf = map[string]string{}
				for id, d := range slurm.JoinDetails(jobs, details) {
					filter.partitionOf[id] = d.Partition
				}
			}
			var kept []slurm.Job
			for _, j := range jobs {
				if filter.keep(j) {
					kept = append(kept, j)
				}
			}
			out := buildStatus(nodes, kept, bridge.OccupiedNodes(jobs))
			if st, err := bridge.ReadStatus(c.String("spool")); err == nil {
				out.DaemonAlive, out.Daemon = st.Liveness(time.Now())
			} else {
				out.Daemon = "cannot tell whether hadar-slurmd runs: " + err.Error()
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			printStatus(c.App.Writer, out, !c.Bool("noheader"))
			return nil
		},
	}
}

// buildStatus is the pure part of `hadar status`: jobs are the ones to
// list, occupied the nodes any job of the queue runs on (whatever the
// filters), which tell a stale GresUsed from a real one.
func buildStatus(nodes []slurm.Node, jobs []slurm.Job, occupied map[string]bool) statusOutput {
	out := statusOutput{Nodes: []statusNode{}, Jobs: []statusJob{}}
	nodeTypes := map[string][]string{}
	for _, n := range nodes {
		sn := statusNode{Name: n.Name, State: n.State, GPUs: map[string]statusGPUs{}, Schedulable: n.Schedulable()}
		for t, c := range slurm.GPUsByType(n.Gres) {
			g := sn.GPUs[t]
			g.Total += c
			sn.GPUs[t] = g
			nodeTypes[n.Name] = append(nodeTypes[n.Name], t)
		}
		stale := bridge.StaleGresUsed(n, occupied[n.Name])
		for t, c := range slurm.GPUsByType(n.GresUsed) {
			if c == 0 {
				continue // "gpu:0" on a node without GPUs
			}
			g := sn.GPUs[t]
			if stale {
				g.Stale += c
			} else {
				g.Used += c
			}
			sn.GPUs[t] = g
		}
		out.Nodes = append(out.Nodes, sn)
	}
	for _, j := range jobs {
		sj := statusJob{ID: j.ID(), User: j.User, State: j.State, Reason: j.Reason, Tagged: jobproto.IsTagged(j.Comment), Placement: []statusPlacement{}}
		if sj.Tagged {
			if tag, err := jobproto.ParseTag(j.Comment); err != nil {
				sj.TagError = printable(err.Error())
			} else {
				sj.Model = printable(tag.Model)
			}
		}
		perNode := 0
		for _, c := range slurm.GPUsByType(j.Gres) {
			perNode += c
		}
		nn := max(1, j.NumNodes)
		if len(j.Nodes) > 0 {
			nn = len(j.Nodes)
		}
		sj.GPUs = perNode * nn
		for _, n := range j.Nodes {
			p := statusPlacement{Node: n, GPUs: perNode}
			if ts := nodeTypes[n]; len(ts) == 1 {
				p.Type = ts[0]
			}
			sj.Placement = append(sj.Placement, p)
		}
		out.Jobs = append(out.Jobs, sj)
	}
	sort.SliceStable(out.Nodes, func(a, b int) bool { return out.Nodes[a].Name < out.Nodes[b].Name })
	return out
}

// printable keeps user text readable and harmless on a terminal.
func printable(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func printStatus(w io.Writer, out statusOutput, header bool) {
	if header && out.Daemon != "" {
		fmt.Fprintln(w, printable(out.Daemon))
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "NODE\tSTATE\tGPUS (type used/total)\tHADAR")
	}
	stale := false
	for _, n := range out.Nodes {
		var gs []string
		for _, t := range slices.Sorted(maps.Keys(n.GPUs)) {
			name := t
			if name == "" {
				name = "gpu"
			}
			g := fmt.Sprintf("%s %d/%d", name, n.GPUs[t].Used, n.GPUs[t].Total)
			if n.GPUs[t].Stale > 0 {
				g += fmt.Sprintf(" (%d stale)", n.GPUs[t].Stale)
				stale = true
			}
			gs = append(gs, g)
		}
		use := "yes"
		if !n.Schedulable {
			use = "no"
		}
		if len(gs) == 0 {
			gs = []string{"-"}
			use = "no GPUs"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, n.State, strings.Join(gs, ", "), use)
	}
	tw.Flush()
	if stale && header {
		fmt.Fprintln(w, "stale: GPUs Slurm counts as used on a node that runs no job, free to hadar and to Slurm's\n"+
			"scheduler (slurmctld 22.05 after a restart, when jobs ended while it was down;\n"+
			"`scontrol reconfigure` corrects the count)")
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "JOB\tUSER\tSTATE\tTAGGED\tMODEL\tGPUS\tPLACEMENT / REASON")
	}
	for _, j := range out.Jobs {
		tagged, model := "no", "-"
		if j.Tagged {
			tagged, model = "yes", j.Model
			if j.TagError != "" {
				model = "(" + j.TagError + ")"
			}
		}
		where := j.Reason
		if len(j.Placement) > 0 {
			var ps []string
			for _, p := range j.Placement {
				ps = append(ps, fmt.Sprintf("%s:%s:%d", p.Node, p.Type, p.GPUs))
			}
			where = strings.Join(ps, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, printable(j.User), j.State, tagged, model, j.GPUs, where)
	}
	tw.Flush()
}
