#!/usr/bin/env bash
# Build the test control plane from Go modules and cache the binaries.
#
#   tools/controlplane/build.sh          # prints the bin directory on stdout
#
# Binaries: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# (k8s.io/kubernetes $K8S_VERSION through the wrapper module in k8s/) and etcd
# (go.etcd.io/etcd/server/v3 $ETCD_VERSION through etcd/). They land in
# ${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/controlplane/<key>/bin, where <key> is a
# hash of the wrapper modules; a second run with the same modules returns at once.
# A cold build on 2 cores takes about 8 minutes and 3 GB of module cache (docs/cluster.md).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="$(awk '/^require k8s.io\/kubernetes /{print $3}' "$HERE/k8s/go.mod")"
ETCD_VERSION="$(awk '/^require go.etcd.io\/etcd\/server\/v3 /{print $3}' "$HERE/etcd/go.mod")"
KEY="$(cat "$HERE/k8s/go.mod" "$HERE/k8s/go.sum" "$HERE/etcd/go.mod" "$HERE/etcd/go.sum" "$HERE/build.sh" | sha256sum | cut -c1-16)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/t9k-jobs/controlplane"
OUT="$CACHE/$KEY"
BIN="$OUT/bin"
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "build.sh: the Go toolchain (go >= 1.24) is needed to build the control plane" >&2; exit 2; }
mkdir -p "$BIN"
# One build at a time (a test run and a tool may both ask): the second waits, then finds it done.
exec 9>"$OUT/.lock"
flock 9
if [[ -f "$OUT/.complete" ]]; then
  echo "$BIN"
  exit 0
fi
export CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
log() { echo "[controlplane $(date +%H:%M:%S)] $*" >&2; }

MINOR="$(echo "$K8S_VERSION" | cut -d. -f2)"
DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR"
  LD="$LD -X $p.gitTreeState=clean -X $p.buildDate=$DATE"
done
(
  cd "$HERE/k8s"
  log "downloading modules for k8s.io/kubernetes $K8S_VERSION"
  go mod download
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    if [[ ! -x "$BIN/$c" ]]; then
      log "building $c"
      go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$LD" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
      mv "$BIN/$c.tmp" "$BIN/$c"
    fi
  done
)
(
  cd "$HERE/etcd"
  if [[ ! -x "$BIN/etcd" ]]; then
    log "building etcd $ETCD_VERSION"
    go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$BIN/etcd.tmp" "$BIN/etcd"
  fi
)
"$BIN/kube-apiserver" --version >&2
"$BIN/etcd" --version 2>&1 | sed -n 1p >&2 # sed reads to the end: head would close the pipe early and SIGPIPE would fail the build under pipefail
touch "$OUT/.complete"
echo "$BIN"
