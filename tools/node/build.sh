#!/usr/bin/env bash
# Build the test node's binaries from Go modules and cache them.
#
#   tools/node/build.sh          # prints the bin directory on stdout
#
# kubelet and kube-proxy come from the same wrapper module as the control plane
# (tools/controlplane/k8s, k8s.io/kubernetes at the version its go.mod requires), CoreDNS from
# tools/node/coredns (a pinned CoreDNS with only the plugins the node's Corefile uses). They land
# in ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/node/<key>/bin, <key> being a hash of both modules and
# this script; a second run returns at once. Cold on 2 cores: see docs/cluster.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S="$HERE/../controlplane/k8s"
K8S_VERSION="$(awk '/^require k8s.io\/kubernetes /{print $3}' "$K8S/go.mod")"
KEY="$(cat "$K8S/go.mod" "$K8S/go.sum" "$HERE/coredns/go.mod" "$HERE/coredns/go.sum" "$HERE/coredns/main.go" \
  "$HERE/build.sh" | sha256sum | cut -c1-16)"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/node/$KEY"
BIN="$OUT/bin"
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "tools/node/build.sh: the Go toolchain (go >= 1.26) is needed to build the node" >&2; exit 2; }
mkdir -p "$BIN"
# One build at a time (a test run and a tool may both ask): the second waits, then finds it done.
exec 9>"$OUT/.lock"
flock 9
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN"
  exit 0
fi
export CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
log() { echo "[node-build $(date +%H:%M:%S)] $*" >&2; }
MINOR="$(echo "$K8S_VERSION" | cut -d. -f2)"
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
done
(
  cd "$K8S"
  go mod download
  for c in kubelet kube-proxy; do
    if [[ ! -x "$BIN/$c" ]]; then
      log "building $c $K8S_VERSION"
      go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$LD" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
      mv "$BIN/$c.tmp" "$BIN/$c"
    fi
  done
)
(
  cd "$HERE/coredns"
  if [[ ! -x "$BIN/coredns" ]]; then
    log "building coredns $(awk '/github.com\/coredns\/coredns /{print $2; exit}' go.mod)"
    go build -trimpath -ldflags="-s -w" -o "$BIN/coredns.tmp" .
    mv "$BIN/coredns.tmp" "$BIN/coredns"
  fi
)
"$BIN/kubelet" --version >&2
"$BIN/coredns" -version 2>&1 | sed -n 1p >&2 # sed reads to the end: head would close the pipe early and SIGPIPE would fail the build under pipefail
touch "$OUT/.complete"
echo "$BIN"
