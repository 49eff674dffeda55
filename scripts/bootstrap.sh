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
# The venv is shared by every checkout on the machine: another clone's install repoints the
# editable t9k_jobs at itself, so the stamp alone is not trusted; the import must resolve here.
installed_here() {
  "$venv/bin/python" - "$root" <<'PY' 2>/dev/null
import os, sys
import t9k_jobs
here = os.path.realpath(os.path.join(sys.argv[1], "src", "t9k_jobs"))
sys.exit(0 if os.path.realpath(os.path.dirname(t9k_jobs.__file__)) == here else 1)
PY
}
if [ ! -f "$stamp" ] || ! installed_here; then
  echo "installing t9k-jobs[$extras] into $venv (first run downloads torch; later runs reuse it)" >&2
  # DS_BUILD_OPS=0: deepspeed (the launchers extra) builds without its CUDA ops.
  DS_BUILD_OPS=0 "$venv/bin/python" -m pip install -q -e "$root[$extras]" >&2
  case ",$extras," in
    *,launchers,*)
      # ColossalAI's launcher and Booster on the project's torch: colossalai's own metadata pins
      # torch<=2.5.1 and more, so it goes in without its pins, with what it imports (docs/launchers.md).
      "$venv/bin/python" -m pip install -q --no-deps colossalai==0.5.0 galore-torch==1.0 >&2
      "$venv/bin/python" -m pip install -q click fabric psutil einops tqdm safetensors bitsandbytes \
        "peft==0.13.2" "transformers==4.51.3" >&2
      ;;
  esac
  # An install for one checkout invalidates the stamps of every other one.
  rm -f "$venv"/.installed-* && touch "$stamp"
fi
echo "$venv/bin"
