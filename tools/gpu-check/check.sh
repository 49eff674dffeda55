#!/usr/bin/env bash
# The GPU check of local runs (issue 31), for a machine with an NVIDIA GPU: replicas in namespaces
# of their own (unshare as root without bubblewrap, then bubblewrap) still see their GPU, a replica
# without a GPU limit sees none, and a T9k tutorial-shaped job (its code on a claim mounted at
# /t9k/mnt) trains with torchrun and NCCL on the GPU.
#
#   bash tools/gpu-check/check.sh [BWRAP_DIR]     # BWRAP_DIR: where a bwrap binary is, if not on PATH
#
# Needs t9k-jobs importable by python3 (PYTHONPATH=src, or installed) and torch with CUDA there.
# Results are in docs/launchers.md ("GPUs in local runs").
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(mktemp -d)"
[ $# -gt 0 ] && export PATH="$1:$PATH"
nvidia-smi -L
echo "== 1. a GPU replica and a replica without one (the sandbox this machine allows)"
python3 -m t9k_jobs.cli run "$here/gpu-two.yaml" --run-dir "$out/r1" --quiet; echo "rc=$?"
for f in "$out"/r1/*.main.log; do echo "-- $f"; cat "$f"; done
if command -v bwrap >/dev/null; then
  echo "== 2. the same under bubblewrap"
  T9K_JOBS_SANDBOX=bwrap python3 -m t9k_jobs.cli run "$here/gpu-two.yaml" --run-dir "$out/r2" --quiet; echo "rc=$?"
  for f in "$out"/r2/*.main.log; do echo "-- $f"; cat "$f"; done
  echo "== 3. a tutorial-shaped job, its code on a claim at /t9k/mnt, torchrun + NCCL on the GPU"
  cp -r "$here/tut" "$out/tut"
  T9K_JOBS_SANDBOX=bwrap python3 -m t9k_jobs.cli run "$here/gpu-claim.yaml" --volume "tutorial=$out/tut" \
    --run-dir "$out/r3" --quiet; echo "rc=$?"
  tail -7 "$out/r3/job.log"
  cat "$out/tut/tutorial-examples/job/pytorchtrainingjob/ddp/log/done.txt"
  ls -d /t9k 2>&1 | head -1
fi
echo "run dirs: $out"
