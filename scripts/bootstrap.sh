#!/usr/bin/env bash
# Installs exactly what uv.lock pins (this checkout and the given extras) into this checkout's own
# virtual environment, and prints that environment's bin dir: `.venv` for the default extras (what
# scripts/run-example.sh uses: `.venv/bin/t9k-jobs`), `.venv-<extras>` for another set (the test
# suite's: `.venv-examples-launchers-test`). One environment per clone: a second clone never
# changes what the first one runs. uv itself and its package cache live under ~/.cache (the
# packages are hard links into uv's cache, so a clone's environment costs little disk). Sourced by
# the other scripts:
#
#   bash scripts/bootstrap.sh [EXTRAS]      # EXTRAS: comma-separated, default "examples"
#   bash scripts/bootstrap.sh --uv          # only uv: prints its path (scripts/lock.sh uses it)
#
# Needs only python3 (3.11+) and access to PyPI. The only thing pip installs is uv, pinned with its
# hashes in scripts/uv-requirements.txt; uv then installs the lock's versions with their hashes
# (`uv sync --locked`). A lock that no longer matches pyproject.toml is refused, never re-resolved:
# scripts/lock.sh refreshes it (docs/install.md). A second run with the same lock takes a second.
set -euo pipefail
extras="${1:-examples}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
"$py" - <<'PY' || { echo "t9k-jobs needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
cache="${T9K_JOBS_CACHE:-$HOME/.cache/t9k-jobs}"
pyver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
mkdir -p "$cache"
# uv's own TLS roots would refuse a machine whose PyPI traffic goes through a proxy with its own CA;
# the system's store is what pip uses too.
export UV_SYSTEM_CERTS=1 UV_PYTHON_DOWNLOADS=never

# uv, once per version of scripts/uv-requirements.txt.
uv_env="$cache/uv-$(sha256sum "$root/scripts/uv-requirements.txt" | cut -c1-12)"
if [ ! -x "$uv_env/bin/uv" ]; then
  echo "installing uv (scripts/uv-requirements.txt) into $uv_env" >&2
  rm -rf "$uv_env.tmp"
  "$py" -m venv "$uv_env.tmp" >&2
  "$uv_env.tmp/bin/python" -m pip install -q --require-hashes --no-deps -r "$root/scripts/uv-requirements.txt" >&2
  rm -rf "$uv_env" && mv "$uv_env.tmp" "$uv_env"
fi
uv="$uv_env/bin/uv"
if [ "$extras" = "--uv" ]; then
  echo "$uv"
  exit 0
fi

# One environment per set of extras (sorted), so that each command gets exactly its part of the
# lock; the packages themselves are hard links into uv's cache, so a second environment costs little.
extras_sorted="$(echo "$extras" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)"
if [ "$extras_sorted" = "examples" ]; then
  venv="$root/.venv"
else
  venv="$root/.venv-${extras_sorted//,/-}"
fi
extra_args=()
for e in ${extras_sorted//,/ }; do extra_args+=(--extra "$e"); done
# "-bc": the environment holds every module's bytecode (uv sync --compile-bytecode, below); an
# environment made before without it is synced again.
stamp="$venv/.locked-$(cat "$root/uv.lock" "$root/pyproject.toml" | sha256sum | cut -c1-16)-$(echo "$root" | sha256sum | cut -c1-8)-$pyver-bc"
# The environment is this checkout's; a checkout moved or copied elsewhere carries one whose
# editable t9k_jobs points at the old place, so the stamp alone is not trusted: the import must
# resolve here.
installed_here() {
  "$venv/bin/python" - "$root" <<'PY' 2>/dev/null
import os, sys
import t9k_jobs
here = os.path.realpath(os.path.join(sys.argv[1], "src", "t9k_jobs"))
sys.exit(0 if os.path.realpath(os.path.dirname(t9k_jobs.__file__)) == here else 1)
PY
}
sync() {
  local log
  log="$(mktemp)"
  echo "installing t9k-jobs[$extras_sorted] from uv.lock into $venv (the first run downloads torch; later runs reuse it)" >&2
  # DS_BUILD_OPS=0: deepspeed (the launchers extra) builds without its CUDA ops.
  # --compile-bytecode: uv, unlike pip, writes no .pyc; where PYTHONDONTWRITEBYTECODE=1 is set (these
  # machines, many images) every process would otherwise compile what it imports, each time
  # (import torch: 3.2 s without, issue 46; docs/benchmarks.md "Bytecode").
  if ! DS_BUILD_OPS=0 UV_PROJECT_ENVIRONMENT="$venv" "$uv" sync --locked --quiet --compile-bytecode --project "$root" \
      --python "$py" "${extra_args[@]}" 2>"$log"; then
    if grep -q "needs to be updated" "$log"; then
      echo "uv.lock is out of date with pyproject.toml: refresh it with 'bash scripts/lock.sh' and commit it (docs/install.md)" >&2
    else
      cat "$log" >&2
    fi
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  rm -f "$venv"/.locked-* && touch "$stamp"
}
if [ ! -f "$stamp" ] || ! installed_here; then
  if command -v flock >/dev/null; then
    # Two bootstraps at once (two checkouts, a test and a run) take turns on one environment.
    exec 9>"$venv.lock"
    flock 9
    if [ ! -f "$stamp" ] || ! installed_here; then sync; fi
    flock -u 9
  else
    sync
  fi
fi
# t9k_jobs itself is installed editable (src/): its bytecode too, every time (0.1 s when nothing
# changed; a module edited later is compiled in memory until the next bootstrap).
"$venv/bin/python" -m compileall -q -j 0 "$root/src" >/dev/null 2>&1 || true
echo "$venv/bin"
