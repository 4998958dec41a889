#!/usr/bin/env bash
# Kubernetes benchmark, run by `make bench` through scripts/bench.sh: `airlock run -- true`
# with backend = "kubernetes" against `kubectl run --rm -i --restart=Never` of the same
# image, on the project's two-node cluster (scripts/kube.sh up: built and cached on
# first use), interleaved. Records docs/benchmarks.md "## Kubernetes".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/airlock ] || make build
./scripts/engine.sh
./scripts/kube.sh up
kubectl=$(./scripts/kube.sh env | sed -n 's/^export PATH=\(.*\):\$PATH$/\1/p')/kubectl
go run ./bench/kube -airlock bin/airlock -kubeconfig "$(./scripts/kube.sh kubeconfig)" -kubectl "$kubectl" -command "scripts/bench-kube.sh" "$@"
