#!/usr/bin/env bash
# engine29.sh: a current Docker Engine (29: moby v2, containerd 2, runc 1.3) beside Debian's 20.10,
# built from the Go module proxy with pinned versions and cached, for airlock's tests (issue 40).
# Linux, root, Debian packages. docs/engines.md says what differs on it.
#
#   scripts/engine29.sh build    builds dockerd and docker-proxy (moby v2.0.0-beta.24), containerd
#                                and containerd-shim-runc-v2 (v2.2.1) and runc (v1.3.3) into the
#                                cache; a no-op when they are there (a stamp names versions and flags).
#   scripts/engine29.sh up       builds when needed, makes the network namespace e29 (loopback up)
#                                and starts containerd and dockerd in it (nsenter --net), each with its
#                                own root, state, sockets and pidfile; waits for the Engine's socket.
#                                A quick no-op when the Engine answers.
#   scripts/engine29.sh down     ends what up started (containers of this Engine first, through its
#                                API), its leftover shims, mounts under its directories, and the
#                                namespace. Keeps the data root (images) for the next up.
#   scripts/engine29.sh clean    down, then removes the data roots (not the build cache).
#   scripts/engine29.sh status   says whether the Engine answers (exit 0) or not (exit 1).
#   scripts/engine29.sh env      prints export lines: DOCKER_HOST (this Engine's socket).
#   scripts/engine29.sh exec CMD...  runs CMD in the namespace e29 with DOCKER_HOST set, so that
#                                ports the Engine publishes on 127.0.0.1 are the caller's loopback,
#                                and AIRLOCK_HOST_NETNS, the namespace up was called in (bound at
#                                /run/airlock-e29/hostnet), where scripts/debian-image.sh reaches
#                                the Debian mirror.
#
# Paths:
#   ${AIRLOCK_ENGINE29_CACHE:-$HOME/.cache/airlock-engine29}/<versions>/bin  the binaries
#   /var/lib/airlock-e29/   docker/ (dockerd's --data-root), containerd/ (its root), etc/
#                           (daemon.json, containerd.toml), logs/ (dockerd.log, containerd.log)
#   /run/airlock-e29/       docker.sock (the Engine), docker/ (--exec-root), dockerd.pid,
#                           containerd/ (its state, containerd.sock), containerd.pid
# Network: the namespace e29 (/var/run/netns/e29), its own loopback, docker0 and iptables. Never the
#   host's: two Engines in one network namespace share docker0 and the DOCKER chains, and stopping
#   one takes the bridge away from the other. `ip netns exec` is not used: it remounts /sys, which
#   hides the cgroups from the Engine; nsenter --net changes the network namespace only. Nothing
#   routes out of the namespace (no registry is reachable from it; test images are built locally).
#   The socket is a file under /run: the host reaches the Engine; published ports are in e29 only
#   (tests that dial them run in e29: exec).
set -euo pipefail

prog=engine29.sh
moby_version=v2.0.0-beta.24
containerd_version=v2.2.1
runc_version=v1.3.3
versions=moby-$moby_version+containerd-$containerd_version+runc-$runc_version
cache=${AIRLOCK_ENGINE29_CACHE:-${HOME:-/root}/.cache/airlock-engine29}/$versions
bin=$cache/bin
ns=e29
state=/var/lib/airlock-e29
run=/run/airlock-e29
sock=$run/docker.sock
ctrd_sock=$run/containerd/containerd.sock
logs=$state/logs
# Build tags and flags; the stamp of each binary holds them, so a change rebuilds.
moby_tags="exclude_graphdriver_btrfs exclude_disk_quota no_btrfs"
containerd_tags="no_btrfs"
runc_tags="seccomp"

say() { echo "$prog: $*" >&2; }
die() {
  say "$*"
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
need_root() { [ "$(id -u)" = 0 ] || die "cannot $1: must run as root"; }

### build

# go_install NAME PKG@VERSION TAGS LDFLAGS: go install into $bin unless built with these arguments.
go_install() {
  local name=$1 pkg=$2 tags=$3 ld=$4 stamp t tmp
  stamp="$pkg tags=$tags ldflags=$ld $(go env GOVERSION)"
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.stamp" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  say "building $name ($pkg)"
  t=$(now)
  tmp=$(mktemp -d "$cache/.gobin.XXXXXX")
  if ! GOBIN=$tmp CGO_ENABLED=0 GOWORK=off GOFLAGS= go install -trimpath -tags "$tags" -ldflags "$ld" "$pkg"; then
    rm -rf "$tmp"
    die "cannot build $name (go output above)"
  fi
  mv -f "$tmp/$(basename "${pkg%@*}")" "$bin/$name"
  rm -rf "$tmp"
  echo "$stamp" >"$bin/$name.stamp"
  say "built $name in $(since "$t")"
}

# build_runc: runc has replace directives, which go install refuses: its module is downloaded,
# copied, its vendor/ dropped with the replace of selinux (it points into a directory the module
# zip lacks), and built with CGO and libseccomp.
build_runc() {
  local mod=github.com/opencontainers/runc@$runc_version stamp t dir work
  stamp="$mod tags=$runc_tags cgo $(go env GOVERSION)"
  if [ -x "$bin/runc" ] && [ "$(cat "$bin/runc.stamp" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  if ! pkg-config --exists libseccomp 2>/dev/null; then
    say "installing libseccomp-dev (runc's seccomp support)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev pkg-config >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev pkg-config >/dev/null; } ||
      die "cannot install libseccomp-dev"
  fi
  command -v gcc >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null || die "cannot install gcc"
  say "building runc ($mod)"
  t=$(now)
  dir=$(cd "$cache" && GOWORK=off GOFLAGS= go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -d "$dir" ] || die "cannot download $mod"
  work=$(mktemp -d "$cache/.runc.XXXXXX")
  cp -a "$dir/." "$work/"
  chmod -R u+w "$work"
  rm -rf "$work/vendor"
  sed -i '/^replace github.com\/opencontainers\/selinux/d' "$work/go.mod"
  if ! (cd "$work" && CGO_ENABLED=1 GOWORK=off GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -tags "$runc_tags" \
    -ldflags "-s -w -X main.version=${runc_version#v}" -o "$bin/runc.tmp" .); then
    rm -rf "$work" "$bin/runc.tmp"
    die "cannot build runc (go output above)"
  fi
  rm -rf "$work"
  mv -f "$bin/runc.tmp" "$bin/runc"
  echo "$stamp" >"$bin/runc.stamp"
  say "built runc in $(since "$t")"
}

cmd_build() {
  local t
  command -v go >/dev/null 2>&1 || die "cannot build: no go command on PATH"
  t=$(now)
  mkdir -p "$bin"
  exec 8>>"$cache/.lock"
  flock 8
  go_install dockerd github.com/moby/moby/v2/cmd/dockerd@$moby_version "$moby_tags" \
    "-s -w -X github.com/moby/moby/v2/dockerversion.Version=${moby_version#v} -X github.com/moby/moby/v2/dockerversion.GitCommit=$moby_version"
  # (the Engine starts one per published port; Debian's 20.10 one lacks -use-listen-fd)
  go_install docker-proxy github.com/moby/moby/v2/cmd/docker-proxy@$moby_version "$moby_tags" "-s -w"
  go_install containerd github.com/containerd/containerd/v2/cmd/containerd@$containerd_version "$containerd_tags" \
    "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version"
  go_install containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version "$containerd_tags" "-s -w"
  build_runc
  flock -u 8
  say "phase build: $(since "$t")"
}

### up and down

# running PID: the process exists and is not a zombie.
running() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# alive NAME: the process whose pid NAME.pid holds runs and is our binary (a recycled pid is not ours).
alive() {
  local pid
  pid=$(cat "$run/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && running "$pid" || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$bin/$1" ]
}

answers() { [ -S "$sock" ] && curl -fsS --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1; }

ensure_ns() {
  if [ ! -e "/var/run/netns/$ns" ]; then
    ip netns add "$ns" || die "cannot make the network namespace $ns"
  fi
  nsenter --net="/var/run/netns/$ns" ip link set lo up || die "cannot bring up loopback in $ns"
}

# keep_hostnet: the caller's network namespace (the host's, with the network) bound at
# $run/hostnet, for what the tests run in e29 must do outside (exec's AIRLOCK_HOST_NETNS).
keep_hostnet() {
  mountpoint -q "$run/hostnet" 2>/dev/null && return 0
  [ "$(readlink /proc/$$/ns/net)" != "$(readlink "/var/run/netns/$ns" 2>/dev/null || echo none)" ] ||
    die "cannot start from inside the namespace $ns"
  mkdir -p "$run"
  touch "$run/hostnet"
  mount --bind "/proc/$$/ns/net" "$run/hostnet" || die "cannot keep the host's network namespace at $run/hostnet"
}

write_configs() {
  mkdir -p "$state/etc" "$logs" "$run/containerd" "$state/containerd" "$state/docker"
  # CRI is off (this containerd serves dockerd only); its own sockets, root and state.
  cat >"$state/etc/containerd.toml" <<EOF
version = 3
root = "$state/containerd"
state = "$run/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$ctrd_sock"
[ttrpc]
  address = "$ctrd_sock.ttrpc"
[debug]
  address = "$run/containerd/debug.sock"
EOF
  # Not /etc/docker/daemon.json (the 20.10 Engine's). The released Engine 29 refuses API versions
  # below 1.44 (Docker 25's); this module still defaults to 1.40.
  echo '{"min-api-version": "1.44"}' >"$state/etc/daemon.json"
}

# start NAME CMD...: CMD in the namespace, a session of its own, output to logs/NAME.log.
start() {
  local name=$1
  shift
  [ ! -f "$logs/$name.log" ] || mv -f "$logs/$name.log" "$logs/$name.log.1"
  PATH=$bin:$PATH setsid nsenter --net="/var/run/netns/$ns" -- "$@" >"$logs/$name.log" 2>&1 </dev/null 8>&- 9>&- &
}

wait_for() {
  local secs=$1 name=$2 what=$3 i
  shift 3
  for ((i = 0; i < secs * 5; i++)); do
    "$@" && return 0
    sleep 0.2
  done
  say "cannot start the Engine: no $what within $secs s; last lines of $logs/$name.log:"
  tail -n 25 "$logs/$name.log" >&2 || true
  exit 1
}

cmd_up() {
  need_root "start the Engine"
  local t
  t=$(now)
  answers && alive dockerd && {
    keep_hostnet
    say "up: DOCKER_HOST=unix://$sock"
    return 0
  }
  for c in curl ip nsenter iptables; do command -v $c >/dev/null 2>&1 || die "cannot start: $c missing (scripts/engine.sh installs it)"; done
  cmd_build
  mkdir -p "$run" "$state"
  exec 9>>"$run/.lock"
  flock 9
  ensure_ns
  keep_hostnet
  write_configs
  if ! alive containerd; then
    rm -f "$ctrd_sock" "$ctrd_sock.ttrpc"
    start containerd "$bin/containerd" --config "$state/etc/containerd.toml" --log-level warn
    echo $! >"$run/containerd.pid"
    wait_for 30 containerd "containerd socket" test -S "$ctrd_sock"
  fi
  if ! alive dockerd; then
    rm -f "$sock"
    start dockerd "$bin/dockerd" --config-file "$state/etc/daemon.json" \
      --data-root "$state/docker" --exec-root "$run/docker" --pidfile "$run/dockerd.pid" \
      --containerd "$ctrd_sock" -H "unix://$sock"
    wait_for 60 dockerd "answer on $sock" answers
  fi
  say "up in $(since "$t"): DOCKER_HOST=unix://$sock ($(curl -fsS --unix-socket "$sock" http://localhost/version | sed -n 's/.*"Version":"\([^"]*\)".*"ApiVersion":"\([^"]*\)".*/Engine \1, API \2/p'))"
}

# stop NAME SECS: SIGTERM, then SIGKILL after SECS.
stop() {
  local pid i
  alive "$1" || {
    rm -f "$run/$1.pid"
    return 0
  }
  pid=$(cat "$run/$1.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < $2 * 5; i++)); do
    running "$pid" || break
    sleep 0.2
  done
  if running "$pid"; then
    say "$1 (pid $pid) did not end within $2 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$run/$1.pid"
}

# our_shims: pids of containerd shims of this Engine's containerd (their command line names its socket).
our_shims() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $cmd == *containerd-shim* && $cmd == *"$ctrd_sock"* ]] && echo "${p#/proc/}"
  done
  return 0
}

cmd_down() {
  need_root "stop the Engine"
  local t ids p m
  t=$(now)
  [ -d "$run" ] || {
    say "not up"
    return 0
  }
  exec 9>>"$run/.lock"
  flock 9
  if answers; then
    # Containers end with the Engine otherwise, but their shims and mounts may not.
    ids=$(curl -fsS --unix-socket "$sock" 'http://localhost/containers/json?all=1' | grep -o '"Id":"[0-9a-f]*"' | cut -d'"' -f4 || true)
    for p in $ids; do curl -fsS -X DELETE --max-time 30 --unix-socket "$sock" "http://localhost/containers/$p?force=1&v=1" >/dev/null 2>&1 || true; done
  fi
  stop dockerd 20
  stop containerd 10
  for p in $(our_shims); do
    say "ending leftover shim $p"
    kill -KILL "$p" 2>/dev/null || true
  done
  awk -v a="$run/" -v b="$state/" 'index($2, a) == 1 || index($2, b) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
  done
  if [ -e "/var/run/netns/$ns" ]; then ip netns del "$ns" || say "cannot delete the network namespace $ns"; fi
  rm -f "$sock" "$ctrd_sock" "$ctrd_sock.ttrpc"
  say "down in $(since "$t")"
}

cmd_clean() {
  cmd_down
  rm -rf "$state" "$run"
  say "removed $state and $run"
}

cmd_status() {
  if answers; then
    echo "$prog: up: DOCKER_HOST=unix://$sock"
    return 0
  fi
  echo "$prog: down"
  return 1
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

case ${1:-} in
build) cmd_build ;;
up) cmd_up ;;
down) cmd_down ;;
clean) cmd_clean ;;
status) cmd_status ;;
env)
  echo "export DOCKER_HOST=unix://$sock"
  ;;
exec)
  shift
  [ $# -gt 0 ] || die "usage: $prog exec CMD..."
  answers || die "cannot run $1: the Engine does not answer (scripts/engine29.sh up)"
  need_root "enter the namespace $ns"
  DOCKER_HOST=unix://$sock AIRLOCK_HOST_NETNS=$run/hostnet exec nsenter --net="/var/run/netns/$ns" -- "$@"
  ;;
bin) echo "$bin" ;;
*) usage ;;
esac
