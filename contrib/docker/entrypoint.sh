#!/usr/bin/env bash
# Entry point of the container test cluster (see docs/docker.md). Every container runs the
# same image (Debian + Slurm + munge, from contrib/docker/image) with the repository
# mounted read-only at $HADAR_REPO and one volume shared by all at /shared, as a site's
# shared filesystem:
#   /shared/cluster   the cluster's state directory: slurm.conf, gres.conf, cgroup.conf
#                     (24.11), job_submit.lua, state/, spool/<node>/, log/, dev/<node>/, jobs/
#   /shared/munge     the munge key, created by slurmctld
#   /shared/spool     hadar's spool (/var/spool/hadar on every host is a link to it): root's,
#                     mode 0755, as hadar-slurmd requires; it makes progress/ and copies/
#                     in it writable by every user
#   /shared/tmp       TMPDIR of the tests (their work directories, hadar's spool)
#   /shared/bin       hadar and hadar-slurmd, copied there by contrib/docker/cluster up
#                     (or, when missing, from $HADAR_REPO/bin by slurmctld)
#
# usage: entrypoint.sh slurmctld|slurmd|hadar-slurmd|client|mariadb|slurmdbd
#   slurmctld     render the config from contrib/testcluster/templates (render --mode docker),
#                 create the munge key, run slurmctld in the foreground (with accounting:
#                 once slurmdbd answers and has the cluster)
#   slurmd        wait for the config and key, create this node's fake GPUs, run
#                 slurmd -N $(hostname) in the foreground
#   hadar-slurmd  wait for slurmctld, run hadar-slurmd with the example config (state in
#                 /var/lib/hadar), or $HADAR_DOCKER_CONFIG;
#                 HADAR_DOCKER_ARGS are added
#   client        a login host: munged, then sleep (tests and users `docker exec` here)
#   mariadb       with accounting: the cluster's MariaDB (data in /shared/cluster/mysql),
#                 with the database and slurmdbd's user, in the foreground
#   slurmdbd      with accounting: wait for MariaDB, run slurmdbd in the foreground
#
# Environment: HADAR_CLUSTER_LAYOUT (default demo), HADAR_CLUSTER_PORT (slurmctld's port,
# default 17000), HADAR_SLURMD_TIMEOUT (default 300), HADAR_REPO (default /hadar), HADAR_TEST_UID (uid of the test user
# hadartest on every host, default 1001), HADAR_DOCKER_ACCOUNTING=1 (the cluster with
# slurmdbd and MariaDB: render --accounting; the site's users alice and bob on every host,
# uids HADAR_TEST_UID+1 and +2).
set -euo pipefail

role=${1:-slurmd}
accounting=${HADAR_DOCKER_ACCOUNTING:-0}
layout=${HADAR_CLUSTER_LAYOUT:-demo}
repo=${HADAR_REPO:-/hadar}
dir=/shared/cluster
key=/shared/munge/munge.key
conf=$dir/slurm.conf
export SLURM_CONF=$conf

log() { printf 'hadar-docker[%s %s]: %s\n' "$role" "$(hostname)" "$*" >&2; }

# wait_for WHAT SECONDS CMD...: poll CMD every 0.2 s
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 5; i++)); do
		"$@" && return 0
		((i == 0)) && log "waiting for $what"
		sleep 0.2
	done
	log "no $what after ${secs}s"
	return 1
}

# The test user exists on every host with one uid, as on a site (jobs run as it on the
# nodes; slurmstepd looks it up there).
users() {
	local uid=${HADAR_TEST_UID:-1001}
	id hadartest >/dev/null 2>&1 ||
		useradd --uid "$uid" --no-create-home --shell /usr/sbin/nologin hadartest
	# the accounts' users (contrib/testcluster/up --accounting has the same): slurmctld
	# maps associations to uids, the nodes run their jobs, the login host submits them
	if [[ $accounting == 1 ]]; then
		id alice >/dev/null 2>&1 ||
			useradd --uid $((uid + 1)) --no-create-home --shell /usr/sbin/nologin alice
		id bob >/dev/null 2>&1 ||
			useradd --uid $((uid + 2)) --no-create-home --shell /usr/sbin/nologin bob
	fi
	return 0
}

start_munged() {
	wait_for "the munge key in $key" 60 test -s "$key"
	install -o munge -g munge -m 0400 "$key" /etc/munge/munge.key
	install -d -o munge -g munge -m 0755 /run/munge
	rm -f /run/munge/munged.pid
	runuser -u munge -- /usr/sbin/munged --force
	wait_for "munged" 10 sh -c 'munge -n | unmunge >/dev/null 2>&1'
}

render() {
	mkdir -p "$dir"/{state,run,log,jobs} /shared/tmp /shared/spool
	chmod 0755 /shared "$dir"
	chmod 1777 "$dir/jobs" /shared/tmp
	chmod 0755 /shared/spool
	local -a with=()
	[[ $accounting == 1 ]] && with=(--accounting)
	"$repo/contrib/testcluster/render" --mode docker --layout "$layout" --dir "$dir" --out "$dir" \
		--slurmd-timeout "${HADAR_SLURMD_TIMEOUT:-300}" "${with[@]}"
	cp -f "$repo/contrib/slurm/job_submit.lua" "$dir/job_submit.lua.tmp"
	mv -f "$dir/job_submit.lua.tmp" "$dir/job_submit.lua"
	local lf=$layout
	[[ -f $lf ]] || lf=$repo/contrib/testcluster/layouts/$layout.layout
	cp -f "$lf" "$dir/layout.tmp"
	mv -f "$dir/layout.tmp" "$dir/layout"
	chmod 0644 "$dir"/*.conf "$dir/job_submit.lua" "$dir/layout"
	# but the database password: slurmdbd refuses a slurmdbd.conf others can read
	if [[ -f $dir/slurmdbd.conf ]]; then chmod 0600 "$dir/slurmdbd.conf"; fi
	# Clients find the cluster as on the native one: <dir>/env; contrib/testcluster/up and
	# down (run by the demo and the tests on the login host) leave a cluster marked
	# external alone
	printf 'export SLURM_CONF=%s\n' "$conf" >"$dir/env"
	printf 'contrib/docker (the container cluster)\n' >"$dir/external"
}

# fake_gpus NODE: /dev/null symlinks for the File= lines of gres.conf.
fake_gpus() {
	local node=$1 n i
	n=$(awk -v node="$node" '$1 == "NodeName="node { f = $0; sub(/.*nvidia\[?/, "", f); sub(/\]$/, "", f); split(f, r, "-"); last = (r[2] == "" ? r[1] : r[2]); if (last + 1 > max) max = last + 1 } END { print max + 0 }' \
		"$dir/gres.conf")
	mkdir -p "$dir/dev/$node" "$dir/spool/$node"
	for ((i = 0; i < n; i++)); do ln -sfn /dev/null "$dir/dev/$node/nvidia$i"; done
}

ctld_up() { scontrol ping 2>/dev/null | grep -q ' is UP'; }

dbd_up() { sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; }

# dbd_cluster: the cluster in slurmdbd before slurmctld starts, so that it registers into
# it (and with it root's association, which AccountingStorageEnforce needs for any job)
dbd_cluster() {
	wait_for slurmdbd 180 dbd_up
	sacctmgr -n -P show cluster format=cluster | grep -qx hadar && return 0
	sacctmgr -i add cluster hadar >&2
}

# start_mariadb: the cluster's MariaDB, configured by mariadb.cnf (data in
# /shared/cluster/mysql, listening on the private network); the init file makes the
# database and slurmdbd's user (from any host of the network) at every start.
start_mariadb() {
	local cnf=$dir/mariadb.cnf pass init=/run/hadar-mariadb-init.sql
	wait_for "$cnf" 60 test -s "$cnf"
	wait_for "$dir/slurmdbd.conf" 60 test -s "$dir/slurmdbd.conf"
	pass=$(sed -n 's/^StoragePass=//p' "$dir/slurmdbd.conf")
	[[ $pass =~ ^[0-9a-f]+$ ]] || { log "no StoragePass in $dir/slurmdbd.conf"; exit 1; }
	install -d -o mysql -g mysql -m 0750 "$dir/mysql"
	if [[ ! -d $dir/mysql/data/mysql ]]; then
		rm -rf "${dir:?}/mysql/data"
		mariadb-install-db --defaults-file="$cnf" --user=mysql \
			--auth-root-authentication-method=socket --skip-test-db >"$dir/log/mariadb-install-db.log" 2>&1 ||
			{ log "mariadb-install-db failed (see $dir/log/mariadb-install-db.log)"; exit 1; }
	fi
	rm -f "$dir/mysql/mariadbd.pid" "$dir/mysql/mariadbd.sock"
	(
		umask 077
		# one statement a line: what --init-file reads
		printf '%s\n' 'CREATE DATABASE IF NOT EXISTS slurm_acct_db;' \
			"CREATE OR REPLACE USER 'slurm'@'%' IDENTIFIED BY '$pass';" \
			"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';" >"$init"
	)
	chown mysql:mysql "$init"
	exec /usr/sbin/mariadbd --defaults-file="$cnf" --init-file="$init"
}

# db_up: MariaDB answers slurmdbd's user on the network
db_up() {
	local pass port
	pass=$(sed -n 's/^StoragePass=//p' "$dir/slurmdbd.conf")
	port=$(sed -n 's/^StoragePort=//p' "$dir/slurmdbd.conf")
	MYSQL_PWD=$pass mariadb --host=mariadb --port="$port" --user=slurm --batch --silent \
		-e 'SELECT 1' slurm_acct_db >/dev/null 2>&1
}

# hadar's default spool (/var/spool/hadar, where `hadar report` in a job writes) is the
# shared one on every host, as a site shares it between the nodes and hadar-slurmd. It is
# root's and not writable by others (hadar-slurmd refuses a spool_dir users could change,
# see docs/security.md); users write only in the progress/ and copies/ directories that
# hadar-slurmd makes in it.
shared_spool() {
	mkdir -p /shared/spool /var/spool
	chmod 0755 /shared/spool
	if [[ ! -L /var/spool/hadar ]]; then
		rm -rf /var/spool/hadar
		ln -s /shared/spool /var/spool/hadar
	fi
}

users
shared_spool
case $role in
slurmctld)
	if [[ ! -s $key ]]; then
		mkdir -p "$(dirname "$key")"
		mungekey --create --keyfile "$key.tmp" --force
		mv -f "$key.tmp" "$key"
	fi
	render
	# hadar's binaries for every host: contrib/docker/cluster copies a snapshot; under
	# Compose, the tree's bin/ (make build) is copied here
	if [[ ! -x /shared/bin/hadar-slurmd && -x $repo/bin/hadar-slurmd ]]; then
		mkdir -p /shared/bin
		cp -f "$repo/bin/hadar" "$repo/bin/hadar-slurmd" /shared/bin/
	fi
	start_munged
	[[ $accounting == 1 ]] && dbd_cluster
	# -D: in the foreground, so the container is the daemon; state kept across restarts
	exec slurmctld -D -f "$conf"
	;;
slurmd)
	node=$(hostname)
	wait_for "$conf" 60 test -s "$conf"
	grep -q "^NodeName=$node " "$conf" || { log "node $node is not in the layout"; exit 1; }
	fake_gpus "$node"
	start_munged
	exec slurmd -D -f "$conf" -N "$node"
	;;
hadar-slurmd)
	wait_for "$conf" 60 test -s "$conf"
	start_munged
	wait_for slurmctld 120 ctld_up
	mkdir -p /etc/hadar /var/lib/hadar
	# HADAR_DOCKER_CONFIG (a test's), else the example config (state in /var/lib/hadar,
	# spool /var/spool/hadar = /shared/spool) with the metrics endpoint open on the
	# container's network.
	if [[ -n ${HADAR_DOCKER_CONFIG:-} ]]; then
		# shellcheck disable=SC2086 # HADAR_DOCKER_ARGS is a list of flags
		exec /shared/bin/hadar-slurmd --config "$HADAR_DOCKER_CONFIG" ${HADAR_DOCKER_ARGS:-}
	fi
	sed -e 's/^listen = .*/listen = "0.0.0.0:9788"/' \
		-e 's|^data_dir = .*|data_dir = "/var/lib/hadar"|' \
		"$repo/contrib/hadar.toml" >/etc/hadar/hadar.toml
	chmod 0640 /etc/hadar/hadar.toml
	# shellcheck disable=SC2086 # HADAR_DOCKER_ARGS is a list of flags
	exec /shared/bin/hadar-slurmd --config /etc/hadar/hadar.toml ${HADAR_DOCKER_ARGS:-}
	;;
client)
	wait_for "$conf" 60 test -s "$conf"
	start_munged
	exec sleep infinity
	;;
mariadb)
	start_mariadb
	;;
slurmdbd)
	wait_for "$dir/slurmdbd.conf" 60 test -s "$dir/slurmdbd.conf"
	start_munged
	wait_for MariaDB 120 db_up
	# slurmdbd reads slurmdbd.conf next to $SLURM_CONF; -D: in the foreground
	exec slurmdbd -D
	;;
*)
	log "unknown role '$role' (slurmctld, slurmd, hadar-slurmd, client, mariadb, slurmdbd)"
	exit 2
	;;
esac
