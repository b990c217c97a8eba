#!/usr/bin/env bash
# Regenerates docs/results.md's Philly weekly table: weeks 2-5 of Microsoft's
# Philly trace (Aug-Sep 2017, shared/data/philly; docs/traces.md) x 3 job-type
# draws x {12:12:12, 36:36:36}, imported with `hadar trace import --philly` and
# replayed on the fast path with the rules of hadar-slurmd's round and
# preemption on (RULES), with exact estimates (hadar, gavel, tiresias, elas,
# yarn-cs; yarn-cs not on week 5, where one run takes over 10 minutes) and with
# --noise-steps 0.5 --noise-rate 0.3 (hadar, gavel). Prints the per-row ratio
# table (hadar / gavel; elas / tiresias and elas / yarn-cs) and then every
# run's table. Run from the repository root after `make build`:
#   PHILLY=path/to/philly-aug-sep-2017.csv contrib/results/philly.sh > philly.md
# JOBS runs that many rows at once (default 2).
set -euo pipefail
HADAR=${HADAR:-bin/hadar}
PHILLY=${PHILLY:-../shared/data/philly/philly-aug-sep-2017.csv}
RULES=${RULES---daemon-rules --config contrib/results/hadar.toml}
NOISE=${NOISE:---noise-steps 0.5 --noise-rate 0.3}
JOBS=${JOBS:-2}
if [[ ! -r $PHILLY ]]; then
	echo "philly.sh: cannot read $PHILLY (set PHILLY)" >&2
	exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

one() { # week draw size
	local w=$1 s=$2 c=$3 policies=hadar,gavel,tiresias,elas,yarn-cs
	[[ $w == 5 ]] && policies=hadar,gavel,tiresias,elas
	local trace=$work/philly-w$w-s$s.trace cluster=v100=$c,p100=$c,k80=$c
	# shellcheck disable=SC2086 # RULES and NOISE are lists of flags
	{
		"$HADAR" simulate $RULES --trace "$trace" --cluster "$cluster" --policies "$policies" --markdown
		"$HADAR" simulate $RULES $NOISE --trace "$trace" --cluster "$cluster" --policies hadar,gavel --markdown |
			sed -n 's/^| \(hadar\|gavel\) |/| \1, noisy |/p'
	} >"$work/row-$w-$s-$c.md" 2>"$work/row-$w-$s-$c.err"
}
export -f one
export HADAR RULES NOISE work

for w in 2 3 4 5; do
	for s in 1 2 3; do
		"$HADAR" trace import --philly "$PHILLY" --week "$w" --seed "$s" --out "$work/philly-w$w-s$s.trace" 2>/dev/null
	done
done
rows=()
for w in 2 3 4 5; do for c in 12 36; do for s in 1 2 3; do rows+=("$w $s $c"); done; done; done
printf '%s\n' "${rows[@]}" | xargs -P "$JOBS" -I{} bash -c 'one {}'

# field: 1 makespan, 2 avg JCT, 3 p99 JCT, 7 util (of the markdown row's numbers)
field() { # file policy n
	awk -F'|' -v p="$2" -v n="$3" '{ gsub(/ /, "", $2) } $2 == p { v = $(n + 2); gsub(/ /, "", v); print v }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { r = a / b; printf (r <= 1.00499 ? "**%.2f**" : "%.2f"), r }'; }
gpuh() { # file policy gpus: busy GPU-hours = util x makespan x GPUs
	awk -v m="$(field "$1" "$2" 1)" -v u="$(field "$1" "$2" 7)" -v g="$3" 'BEGIN { print m * u * g }'
}
echo "| week | cluster | draw | avg JCT | p99 JCT | makespan | GPU-h | noisy avg JCT | noisy makespan | elas / tiresias avg JCT | elas / yarn-cs avg JCT |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
	read -r w s c <<<"$r"
	f=$work/row-$w-$s-$c.md
	line="| $w | $c:$c:$c | $s |"
	for n in 2 3 1; do line+=" $(ratio "$(field "$f" hadar "$n")" "$(field "$f" gavel "$n")") |"; done
	line+=" $(ratio "$(gpuh "$f" hadar $((3 * c)))" "$(gpuh "$f" gavel $((3 * c)))") |"
	for n in 2 1; do line+=" $(ratio "$(field "$f" hadar,noisy "$n")" "$(field "$f" gavel,noisy "$n")") |"; done
	line+=" $(ratio "$(field "$f" elas 2)" "$(field "$f" tiresias 2)") |"
	if [[ $w == 5 ]]; then line+=" - |"; else line+=" $(ratio "$(field "$f" elas 2)" "$(field "$f" yarn-cs 2)") |"; fi
	echo "$line"
done
echo
for r in "${rows[@]}"; do
	read -r w s c <<<"$r"
	echo "#### week $w, draw $s, v100=$c,p100=$c,k80=$c"
	echo
	cat "$work/row-$w-$s-$c.md"
	sed 's/^/    /' "$work/row-$w-$s-$c.err"
	echo
done
