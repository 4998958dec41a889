#!/usr/bin/env bash
# Many alive at once on Kubernetes (issue 25): N `airlock up -d` sandboxes on the project's
# two-node cluster (scripts/kube.sh up) against N plain Pods of the same image made with
# kubectl run, 8 at a time both: time until all are ready, their spread over the nodes, `ps`,
# down and nothing left. Records docs/benchmarks.md "## Kubernetes, many alive at once".
# BENCH_KUBE_ALIVE_N (100).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
./scripts/kube.sh up
kubectl=$(./scripts/kube.sh env | sed -n 's/^export PATH=\(.*\):\$PATH$/\1/p')/kubectl
go run ./bench/kube -airlock bin/airlock -kubeconfig "$(./scripts/kube.sh kubeconfig)" -kubectl "$kubectl" \
  -up "${BENCH_KUBE_ALIVE_N:-100}" -command "scripts/bench-kube-alive.sh" "$@"
