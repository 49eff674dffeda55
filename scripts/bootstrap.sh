#!/usr/bin/env bash
# Creates (once) a virtual environment under ~/.cache/t9k-jobs and installs this checkout
# into it with the given extras. Sourced by the other scripts; prints the venv's bin dir.
# Needs only python3 (3.11+) and access to PyPI; the second run takes seconds.
set -euo pipefail
extras="${1:-examples}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
"$py" - <<'PY' || { echo "t9k-jobs needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
cache="${T9K_JOBS_CACHE:-$HOME/.cache/t9k-jobs}"
venv="$cache/venv-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$cache"
  "$py" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
fi
stamp="$venv/.installed-$extras-$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)-$(echo "$root" | sha256sum | cut -c1-8)"
if [ ! -f "$stamp" ]; then
  echo "installing t9k-jobs[$extras] into $venv (first run downloads torch; later runs reuse it)" >&2
  "$venv/bin/python" -m pip install -q -e "$root[$extras]" >&2
  rm -f "$venv"/.installed-"$extras"-* && touch "$stamp"
fi
echo "$venv/bin"
