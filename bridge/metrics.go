package bridge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hadar-sched/hadar/slurm"
)

// Metrics are the daemon's Prometheus metrics. A nil *Metrics is valid and
// records nothing.
type Metrics struct {
	reg           *prometheus.Registry
	rounds        *prometheus.CounterVec
	roundDuration *prometheus.HistogramVec
	jobs          *prometheus.GaugeVec
	gpus          *prometheus.GaugeVec
	actions       *prometheus.CounterVec
	slurmErrors   *prometheus.CounterVec
	samples       prometheus.Counter
	dropped       prometheus.Counter
}

// NewMetrics registers hadar's metrics in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.rounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hadar_rounds_total", Help: "Scheduling rounds run, by result (ok, error).",
	}, []string{"result"})
	m.roundDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hadar_round_duration_seconds", Help: "Duration of a round's phases (observe, solve, enforce).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	}, []string{"phase"})
	m.jobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hadar_jobs", Help: "Jobs in the queue at the last round, by class (untagged, waiting, running, ...).",
	}, []string{"class"})
	m.gpus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hadar_gpus", Help: "GPUs of the nodes hadar uses at the last round, by canonical type and state (free: a new job could get them; blocked: idle, but the node's CPUs or memory are taken; hadar; others).",
	}, []string{"type", "state"})
	m.actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hadar_slurm_actions_total", Help: "scontrol actions, by kind and result (ok, error, skipped, refused).",
	}, []string{"kind", "result"})
	m.slurmErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hadar_slurm_errors_total", Help: "Failed Slurm commands, by class (controller_down, timeout, other, ...).",
	}, []string{"class"})
	m.samples = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hadar_throughput_samples_total", Help: "Learned-throughput samples recorded from job progress reports.",
	})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hadar_throughput_samples_dropped_total", Help: "Learned-throughput samples dropped as out of bounds (an outlier against the cell's imported or planned rate, or out of range).",
	})
	m.reg.MustRegister(m.rounds, m.roundDuration, m.jobs, m.gpus, m.actions, m.slurmErrors, m.samples, m.dropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series exists from the start, at 0, so that rate() and alerts
	// work before the first error.
	for _, r := range []string{"ok", "error"} {
		m.rounds.WithLabelValues(r)
	}
	for _, c := range errorClasses {
		m.slurmErrors.WithLabelValues(c.name)
	}
	m.slurmErrors.WithLabelValues("other")
	return m
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Serve serves /metrics on addr until ctx ends.
func (m *Metrics) Serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("metrics endpoint listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (m *Metrics) observeRound(r RoundReport, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.rounds.WithLabelValues("error").Inc()
		m.slurmErrors.WithLabelValues(errorClass(err)).Inc()
		return
	}
	m.rounds.WithLabelValues("ok").Inc()
	m.roundDuration.WithLabelValues("observe").Observe(r.Observe.Seconds())
	m.roundDuration.WithLabelValues("solve").Observe(r.Solve.Seconds())
	m.roundDuration.WithLabelValues("enforce").Observe(r.Enforce.Seconds())
	if r.View != nil {
		m.jobs.Reset()
		counts := map[JobClass]int{}
		for _, j := range r.View.Jobs {
			counts[j.Class]++
		}
		for _, c := range []JobClass{ClassUntagged, ClassPassThrough, ClassWaiting, ClassHeld, ClassNotReady, ClassLaunching, ClassRunning, ClassPinned} {
			m.jobs.WithLabelValues(string(c)).Set(float64(counts[c]))
		}
		m.gpus.Reset()
		type key struct{ t, s string }
		g := map[key]int{}
		for _, n := range r.View.Nodes {
			if !n.Usable {
				continue
			}
			// A node used per GPU type counts under each of its types.
			for _, p := range n.TypePools() {
				others := max(0, p.Used-p.Hadar)
				g[key{p.Type, "others"}] += others
				g[key{p.Type, "hadar"}] += p.Hadar + p.Reserved
				idle := max(0, p.Total-others-p.Hadar-p.Reserved)
				_, cpus := n.AvailableCPUs()
				_, mem := n.AvailableMem()
				if cpus && mem {
					g[key{p.Type, "free"}] += idle
					g[key{p.Type, "blocked"}] += 0
				} else {
					g[key{p.Type, "blocked"}] += idle
					g[key{p.Type, "free"}] += 0
				}
			}
		}
		for k, v := range g {
			m.gpus.WithLabelValues(k.t, k.s).Set(float64(v))
		}
	}
	if !r.DryRun {
		m.observeActions(r.Results)
	}
}

func (m *Metrics) observeActions(rs []ActionResult) {
	if m == nil {
		return
	}
	for _, r := range rs {
		kind := string(r.Action.Kind)
		switch {
		case r.Err != nil:
			m.actions.WithLabelValues(kind, "error").Inc()
			m.slurmErrors.WithLabelValues(errorClass(r.Err)).Inc()
		case len(r.Sent) > 0:
			m.actions.WithLabelValues(kind, "ok").Inc()
		}
		if len(r.Skipped) > 0 {
			m.actions.WithLabelValues(kind, "skipped").Inc()
		}
		if len(r.Refused) > 0 {
			m.actions.WithLabelValues(kind, "refused").Inc()
		}
	}
}

func (m *Metrics) observeSample() {
	if m != nil {
		m.samples.Inc()
	}
}

func (m *Metrics) observeDroppedSample() {
	if m != nil {
		m.dropped.Inc()
	}
}

// errorClasses name the Slurm errors hadar_slurm_errors_total counts.
var errorClasses = []struct {
	err  error
	name string
}{
	{slurm.ErrControllerDown, "controller_down"}, {slurm.ErrTimeout, "timeout"},
	{slurm.ErrInvalidJobID, "invalid_job_id"}, {slurm.ErrJobNotPending, "job_not_pending"},
	{slurm.ErrJobHeld, "job_held"}, {slurm.ErrInvalidNodeName, "invalid_node_name"},
	{slurm.ErrAccessDenied, "access_denied"}, {slurm.ErrNotConfigured, "not_configured"},
	{slurm.ErrCommandNotFound, "command_not_found"}, {slurm.ErrMalformed, "malformed_output"},
	{ErrStillPending, "still_pending"},
}

func errorClass(err error) string {
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other"
}
