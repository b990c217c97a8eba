// Package containers holds hadar's cross-host fault tests: they run on
// the container test cluster of contrib/docker (slurmctld, one container
// per node, a login host and hadar-slurmd in a container of its own, on a
// private Docker network, with one shared volume as the site's shared
// filesystem) and break it the way real hosts break: a node container
// killed while it runs hadar's jobs, a node cut off the network, the
// hadar-slurmd host cut off from slurmctld, the slurmctld container
// restarted, the hadar-slurmd container killed -9 (started again, or left
// dead: then Slurm starts the tagged jobs alone when their lease runs out).
//
// The tests run on the Docker host and reach the cluster through `docker
// exec` on its login host (NAME-client) and through the shared volume,
// which the host reads directly. They skip unless HADAR_E2E_CONTAINERS=1;
// `make e2e-containers` brings the cluster up, runs them (after the e2e
// suite, which runs on the login host) and tears the cluster down:
//
//	contrib/docker/cluster up
//	HADAR_E2E_CONTAINERS=1 go test -v -count=1 ./e2e/containers/
//	contrib/docker/cluster down
//
// HADAR_DOCKER_NAME names the cluster (default hadar-ct). Results are in
// docs/reliability.md.
package containers
