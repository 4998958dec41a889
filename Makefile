# airlock build, test and benchmark targets. See README.md.
SHELL := /bin/bash
GO ?= go
PKG := github.com/airlock-dev/airlock
VERSION ?= 0.1.0-dev
# Build ID: the git short hash (plus -dirty.<time> for uncommitted changes, so a rebuilt
# binary replaces a running daemon), else version+timestamp outside a git checkout.
BUILD_ID ?= $(shell h=$$(git rev-parse --short HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null && echo $$h || echo $$h-dirty.$$(date -u +%H%M%S); } || echo "$(VERSION)+$$(date -u +%Y%m%d%H%M%S)")
LDFLAGS := -s -w -X $(PKG)/cli.Version=$(VERSION) -X $(PKG)/cli.BuildID=$(BUILD_ID)

.PHONY: all build test lint bench demo engine faults clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/airlock ./cmd/airlock

# Everything, race detector on, integration tests against the real Docker Engine included.
test: lint
	$(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: build
	./scripts/bench.sh

# The fault suite (docs/reliability.md): kills, concurrency, a long series of runs, bad inputs,
# against the real Engine; not part of `make test`. FAULTS_RUNS=100 for the quick mode.
FAULTS_RUNS ?= 1000
faults: build
	./scripts/engine.sh
	AIRLOCK_FAULTS_RUNS=$(FAULTS_RUNS) $(GO) test -tags faults -count=1 -timeout 60m -v ./faults

# Starts the Docker Engine when none answers (installing it on Debian when absent).
engine:
	./scripts/engine.sh

demo: build engine
	./scripts/demo.sh

clean:
	rm -rf bin
