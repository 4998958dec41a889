#!/usr/bin/env bash
# Pause and unpause (issue 42), run by `make bench` through scripts/bench.sh: an `up -d` sandbox
# with a counting daemon and a service, paused and unpaused 20 times through the API and by the
# CLI (medians against the targets of 100 ms), what it costs while paused (CPU, memory) and that
# the daemon's state is kept. Records docs/benchmarks.md "## Pause and unpause".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/pause -airlock bin/airlock -command "scripts/bench-pause.sh" "$@"
