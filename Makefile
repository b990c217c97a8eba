# hadar: heterogeneity-aware GPU scheduling for Slurm.
# `make demo` runs the main job on the embedded defaults; `make test` runs the tests.

GO       ?= go
BIN      ?= bin
PREFIX   ?= /usr/local
DESTDIR  ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
export CGO_ENABLED := 1

.PHONY: all build test test-go test-deps e2e e2e-site e2e-containers e2e-containers-prepare e2e-containers-main docker-images docker-up docker-down unit-test bench demo demo-sim lint fmt fuzz test-reliability clean cluster-up cluster-down

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hadar ./cmd/hadar
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hadar-slurmd ./cmd/hadar-slurmd

## lint: go vet, gofmt, staticcheck and deadcode (both fetched through the Go module
## proxy by `go run`, at the versions below)
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE    ?= golang.org/x/tools/cmd/deadcode@v0.52.0
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	@out=$$($(GO) run $(DEADCODE) -test ./...); \
	  if [ -n "$$out" ]; then echo "deadcode: unreachable code:"; echo "$$out"; exit 1; fi

## test: installs what it needs (test-deps), then lint, unit and acceptance tests
## (test-go) while the container images are built and the one-node container clusters
## tested (e2e-containers-prepare; nothing in test-go is timed, and those tests wait
## tens of seconds for what takes seconds), the end-to-end tests on a real Slurm 22.05
## test cluster on this host (installed and started by contrib/testcluster/up; needs
## root), then the e2e suite, the cross-host fault tests and the accounting suite on the
## container cluster with Slurm 24.11 (e2e-containers-main) beside the suite of the
## accounting test cluster on this host (e2e-site: Slurm 22.05 with slurmdbd and MariaDB of
## its own) while every fuzz target runs for FUZZ_TOTAL seconds in all (the three at once:
## the cluster tests mostly wait; fuzzing runs at nice 19, which yields to the host's processes, not to the
## containers' own cgroups; each one's output is printed whole when it ends) (docs/reliability.md, docs/docker.md)
test: test-deps
	$(MAKE) -j2 --output-sync=target test-go e2e-containers-prepare
	$(MAKE) e2e
	$(MAKE) -j3 --output-sync=target e2e-containers-main e2e-site fuzz

## test-go: lint, build, then every Go package's tests (no cluster needed)
test-go: lint build
	$(GO) test -count=1 ./...

## test-deps: apt-get install what the tests need and the machine lacks (python3-torch,
## python3-sklearn, slurm-wlm, munge, debootstrap) and checks that a Docker engine
## answers; idempotent; a prerequisite apt-get cannot provide (Go, a running Docker
## engine, root) is an error naming the fix
TEST_DEPS ?= python slurm containers
test-deps:
	contrib/ci/deps $(TEST_DEPS)

## e2e: end-to-end tests on the test cluster (brought up and down around them), all of
## ./e2e/... but e2e/site (e2e-site: a cluster of its own)
e2e: build
	@set -e; env_line=$$(contrib/testcluster/up); eval "$$env_line"; export SLURM_CONF; \
	  status=0; HADAR_E2E=1 $(GO) test -p 1 -v -count=1 -timeout 60m $$($(GO) list ./e2e/... | grep -v '/e2e/site$$') || status=$$?; \
	  contrib/testcluster/down; exit $$status

## e2e-site: the end-to-end tests on the accounting test cluster alone (slurmdbd and
## MariaDB of its own, multifactor fairshare, QOS limits; its own state dir and port),
## which the suite brings up and down itself (e2e/site)
e2e-site: build
	HADAR_E2E=1 $(GO) test -p 1 -v -count=1 -timeout 30m ./e2e/site/

## unit-test: the fast tests only
unit-test:
	$(GO) test -short ./...

## bench: optimizer benchmarks and the planning-time targets
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./optimizer/ ./sim/
	$(BIN)/hadar bench --policy hadar --jobs 1000 --gpus 1024 --types 4
	$(BIN)/hadar bench --policy hadar --jobs 10000 --gpus 8192 --types 4 --repeat 3

## demo: bring up the test cluster, run a mixed workload under hadar-slurmd and
## under Slurm alone, and compare (needs root; installs Slurm when missing)
demo: build
	contrib/demo/run

## demo-sim: simulate every policy on the built-in trace and plot the results
demo-sim: build
	$(BIN)/hadar simulate --cluster v100=12,p100=12,k80=12 --plot out/demo

## fuzz: every fuzz target (Slurm parsers, tag, trace) for a share of FUZZ_TOTAL seconds; fails on a crasher
FUZZ_TOTAL ?= 300
fuzz:
	GO=$(GO) contrib/ci/fuzz $(FUZZ_TOTAL)

## test-reliability: fault, load and hostile-input tests on a real Slurm test cluster (root; docs/reliability.md)
test-reliability:
	HADAR_E2E=1 $(GO) test -count=1 -timeout 20m ./e2e/reliability/

## e2e-containers: the e2e suite and the cross-host fault tests on the container cluster
## (contrib/docker, Slurm 24.11; images built from Debian's packages, cached), then down
e2e-containers: build
	GO=$(GO) contrib/ci/e2e-containers

## e2e-containers-prepare / e2e-containers-main: its two halves (images and the one-node
## clusters' tests; then the multi-host cluster's suites), as make test runs them
e2e-containers-prepare: build
	GO=$(GO) contrib/ci/e2e-containers prepare

e2e-containers-main: build
	GO=$(GO) contrib/ci/e2e-containers main

## docker-images: the base images of the container cluster (bookworm 22.05, trixie 24.11)
docker-images:
	contrib/docker/image bookworm
	contrib/docker/image trixie

## docker-up / docker-down: the container cluster (DOCKER_SUITE=trixie|bookworm) with
## hadar-slurmd in its own container; `contrib/docker/cluster exec sinfo` to use it
DOCKER_SUITE ?= trixie
docker-up: build
	HADAR_DOCKER_SUITE=$(DOCKER_SUITE) contrib/docker/cluster up
	contrib/docker/cluster hadar-up

docker-down:
	contrib/docker/cluster down

cluster-up:
	contrib/testcluster/up

cluster-down:
	contrib/testcluster/down

clean:
	rm -rf $(BIN) out

# ---------------------------------------------------------------- install, man pages
# make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]: hadar to BINDIR, hadar-slurmd to
# SBINDIR, the systemd unit to UNITDIR (its ExecStart follows SBINDIR), the example config
# to SYSCONFDIR/hadar/hadar.toml.example (0640; an existing hadar.toml is never touched),
# job_submit.lua to DATADIR, the man pages to MANDIR/man{1,5,8}.
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
DATADIR    ?= $(PREFIX)/share/hadar
MANDIR     ?= $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSCONFDIR ?= /etc
INSTALL    ?= install

.PHONY: install man

## install: binaries, systemd unit, example config, job_submit.lua and man pages (PREFIX, DESTDIR)
install: build
	$(INSTALL) -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DATADIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SYSCONFDIR)/hadar
	$(INSTALL) -m 0755 $(BIN)/hadar $(DESTDIR)$(BINDIR)/hadar
	$(INSTALL) -m 0755 $(BIN)/hadar-slurmd $(DESTDIR)$(SBINDIR)/hadar-slurmd
	sed 's|/usr/local/sbin/hadar-slurmd|$(SBINDIR)/hadar-slurmd|g' contrib/systemd/hadar-slurmd.service >$(DESTDIR)$(UNITDIR)/hadar-slurmd.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/hadar-slurmd.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/hadar-slurmd.service.tmp $(DESTDIR)$(UNITDIR)/hadar-slurmd.service
	$(INSTALL) -m 0640 contrib/hadar.toml $(DESTDIR)$(SYSCONFDIR)/hadar/hadar.toml.example
	$(INSTALL) -m 0644 contrib/slurm/job_submit.lua $(DESTDIR)$(DATADIR)/job_submit.lua
	$(INSTALL) -m 0644 man/hadar.1 $(DESTDIR)$(MANDIR)/man1/hadar.1
	$(INSTALL) -m 0644 man/hadar.toml.5 $(DESTDIR)$(MANDIR)/man5/hadar.toml.5
	$(INSTALL) -m 0644 man/hadar-slurmd.8 $(DESTDIR)$(MANDIR)/man8/hadar-slurmd.8
	$(INSTALL) -d -m 0755 $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSCONFDIR)/default
	$(INSTALL) -m 0644 contrib/systemd/hadar.tmpfiles $(DESTDIR)$(TMPFILESDIR)/hadar.conf
	[ -e $(DESTDIR)$(SYSCONFDIR)/default/hadar-slurmd ] || $(INSTALL) -m 0644 contrib/systemd/hadar-slurmd.default $(DESTDIR)$(SYSCONFDIR)/default/hadar-slurmd
	@echo "installed; next steps: docs/admin-guide.md (systemd-tmpfiles --create hadar.conf; enable job_submit.lua; then systemctl daemon-reload && systemctl enable --now hadar-slurmd)"

## man: regenerate man/hadar.1, man/hadar-slurmd.8, man/hadar.toml.5 and docs/config.md from the code
man:
	HADAR_UPDATE_MAN=1 $(GO) test -count=1 -run '^TestManPages?$$' ./cmd/hadar ./cmd/hadar-slurmd
