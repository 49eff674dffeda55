#!/usr/bin/env bash
# Refreshes uv.lock and the requirement files the images install from it (docs/install.md).
#
#   bash scripts/lock.sh                          # after an edit of pyproject.toml: re-resolve only what changed
#   bash scripts/lock.sh --upgrade-package torch  # move one package (and what it needs) to its newest allowed version
#   bash scripts/lock.sh --upgrade                # move everything to the newest allowed versions
#   bash scripts/lock.sh --check                  # exit 1 if uv.lock or requirements/ would change (nothing written)
#   bash scripts/lock.sh --uv 0.14.0              # pin another uv (scripts/uv-requirements.txt, every wheel's hash)
#
# Arguments other than --check go to `uv lock`. Nothing else ever re-resolves: scripts/bootstrap.sh
# installs the lock as it is (`uv sync --locked`) and refuses a lock that no longer matches
# pyproject.toml. After a refresh, run the whole suite (bash scripts/test.sh) and commit uv.lock and
# requirements/ together.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
check=0
uv_version=
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --uv) uv_version="${2:?--uv needs a version, e.g. --uv 0.14.0}"; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
# uv from the pinned scripts/uv-requirements.txt (the bootstrap installs it; no extras needed).
uv="$(bash "$root/scripts/bootstrap.sh" --uv)"
export UV_SYSTEM_CERTS=1
cd "$root"

if [ -n "$uv_version" ]; then
  pin="$(mktemp)"
  echo "uv==$uv_version" >"$pin"
  {
    echo "# The one tool the bootstrap installs with pip: uv, pinned with every wheel's hash."
    echo "# Refreshed by scripts/lock.sh --uv VERSION (docs/install.md)."
    "$uv" pip compile --quiet --generate-hashes --universal --no-header --no-annotate "$pin"
  } >"$root/scripts/uv-requirements.txt.new"
  rm -f "$pin"
  mv "$root/scripts/uv-requirements.txt.new" "$root/scripts/uv-requirements.txt"
  echo "scripts/uv-requirements.txt now pins uv $uv_version; the next bootstrap installs it" >&2
  exit 0
fi

if [ "$check" = 1 ]; then
  "$uv" lock --check --quiet || { echo "uv.lock is out of date with pyproject.toml: run bash scripts/lock.sh" >&2; exit 1; }
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
else
  "$uv" lock "${args[@]}"
  out="$root/requirements"
  mkdir -p "$out"
fi

# The images install with pip --require-hashes --no-deps from these exports of the lock:
#  operator.txt  the package's runtime dependencies and its build backend (the build group);
#  training.txt  the examples and launchers extras, less deepspeed, which is built afterwards
#                against the installed torch (--no-build-isolation) from deepspeed.txt, and less
#                py-spy (a local runtime reads its replicas' stacks with it from outside; the
#                image runs replicas, and a 7 GB image rebuilt on every machine for 3 MB costs
#                the disk of two containerd stores).
export_lock() {
  "$uv" export --locked --quiet --no-emit-project --no-header --format requirements-txt "$@"
}
{
  echo "# uv.lock exported for the operator image (the root Dockerfile): made by scripts/lock.sh, do not edit."
  export_lock --group build
} >"$out/operator.txt"
{
  echo "# uv.lock exported for the training image (images/training/Dockerfile): made by scripts/lock.sh, do not edit."
  export_lock --extra examples --extra launchers --no-emit-package deepspeed --no-emit-package py-spy
} >"$out/training.txt"
{
  echo "# uv.lock's deepspeed, built in the training image against its torch: made by scripts/lock.sh, do not edit."
  export_lock --extra launchers | awk '/^deepspeed==/{on=1} on && !/^    /&&!/^deepspeed==/{on=0} on'
} >"$out/deepspeed.txt"

if [ "$check" = 1 ]; then
  for f in operator.txt training.txt deepspeed.txt; do
    cmp -s "$out/$f" "$root/requirements/$f" || { echo "requirements/$f is out of date with uv.lock: run bash scripts/lock.sh" >&2; exit 1; }
  done
  echo "uv.lock and requirements/ are current" >&2
fi
