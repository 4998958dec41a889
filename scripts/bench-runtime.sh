#!/usr/bin/env bash
# Runtime benchmarks, run by `make bench` through scripts/bench.sh: `airlock run -- true`
# against `docker run --rm IMAGE true`, and `airlock exec` against `docker exec`, on the
# local busybox image, interleaved in one run. Records docs/benchmarks.md "## Runtime".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/runtime -airlock bin/airlock -command "scripts/bench-runtime.sh" "$@"
