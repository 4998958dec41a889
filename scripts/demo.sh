#!/usr/bin/env bash
# make demo: builds the demo image through the Engine API, then runs the hello
# example: a busybox sandbox whose httpd sidecar is ready before the main command
# fetches a page from it. Everything is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building the demo image airlock-demo/busybox:latest (FROM scratch + the host's static busybox)"
go run ./internal/cmd/mkbusybox airlock-demo/busybox:latest >/dev/null
cd examples/hello
echo "== examples/hello: airlock config --layers (what the manifest resolves to)"
../../bin/airlock config --layers | grep -E '^(sandbox.image|daemons.web.(command|ready))'
echo "== examples/hello: airlock run -- wget -qO- http://127.0.0.1:8080/"
../../bin/airlock run -- wget -qO- http://127.0.0.1:8080/
echo "== done: nothing is left behind (airlock ps -a lists no sandbox of this project)"
../../bin/airlock ps -a
