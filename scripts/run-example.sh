#!/usr/bin/env bash
# Installs what is needed and runs the main job: DDP on the digits data set, 2 replicas,
# torchrun over c10d with gloo on CPU, from the PyTorchTrainingJob manifest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(bash "$root/scripts/bootstrap.sh" examples)"
exec "$bin/t9k-jobs" run "$root/examples/pytorch-ddp/job.yaml" "$@"
