#!/usr/bin/env bash
# Sidecar CI job benchmark (issue 12), run by `make bench` through scripts/bench.sh:
# `airlock run -- make test` with a ready-gated [daemons.redis] (the redis preset), against
# its one-container floor (one `docker run --rm` that starts redis-server in the background,
# waits for it and runs make test) and docker-compose 1.29 with a healthcheck-gated redis
# service, interleaved in one run. Records docs/benchmarks.md "## Redis CI job".
#
# The Debian image (redis-server, redis-tools, make) is built by scripts/debian-image.sh
# when its tag is absent. docker-compose (a baseline only) is installed with apt when
# missing; without docker-compose its rows are skipped. Environment:
# AIRLOCK_BENCH_REDIS_IMAGE (the tag), DEBIAN_MIRROR (see scripts/debian-image.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
image=${AIRLOCK_BENCH_REDIS_IMAGE:-airlock-bench/debian-redis:bookworm-1}
[ -x bin/airlock ] || make build
./scripts/engine.sh

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "bench-redis.sh: missing $*; run as root or install it" >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null; }
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

./scripts/debian-image.sh "$image" redis-server redis-tools make

compose=
if command -v docker-compose >/dev/null 2>&1 || { echo "bench-redis.sh: installing docker-compose (baseline only)" >&2; apt_install docker-compose; }; then
  compose=$(command -v docker-compose || true)
fi
[ -n "$compose" ] || echo "bench-redis.sh: docker-compose unavailable; its rows are skipped" >&2

"$GO" build -o "$tmp/benchredis" ./bench/redis
"$tmp/benchredis" -airlock bin/airlock -image "$image" -compose "$compose" -doc docs/benchmarks.md -command "scripts/bench-redis.sh" "$@"
