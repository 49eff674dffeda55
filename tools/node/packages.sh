#!/usr/bin/env bash
# Install the Debian packages a real node needs when they are missing (as root; apt-get update first).
set -euo pipefail
need=()
for pair in containerd:containerd ctr:containerd runc:runc iptables:iptables conntrack:conntrack \
            nsenter:util-linux unshare:util-linux ip:iproute2; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair##*:}")
done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "tools/node: missing Debian packages ${need[*]}; installing them needs root" >&2
  exit 2
fi
echo "tools/node: installing ${need[*]}" >&2
apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >&2
