#!/usr/bin/env bash
# Build what the scale benchmark needs besides the control plane, and cache it.
#
#   tools/controlplane/build-peers.sh      # prints the directory holding bin/ and crds/
#
# - kwok (sigs.k8s.io/kwok/cmd/kwok): fake nodes, and pod stages Pending -> Running;
#   its own pod-ready and pod-delete stages are copied from the module into kwok-stages/;
# - Kubeflow's training operator v1 (github.com/kubeflow/training-operator/cmd/training-operator.v1),
#   the peer we compare with, and its CRDs (manifests/base/crds of the same module).
# Each is built through a wrapper module of its own (peers/kwok, peers/training-operator: go.mod and
# go.sum committed, so every dependency is pinned and checked; one module each, since their
# Kubernetes libraries differ). Cached under ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/peers/<key>, <key>
# a hash of both modules and this script; a second run returns at once.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KWOK="$HERE/peers/kwok"
TO="$HERE/peers/training-operator"
KWOK_VERSION="$(awk '/^require sigs.k8s.io\/kwok /{print $3}' "$KWOK/go.mod")"
TO_VERSION="$(awk '/^require github.com\/kubeflow\/training-operator /{print $3}' "$TO/go.mod")"
KEY="$(cat "$KWOK/go.mod" "$KWOK/go.sum" "$TO/go.mod" "$TO/go.sum" "$HERE/build-peers.sh" | sha256sum | cut -c1-16)"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/peers/$KEY"
if [[ -f "$OUT/.complete" ]]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "build-peers.sh: the Go toolchain (go >= 1.24) is needed" >&2; exit 2; }
export CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
mkdir -p "$OUT/bin" "$OUT/crds"
# One build at a time (a test run and a tool may both ask): the second waits, then finds it done.
exec 9>"$OUT/.lock"
flock 9
if [[ -f "$OUT/.complete" ]]; then
  echo "$OUT"
  exit 0
fi
log() { echo "[peers $(date +%H:%M:%S)] $*" >&2; }
log "building kwok $KWOK_VERSION"
(cd "$KWOK" && go build -trimpath -ldflags="-s -w" -o "$OUT/bin/kwok" sigs.k8s.io/kwok/cmd/kwok)
log "building training-operator $TO_VERSION"
(cd "$TO" && go build -trimpath -ldflags="-s -w" -o "$OUT/bin/training-operator.v1" \
  github.com/kubeflow/training-operator/cmd/training-operator.v1)
kdir="$(cd "$KWOK" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
mkdir -p "$OUT/kwok-stages"
cp "$kdir"/kustomize/stage/pod/fast/pod-ready.yaml "$kdir"/kustomize/stage/pod/fast/pod-delete.yaml "$OUT/kwok-stages/"
chmod u+w "$OUT"/kwok-stages/*.yaml
dir="$(cd "$TO" && go mod download -json "github.com/kubeflow/training-operator@$TO_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
cp "$dir"/manifests/base/crds/*.yaml "$OUT/crds/"
chmod u+w "$OUT"/crds/*.yaml
touch "$OUT/.complete"
echo "$OUT"
