#!/usr/bin/env bash
# Sidecar CI job benchmark (issue 12), run by `make bench` through scripts/bench.sh:
# `airlock run -- make test` with a ready-gated [daemons.redis] (the redis preset), against
# its one-container floor (one `docker run --rm` that starts redis-server in the background,
# waits for it and runs make test) and docker-compose 1.29 with a healthcheck-gated redis
# service, interleaved in one run. Records docs/benchmarks.md "## Redis CI job".
#
# The Debian image (redis-server, redis-tools, make) is built here when its tag is absent:
# debootstrap --variant=minbase into a temporary dir, then `docker import`. debootstrap and
# docker-compose (a baseline only) are installed with apt when missing; without
# docker-compose its rows are skipped. Environment: AIRLOCK_BENCH_REDIS_IMAGE (the tag),
# DEBIAN_MIRROR (default: the Debian URI in /etc/apt/sources*, else deb.debian.org).
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

debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '$1 == "URIs:" && $2 ~ /\/debian\/?$/ { print $2; exit }')
  [ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }')
  echo "${m:-http://deb.debian.org/debian}"
}

rootfs=
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" ${rootfs:+"$rootfs"}' EXIT

if ! docker image inspect "$image" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null 2>&1 || { echo "bench-redis.sh: installing debootstrap" >&2; apt_install debootstrap; }
  mirror=$(debian_mirror)
  rootfs=$(mktemp -d /var/tmp/airlock-bench-rootfs.XXXXXX)
  echo "bench-redis.sh: building $image (debootstrap bookworm from $mirror)" >&2
  start=$(date +%s)
  if ! debootstrap --variant=minbase --include=redis-server,redis-tools,make bookworm "$rootfs" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
    tail -n 30 "$tmp/debootstrap.log" >&2
    exit 1
  fi
  # Nothing from the build's apt caches is needed in the image.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -m "airlock bench: Debian bookworm minbase + redis-server, redis-tools, make" - "$image" >/dev/null
  rm -rf "$rootfs"
  rootfs=
  echo "bench-redis.sh: built $image in $(($(date +%s) - start)) s" >&2
fi

compose=
if command -v docker-compose >/dev/null 2>&1 || { echo "bench-redis.sh: installing docker-compose (baseline only)" >&2; apt_install docker-compose; }; then
  compose=$(command -v docker-compose || true)
fi
[ -n "$compose" ] || echo "bench-redis.sh: docker-compose unavailable; its rows are skipped" >&2

"$GO" build -o "$tmp/benchredis" ./internal/benchredis
"$tmp/benchredis" -airlock bin/airlock -image "$image" -compose "$compose" -doc docs/benchmarks.md -command "scripts/bench-redis.sh" "$@"
