# hadar: heterogeneity-aware GPU scheduling for Slurm.
# `make demo` runs the main job on the embedded defaults; `make test` runs the tests.

GO       ?= go
BIN      ?= bin
PREFIX   ?= /usr/local
DESTDIR  ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
export CGO_ENABLED := 1

.PHONY: all build test e2e unit-test bench demo demo-sim lint fmt fuzz clean cluster-up cluster-down

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hadar ./cmd/hadar
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hadar-slurmd ./cmd/hadar-slurmd

## lint: go vet and gofmt
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## test: lint, unit and acceptance tests, then the end-to-end tests on a real
## Slurm test cluster (installed and started by contrib/testcluster/up; needs root)
test: lint build
	$(GO) test -count=1 ./...
	$(MAKE) e2e

## e2e: end-to-end tests on the test cluster (brought up and down around them)
e2e: build
	@set -e; env_line=$$(contrib/testcluster/up); eval "$$env_line"; export SLURM_CONF; \
	  status=0; HADAR_E2E=1 $(GO) test -count=1 -timeout 40m ./e2e/... || status=$$?; \
	  contrib/testcluster/down; exit $$status

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

## fuzz: run each fuzzer briefly
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseTrace -fuzztime 20s ./sim/

cluster-up:
	contrib/testcluster/up

cluster-down:
	contrib/testcluster/down

clean:
	rm -rf $(BIN) out
