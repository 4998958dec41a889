#!/usr/bin/env bash
# Creates from the Python SDK, back to back, with and without a warm pool: 20 times
# `client.create(manifest, id=…, labels=…, env=…, vars=…)` then a first command in the sandbox,
# timed from the create's call to that command's first output byte, each sandbox deleted (untimed)
# before the next create. Without a pool first (the manifest has no [sandbox.pool]), then with
# `[sandbox.pool] size = 3` (warmed untimed before the first create). Prints the figures that
# docs/benchmarks.md "## Warm pool for programs (SDK)" records. It takes the machine for about a
# minute. Needs a Docker Engine and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
image=$(go run ./tools/mkbusybox)
exec env AIRLOCK_BINARY="$PWD/bin/airlock" AIRLOCK_TEST_IMAGE="$image" PYTHONDONTWRITEBYTECODE=1 \
  python3 scripts/bench_sdk_pool.py "$@"
