#!/usr/bin/env bash
# Start the test control plane plus real nodes (containerd, runc, bridge CNI, kubelet,
# kube-proxy; CoreDNS on the first) on this machine, and print the KUBECONFIG to use:
#
#   tools/node/up.sh DIR [--image NAME]... [--kueue] [--nodes N]   # then: export KUBECONFIG=DIR/cp/kubeconfig
#   tools/node/fault.sh DIR lose|restore NODE  # freeze a node whole / thaw it (docs/cluster.md)
#   tools/node/down.sh DIR                     # stops it and leaves nothing behind
#
# --nodes N (default 1, at most 20): t9k-node (198.18.0.2, pods 10.244.0.0/24) plus t9k-node-K
# (198.18.0.(K+1), pods 10.244.(K-1).0/24) for K = 2..N, each with its own namespaces, cgroup,
# containerd (store ~/.cache/t9k-jobs/node/containerd-K), kubelet and kube-proxy, joined over a
# host bridge; every node gets the same images.
#
# Installs the Debian packages it needs when missing (root), builds and caches the binaries
# (tools/controlplane/build.sh, tools/node/build.sh) and the images (tools/images/build.sh: the
# sandbox image always; --image training / --image operator for the training and operator images),
# imports them into the node's containerd, installs the CRDs, and waits until the node is Ready
# and DNS answers. --kueue also builds Kueue v0.17.0 and its image (tools/kueue/build.sh, cold about
# 12 minutes on 2 cores, then cached), renders its manifests (tools/kueue/manifests.sh
# --no-visibility), applies them server-side and waits (180 s at most) until its Deployment is
# Available and its admission and conversion webhooks answer. Everything stays on this machine
# (tools/node/node.py tells how).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
usage="usage: tools/node/up.sh DIR [--image NAME]... [--kueue] [--nodes N]"
dir="${1:?$usage}"
shift
images=(pause)
kueue=0
nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --image) images+=("${2:?--image needs a name: training or operator}"); shift 2 ;;
    --kueue) kueue=1; shift ;;
    --nodes)
      nodes="${2:-}"
      if ! [[ "$nodes" =~ ^[0-9]+$ ]] || [ "$nodes" -lt 1 ] || [ "$nodes" -gt 20 ]; then
        echo "up.sh: --nodes needs a number from 1 to 20, not '$nodes'" >&2; exit 2
      fi
      shift 2 ;;
    *) echo "up.sh: unknown option $1 (accepted: --image NAME, --kueue, --nodes N)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "tools/node/up.sh: a real node needs root (containerd, cgroups, network namespaces)" >&2
  exit 2
fi
bash "$here/packages.sh"
py="$(bash "$here/python.sh")"
cp_bin="$(bash "$root/tools/controlplane/build.sh")"
node_bin="$(bash "$here/build.sh")"
args=()
if [ "$kueue" = 1 ]; then
  images+=(kueue)
  args+=(--kueue "$(bash "$root/tools/kueue/manifests.sh" --no-visibility)")
fi
built="$(bash "$root/tools/images/build.sh" "${images[@]}")"  # `NAME ARCHIVE` lines; a failed build stops here
while read -r _ archive; do
  args+=(--image "$archive")
done <<<"$built"
exec "$py" "$here/node.py" up --dir "$dir" --cp-bin "$cp_bin" --node-bin "$node_bin" \
  --crds "$root/deploy/crds" --nodes "$nodes" "${args[@]}"
