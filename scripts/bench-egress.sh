#!/usr/bin/env bash
# Egress benchmark, run by `make bench` through scripts/bench.sh: `airlock run -- true` with
# `[sandbox.egress]` against the same run without, interleaved pairs, median of their ratios.
# Records docs/benchmarks.md "## Egress".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/egress -airlock bin/airlock -command "scripts/bench-egress.sh" "$@"
