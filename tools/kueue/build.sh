#!/usr/bin/env bash
# Build the Kueue manager from Go modules and cache it.
#
#   tools/kueue/build.sh          # prints the path of the manager binary on stdout
#
# sigs.k8s.io/kueue/cmd/kueue at the version tools/kueue/go.mod requires, built through this
# wrapper module (tools.go pins it), static (CGO_ENABLED=0) as Kueue's own Makefile and Dockerfile
# build it. It lands in ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/kueue/<key>/bin/manager, <key> being
# a hash of the module and this script; a second run returns at once. The image
# (tools/images/build.sh kueue) copies it to /manager. Cold on 2 cores: see tools/kueue/README.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUEUE_VERSION="$(awk '/^require sigs.k8s.io\/kueue /{print $3}' "$HERE/go.mod")"
KEY="$(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/tools.go" "$HERE/build.sh" | sha256sum | cut -c1-16)"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/kueue/$KEY"
BIN="$OUT/bin"
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN/manager"
  exit 0
fi
command -v go >/dev/null || { echo "tools/kueue/build.sh: the Go toolchain (go >= 1.26) is needed to build Kueue" >&2; exit 2; }
mkdir -p "$BIN"
# One build at a time (a test run and a tool may both ask): the second waits, then finds it done.
exec 9>"$OUT/.lock"
flock 9
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN/manager"
  exit 0
fi
export CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
log() { echo "[kueue-build $(date +%H:%M:%S)] $*" >&2; }
# What Kueue's Makefile stamps into a release build (the module zip carries no commit hash).
V=sigs.k8s.io/kueue/pkg/version
LD="-s -w -X $V.GitVersion=$KUEUE_VERSION -X $V.GitCommit=unknown -X $V.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
(
  cd "$HERE"
  log "downloading modules for sigs.k8s.io/kueue $KUEUE_VERSION"
  go mod download
  log "building the Kueue manager $KUEUE_VERSION"
  go build -trimpath -ldflags="$LD" -o "$BIN/manager.tmp" sigs.k8s.io/kueue/cmd/kueue
  mv "$BIN/manager.tmp" "$BIN/manager"
)
touch "$OUT/.complete"
echo "$BIN/manager"
