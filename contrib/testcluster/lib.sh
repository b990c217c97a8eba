# shellcheck shell=bash
# Shared helpers of contrib/testcluster/{up,down,render,smoke}. Sourced, not run.
#
# Environment (all optional):
#   HADAR_CLUSTER_DIR      state directory of the cluster       (default /tmp/hadar-testcluster)
#   HADAR_CLUSTER_LAYOUT   layout name or file for `up`          (default demo)
#   HADAR_CLUSTER_PORT     slurmctld port; node N listens on PORT+N  (default 17000)
#   HADAR_CLUSTER_TIMEOUT  seconds `up` waits for the nodes         (default 30)
#   HADAR_CLUSTER_ACCOUNTING  1: `up` starts the cluster with slurmdbd and MariaDB
#                          (as --accounting), whose ports are PORT+819 and PORT+306

TC_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # used by the scripts that source this file
TC_REPO=$(cd "$TC_HOME/../.." && pwd)

tc_log() { printf '%s: %s\n' "${TC_PROG:-testcluster}" "$*" >&2; }
tc_die() { tc_log "error: $*"; exit 1; }

# tc_abs PATH: PATH made absolute (it need not exist).
tc_abs() {
	case $1 in
	/*) printf '%s\n' "${1%/}" ;;
	*) printf '%s/%s\n' "$(pwd)" "${1%/}" ;;
	esac
}

# tc_layout_file NAME_OR_PATH: the layout file to use.
tc_layout_file() {
	local l=$1
	if [[ -f $l ]]; then
		tc_abs "$l"
	elif [[ -f $TC_HOME/layouts/$l.layout ]]; then
		printf '%s\n' "$TC_HOME/layouts/$l.layout"
	else
		tc_die "no layout '$l' (neither a file nor $TC_HOME/layouts/$l.layout)"
	fi
}

# tc_parse_layout FILE: fills the arrays
#   TC_NODES            node names in order
#   TC_NODE_GPUS[name]  "type count type count ..." (empty for a CPU-only node)
tc_parse_layout() {
	local file=$1 line name n=0 i
	local -a f
	TC_NODES=()
	declare -gA TC_NODE_GPUS=()
	while IFS= read -r line || [[ -n $line ]]; do
		n=$((n + 1))
		line=${line%%#*}
		read -r -a f <<<"$line"
		((${#f[@]} == 0)) && continue
		name=${f[0]}
		[[ $name =~ ^[A-Za-z][A-Za-z0-9_-]*$ ]] || tc_die "$file:$n: bad node name '$name'"
		[[ -v TC_NODE_GPUS[$name] ]] && tc_die "$file:$n: node '$name' listed twice"
		(((${#f[@]} - 1) % 2 == 0)) || tc_die "$file:$n: expected NODENAME [GPUTYPE COUNT]..."
		for ((i = 1; i < ${#f[@]}; i += 2)); do
			[[ ${f[i]} =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || tc_die "$file:$n: bad GPU type '${f[i]}'"
			[[ ${f[i + 1]} =~ ^[1-9][0-9]*$ ]] || tc_die "$file:$n: bad GPU count '${f[i + 1]}'"
		done
		TC_NODES+=("$name")
		TC_NODE_GPUS[$name]="${f[*]:1}"
	done <"$file"
	((${#TC_NODES[@]} > 0)) || tc_die "$file: no nodes"
}

# tc_alive PID: the process exists and is not a zombie (an exited daemon stays a zombie
# until pid 1 reaps it, which can take seconds where pid 1 is not a real init).
tc_alive() {
	local st
	read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	[[ ${st:0:1} != Z ]]
}

# tc_proc_is PID COMM: true when PID is alive and its /proc/PID/comm is COMM. For slurmctld
# and slurmd, COMM-wlm counts too: Slurm 24.11 re-executes itself in place on `scontrol
# reconfigure`, same pid, under Debian's real binary name (slurmctld-wlm, slurmd-wlm).
tc_proc_is() {
	local pid=$1 comm=$2 c
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	tc_alive "$pid" || return 1
	read -r c 2>/dev/null <"/proc/$pid/comm" || return 1
	[[ $c == "$comm" ]] && return 0
	[[ ($comm == slurmctld || $comm == slurmd) && $c == "$comm-wlm" ]]
}

# tc_slurm_daemons_running: true when any slurmctld, slurmd or slurmdbd (either name) runs
# on this host (in this pid namespace).
# tc_closefds CMD...: run CMD with every file descriptor above 2 closed, so that a daemon
# it starts keeps none of the caller's open: a `flock LOCK make e2e` whose munged held the
# lock for as long as munged ran was seen; a pipe (`make test | tee`) would never end.
tc_closefds() {
	(
		local fd
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then
				eval "exec $fd>&-" 2>/dev/null || true
			fi
		done
		exec "$@"
	)
}
tc_slurm_daemons_running() { pgrep -x 'slurm(ctld|d|dbd)(-wlm)?' >/dev/null 2>&1; } # (procps warns of a pattern over 15 characters; the regex matches all the same)

# tc_slurm_version: the installed Slurm's MAJOR.MINOR (e.g. 22.05, 24.11), from `slurmd -V`
# ("slurm 22.05.8", "slurm-wlm 24.11.5"); $HADAR_SLURM_VERSION overrides.
tc_slurm_version() {
	local v=${HADAR_SLURM_VERSION:-}
	if [[ -z $v ]]; then
		v=$(slurmd -V 2>/dev/null) || v=$(sinfo -V 2>/dev/null) || return 1
		v=${v##* }
	fi
	[[ $v =~ ^([0-9]+)\.([0-9]+) ]] || return 1
	printf '%s.%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
}

# tc_pidfile_alive FILE COMM: prints the pid of FILE when that process is alive as COMM.
tc_pidfile_alive() {
	local file=$1 comm=$2 pid
	[[ -f $file ]] || return 1
	pid=$(tr -dc '0-9' <"$file" 2>/dev/null) || return 1
	tc_proc_is "$pid" "$comm" || return 1
	printf '%s\n' "$pid"
}

# tc_ctld_pid DIR / tc_slurmd_pid DIR NODE: pids of the daemons of the cluster in DIR.
tc_ctld_pid() { tc_pidfile_alive "$1/run/slurmctld.pid" slurmctld; }
tc_slurmd_pid() { tc_pidfile_alive "$1/run/slurmd-$2.pid" slurmd; }

# tc_dbd_pid DIR / tc_mariadbd_pid DIR: pids of the accounting daemons of the cluster in DIR.
tc_dbd_pid() { tc_pidfile_alive "$1/run/slurmdbd.pid" slurmdbd; }
tc_mariadbd_pid() { tc_pidfile_alive "$1/mysql/mariadbd.pid" mariadbd; }

# tc_dbd_port CTLD_PORT / tc_mysql_port CTLD_PORT: the ports of slurmdbd and MariaDB of an
# accounting cluster, derived from slurmctld's so that clusters on other ports do not clash.
tc_dbd_port() { printf '%d\n' $(($1 + 819)); }
tc_mysql_port() { printf '%d\n' $(($1 + 306)); }

# tc_cluster_nodes DIR: node names of the cluster whose state is in DIR (from its layout copy).
tc_cluster_nodes() {
	[[ -f $1/layout ]] || return 0
	(tc_parse_layout "$1/layout" && printf '%s\n' "${TC_NODES[@]}")
}

# tc_listening_ports: the TCP ports something listens on (from /proc/net/tcp{,6}), decimal.
tc_listening_ports() {
	local f local_addr st _
	for f in /proc/net/tcp /proc/net/tcp6; do
		[[ -r $f ]] || continue
		while read -r _ local_addr _ st _; do
			[[ $st == 0A ]] && printf '%d\n' "0x${local_addr##*:}"
		done <"$f"
	done
}

# tc_tail_logs DIR [NODE...]: the end of slurmctld's log and of the given nodes' slurmd
# logs (all nodes' when none is given), to stderr.
tc_tail_logs() {
	local dir=$1 f n
	shift
	local -a files=("$dir/log/slurmctld.log")
	if (($#)); then
		for n in "$@"; do files+=("$dir/log/slurmd-$n.log"); done
	else
		files+=("$dir"/log/slurmd-*.log)
	fi
	for f in "${files[@]}"; do
		[[ -f $f ]] || continue
		printf '\n==> %s (last 15 lines) <==\n' "$f" >&2
		tail -n 15 "$f" >&2
	done
	printf '\n' >&2
}
