#!/usr/bin/env bash
# Jobs with a daemon slow to stop (issue 24): a plain redis-server and memcached, each job run by
# `airlock run`, `airlock run --wait` and its one-container floor, interleaved; records
# docs/benchmarks.md "## Jobs with a daemon slow to stop". Run by `make bench` through
# scripts/bench.sh. The Debian images are built once by scripts/debian-image.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
redis=${AIRLOCK_BENCH_REDIS_IMAGE:-airlock-bench/debian-redis:bookworm-1}
memcached=${AIRLOCK_BENCH_MEMCACHED_IMAGE:-airlock-bench/debian-memcached:bookworm-1}
./scripts/debian-image.sh "$redis" redis-server redis-tools make
./scripts/debian-image.sh "$memcached" memcached
go run ./bench/slowstop -airlock bin/airlock -redis-image "$redis" -memcached-image "$memcached" -command "scripts/bench-slowstop.sh" "$@"
