#!/usr/bin/env bash
# dns-cpu.sh ENGINE [N]: what the embedded DNS of a user-defined network costs the Engine a container
# (issue 40; docs/benchmarks.md "Docker Engine 29"). ENGINE is 20.10 (Debian's, /var/run/docker.sock)
# or 29 (scripts/engine29.sh's, its CLI through `engine29.sh exec`). N (20) `docker run --rm IMAGE true`
# at once on the default bridge, then N on a bridge with enable_icc=false (as airlock's shared network),
# each burst under BSD process accounting (Debian's acct; machine-wide, turned off after): the processes
# whose parent chain leads to that Engine's dockerd, by command, and the change of dockerd's own CPU and
# of its waited-for children's (/proc/PID/stat 14+15 and 16+17; the records round each short iptables
# down to 0 ticks), a container. Not part of make bench (scripts/bench-*.sh). Root.
set -euo pipefail
cd "$(dirname "$0")/.."
eng=${1:?usage: dns-cpu.sh 20.10|29 [N]} n=${2:-20}
net=airlock-dnscpu-$$
command -v accton >/dev/null 2>&1 || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq acct >/dev/null; }
case $eng in
29)
  pid=$(cat /run/airlock-e29/dockerd.pid)
  dk() { scripts/engine29.sh exec docker "$@"; }
  ;;
20.10)
  pid=$(cat /var/run/docker.pid)
  dk() { env -u DOCKER_HOST docker "$@"; }
  ;;
*) echo "dns-cpu.sh: ENGINE is 20.10 or 29" >&2 && exit 2 ;;
esac
img=$(dk images --format '{{.Repository}}:{{.Tag}}' | grep -m1 '^airlock-test/busybox:') ||
  { echo "dns-cpu.sh: no airlock-test/busybox image on Engine $eng (the tests and benches build it)" >&2 && exit 1; }
tmp=$(mktemp -d)
trap 'accton off >/dev/null 2>&1 || true; dk network rm $net >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
cpu() { awk -v f="$1" '{ print $f + $(f + 1) }' "/proc/$pid/stat"; }
per() { awk -v a="$1" -v b="$2" -v n="$n" 'BEGIN { printf "%.2f s (%.3f s a container)", (b - a) / 100, (b - a) / 100 / n }'; }
dk network create -o com.docker.network.bridge.enable_icc=false "$net" >/dev/null
dk run --rm "$img" true
dk run --rm --network "$net" "$img" true
echo "$(uptime); Engine $eng (dockerd $pid), $img, $n at once"
for mode in default isolated; do
  args=()
  [ "$mode" = default ] || args=(--network "$net")
  : >"$tmp/acct"
  own0=$(cpu 14) kids0=$(cpu 16) t0=$(date +%s.%N)
  accton "$tmp/acct" >/dev/null
  for ((i = 0; i < n; i++)); do dk run --rm "${args[@]}" "$img" true >/dev/null & done
  wait
  t1=$(date +%s.%N)
  sleep 2
  accton off >/dev/null
  own1=$(cpu 14) kids1=$(cpu 16)
  echo "== $mode: wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }'); dockerd's own CPU $(per "$own0" "$own1"); its children's $(per "$kids0" "$kids1")"
  dump-acct "$tmp/acct" | awk -F'|' -v d="$pid" -v n="$n" '
    { c = $1; gsub(/ /, "", c); p = $10 + 0; comm[p] = c; par[p] = $11 + 0 }
    END {
      for (p in comm) {
        q = p
        for (k = 0; k < 20 && (q in par) && par[q] != d; k++) q = par[q]
        if ((q in par) && par[q] == d) cnt[comm[p]]++
      }
      for (c in cnt) printf "   %-16s %4d processes (%.1f a container)\n", c, cnt[c], cnt[c] / n
    }'
done
uptime
