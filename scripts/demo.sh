#!/usr/bin/env bash
# make demo: builds the demo image through the Engine API, then runs the hello
# example: a busybox sandbox whose httpd sidecar is ready before the main command
# fetches a page from it. Everything is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building the demo image airlock-demo/busybox:latest (FROM scratch + the host's static busybox)"
go run ./tools/mkbusybox airlock-demo/busybox:latest >/dev/null
cd examples/hello
echo "== examples/hello: airlock config --layers (what the manifest resolves to)"
../../bin/airlock config --layers | grep -E '^(sandbox.image|daemons.web.(command|ready))'
# --wait returns as `docker run --rm` does, once the sandbox is removed. A plain
# run returns at the main command's end and removes the sandbox in the
# background, so a ps -a right after it may still list the run (exited (0)).
echo "== examples/hello: airlock run --wait -- wget -qO- http://127.0.0.1:8080/"
../../bin/airlock run --wait -- wget -qO- http://127.0.0.1:8080/
echo "== done: nothing is left behind (airlock ps -a lists no sandbox of this project)"
../../bin/airlock ps -a
