#!/usr/bin/env bash
# Many at once (issue 25), run by `make bench` through scripts/bench.sh: N concurrent `airlock run`
# against N concurrent `docker run --rm` on the local busybox image, exit codes checked, nothing left,
# the control daemon's peak RSS. Records docs/benchmarks.md "## Many at once". BENCH_SCALE_N (100).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/scale -airlock bin/airlock -n "${BENCH_SCALE_N:-100}" -command "scripts/bench-scale.sh" "$@"
