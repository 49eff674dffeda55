#!/usr/bin/env bash
# Restart one component of the node started by tools/node/up.sh DIR: stop the process (SIGTERM,
# SIGKILL after 15 s) and start it again the way up.sh did (containerd, kubelet, kube-proxy and
# CoreDNS inside the node's namespaces and cgroup; etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler on the same ports and data), then wait until it serves:
#
#   tools/node/restart.sh COMPONENT DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
component="${1:?usage: tools/node/restart.sh COMPONENT DIR}"
dir="${2:?usage: tools/node/restart.sh COMPONENT DIR}"
exec "$(bash "$here/python.sh")" "$here/node.py" restart --dir "$dir" "$component"
