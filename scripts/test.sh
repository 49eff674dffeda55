#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (engine, render, CLI, local end-to-end, cluster).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(bash "$root/scripts/bootstrap.sh" examples,test)"
cd "$root"
# The cluster tests (tests/cluster) run a real kube-apiserver built from Go modules; build it (and
# cache it) now so that a cold build (about 30 minutes) is not charged to a test's timeout.
if ! bash "$root/tools/controlplane/build.sh" >/dev/null; then
  command -v go >/dev/null || echo "the cluster tests (tests/cluster) need the Go toolchain (go >= 1.24) on PATH to build the control plane" >&2
  exit 1
fi
set +e
"$bin/python" -m pytest -p no:cacheprovider "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$code"
