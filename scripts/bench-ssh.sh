#!/usr/bin/env bash
# SSH benchmark, run by `make bench` through scripts/bench.sh: `airlock -H ssh://root@box run
# -- true` (the real ssh and sshd, in a stand-in remote's namespaces) against a local `airlock
# run -- true`, interleaved, with one ssh handshake's time. Records docs/benchmarks.md "## SSH".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/ssh -airlock bin/airlock -command "scripts/bench-ssh.sh" "$@"
