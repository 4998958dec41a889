#!/usr/bin/env bash
# Many alive at once (issue 25), run by `make bench` through scripts/bench.sh: N `airlock up -d`
# sandboxes (one sidecar daemon each) alive together, an exec in each, `ps` with all of them, the
# control daemon's memory and descriptors, `down` of all and nothing left. Records
# docs/benchmarks.md "## Many alive at once". BENCH_ALIVE_N (200).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/scale -airlock bin/airlock -up "${BENCH_ALIVE_N:-200}" -command "scripts/bench-alive.sh" "$@"
