#!/usr/bin/env bash
# Build what the scale benchmark needs besides the control plane, and cache it.
#
#   tools/controlplane/build-peers.sh      # prints the directory holding bin/ and crds/
#
# - kwok (sigs.k8s.io/kwok/cmd/kwok): fake nodes, and pod stages Pending -> Running;
#   its own pod-ready and pod-delete stages are copied from the module into kwok-stages/;
# - Kubeflow's training operator v1 (github.com/kubeflow/training-operator/cmd/training-operator.v1),
#   the peer we compare with, and its CRDs (manifests/base/crds of the same module).
# Both are `go install`-able (no replace directives). Cached under
# ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/peers/<key>; a second run returns at once.
set -euo pipefail
KWOK_VERSION="${KWOK_VERSION:-v0.7.0}"
TO_VERSION="${TO_VERSION:-v1.9.3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KEY="$(printf '%s %s\n' "$KWOK_VERSION" "$TO_VERSION" | cat - "$HERE/build-peers.sh" | sha256sum | cut -c1-16)"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/peers/$KEY"
if [[ -f "$OUT/.complete" ]]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "build-peers.sh: the Go toolchain (go >= 1.24) is needed" >&2; exit 2; }
export CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOBIN="$OUT/bin"
mkdir -p "$OUT/bin" "$OUT/crds"
log() { echo "[peers $(date +%H:%M:%S)] $*" >&2; }
log "building kwok $KWOK_VERSION"
go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
log "building training-operator $TO_VERSION"
go install -trimpath -ldflags="-s -w" "github.com/kubeflow/training-operator/cmd/training-operator.v1@$TO_VERSION"
kdir="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
mkdir -p "$OUT/kwok-stages"
cp "$kdir"/kustomize/stage/pod/fast/pod-ready.yaml "$kdir"/kustomize/stage/pod/fast/pod-delete.yaml "$OUT/kwok-stages/"
chmod u+w "$OUT"/kwok-stages/*.yaml
dir="$(go mod download -json "github.com/kubeflow/training-operator@$TO_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
cp "$dir"/manifests/base/crds/*.yaml "$OUT/crds/"
chmod u+w "$OUT"/crds/*.yaml
touch "$OUT/.complete"
echo "$OUT"
