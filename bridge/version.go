package bridge

import (
	"context"
	"log/slog"
	"slices"

	"github.com/hadar-sched/hadar/slurm"
)

// SlurmVersioner is what a Cluster may offer besides Cluster: the Slurm
// release it talks to. *slurm.Client has it. A Cluster without it
// (slurmsim, the tests' fakes) is taken for Slurm 22.05, whose behaviour
// they model.
type SlurmVersioner interface {
	SlurmVersion(ctx context.Context) (slurm.Version, error)
}

var _ SlurmVersioner = (*slurm.Client)(nil)

// retypesPending reports whether Slurm v replaces a pending job's GPU type
// on `scontrol update Gres=gpu:TYPE:N`: measured on 24.11. 22.05 adds the
// new type to the old one (the job gets both, or goes BadConstraints); the
// releases between were not measured, so they are treated as 22.05.
func retypesPending(v slurm.Version) bool { return v.AtLeast(24, 11) }

// retype reports whether this round may retype pending jobs, and so use
// nodes with several GPU types per type (ViewInput.Retype). Slurm's
// version is read once per daemon (an upgrade of Slurm restarts it
// anyway); a failed read is retried next round, which meanwhile treats
// Slurm as 22.05.
func (b *Bridge) retype(ctx context.Context, log *slog.Logger) bool {
	if b.slurmVersion != nil {
		return retypesPending(*b.slurmVersion)
	}
	sv, ok := b.deps.Cluster.(SlurmVersioner)
	if !ok {
		return false
	}
	v, err := sv.SlurmVersion(ctx)
	if err != nil {
		log.Warn("could not read Slurm's version; nodes with several GPU types stay unused this round", "err", err)
		return false
	}
	b.slurmVersion = &v
	log.Info("slurm version", "version", v.Raw, "nodes_used_per_gpu_type", retypesPending(v))
	return retypesPending(v)
}

// withoutRetyped drops from actions every step that retypes, places,
// starts or releases one of the jobs in ids: they stay held (a migration's
// requeuehold still runs) and are placed again next round.
func withoutRetyped(actions []Action, ids map[string]string) []Action {
	var out []Action
	for _, a := range actions {
		if dependent(a.Kind) {
			a.JobIDs = slices.DeleteFunc(slices.Clone(a.JobIDs), func(id string) bool { _, drop := ids[id]; return drop })
			if len(a.JobIDs) == 0 {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}
