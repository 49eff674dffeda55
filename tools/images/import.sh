#!/usr/bin/env bash
# Import image archives into a containerd, namespace k8s.io (the one the kubelet's CRI uses):
#
#   tools/images/import.sh /run/containerd/containerd.sock $(tools/images/build.sh pause operator | cut -d' ' -f2)
#
# An archive whose image (same ref, same manifest digest) is already there is skipped.
# Prints `REF DIGEST` per archive on stdout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null \
  || { echo "import.sh: needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 2; }
[ $# -ge 2 ] || { echo "usage: import.sh SOCKET ARCHIVE..." >&2; exit 2; }
exec "$py" "$HERE/images.py" import "$@"
