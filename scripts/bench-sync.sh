#!/usr/bin/env bash
# Edits reaching a copied project (issue 43), run by `make bench` through scripts/bench.sh:
# `airlock up` through a daemon on loopback tcp:// (the project copied in through the files API,
# as for a daemon on another machine), its shell held open; a host edit until the sandbox shows it,
# and 1000 files changed at once until it shows them all, interleaved with the same bytes written
# straight through the files API; medians against 1 s and 5 s. Records docs/benchmarks.md
# "## Edits reaching a copied project".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
go run ./bench/sync -airlock bin/airlock -command "scripts/bench-sync.sh" "$@"
