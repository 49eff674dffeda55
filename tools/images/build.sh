#!/usr/bin/env bash
# Build t9k-jobs' images as OCI archives, without a Docker engine (buildah, debootstrap, gcc).
#
#   tools/images/build.sh NAME...         # NAME: pause, base, operator, training, kueue, or all
#   tools/images/build.sh --force NAME    # rebuild even when the archive is cached
#
# Prints `NAME ARCHIVE` per image on stdout; progress and timings on stderr. Archives are cached
# under ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/images/, keyed by a hash of their inputs.
# Needs root; installs buildah, debootstrap, gcc with apt-get when missing. See tools/images/README.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null \
  || { echo "build.sh: needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 2; }
exec "$py" "$HERE/images.py" build "$@"
