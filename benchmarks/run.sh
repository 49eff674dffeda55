#!/usr/bin/env bash
# The scale benchmark in one command, from a fresh clone:
#   bash benchmarks/run.sh                       # N = 100 and 1000, both operators, both limit settings, the ceiling
#   bash benchmarks/run.sh --jobs 2500 --systems t9k-jobs --limits default
# Installs the project venv, builds the control plane and the peers (kwok, Kubeflow's training
# operator) once into ~/.cache/t9k-jobs, then runs benchmarks/cluster_scale.py with the arguments
# given. Results: benchmarks/results.json and a Markdown table on stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(bash "$root/scripts/bootstrap.sh" test,bench)"
bash "$root/tools/controlplane/build.sh" >/dev/null
bash "$root/tools/controlplane/build-peers.sh" >/dev/null
cd "$root"
exec "$bin/python" benchmarks/cluster_scale.py "$@"
