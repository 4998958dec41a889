# airlock build, test and benchmark targets. See README.md.
SHELL := /bin/bash
GO ?= go
PKG := github.com/airlock-dev/airlock
VERSION ?= 0.1.0-dev
# Build ID: the git short hash (plus -dirty.<time> for uncommitted changes, so a rebuilt
# binary replaces a running daemon), else version+timestamp outside a git checkout.
# Evaluated once, so the CLI and the supervisors it embeds share it. (A plain go build
# takes its build ID from the VCS stamp instead: see cli/version.go.)
ifeq ($(origin BUILD_ID),undefined)
BUILD_ID := $(shell h=$$(git rev-parse --short HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null && echo $$h || echo $$h-dirty.$$(date -u +%H%M%S); } || echo "$(VERSION)+$$(date -u +%Y%m%d%H%M%S)")
endif
LDFLAGS := -s -w -X $(PKG)/cli.Version=$(VERSION) -X $(PKG)/cli.BuildID=$(BUILD_ID) \
	-X $(PKG)/cli/insandbox.Version=$(VERSION) -X $(PKG)/cli/insandbox.BuildID=$(BUILD_ID)

# The supervisor injected into a sandbox is a static Linux binary for the Engine's
# architecture: make build embeds linux/amd64 and linux/arm64 ones (airlock itself, built
# under $(SUPERVISOR_DIR), not committed) into the CLI with the build tag $(EMBED_TAG).
SUPERVISOR_DIR := internal/supervisorbin/gen
SUPERVISOR_ARCHES := amd64 arm64
EMBED_TAG := embedsupervisors
# The supervisor (embedded, and in the airlock image) only runs inside sandboxes: it is
# built of the in-sandbox commands alone (tag insandbox: cmd/airlock/main_insandbox.go),
# without the CLI, the daemon, the Engine and Kubernetes clients and compose-go, so each
# process it starts there (PID 1, every exec) starts in ~4 ms instead of ~8 (the CLI's
# kube client alone added ~9 ms, compose's JSON-schema compiler ~15 ms).
SUPERVISOR_TAGS := insandbox
# What make cross builds (bin/airlock-<os>-<arch>).
CROSS_TARGETS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# make test embeds the supervisors when they were built (make build or make cross ran).
TEST_TAGS := $(if $(wildcard $(SUPERVISOR_DIR)/linux-arm64/airlock.gz $(SUPERVISOR_DIR)/linux-amd64/airlock.gz),-tags $(EMBED_TAG))

.PHONY: all build supervisors cross image test test-projects test-sdk test-engine29 engine29 lint bench demo engine kube faults soak clean

all: build

build: supervisors
	CGO_ENABLED=0 $(GO) build -trimpath -tags $(EMBED_TAG) -ldflags '$(LDFLAGS)' -o bin/airlock ./cmd/airlock

# The Linux supervisors the CLI embeds: static (CGO_ENABLED=0), gzip-compressed.
supervisors:
	@set -e; for arch in $(SUPERVISOR_ARCHES); do \
	  dir=$(SUPERVISOR_DIR)/linux-$$arch; mkdir -p $$dir; \
	  echo "supervisor linux/$$arch"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -tags $(SUPERVISOR_TAGS) -ldflags '$(LDFLAGS)' -o $$dir/airlock.tmp ./cmd/airlock; \
	  gzip -9 -n -c $$dir/airlock.tmp > $$dir/airlock.gz.tmp; \
	  rm -f $$dir/airlock.tmp; mv -f $$dir/airlock.gz.tmp $$dir/airlock.gz; \
	done

# Every target the CLI and daemon run on, each with the supervisors embedded, into bin/;
# and every package (tests aside) must build for macOS.
cross: supervisors
	@set -e; for t in $(CROSS_TARGETS); do \
	  os=$${t%/*}; arch=$${t#*/}; echo "cross $$t -> bin/airlock-$$os-$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags $(EMBED_TAG) -ldflags '$(LDFLAGS)' -o bin/airlock-$$os-$$arch ./cmd/airlock; \
	done
	CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 $(GO) build ./...

# The airlock image (the Kubernetes backend's init container copies the supervisor from it):
# FROM scratch plus the static linux/$(IMAGE_ARCH) airlock at /airlock, named
# localhost/airlock:$(BUILD_ID) ('+' becomes '_'), written to bin/airlock-image.tar, which
# docker load and ctr images import both accept. Needs no Docker Engine.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
image:
	@mkdir -p bin
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -tags $(SUPERVISOR_TAGS) -ldflags '$(LDFLAGS)' -o bin/.airlock-image-linux-$(IMAGE_ARCH) ./cmd/airlock
	$(GO) run ./tools/mkimage -binary bin/.airlock-image-linux-$(IMAGE_ARCH) -build-id '$(BUILD_ID)' -arch $(IMAGE_ARCH) -o bin/airlock-image.tar
	@rm -f bin/.airlock-image-linux-$(IMAGE_ARCH)

# Everything, race detector on, integration tests against the real Docker Engine included.
# The longest packages are named first so they start first (a long package started last
# would run on alone at the end); supervisor, which needs no Engine, beside e2e. -trimpath
# lets a fresh clone reuse the build cache (half a minute of compiling on 2 cores).
SLOW_PACKAGES := ./e2e/ ./supervisor/ ./control/ ./backend/docker/
GO_TEST := $(GO) test -trimpath -ldflags=-w -race -count=1 $(TEST_TAGS)
test: lint
	$(GO_TEST) $(SLOW_PACKAGES) ./...

# The end-to-end tests of real projects and networks (build tag projects: the presets' PostgreSQL
# and MariaDB on Debian images, compose projects, the egress suite, containment, the shared
# network's shards, a real sshd, the stand-in remote Engine, the go tool as a non-root user
# compiling a module): the most CPU of the suite, apart from make test to keep that
# under five minutes on 2 cores, and run by CI after it (and in the Engine 29 lap).
comma := ,
PROJECTS_TAGS := -tags $(if $(TEST_TAGS),projects$(comma)$(EMBED_TAG),projects)
PROJECTS_E2E := $(shell grep -l '^//go:build projects' e2e/*_test.go 2>/dev/null)
PROJECTS_TESTS := $(shell grep -ho '^func Test[A-Za-z0-9_]*' $(PROJECTS_E2E) /dev/null | sed 's/^func //' | paste -sd'|')
test-projects:
	./scripts/engine.sh
	$(GO) test -trimpath -ldflags=-w -race -count=1 -timeout 30m $(PROJECTS_TAGS) -run '^($(PROJECTS_TESTS))$$' ./e2e/

# The Python SDK's suite (sdk/python/tests, sync and asyncio clients, mypy --strict), build tag
# sdk: each of its tests starts daemons of its own against the real Engine (75 s); apart from make
# test, which it would take past five minutes, and run by CI after it.
SDK_TAGS := -tags $(if $(TEST_TAGS),sdk$(comma)$(EMBED_TAG),sdk)
test-sdk:
	./scripts/engine.sh
	$(GO) test -trimpath -ldflags=-w -race -count=1 $(SDK_TAGS) ./sdk/python/

# The same suite against the current Docker Engine (29, containerd 2, runc 1.3: docs/engines.md),
# which scripts/engine29.sh builds (cached under ~/.cache/airlock-engine29) and starts in the
# network namespace e29 beside the 20.10 Engine. The tests run in that namespace (engine29.sh
# exec: DOCKER_HOST is its socket, and the ports it publishes on 127.0.0.1 are theirs; the Debian
# images the tests make are debootstrapped in the host's, or imported from scripts/debian-image.sh's
# cache in seconds). PKGS narrows it.
PKGS ?= $(SLOW_PACKAGES) ./...
test-engine29: engine29
	./scripts/engine29.sh exec $(GO) test -trimpath -ldflags=-w -race -count=1 -timeout 30m $(PROJECTS_TAGS) $(PKGS)
	./scripts/engine29.sh exec $(GO) test -trimpath -ldflags=-w -race -count=1 $(SDK_TAGS) ./sdk/python/

engine29:
	./scripts/engine.sh
	./scripts/engine29.sh up

# The Kubernetes backend's integration tests (e2e/kube) against the project's own
# two-node cluster (on this one machine), which scripts/kube.sh builds (cached) and starts when it is not up.
test-kube:
	./scripts/engine.sh
	./scripts/kube.sh up
	$(GO) test -race -tags kube -count=1 -timeout 30m ./e2e/kube/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -trimpath ./...
	$(GO) vet -trimpath -tags projects ./e2e/

bench: build
	./scripts/bench.sh

# The fault suite (docs/reliability.md): kills, concurrency, a long series of runs, bad inputs,
# against the real Engine; not part of `make test`. FAULTS_RUNS=100 for the quick mode.
FAULTS_RUNS ?= 1000
faults: build
	./scripts/engine.sh
	AIRLOCK_FAULTS_RUNS=$(FAULTS_RUNS) $(GO) test -tags faults -count=1 -timeout 60m -v ./faults

# The soak (issue 24, docs/reliability.md): every preset with a server and every example, on stock
# Debian images, SOAK_RUNS runs in a row whose command uses the server at once, and 20 at once;
# and the shared network's shard limit at its default (1000 containers on one bridge, issue 25);
# not part of `make test`.
SOAK_RUNS ?= 30
soak: build
	./scripts/engine.sh
	AIRLOCK_SOAK_RUNS=$(SOAK_RUNS) $(GO) test -tags soak -count=1 -timeout 60m -v ./soak

# Starts the Docker Engine when none answers (installing it on Debian when absent).
engine:
	./scripts/engine.sh

# Starts the two-node Kubernetes of the tests (building it on first use, ~7 min on 2 cores);
# scripts/kube.sh says more (down, status, kubeconfig, import).
kube:
	./scripts/kube.sh up

demo: build engine
	./scripts/demo.sh

clean:
	rm -rf bin $(SUPERVISOR_DIR)
