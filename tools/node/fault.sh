#!/usr/bin/env bash
# Lose a node of the cluster started by tools/node/up.sh DIR, as a power loss or a partition looks
# to the control plane, and bring it back:
#
#   tools/node/fault.sh DIR lose NODE      # freeze everything of NODE at once (cgroup freezer)
#   tools/node/fault.sh DIR restore NODE   # thaw its daemons, then (once its kubelet heartbeats and
#                                          # every process of a pod deleted meanwhile has SIGKILL
#                                          # pending, or its container's init has, 120 s at most)
#                                          # its pods
#
# NODE is a node's name (t9k-node-2...). t9k-node (node 1) is refused: CoreDNS, the cluster's DNS,
# lives there. One line per step, with timings, on stderr. Bad input (an unknown node, a node lost
# twice or restored while not lost): one line, exit 2. down.sh thaws a lost node before stopping it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage="usage: tools/node/fault.sh DIR lose|restore NODE"
if [ $# -ne 3 ] || { [ "$2" != lose ] && [ "$2" != restore ]; }; then
  echo "fault.sh: $usage" >&2
  exit 2
fi
if [ ! -f "$1/node.json" ]; then
  echo "fault.sh: no cluster runs from $1 (no $1/node.json); start one with tools/node/up.sh" >&2
  exit 2
fi
exec "$(bash "$here/python.sh")" "$here/node.py" fault --dir "$1" "$2" "$3"
