#!/usr/bin/env bash
# Start, stop or inspect a test control plane:  tools/controlplane/cp.sh start|stop|status [DIR [OPTIONS]]
# DIR defaults to ${XDG_RUNTIME_DIR:-/tmp}/t9k-jobs-cp; start prints `export KUBECONFIG=DIR/kubeconfig`.
# OPTIONS go to controlplane.py, e.g. `cp.sh start /tmp/cp --with-scheduler --crds deploy/crds`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:?usage: cp.sh start|stop|status [DIR]}"
dir="${2:-${XDG_RUNTIME_DIR:-/tmp}/t9k-jobs-cp}"
py=python3  # the project venv (scripts/bootstrap.sh) has `cryptography`; fall back to python3
for cand in "$here"/../../.venv*/bin/python; do
  [ -x "$cand" ] && py="$cand"
done
exec "$py" "$here/controlplane.py" "$cmd" --dir "$dir" "${@:3}"
