#!/usr/bin/env bash
# Installs what is needed and runs the main job: DDP on the digits data set, 2 replicas,
# torchrun over c10d with gloo on CPU, from the PyTorchTrainingJob manifest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(bash "$root/scripts/bootstrap.sh" examples)"
echo "t9k-jobs is $bin/t9k-jobs (this clone's own environment); to type plain t9k-jobs: export PATH=\"$bin:\$PATH\"" >&2
exec "$bin/t9k-jobs" run "$root/examples/pytorch-ddp/job.yaml" "$@"
