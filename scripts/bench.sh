#!/usr/bin/env bash
# make bench: runs every scripts/bench-*.sh in name order. Each prints its own figures
# and ratios; see docs/benchmarks.md for recorded results.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
for b in scripts/bench-*.sh; do
  echo "== $b"
  bash "$b"
done
