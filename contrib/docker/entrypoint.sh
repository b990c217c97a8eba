#!/usr/bin/env bash
# Entry point of the dockerized hadar test cluster (see docs/docker.md).
#
# usage: hadar-docker-entrypoint slurmctld|slurmd|hadar-slurmd|COMMAND...
#   slurmctld     render slurm.conf/gres.conf, create the munge key (shared volume), run slurmctld
#   slurmd        render, wait for the key, create this node's fake GPUs, run slurmd -N $(hostname)
#   hadar-slurmd  render, wait for the key and slurmctld, run hadar-slurmd
#   anything else is run as is (after munged is started when the key exists)
#
# Environment: HADAR_CLUSTER_LAYOUT (default demo: the compose file's nodes must match it).
set -euo pipefail

role=${1:-slurmd}
layout=${HADAR_CLUSTER_LAYOUT:-demo}
state=/var/lib/hadar-cluster   # per container, as the native cluster's state dir
conf=/etc/slurm
key=/shared/munge/munge.key

log() { printf 'hadar-docker[%s]: %s\n' "$role" "$*" >&2; }

render() {
	mkdir -p "$conf" "$state"/{state,run,log,jobs} "$state/spool/$(hostname)"
	/opt/hadar/testcluster/render --mode docker --layout "$layout" --dir "$state" --out "$conf"
	cp /opt/hadar/job_submit.lua "$conf/job_submit.lua"
	chmod 0644 "$conf/slurm.conf" "$conf/gres.conf" "$conf/job_submit.lua"
}

# munge: slurmctld creates the key in the shared volume, every container copies it.
start_munged() {
	if [[ $role == slurmctld && ! -s $key ]]; then
		mkdir -p "$(dirname "$key")"
		mungekey --create --keyfile "$key.tmp" --force
		mv -f "$key.tmp" "$key"
	fi
	local i
	for ((i = 0; i < 120; i++)); do
		[[ -s $key ]] && break
		((i == 0)) && log "waiting for the munge key from slurmctld"
		sleep 0.5
	done
	[[ -s $key ]] || { log "no munge key in $key"; exit 1; }
	install -o munge -g munge -m 0400 "$key" /etc/munge/munge.key
	install -d -o munge -g munge -m 0755 /run/munge
	runuser -u munge -- /usr/sbin/munged --force
}

# fake_gpus NODE: /dev/null symlinks for the File= lines of gres.conf.
fake_gpus() {
	local node=$1 n
	n=$(awk -v node="$node" '$1 == "NodeName="node { sub(/.*nvidia\[?/, ""); sub(/\]$/, ""); split($0, r, "-"); last = (r[2] == "" ? r[1] : r[2]); if (last + 1 > max) max = last + 1 } END { print max + 0 }' \
		"$conf/gres.conf")
	mkdir -p "$state/dev/$node"
	for ((i = 0; i < n; i++)); do ln -sfn /dev/null "$state/dev/$node/nvidia$i"; done
}

case $role in
slurmctld)
	render
	start_munged
	touch "$state/log/slurmctld.log"
	tail -n +1 -F "$state/log/slurmctld.log" &
	exec slurmctld -D -f "$conf/slurm.conf"
	;;
slurmd)
	node=$(hostname)
	render
	grep -q "^NodeName=$node " "$conf/slurm.conf" || { log "node $node is not in layout $layout"; exit 1; }
	fake_gpus "$node"
	start_munged
	touch "$state/log/slurmd-$node.log"
	tail -n +1 -F "$state/log/slurmd-$node.log" &
	exec slurmd -D -f "$conf/slurm.conf" -N "$node"
	;;
hadar-slurmd)
	render
	start_munged
	# The example config with the metrics endpoint open to the host's port mapping.
	sed 's/^listen = .*/listen = "0.0.0.0:9788"/' /etc/hadar/hadar.toml.example >/etc/hadar/hadar.toml
	chmod 0640 /etc/hadar/hadar.toml
	mkdir -p /var/spool/hadar
	for ((i = 0; i < 120; i++)); do
		scontrol ping 2>/dev/null | grep -q ' is UP' && break
		((i == 0)) && log "waiting for slurmctld"
		sleep 1
	done
	shift || true
	exec hadar-slurmd --config /etc/hadar/hadar.toml "$@"
	;;
*)
	render
	[[ -s $key ]] && start_munged
	exec "$@"
	;;
esac
