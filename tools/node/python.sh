#!/usr/bin/env bash
# Print a Python (3.11+) that has `cryptography`, for node.py and controlplane.py: the project's
# venv when it exists, else the one scripts/bootstrap.sh makes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for cand in "$root"/.venv*/bin/python; do
  if [ -x "$cand" ] && "$cand" -c "import cryptography" 2>/dev/null; then
    echo "$cand"
    exit 0
  fi
done
echo "$(bash "$root/scripts/bootstrap.sh" examples,test,launchers)/python"
