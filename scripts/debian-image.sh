#!/usr/bin/env bash
# Usage: scripts/debian-image.sh TAG [PACKAGE...]
#
# Makes a local Debian bookworm image TAG (minbase plus PACKAGE...) for tests and benches, once:
# when an image TAG exists nothing is done, so a tag names one recipe (bump its suffix, e.g.
# airlock-test/debian-postgres:bookworm-1 -> -2, when the packages change). The image is
# built without a registry: debootstrap --variant=minbase into a temporary dir, then
# `docker import`. debootstrap is installed with apt when missing (which needs root, as
# debootstrap itself does). Concurrent calls for one tag build it once (flock).
#
# The root file system's tar is kept in ${AIRLOCK_DEBIAN_CACHE:-$HOME/.cache/airlock-debian}/TAG.tar
# (TAG with / and : as _), so that another Engine of this machine (scripts/engine29.sh's, whose
# network namespace reaches no mirror) imports the same image in seconds, without debootstrap.
#
# Environment: DEBIAN_MIRROR (default: the Debian URI in /etc/apt/sources*, else
# debootstrap's own default mirror), DEBIAN_SUITE (default bookworm), AIRLOCK_DEBIAN_CACHE,
# AIRLOCK_HOST_NETNS (below).
set -euo pipefail

if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: $0 TAG [PACKAGE...]" >&2
  exit 2
fi
image=$1
shift
suite=${DEBIAN_SUITE:-bookworm}
include=$(IFS=,; echo "$*")

exists() { docker image inspect "$image" >/dev/null 2>&1; }
exists && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "debian-image.sh: building $image needs root (debootstrap); run as root or build it once with sudo $0 $image $*" >&2
  exit 1
fi

debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '$1 == "URIs:" && $2 ~ /\/debian\/?$/ { print $2; exit }')
  [ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }')
  echo "$m"
}

# One build per tag at a time; whoever waited finds the image made.
lock="${TMPDIR:-/tmp}/airlock-debian-image.$(printf '%s' "$image" | tr -c 'A-Za-z0-9._-' '_').lock"
exec 9>"$lock"
flock 9
exists && exit 0

import_tar() {
  docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -m "airlock: Debian $suite minbase${include:+ + $include}" "$1" "$image" >/dev/null
}
cache=${AIRLOCK_DEBIAN_CACHE:-${HOME:-/root}/.cache/airlock-debian}
cached=$cache/$(printf '%s' "$image" | tr '/:' '__').tar
if [ -s "$cached" ]; then
  start=$(date +%s)
  import_tar "$cached"
  echo "debian-image.sh: imported $image from $cached in $(($(date +%s) - start)) s" >&2
  exit 0
fi

rootfs=
log=$(mktemp)
trap 'rm -rf "$log" ${rootfs:+"$rootfs"} ${cached:+"$cached.tmp"}' EXIT

# With AIRLOCK_HOST_NETNS (a network namespace's file: scripts/engine29.sh exec sets it, as it runs
# the tests in its Engine's namespace, which reaches no mirror), apt and debootstrap run in that
# namespace: only they need the network; docker import reaches the Engine through its socket.
hostnet=()
if [ -n "${AIRLOCK_HOST_NETNS:-}" ]; then
  hostnet=(nsenter --net="$AIRLOCK_HOST_NETNS" --)
fi
# Tests build several images at once: one install at a time (flock), and apt waits for a lock
# another apt holds instead of failing.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq)
  (
    flock 9
    command -v "$1" >/dev/null 2>&1 && exit 0
    "${hostnet[@]}" "${apt[@]}" install "$@" >/dev/null 2>&1 ||
      { "${hostnet[@]}" "${apt[@]}" update >/dev/null && "${hostnet[@]}" "${apt[@]}" install "$@" >/dev/null; }
  ) 9>/var/lock/airlock-debian-image-apt.lock
}
command -v debootstrap >/dev/null 2>&1 || { echo "debian-image.sh: installing debootstrap" >&2; apt_install debootstrap; }
mirror=$(debian_mirror)
rootfs=$(mktemp -d /var/tmp/airlock-debian-rootfs.XXXXXX)
echo "debian-image.sh: building $image (debootstrap $suite from ${mirror:-its default mirror}${include:+, with $include})" >&2
start=$(date +%s)
if ! "${hostnet[@]}" debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$rootfs" ${mirror:+"$mirror"} >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  exit 1
fi
# Nothing from the build's apt caches is needed in the image.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
mkdir -p "$cache"
tar -C "$rootfs" -cf "$cached.tmp" .
mv -f "$cached.tmp" "$cached"
import_tar "$cached"
echo "debian-image.sh: built $image in $(($(date +%s) - start)) s" >&2
