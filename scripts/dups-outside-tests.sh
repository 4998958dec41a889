#!/bin/sh
# Counts the pairs `duplicates` finds in the code outside tests (no *_test.go,
# no test suites or their harness), on a copy of the committed tree.
# Usage: scripts/dups-outside-tests.sh [REV]   (default HEAD)
set -eu
rev=${1:-HEAD}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$rev" | tar -x -C "$tmp"
find "$tmp" -name '*_test.go' -delete
rm -rf "$tmp/e2e" "$tmp/faults" "$tmp/soak" "$tmp/internal/testenv" "$tmp/internal/clitest" "$tmp/test" "$tmp/sdk"
duplicates --repo "$tmp" --most 200 --seconds 120 | sed "s|$tmp/||g"
