#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (engine, render, CLI, local end-to-end).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(bash "$root/scripts/bootstrap.sh" examples,test)"
cd "$root"
set +e
"$bin/python" -m pytest -p no:cacheprovider "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$code"
