#!/usr/bin/env bash
# Put images built by build.sh into podman's local store (what `t9k-jobs run --container-engine
# podman` runs replicas from; it never pulls):
#
#   tools/images/podman-import.sh base training
#
# Builds what is missing (build.sh), then, for each image whose ref podman does not have yet,
# `podman pull oci-archive:ARCHIVE` (the archive names its ref; the training image's 6.7 GB take
# about 90 s and as much disk again, transiently more). Prints `REF` per image on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 1 ] || { echo "usage: podman-import.sh NAME..." >&2; exit 2; }
command -v podman >/dev/null || { echo "podman-import.sh: podman is not installed (apt-get install podman)" >&2; exit 2; }
built="$(bash "$here/build.sh" "$@")"
while read -r name archive; do
  [ -n "$name" ] || continue
  ref="$(python3 - "$archive" <<'PY'
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    index = json.load(t.extractfile("index.json"))
notes = index["manifests"][0].get("annotations", {})
print(notes.get("io.containerd.image.name") or notes["org.opencontainers.image.ref.name"])
PY
)"
  if ! podman image exists "$ref"; then
    echo "podman-import.sh: $name into podman's store ($archive)" >&2
    podman pull -q "oci-archive:$archive" >/dev/null
    podman image exists "$ref" || { echo "podman-import.sh: $archive did not give $ref" >&2; exit 1; }
  fi
  echo "$ref"
done <<<"$built"
