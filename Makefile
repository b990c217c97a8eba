# hadar: heterogeneity-aware GPU scheduling for Slurm.
# `make demo` runs the main job on the embedded defaults; `make test` runs the tests.

GO       ?= go
BIN      ?= bin
PREFIX   ?= /usr/local
DESTDIR  ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
export CGO_ENABLED := 1

.PHONY: all build test unit-test bench demo lint fmt fuzz clean cluster-up cluster-down

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hadar ./cmd/hadar
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/hadar-slurmd ./cmd/hadar-slurmd

## lint: go vet and gofmt
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## test: lint, then every test (the slow fidelity and acceptance runs included)
test: lint build
	$(GO) test -count=1 ./...

## unit-test: the fast tests only
unit-test:
	$(GO) test -short ./...

## bench: optimizer benchmarks and the planning-time targets
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./optimizer/ ./sim/
	$(BIN)/hadar bench --policy hadar --jobs 1000 --gpus 1024 --types 4
	$(BIN)/hadar bench --policy hadar --jobs 10000 --gpus 8192 --types 4 --repeat 3

## demo: simulate every policy on the built-in trace and plot the results
demo: build
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
