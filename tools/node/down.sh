#!/usr/bin/env bash
# Stop the node started by tools/node/up.sh DIR and its control plane; afterwards no process,
# mount, cgroup, network namespace, veth, iptables rule or sysctl of it is left (DIR keeps the logs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:?usage: tools/node/down.sh DIR}"
exec "$(bash "$here/python.sh")" "$here/node.py" down --dir "$dir"
