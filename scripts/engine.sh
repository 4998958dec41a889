#!/usr/bin/env bash
# Makes sure a Docker Engine answers on /var/run/docker.sock (or $DOCKER_HOST).
# On a fresh Debian machine it installs docker.io, docker-registry, busybox-static (test
# images are built from the static busybox), curl and jq (docs/api.md's examples, which a test
# runs), socat (it exposes the stand-in remote Engine of the tests over loopback TCP),
# qemu-user-static (a test runs the linux/arm64 supervisor under qemu-aarch64-static) and
# openssh-server and openssh-client (a test runs sshd in the stand-in's namespaces and reaches it
# with ssh), starts dockerd in the background with its log in $AIRLOCK_DOCKERD_LOG (default
# /var/log/airlock-dockerd.log) and waits for it. It installs mypy too (it checks the Python SDK's type hints)
# and debootstrap (scripts/debian-image.sh makes the Debian test images with it).
set -euo pipefail

log=${AIRLOCK_DOCKERD_LOG:-/var/log/airlock-dockerd.log}
sock=/var/run/docker.sock

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v docker >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v docker-registry >/dev/null 2>&1 || need_pkgs+=(docker-registry)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -x httpd >/dev/null || need_pkgs+=(busybox-static)
command -v socat >/dev/null 2>&1 || need_pkgs+=(socat)
command -v curl >/dev/null 2>&1 || need_pkgs+=(curl)
command -v jq >/dev/null 2>&1 || need_pkgs+=(jq)
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3)  # the Python SDK's tests (sdk/python)
command -v mypy >/dev/null 2>&1 || need_pkgs+=(mypy)  # the Python SDK's type check (sdk/python)
command -v qemu-aarch64-static >/dev/null 2>&1 || need_pkgs+=(qemu-user-static)
[ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)  # e2e.TestRemoteDaemonOverSSHD
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)  # scripts/debian-image.sh (the Debian test images)
command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || need_pkgs+=(openssh-client)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "engine.sh: missing ${need_pkgs[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "engine.sh: installing ${need_pkgs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need_pkgs[@]}" >/dev/null
fi

ping_engine() {
  if [ -n "${DOCKER_HOST:-}" ]; then docker version >/dev/null 2>&1; return; fi
  if command -v curl >/dev/null 2>&1; then
    [ -S "$sock" ] && curl -fsS --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1
  else
    [ -S "$sock" ] && timeout 5 docker version >/dev/null 2>&1
  fi
}

if ping_engine; then
  exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
  echo "engine.sh: DOCKER_HOST=$DOCKER_HOST does not answer" >&2
  exit 1
fi

# The machine's own dockerd (its default pidfile), not a second one a test runs in
# its own namespaces (the stand-in remote Engine): that one must not keep this one
# from starting.
if ! { [ -s /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; }; then
  echo "engine.sh: starting dockerd (log: $log)" >&2
  mkdir -p "$(dirname "$log")"
  nohup dockerd >>"$log" 2>&1 </dev/null &
fi
for _ in $(seq 1 120); do
  if ping_engine; then
    echo "engine.sh: Docker Engine ready" >&2
    exit 0
  fi
  sleep 0.5
done
echo "engine.sh: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -n 20 "$log" >&2 || true
exit 1
