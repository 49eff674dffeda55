#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (engine, render, CLI, local end-to-end, cluster).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(bash "$root/scripts/bootstrap.sh" examples,test)"
cd "$root"
# The cluster tests (tests/cluster) run a real kube-apiserver built from Go modules, and the
# benchmark's smoke test kwok and Kubeflow's training operator; build them (and cache them) now so
# that a cold build (about 8 + 4 minutes on 2 cores) is not charged to a test's timeout.
for build in build.sh build-peers.sh; do
  if ! bash "$root/tools/controlplane/$build" >/dev/null; then
    command -v go >/dev/null || echo "the cluster tests (tests/cluster) need the Go toolchain (go >= 1.24) on PATH to build the control plane" >&2
    exit 1
  fi
done
set +e
"$bin/python" -m pytest -p no:cacheprovider "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$code"
