#!/usr/bin/env bash
# Warm pool benchmarks, run by `make bench` through scripts/bench.sh: a warm `airlock run -- true`
# (a parked sandbox claimed) and a cold one with an empty pool against `docker run --rm IMAGE true`,
# 20 concurrent runs against a pool of 4, and the idle cost of a parked sandbox. Records
# docs/benchmarks.md "## Warm pool".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/pool -airlock bin/airlock -command "scripts/bench-pool.sh" "$@"
