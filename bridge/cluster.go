package bridge

import (
	"context"
	"log/slog"
	"time"

	"github.com/hadar-sched/hadar/optimizer"
	"github.com/hadar-sched/hadar/profiles"
	"github.com/hadar-sched/hadar/slurm"
)

// Cluster is what the bridge needs from Slurm: two reads per round and the
// few updates it makes. *slurm.Client implements it (see NewSlurmCluster);
// tests use an in-memory fake.
type Cluster interface {
	// Jobs lists the queue (slurm.JobQueryArgs: one squeue).
	Jobs(ctx context.Context) ([]slurm.Job, error)
	// Nodes lists the nodes (slurm.NodeQueryArgs: one scontrol show node).
	Nodes(ctx context.Context) ([]slurm.Node, error)
	// JobDetails reads every job's full request (slurm.JobDetailQueryArgs:
	// one scontrol show job).
	JobDetails(ctx context.Context) ([]slurm.JobDetail, error)
	// PlaceOnNodes pins one pending job to nodes (scontrol update JobId=X NodeList=...).
	PlaceOnNodes(ctx context.Context, id string, nodes []string) error
	// UpdateJobs sets fields of several jobs in one call.
	UpdateJobs(ctx context.Context, ids []string, kv ...string) error
	// Release releases held jobs in one call (hadar's own holds only:
	// a migration's requeuehold).
	Release(ctx context.Context, ids ...string) error
	// RequeueHold requeues running jobs and holds them, in one call.
	RequeueHold(ctx context.Context, ids ...string) error
	// SetAdminComment sets the admin comment of jobs in one call.
	SetAdminComment(ctx context.Context, ids []string, text string) error
}

var _ Cluster = (*slurm.Client)(nil)

// NewSlurmCluster returns the real Cluster: a slurm.Client running the
// binaries of binDir (PATH if empty) with each command bounded by timeout.
// The clients find the cluster through the usual environment (SLURM_CONF).
func NewSlurmCluster(binDir string, timeout time.Duration, logger *slog.Logger) *slurm.Client {
	c := slurm.NewClient(slurm.ExecRunner{BinDir: binDir}, logger)
	c.CommandTimeout = timeout
	return c
}

// Profiles is what the bridge needs from the throughput database.
// *profiles.Store implements it.
type Profiles interface {
	// Throughputs returns the heterogeneity matrix.
	Throughputs(ctx context.Context) (optimizer.Throughputs, error)
	// ResolveGPUType maps a site GRES type name to a canonical GPU type.
	ResolveGPUType(ctx context.Context, name string) (string, error)
	// RecordObservations learns from the jobs' measured progress, one
	// error per observation (nil: recorded).
	RecordObservations(ctx context.Context, obs []profiles.Observation) []error
}

var _ Profiles = (*profiles.Store)(nil)

// Clock is the bridge's only source of time.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// After implements Clock.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
