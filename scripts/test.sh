#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (engine, render, CLI, local end-to-end,
# cluster, and real pods on a real node).
#
#   bash scripts/test.sh [--no-node] [PYTEST ARGS...]
#
# --no-node leaves out tests/node (real pods on a kubelet built here: they need root, cgroups and
# about 10 GB of disk for the images); everything else runs as any user with Python, Go and PyPI.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node=1
args=()
for arg in "$@"; do
  if [ "$arg" = "--no-node" ]; then node=0; else args+=("$arg"); fi
done
bin="$(bash "$root/scripts/bootstrap.sh" examples,test,launchers)"
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
# The chart tests (tests/cluster/test_chart.py, tests/node/test_helm.py) run helm, built from Go
# modules too (about 4 minutes cold on 2 cores) and cached.
bash "$root/tools/helm/build.sh" >/dev/null
if [ "$(id -u)" = 0 ] && [ ! -x /usr/sbin/sshd ]; then
  # Local ColossalAIJob runs (tests/local) run each worker as a real sshd: OpenSSH's server.
  echo "installing openssh-server for the local ColossalAIJob tests" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server openssh-client >&2
fi
if [ "$node" = 1 ] && [ "$(id -u)" = 0 ]; then
  # The node tests (tests/node): Debian packages, kubelet, kube-proxy and CoreDNS, and the images
  # (pause, the operator from the Dockerfile, the training image with torch): all cached. Without
  # root, tests/node fails with one line that says so (use --no-node).
  bash "$root/tools/node/packages.sh"
  bash "$root/tools/node/build.sh" >/dev/null
  bash "$root/tools/images/build.sh" pause operator training >/dev/null
fi
[ "$node" = 1 ] || args=(-m "not node" "${args[@]}")
set +e
"$bin/python" -m pytest -p no:cacheprovider "${args[@]}"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$code"
