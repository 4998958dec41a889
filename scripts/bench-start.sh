#!/usr/bin/env bash
# The CLI's start, run by `make bench` through scripts/bench.sh: the sum of its packages' init times and
# the wall time of `airlock version` against /bin/true's. Records docs/benchmarks.md "## CLI start".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
go run ./bench/start -airlock bin/airlock -command "scripts/bench-start.sh" "$@"
