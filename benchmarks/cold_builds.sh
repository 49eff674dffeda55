#!/usr/bin/env bash
# What a first run of the README's test command spends before pytest starts, measured on this
# machine with every cache empty (issue 35: the cold suite's time split; docs/benchmarks.md).
#
#   bash benchmarks/cold_builds.sh DIR [--images]
#
# Runs the steps of scripts/test.sh in its order (the Python stack from uv.lock, the control plane,
# kwok and Kubeflow's training operator, helm, the node's binaries, Kueue's manager) with every cache
# they use pointed into DIR, which must not exist: uv's cache and the venv, Go's build and module
# caches, and the binaries' caches under t9k-jobs/. Each step's wall time and the whole are printed
# (seconds). --images also builds the images (pause, operator, training, kueue) into DIR, as
# scripts/test.sh does beside the Go builds; they take about 20 GB of disk on their own, so without
# it DIR needs about 20 GB (the Go caches 11, the venv and uv's cache 9). Debian packages are not
# counted: they are installed machine-wide (a fresh machine adds their download). DIR is left for
# a look; remove it afterwards.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:?usage: bash benchmarks/cold_builds.sh DIR [--images]}"
images=0
[ "${2:-}" = "--images" ] && images=1
if [ -e "$dir" ]; then
  echo "benchmarks/cold_builds.sh: $dir exists; give a path that does not (the caches must start empty)" >&2
  exit 2
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
export XDG_CACHE_HOME="$dir/cache" T9K_JOBS_CACHE="$dir/cache/t9k-jobs" GOPATH="$dir/go" \
  GOCACHE="$dir/cache/go-build" GOMODCACHE="$dir/go/pkg/mod"
started=$SECONDS
declare -a names=() secs=()
step() {
  local name="$1" t=$SECONDS
  shift
  echo "[cold_builds +$((SECONDS - started))s] $name" >&2
  "$@" >"$dir/$name.log" 2>&1 || { echo "$name failed: see $dir/$name.log" >&2; tail -n 20 "$dir/$name.log" >&2; exit 1; }
  names+=("$name")
  secs+=("$((SECONDS - t))")
}
step bootstrap bash "$root/scripts/bootstrap.sh" examples,test,launchers
if [ "$images" = 1 ]; then
  step images bash "$root/tools/images/build.sh" pause operator training kueue
fi
step controlplane bash "$root/tools/controlplane/build.sh"
step peers bash "$root/tools/controlplane/build-peers.sh"
step helm bash "$root/tools/helm/build.sh"
step node bash "$root/tools/node/build.sh"
step kueue bash "$root/tools/kueue/build.sh"
echo "cold steps on $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ), 1-minute load at the end $(cut -d' ' -f1 /proc/loadavg):"
for i in "${!names[@]}"; do
  printf '  %-14s %6d s\n' "${names[$i]}" "${secs[$i]}"
done
printf '  %-14s %6d s\n' total "$((SECONDS - started))"
echo "disk used under $dir: $(du -sh "$dir" | cut -f1)"
