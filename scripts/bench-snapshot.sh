#!/usr/bin/env bash
# Snapshots and forks (docs/snapshots.md), through the Python SDK against a daemon of its own: a
# sandbox with 100 MB of changed files (100 files of 1 MiB of random data in /tmp/data), then the
# time of a snapshot of it, of a create from that snapshot (to ready) against a cold create of the
# manifest's image, and of a fork ×10 (to all ten ready), every copy checked independent (a file
# each writes is in no other, each has the 100 files). Prints the figures docs/benchmarks.md
# "## Snapshots and forks" records. It takes the machine for about a minute. Needs a Docker Engine
# and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
image=$(go run ./tools/mkbusybox)
exec env AIRLOCK_BINARY="$PWD/bin/airlock" AIRLOCK_TEST_IMAGE="$image" PYTHONDONTWRITEBYTECODE=1 \
  python3 scripts/bench_snapshot.py "$@"
