#!/usr/bin/env bash
# Supervisor benchmarks (issue 3), run by `make bench` through scripts/bench.sh:
#   (a) a daemon's port opening -> the main command starting   (target <= 50 ms)
#   (b) shutdown of five daemons that ignore SIGTERM, timeout 2 (target <= 2.3 s)
#   (c) the supervisor's RSS with five daemons running          (target <= 15 MB)
# Runs `airlock supervise` on the host (no Docker needed) and records the figures in
# docs/benchmarks.md under "## Supervisor" (other sections are left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
[ -x bin/airlock ] || make build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/benchsupervisor" ./bench/supervisor
# The supervisor as sandboxes get it: the one make build embeds for this machine's
# architecture (built without the Kubernetes backend), not the CLI itself.
arch=$("$GO" env GOARCH)
gunzip -c "internal/supervisorbin/gen/linux-$arch/airlock.gz" > "$tmp/airlock"
chmod +x "$tmp/airlock"
"$tmp/benchsupervisor" -airlock "$tmp/airlock" -doc docs/benchmarks.md -command "scripts/bench-supervisor.sh" "$@"
