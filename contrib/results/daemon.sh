#!/usr/bin/env bash
# Regenerates the daemon-path tables of docs/results.md: each trace through
# hadar-slurmd's own loop on an in-memory Slurm (`hadar simulate --daemon`,
# docs/fidelity.md "The daemon's round"), nodes of 4 GPUs, with the daemon's
# defaults (preemption off), plus hadar and gavel with preemption on
# (contrib/results/hadar.toml) and a slurm-only row. Run from the repository
# root after `make build`:
#   contrib/results/daemon.sh > daemon-tables.md
# JOBS runs that many traces at once (default 2).
set -euo pipefail
HADAR=${HADAR:-bin/hadar}
POLICIES=${POLICIES:-hadar,gavel,gavel-makespan}
PREEMPT=${PREEMPT:-contrib/results/hadar.toml}
JOBS=${JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for s in 0 1 2 3 4; do
	"$HADAR" trace generate --jobs 160 --seed "$s" --multi-gpu --out "$work/static160-s$s.trace" 2>/dev/null
done
# title|trace|cluster, in the order of the page
rows=()
for s in 0 1 2 3 4; do rows+=("static 160 jobs, seed $s, v100=12,p100=12,k80=12|static160-s$s.trace|v100=12,p100=12,k80=12"); done
rows+=("max_min_fairness.trace on 4:4:4|gavel:max_min_fairness|v100=4,p100=4,k80=4")
rows+=("max_min_fairness.trace on 12:12:12|gavel:max_min_fairness|v100=12,p100=12,k80=12")
rows+=("minimize_makespan.trace on 4:4:4|gavel:minimize_makespan|v100=4,p100=4,k80=4")
rows+=("minimize_makespan.trace on 12:12:12|gavel:minimize_makespan|v100=12,p100=12,k80=12")

one() { # index
	local title trace cluster path
	IFS='|' read -r title trace cluster <<<"${rows[$1]}"
	path=$trace
	[[ -e "$work/$trace" ]] && path=$work/$trace
	{
		echo "#### $title"
		echo
		echo "\`hadar simulate --daemon --trace $trace --cluster $cluster --policies $POLICIES\`,"
		echo "and the rows \`hadar, preemption on\` and \`gavel, preemption on\`:"
		echo "\`hadar simulate --daemon --config $PREEMPT --trace $trace --cluster $cluster --policies hadar,gavel\`"
		echo
		"$HADAR" simulate --daemon --trace "$path" --cluster "$cluster" --policies "$POLICIES" --markdown
		"$HADAR" simulate --daemon --config "$PREEMPT" --trace "$path" --cluster "$cluster" --policies hadar,gavel --markdown |
			sed -n 's/^| \(hadar\|gavel\) |/| \1, preemption on |/p'
		echo
	} >"$work/row-$1.md"
}
export -f one
export HADAR POLICIES PREEMPT work
# the public traces (about 100 jobs, 17-75 h) first, then the static ones
printf '%s\n' 5 6 7 8 0 1 2 3 4 |
	ROWS=$(printf '%s\n' "${rows[@]}") xargs -P "$JOBS" -I{} bash -c 'mapfile -t rows <<<"$ROWS"; one {}'
for i in "${!rows[@]}"; do cat "$work/row-$i.md"; done
