#!/usr/bin/env bash
# Build the helm CLI from Go modules and cache it.
#
#   tools/helm/build.sh          # prints the path of the helm binary on stdout
#
# helm.sh/helm/v3 at the version tools/helm/go.mod requires, built through this wrapper module
# (tools.go pins cmd/helm). It lands in ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/helm/<key>/bin/helm,
# <key> being a hash of the module and this script; a second run returns at once. Used by the
# chart tests (tests/cluster/test_chart.py: helm lint and helm template; tests/node/test_helm.py:
# install, upgrade, uninstall). Cold on 2 cores: see docs/cluster.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HELM_VERSION="$(awk '/^require helm.sh\/helm\/v3 /{print $3}' "$HERE/go.mod")"
KEY="$(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/tools.go" "$HERE/build.sh" | sha256sum | cut -c1-16)"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/helm/$KEY"
BIN="$OUT/bin"
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN/helm"
  exit 0
fi
command -v go >/dev/null || { echo "tools/helm/build.sh: the Go toolchain (go >= 1.26) is needed to build helm" >&2; exit 2; }
mkdir -p "$BIN"
# One build at a time (a test run and a tool may both ask): the second waits, then finds it done.
exec 9>"$OUT/.lock"
flock 9
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN/helm"
  exit 0
fi
export CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
log() { echo "[helm-build $(date +%H:%M:%S)] $*" >&2; }
# `helm version` reports what a release build would, and the default Kubernetes version of `helm
# template` and of lint's deprecation check is the client-go minor helm is built with (helm's
# Makefile sets the same variables: client-go v0.N -> Kubernetes 1.N).
CLIENT_GO_MINOR="$(awk '$1 == "k8s.io/client-go" {print $2}' "$HERE/go.mod" | cut -d. -f2)"
LD="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  LD="$LD -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$CLIENT_GO_MINOR"
done
(
  cd "$HERE"
  log "building helm $HELM_VERSION"
  go build -trimpath -ldflags="$LD" -o "$BIN/helm.tmp" helm.sh/helm/v3/cmd/helm
  mv "$BIN/helm.tmp" "$BIN/helm"
)
"$BIN/helm" version --short >&2
touch "$OUT/.complete"
echo "$BIN/helm"
