package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hadar-sched/hadar/config"
	"github.com/hadar-sched/hadar/internal/statedb"
)

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:  "history",
		Usage: "summarize (and with --plot, draw) what hadar-slurmd did, from its state database",
		Description: "Reads hadar-slurmd's state database (data_dir/state.db; read-only, safe while the\n" +
			"daemon runs) and prints, for the last --since: rounds and their phase times,\n" +
			"decisions and scontrol actions, jobs run and their queueing delay, and GPU\n" +
			"utilization by GPU type. With --plot DIR it also writes PNGs:\n" +
			"utilization.png (GPU utilization by type over time), queue.png (pending jobs and\n" +
			"the queueing delay of each job at its start) and placement.png (a Gantt chart of\n" +
			"the jobs on each node).",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "since", Value: 24 * time.Hour, Usage: "how far back to look"},
			&cli.StringFlag{Name: "plot", Usage: "write utilization.png, queue.png and placement.png into `DIR`"},
			&cli.StringFlag{Name: "db", EnvVars: []string{"HADAR_STATE_DB"}, Usage: "state database `PATH` (default: state.db in the config's data_dir)"},
			configFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf(c, "unexpected arguments: %s", strings.Join(c.Args().Slice(), " "))
			}
			if c.Duration("since") <= 0 {
				return fmt.Errorf("history: --since %v: want a positive duration", c.Duration("since"))
			}
			path := c.String("db")
			if path == "" {
				cfg, _, _, err := loadDaemonConfig(c, "")
				if err != nil {
					return fmt.Errorf("history: %w (or give --db)", err)
				}
				path = filepath.Join(cfg.DataDir, statedb.File)
			}
			now := time.Now()
			h, err := loadHistory(c, path, now.Add(-c.Duration("since")), now)
			if err != nil {
				return err
			}
			if err := h.summary(c.App.Writer); err != nil {
				return err
			}
			if dir := c.String("plot"); dir != "" {
				files, err := h.plot(dir)
				for _, f := range files {
					fmt.Fprintf(c.App.Writer, "wrote %s\n", f)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// history is what `hadar history` read for one period.
type history struct {
	path       string
	from, to   time.Time
	hasHistory bool
	rounds     []statedb.Round
	decisions  []statedb.Decision
	actions    []statedb.Action
	gpus       []statedb.GPUSample
	queue      []statedb.QueueSample
	spans      []statedb.JobSpan
}

func loadHistory(c *cli.Context, path string, from, to time.Time) (*history, error) {
	db, err := statedb.OpenHistory(c.Context, path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer db.Close()
	h := &history{path: path, from: from, to: to, hasHistory: db.HasHistory()}
	if h.rounds, err = db.Rounds(c.Context, from); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	first := int64(math.MaxInt64)
	if len(h.rounds) > 0 {
		first = h.rounds[0].Number
	}
	if h.decisions, err = db.Decisions(c.Context, first); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.actions, err = db.Actions(c.Context, first); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.gpus, err = db.GPUs(c.Context, from); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.queue, err = db.Queue(c.Context, from); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.spans, err = db.Spans(c.Context, from); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return h, nil
}

// typeUtil is the time-weighted mean GPU use of one type.
type typeUtil struct {
	gpuType     string
	gpus        int     // at the last sample
	used, hadar float64 // fractions of the GPUs
}

// utilization averages each type's samples, each weighted by the time to
// the type's next sample (the last one by the mean gap).
func (h *history) utilization() []typeUtil {
	by := map[string][]statedb.GPUSample{}
	for _, g := range h.gpus {
		by[g.Type] = append(by[g.Type], g)
	}
	var out []typeUtil
	for t, ss := range by {
		u := typeUtil{gpuType: t, gpus: ss[len(ss)-1].Total}
		var wsum, used, hadar float64
		for i, s := range ss {
			w := 1.0
			if len(ss) > 1 {
				if i+1 < len(ss) {
					w = ss[i+1].At.Sub(s.At).Seconds()
				} else {
					w = ss[len(ss)-1].At.Sub(ss[0].At).Seconds() / float64(len(ss)-1)
				}
			}
			if s.Total == 0 || w <= 0 {
				continue
			}
			wsum += w
			used += w * float64(s.Used) / float64(s.Total)
			hadar += w * float64(s.Hadar) / float64(s.Total)
		}
		if wsum > 0 {
			u.used, u.hadar = used/wsum, hadar/wsum
		}
		out = append(out, u)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].gpuType < out[b].gpuType })
	return out
}

// delays are the queueing delays (start - submit) of the jobs that started
// in the period, hadar's and others'.
func (h *history) delays() (tagged, others []time.Duration) {
	for _, s := range h.spans {
		if !s.First || s.Submitted.IsZero() || s.Started.Before(h.from) {
			continue
		}
		d := max(0, s.Started.Sub(s.Submitted))
		if s.Tagged {
			tagged = append(tagged, d)
		} else {
			others = append(others, d)
		}
	}
	return tagged, others
}

func (h *history) summary(w io.Writer) error {
	local := func(t time.Time) string { return t.Local().Format("2006-01-02 15:04") }
	fmt.Fprintf(w, "hadar-slurmd history from %s, %s to %s\n", h.path, local(h.from), local(h.to))
	if len(h.rounds) == 0 {
		fmt.Fprintln(w, "no rounds in this period (is hadar-slurmd running? is this its data_dir?)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	failed, dry := 0, 0
	policies := map[string]int{}
	var obs, sol, enf []time.Duration
	for _, r := range h.rounds {
		switch {
		case r.Error != "" && r.Policy != "release-all":
			failed++
		case r.Policy == "release-all":
		default:
			obs, sol, enf = append(obs, r.Observe), append(sol, r.Solve), append(enf, r.Enforce)
		}
		if r.DryRun {
			dry++
		}
		policies[r.Policy]++
	}
	line := fmt.Sprintf("%d (%d failed", len(h.rounds), failed)
	if dry > 0 {
		line += fmt.Sprintf(", %d dry runs", dry)
	}
	line += "), policy " + joinCounts(policies, false)
	fmt.Fprintf(tw, "rounds\t%s\n", line)
	if len(obs) > 0 {
		fmt.Fprintf(tw, "round phases\tobserve %s, solve %s, enforce %s (median / max)\n",
			medMax(obs), medMax(sol), medMax(enf))
	}
	kinds := map[string]int{}
	for _, d := range h.decisions {
		kinds[d.Kind]++
	}
	fmt.Fprintf(tw, "decisions\t%s\n", orNone(joinCounts(kinds, true)))
	acts := map[string]int{}
	for _, a := range h.actions {
		acts[a.Kind+" "+a.Result]++
	}
	fmt.Fprintf(tw, "scontrol actions\t%s\n", orNone(joinCounts(acts, true)))
	if h.hasHistory {
		jobs := map[string]bool{}
		hadarJobs := map[string]bool{}
		types := map[string]int{}
		for _, s := range h.spans {
			jobs[s.JobID] = true
			if s.Tagged {
				hadarJobs[s.JobID] = true
				if s.GPUType != "" {
					types[s.GPUType]++
				}
			}
		}
		fmt.Fprintf(tw, "jobs that ran\t%d (%d hadar, %d others)\n", len(jobs), len(hadarJobs), len(jobs)-len(hadarJobs))
		fmt.Fprintf(tw, "hadar runs by GPU type\t%s\n", orNone(joinCounts(types, true)))
		tagged, others := h.delays()
		fmt.Fprintf(tw, "queueing delay\thadar jobs %s; others %s\n", delayStats(tagged), delayStats(others))
		if n := len(h.queue); n > 0 {
			q := h.queue[n-1]
			fmt.Fprintf(tw, "queue now\t%d pending (%d hadar), %d running (%d hadar)\n",
				q.PendingTagged+q.PendingOther, q.PendingTagged, q.RunningTagged+q.RunningOther, q.RunningTagged)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !h.hasHistory {
		fmt.Fprintln(w, "\nthis database has no GPU or job history (written by an older hadar-slurmd); upgrade the daemon to record it")
		return nil
	}
	if util := h.utilization(); len(util) > 0 {
		fmt.Fprintln(w, "\nGPU utilization by type (time-weighted mean over the period)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GPU TYPE\tGPUS\tUSED\tBY HADAR JOBS")
		for _, u := range util {
			fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%.0f%%\n", u.gpuType, u.gpus, 100*u.used, 100*u.hadar)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var errs []string
	for _, r := range h.rounds {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("%s round %d: %s", r.Started.Local().Format("01-02 15:04:05"), r.Number, r.Error))
		}
	}
	for _, a := range h.actions {
		if a.Error != "" {
			errs = append(errs, fmt.Sprintf("%s round %d: %s %s: %s", a.At.Local().Format("01-02 15:04:05"), a.Round, a.Kind, a.JobIDs, a.Error))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		fmt.Fprintf(w, "\nlast errors (%d in the period)\n", len(errs))
		for _, e := range errs[max(0, len(errs)-5):] {
			fmt.Fprintln(w, "  "+e)
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// joinCounts writes "a 3, b 1", by count (byCount) or by name.
func joinCounts(m map[string]int, byCount bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if byCount && m[keys[a]] != m[keys[b]] {
			return m[keys[a]] > m[keys[b]]
		}
		return keys[a] < keys[b]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func sortedDurations(ds []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s
}

func medMax(ds []time.Duration) string {
	s := sortedDurations(ds)
	return fmt.Sprintf("%s / %s", shortDuration(s[len(s)/2]), shortDuration(s[len(s)-1]))
}

func delayStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none started"
	}
	s := sortedDurations(ds)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return fmt.Sprintf("mean %s, median %s, max %s (%d jobs)", shortDuration(sum/time.Duration(len(s))),
		shortDuration(s[len(s)/2]), shortDuration(s[len(s)-1]), len(s))
}

// shortDuration rounds to a readable precision: 0.012s, 1.5s, 4m10s, 2h5m.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.3fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return config.FormatDuration(d.Round(time.Second))
	default:
		return config.FormatDuration(d.Round(time.Minute))
	}
}
