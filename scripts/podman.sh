#!/usr/bin/env bash
# Usage: scripts/podman.sh up | down | status | env | exec CMD... | images [TAG...] | podman ARGS...
#
# Podman (Debian 12's podman 4.3, rootful) as a Docker-compatible Engine for airlock's tests
# (docs/engines.md#podman), beside the machine's Docker Engine and sharing nothing with it:
#   - its own storage (--root $state/storage, --runroot $run/runroot), network configuration
#     and tmpdir, so its images, containers and networks are not Docker's;
#   - its own network namespace ($netns, made with `ip netns add`): its bridge, netavark's
#     iptables rules and aardvark-dns live there, not beside docker0 and Docker's chains. The
#     service runs under `nsenter --net=…` (not `ip netns exec`, which remounts /sys and hides
#     the cgroups);
#   - its own socket, unix://$run/podman.sock: DOCKER_HOST for airlock and the tests.
#
#   up      installs podman when missing, makes the namespace and starts `podman system service`
#           (log: $run/service.log); does nothing when it answers already.
#   down    removes every Podman container, then stops the service and deletes the namespace
#           (the storage, and so the images, stay for the next `up`).
#   env     prints `export DOCKER_HOST=…` (eval "$(scripts/podman.sh env)").
#   exec    runs CMD in Podman's network namespace with DOCKER_HOST set: a port a sandbox
#           publishes on 127.0.0.1 is that namespace's loopback, so tests that reach published
#           ports run there (e.g. scripts/podman.sh exec go test ./e2e/ -run TestPorts).
#   images  puts the test images into Podman's store: each TAG (default: the Debian images of the
#           tests) copied from the Docker Engine when it has it (docker save | podman load),
#           else built with scripts/debian-image.sh against Podman. The busybox test image
#           needs nothing: the tests build it through the Engine API.
#   podman  runs the podman CLI on this instance's storage (e.g. scripts/podman.sh podman ps -a).
set -euo pipefail

netns=airlock-podman
run=/run/airlock-podman
state=/var/lib/airlock-podman
sock=$run/podman.sock
log=$run/service.log
host=unix://$sock
here=$(cd "$(dirname "$0")" && pwd)

# The Debian images the e2e tests use (e2e/daemon_user_test.go), with their packages.
default_images=(
  "airlock-test/debian-postgres:bookworm-1 postgresql"
  "airlock-bench/debian-redis:bookworm-1 redis-server redis-tools make"
)

export CONTAINERS_CONF=$state/containers.conf
export CONTAINERS_STORAGE_CONF=$state/storage.conf
export CONTAINERS_REGISTRIES_CONF=$state/registries.conf

# The podman CLI on this instance's storage, configuration and namespace-independent flags.
pm=(podman --root "$state/storage" --runroot "$run/runroot" --tmpdir "$run/tmp"
  --network-config-dir "$state/networks" --cgroup-manager cgroupfs --events-backend file)

ping_podman() { [ -S "$sock" ] && curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "podman.sh: $1 needs root (rootful Podman, a network namespace)" >&2
    exit 1
  fi
}

install_missing() {
  local pkgs=()
  command -v podman >/dev/null 2>&1 || pkgs+=(podman)
  command -v netavark >/dev/null 2>&1 || [ -x /usr/lib/podman/netavark ] || pkgs+=(netavark aardvark-dns)
  command -v nsenter >/dev/null 2>&1 || pkgs+=(util-linux)
  command -v ip >/dev/null 2>&1 || pkgs+=(iproute2)
  command -v curl >/dev/null 2>&1 || pkgs+=(curl)
  command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "podman.sh: installing ${pkgs[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${pkgs[@]}" >/dev/null
  fi
}

# lim FLAG: the service's limit as ulimit FLAG says it, -1 for unlimited.
lim() { local v; v=$(ulimit "$1"); [ "$v" = unlimited ] && echo -1 || echo "$v"; }

write_config() {
  mkdir -p "$state/storage" "$state/networks" "$run/runroot" "$run/tmp"
  local nproc
  nproc=$(lim -Hu)
  if [ "$nproc" = -1 ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
  # Everything the flags of pm say, for the podman processes the service starts itself
  # (conmon's exit command) too; the machine's /etc/containers stays as Debian ships it.
  # Rootful Podman raises a container's RLIMIT_NOFILE and RLIMIT_NPROC to 1048576 where
  # Docker keeps its own: without CAP_SYS_RESOURCE (this machine's bounding set lacks it)
  # runc cannot ("error setting rlimit type 7: operation not permitted"), so the defaults are
  # the limits the service has (podman lowers its own processes' RLIMIT_NPROC to 32768).
  cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$(lim -Sn):$(lim -Hn)", "nproc=$nproc:$nproc"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$run/events.log"
tmp_dir = "$run/tmp"
[network]
network_backend = "netavark"
network_config_dir = "$state/networks"
EOF
  # Docker takes a registry on a loopback address as insecure (plain HTTP); Podman asks
  # registries.conf. The tests' local registries (docker-registry) listen on 127.0.0.1.
  cat >"$CONTAINERS_REGISTRIES_CONF" <<EOF
unqualified-search-registries = ["docker.io"]
[[registry]]
location = "127.0.0.1"
insecure = true
[[registry]]
location = "localhost"
insecure = true
EOF
  cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "overlay"
graphroot = "$state/storage"
runroot = "$run/runroot"
EOF
}

up() {
  need_root up
  install_missing
  if ping_podman; then
    echo "podman.sh: Podman answers on $host" >&2
    return 0
  fi
  write_config
  if [ ! -e "/var/run/netns/$netns" ]; then
    ip netns add "$netns"
  fi
  ip -n "$netns" link set lo up
  if [ -s "$run/service.pid" ] && kill -0 "$(cat "$run/service.pid")" 2>/dev/null; then
    echo "podman.sh: the service (pid $(cat "$run/service.pid")) runs but does not answer yet" >&2
  else
    rm -f "$sock"
    echo "podman.sh: starting podman system service on $host (log: $log)" >&2
    # setsid: the service (and the conmons it starts) outlive this script and its session.
    setsid nohup nsenter --net="/var/run/netns/$netns" \
      "${pm[@]}" --log-level info system service --time=0 "$host" >>"$log" 2>&1 </dev/null &
    echo $! >"$run/service.pid"
  fi
  start_healthchecks
  for _ in $(seq 1 120); do
    if ping_podman; then
      # Members of the docker group use it as they use Docker's socket (e2e.TestHostUser).
      if getent group docker >/dev/null; then chgrp docker "$sock" && chmod 660 "$sock"; fi
      echo "podman.sh: Podman $(curl -fsS --unix-socket "$sock" http://d/version | sed -n 's/.*"Version":"\([^"]*\)".*/\1/p' | head -1) ready on $host" >&2
      return 0
    fi
    sleep 0.5
  done
  echo "podman.sh: the service did not answer within 60 s; last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
  exit 1
}

# Podman runs a container's healthcheck from a systemd timer (`podman healthcheck run ID`);
# without systemd (this machine has none) no healthcheck ever runs and the container stays
# "starting". A host that runs Podman has systemd: this loop stands in for its timers, every
# second for every running container with a healthcheck (log: $run/healthchecks.log).
start_healthchecks() {
  if [ -d /run/systemd/system ]; then return; fi
  if [ -s "$run/healthchecks.pid" ] && kill -0 "$(cat "$run/healthchecks.pid")" 2>/dev/null; then return; fi
  (
    while sleep 1; do
      for id in $("${pm[@]}" ps -q --filter health=starting --filter health=healthy --filter health=unhealthy 2>/dev/null); do
        "${pm[@]}" healthcheck run "$id" >/dev/null 2>&1 &
      done
      wait
    done
  ) >>"$run/healthchecks.log" 2>&1 </dev/null &
  echo $! >"$run/healthchecks.pid"
}

down() {
  need_root down
  if [ -d "$state/storage" ] && command -v podman >/dev/null 2>&1; then
    nsenter_if "${pm[@]}" rm -a -f -t 1 >/dev/null 2>&1 || true
    nsenter_if "${pm[@]}" volume prune -f >/dev/null 2>&1 || true
  fi
  if [ -s "$run/healthchecks.pid" ]; then
    kill "$(cat "$run/healthchecks.pid")" 2>/dev/null || true
    rm -f "$run/healthchecks.pid"
  fi
  if [ -s "$run/service.pid" ]; then
    pid=$(cat "$run/service.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$run/service.pid"
  fi
  # Podman 4.3 leaves the conmon of an exec session behind when its container goes:
  # this instance's (their command lines name its storage) end with it.
  local p
  for p in $(pgrep -x conmon || true); do
    if grep -q "$state" "/proc/$p/cmdline" 2>/dev/null; then kill "$p" 2>/dev/null || true; fi
  done
  rm -f "$sock"
  if [ -e "/var/run/netns/$netns" ]; then
    ip netns del "$netns"
  fi
  echo "podman.sh: down (storage kept in $state)" >&2
}

# nsenter_if runs a command in the namespace when it exists (netavark's teardown of a
# container's network must run where the network is).
nsenter_if() {
  if [ -e "/var/run/netns/$netns" ]; then
    nsenter --net="/var/run/netns/$netns" "$@"
  else
    "$@"
  fi
}

images() {
  need_root images
  ping_podman || { echo "podman.sh: Podman does not answer on $host; run $0 up" >&2; exit 1; }
  local specs=()
  if [ $# -gt 0 ]; then
    for t in "$@"; do specs+=("$t"); done
  else
    specs=("${default_images[@]}")
  fi
  for spec in "${specs[@]}"; do
    # shellcheck disable=SC2086
    set -- $spec
    local tag=$1
    shift
    if curl -fsS --unix-socket "$sock" "http://d/images/$tag/json" >/dev/null 2>&1; then
      echo "podman.sh: $tag is in Podman's store" >&2
      continue
    fi
    if docker --host unix:///var/run/docker.sock image inspect "$tag" >/dev/null 2>&1; then
      echo "podman.sh: copying $tag from the Docker Engine" >&2
      docker --host unix:///var/run/docker.sock save "$tag" | "${pm[@]}" load -q >/dev/null
    elif [ $# -gt 0 ]; then
      echo "podman.sh: building $tag with debian-image.sh" >&2
      DOCKER_HOST=$host "$here/debian-image.sh" "$tag" "$@"
    else
      echo "podman.sh: $tag is neither in Podman's store nor in Docker's, and no packages were given to build it" >&2
      exit 1
    fi
  done
}

case "${1:-}" in
up) up ;;
down) down ;;
status)
  if ping_podman; then echo "up: $host (netns $netns)"; else echo "down"; exit 1; fi
  ;;
env) echo "export DOCKER_HOST=$host" ;;
exec)
  shift
  [ $# -gt 0 ] || { echo "usage: $0 exec CMD..." >&2; exit 2; }
  DOCKER_HOST=$host exec nsenter --net="/var/run/netns/$netns" "$@"
  ;;
images)
  shift
  images "$@"
  ;;
podman)
  shift
  nsenter_if "${pm[@]}" "$@"
  ;;
*)
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
