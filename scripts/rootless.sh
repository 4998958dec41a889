#!/usr/bin/env bash
# rootless.sh: a rootless Docker Engine (Debian 12's docker.io 20.10 under rootlesskit) beside the
# machine's root Engine, for airlock's tests (issue 40; docs/engines.md#rootless-docker).
# Linux, root (it makes a user and starts the Engine as that user), Debian packages.
#
#   scripts/rootless.sh up       installs what is missing (docker.io's dockerd-rootless.sh,
#                                rootlesskit, slirp4netns, uidmap), makes the user $user with
#                                /etc/subuid and /etc/subgid ranges and /run/user/<uid>, lets its
#                                group open /dev/net/tun (slirp4netns's tap) when it cannot, and starts
#                                dockerd-rootless.sh as that user; waits for its socket. A quick
#                                no-op when the Engine answers.
#   scripts/rootless.sh down     removes this Engine's containers (through its API), stops it, ends
#                                whatever of the user's processes is left (by pid: every process of
#                                that user was started through this script). Keeps the data root
#                                (images) for the next up.
#   scripts/rootless.sh status   says whether the Engine answers (exit 0) or not (exit 1).
#   scripts/rootless.sh env      prints export lines: DOCKER_HOST (this Engine's socket).
#   scripts/rootless.sh exec CMD...  runs CMD as the user, with DOCKER_HOST, HOME, USER and
#                                XDG_RUNTIME_DIR set: the socket is the user's (0660, owner the user), and
#                                airlock's control daemon runs as the CLI's user. A test binary built
#                                as root runs this way (go test -c; see docs/engines.md).
#   scripts/rootless.sh images [TAG PACKAGE...]  imports the tests' Debian images into this Engine as root
#                                with scripts/debian-image.sh (from ~/.cache/airlock-debian of root
#                                when it holds their tar; debootstrap needs root).
#   scripts/rootless.sh docker ARGS...  the docker CLI on this Engine.
#
# What it shares with the root Engine: nothing but the binaries. The rootless Engine's network is
# rootlesskit's own network namespace (slirp4netns), with its own docker0 and iptables; its /etc
# and /run are copied up (tmpfs) in its own mount namespace; its data root, exec root, containerd,
# socket and pidfile are the user's:
#   /home/$user/.local/share/docker   the data root (images, containers, volumes)
#   /run/user/<uid>/docker.sock       the Engine's socket: DOCKER_HOST=unix:///run/user/<uid>/docker.sock
#   /run/user/<uid>/docker/           the exec root (and its containerd's socket)
#   /run/user/<uid>/rootless.log      dockerd-rootless.sh's output (rootlesskit, dockerd, containerd)
#   /run/user/<uid>/rootless.pid      the pid of rootlesskit (the process this script starts)
# Ports a container publishes on 127.0.0.1 are bound by rootlesskit (port driver "builtin") in the
# network namespace up was called in: the caller's loopback.
set -euo pipefail

prog=rootless.sh
user=${AIRLOCK_ROOTLESS_USER:-airlock-rootless}
here=$(cd "$(dirname "$0")" && pwd)
contrib=/usr/share/docker.io/contrib

# The Debian images the e2e tests use (e2e/daemon_user_test.go), with their packages.
default_images=(
  "airlock-test/debian-postgres:bookworm-1 postgresql"
  "airlock-bench/debian-redis:bookworm-1 redis-server redis-tools make"
)

say() { echo "$prog: $*" >&2; }
die() {
  say "$*"
  exit 1
}
need_root() { [ "$(id -u)" = 0 ] || die "cannot $1: must run as root"; }

uid() { id -u "$user" 2>/dev/null; }
home() { getent passwd "$user" | cut -d: -f6; }
xdg() { echo "/run/user/$(uid)"; }
sock() { echo "$(xdg)/docker.sock"; }
host() { echo "unix://$(sock)"; }

answers() {
  id "$user" >/dev/null 2>&1 || return 1
  [ -S "$(sock)" ] && curl -fsS --max-time 2 --unix-socket "$(sock)" http://localhost/_ping >/dev/null 2>&1
}

# as_user CMD...: CMD as the user, in a clean environment of the user's. setpriv execs (no PAM
# session, no parent left waiting), so the pid of a background as_user_argv command is CMD's.
as_user_argv() {
  local x
  x=$(xdg)
  argv=(setpriv --reuid="$(uid)" --regid="$(id -g "$user")" --init-groups --
    env -i HOME="$(home)" USER="$user" LOGNAME="$user" XDG_RUNTIME_DIR="$x"
    PATH="$contrib:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    LANG=C.UTF-8 DOCKER_HOST="unix://$x/docker.sock")
}
as_user() {
  local argv
  as_user_argv
  exec "${argv[@]}" "$@"
}

install_missing() {
  local pkgs=()
  [ -x "$contrib/dockerd-rootless.sh" ] && command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
  command -v rootlesskit >/dev/null 2>&1 || pkgs+=(rootlesskit)
  command -v slirp4netns >/dev/null 2>&1 || pkgs+=(slirp4netns)
  command -v newuidmap >/dev/null 2>&1 && command -v newgidmap >/dev/null 2>&1 || pkgs+=(uidmap)
  command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
  command -v curl >/dev/null 2>&1 || pkgs+=(curl)
  command -v setpriv >/dev/null 2>&1 || pkgs+=(util-linux)
  if [ ${#pkgs[@]} -gt 0 ]; then
    say "installing ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${pkgs[@]}" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq "${pkgs[@]}" >/dev/null; } ||
      die "cannot install ${pkgs[*]}"
  fi
}

# next_range FILE: the first start of 65536 ids above every range FILE holds (at least 100000).
next_range() {
  awk -F: 'BEGIN { n = 100000 } NF == 3 && $2 + $3 > n { n = $2 + $3 } END { print n }' "$1"
}

ensure_user() {
  local f start was
  if ! id "$user" >/dev/null 2>&1; then
    say "making the user $user"
    useradd --create-home --shell /bin/bash --user-group "$user" || die "cannot make the user $user"
  fi
  # Not in the group docker: this user cannot reach the root Engine's socket by mistake.
  if id -nG "$user" | tr ' ' '\n' | grep -qx docker; then
    gpasswd -d "$user" docker >/dev/null || die "cannot take $user out of the group docker"
  fi
  for f in /etc/subuid /etc/subgid; do
    touch "$f"
    if ! grep -q "^$user:" "$f" && ! grep -q "^$(uid):" "$f"; then
      start=$(next_range "$f")
      echo "$user:$start:65536" >>"$f"
      say "gave $user the ids $start-$((start + 65535)) in $f"
    fi
  done
  install -d -m 0700 -o "$user" -g "$user" "$(xdg)"
  # slirp4netns needs a tap device, made in rootlesskit's namespaces (ip tuntap add) through
  # /dev/net/tun; a Debian with udev has it 0666, this machine's devtmpfs 0600 root: the tap fails
  # with "open: Permission denied". The user's group gets it (0660), no one else.
  if ! setpriv --reuid="$(uid)" --regid="$(id -g "$user")" --init-groups -- test -r /dev/net/tun -a -w /dev/net/tun; then
    [ -c /dev/net/tun ] || die "no /dev/net/tun (the kernel's TUN driver): slirp4netns needs it"
    was=$(stat -c '%A %U:%G' /dev/net/tun)
    { chgrp "$user" /dev/net/tun && chmod g+rw /dev/net/tun; } || die "cannot let $user open /dev/net/tun"
    say "gave the group $user read and write on /dev/net/tun (it was $was)"
  fi
}

cmd_up() {
  need_root "start the rootless Engine"
  install_missing
  ensure_user
  local x pid i
  x=$(xdg)
  if answers; then
    say "up: DOCKER_HOST=$(host)"
    return 0
  fi
  if [ -s "$x/rootless.pid" ] && kill -0 "$(cat "$x/rootless.pid")" 2>/dev/null; then
    die "rootlesskit (pid $(cat "$x/rootless.pid")) runs but the Engine does not answer: scripts/rootless.sh down first; see $x/rootless.log"
  fi
  [ ! -f "$x/rootless.log" ] || mv -f "$x/rootless.log" "$x/rootless.log.1"
  rm -f "$x/docker.sock" "$x/docker.pid"
  # As the user, in a session of its own. The child's /etc and /run are copied up by
  # dockerd-rootless.sh; --state-dir keeps rootlesskit's API socket where down finds it.
  local argv
  as_user_argv
  setsid "${argv[@]}" DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS="--state-dir=$x/rootlesskit" \
    "$contrib/dockerd-rootless.sh" >"$x/rootless.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$x/rootless.pid"
  for ((i = 0; i < 300; i++)); do
    answers && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if ! answers; then
    say "cannot start the rootless Engine; last lines of $x/rootless.log:"
    tail -n 30 "$x/rootless.log" >&2 || true
    exit 1
  fi
  say "up: DOCKER_HOST=$(host) ($(curl -fsS --unix-socket "$(sock)" http://localhost/version |
    sed -n 's/.*"Version":"\([^"]*\)".*"ApiVersion":"\([^"]*\)".*/Engine \1, API \2/p'), rootless)"
}

# user_pids: every process of the user (all of them started through this script).
user_pids() {
  local u p
  u=$(uid) || return 0
  for p in /proc/[0-9]*; do
    [ "$(stat -c %u "$p" 2>/dev/null)" = "$u" ] && echo "${p#/proc/}"
  done
  return 0
}

cmd_down() {
  need_root "stop the rootless Engine"
  id "$user" >/dev/null 2>&1 || {
    say "not up (no user $user)"
    return 0
  }
  local x ids p pid i left
  x=$(xdg)
  if answers; then
    ids=$(curl -fsS --unix-socket "$(sock)" 'http://localhost/containers/json?all=1' | grep -o '"Id":"[0-9a-f]*"' | cut -d'"' -f4 || true)
    for p in $ids; do curl -fsS -X DELETE --max-time 30 --unix-socket "$(sock)" "http://localhost/containers/$p?force=1&v=1" >/dev/null 2>&1 || true; done
  fi
  if [ -s "$x/rootless.pid" ]; then
    pid=$(cat "$x/rootless.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
      done
      if kill -0 "$pid" 2>/dev/null; then
        say "rootlesskit (pid $pid) did not end within 20 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    rm -f "$x/rootless.pid"
  fi
  # Left over: shims, airlock's control daemons the tests started as the user, slirp4netns.
  sleep 0.5
  left=$(user_pids)
  if [ -n "$left" ]; then
    say "ending the user's leftover processes: $(echo "$left" | tr '\n' ' ')"
    for p in $left; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 2
    for p in $(user_pids); do kill -KILL "$p" 2>/dev/null || true; done
  fi
  rm -f "$x/docker.sock" "$x/docker.pid"
  say "down"
}

cmd_images() {
  need_root "import the images (debian-image.sh needs root when it must build)"
  answers || die "the rootless Engine does not answer (scripts/rootless.sh up)"
  local spec
  if [ $# -gt 0 ]; then
    DOCKER_HOST=$(host) "$here/debian-image.sh" "$@"
    return
  fi
  for spec in "${default_images[@]}"; do
    # shellcheck disable=SC2086 # TAG PACKAGE...
    DOCKER_HOST=$(host) "$here/debian-image.sh" $spec
  done
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status)
  if answers; then
    echo "$prog: up: DOCKER_HOST=$(host)"
  else
    echo "$prog: down"
    exit 1
  fi
  ;;
env)
  id "$user" >/dev/null 2>&1 || die "no user $user (scripts/rootless.sh up)"
  echo "export DOCKER_HOST=$(host)"
  ;;
exec)
  shift
  [ $# -gt 0 ] || die "usage: $prog exec CMD..."
  answers || die "cannot run $1: the rootless Engine does not answer (scripts/rootless.sh up)"
  need_root "run as $user"
  as_user "$@"
  ;;
images)
  shift
  cmd_images "$@"
  ;;
docker)
  shift
  answers || die "the rootless Engine does not answer (scripts/rootless.sh up)"
  DOCKER_HOST=$(host) docker "$@"
  ;;
*) usage ;;
esac
