#!/usr/bin/env bash
# Installs what is needed and runs the whole test suite (engine, render, CLI, local end-to-end,
# cluster, and real pods on a real node), in a random order.
#
#   bash scripts/test.sh [--no-node] [--stress [--since=REV] [--repeat=N] [--hogs=N]] [PYTEST ARGS...]
#
# --stress (issue 40: what a fresh or busy machine finds that a quiet warm one hides) runs the
# suite under load: one CPU hog per core beside it (--hogs=N), and three workers instead of two
# (the two lanes plus one); then, still under the hogs, the tests of what changed since REV
# (default HEAD~1; the stop routine gives the commit its session started from), N times over
# (default 3), each round in a new random order: the test files changed, and those that name a
# changed module of src/ (t9k_jobs.local.volumes, ...). Its exit is the first failing step's.
# --no-node leaves out tests/node (real pods on a kubelet built here: they need root, cgroups and
# about 45 GB of disk under ~/.cache/t9k-jobs: the images' archives, 14 GB, and the containerd
# stores of the two nodes, 13-14 GB each); everything else runs as any user with Python, Go and PyPI.
# The order is random (pytest-randomly); the seed is printed first, and --randomly-seed=N replays
# it (-p no:randomly runs the files in their own order). Two workers (pytest-xdist, -n 2) run it:
# the node tests in one, in order, the rest beside them (tests/conftest.py); -n 0 runs it in one
# process. Python packages come from uv.lock (scripts/bootstrap.sh), Go tools from the committed
# go.mod/go.sum files, Debian packages by name (docs/install.md lists the versions measured).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node=1
seeded=0
stress=0
since=HEAD~1
repeat=3
hogs="$(nproc)"
args=()
for arg in "$@"; do
  case "$arg" in
    --no-node) node=0 ;;
    --stress) stress=1 ;;
    --since=*) since="${arg#--since=}" ;;
    --repeat=*) repeat="${arg#--repeat=}" ;;
    --hogs=*) hogs="${arg#--hogs=}" ;;
    --randomly-seed=* | -pno:randomly | no:randomly) seeded=1; args+=("$arg") ;;
    *) args+=("$arg") ;;
  esac
done
if [ "$seeded" = 0 ]; then
  seed="$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
  echo "test order: pytest-randomly seed $seed (replay: bash scripts/test.sh --randomly-seed=$seed)"
  args=("--randomly-seed=$seed" "${args[@]}")
fi
started=$SECONDS
# Each step's start is printed as it begins; how long each took is summed up at the end (issue 35:
# where a cold run's time goes).
steps=()
step() {
  steps+=("$((SECONDS - started)) $*")
  echo "[test.sh +$((SECONDS - started))s] $*" >&2
}
summary() {
  local i next
  echo "[test.sh] time per step (s):" >&2
  for i in "${!steps[@]}"; do
    next=$((SECONDS - started))
    [ $((i + 1)) -lt ${#steps[@]} ] && next="${steps[$((i + 1))]%% *}"
    printf '  %6d  %s\n' "$((next - ${steps[$i]%% *}))" "${steps[$i]#* }" >&2
  done
}
step "the Python stack from uv.lock (scripts/bootstrap.sh)"
bin="$(bash "$root/scripts/bootstrap.sh" examples,test,launchers)"
cd "$root"
if [ "$(id -u)" = 0 ] && [ ! -x /usr/sbin/sshd ]; then
  # Local ColossalAIJob runs (tests/local) run each worker as a real sshd: OpenSSH's server.
  step "installing openssh-server for the local ColossalAIJob tests"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server openssh-client >&2
fi
if [ "$(id -u)" = 0 ] && [ ! -x /usr/bin/bwrap ]; then
  # A local run contains each replica in namespaces of its own with bubblewrap (volumes at their
  # mount paths, a PID namespace per container); tests/local/test_volumes.py needs it.
  step "installing bubblewrap for the local runs' namespaces"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends bubblewrap >&2
fi
if [ "$(id -u)" = 0 ] && [ ! -x /usr/bin/podman ]; then
  # run --container-engine podman (tests/local/test_podman.py): replicas in their images.
  step "installing podman for the local runs in images"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends podman >&2
fi
if [ "$(id -u)" = 0 ] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
  # The dashboard's browser tests (tests/dashboard) drive Debian's headless chromium with Selenium.
  step "installing chromium and chromium-driver for the dashboard's browser tests"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver >&2
fi
images_pid=
images_log="$(mktemp)"
trap 'rm -f "$images_log"; [ -z "$images_pid" ] || kill "$images_pid" 2>/dev/null || true' EXIT
if [ "$node" = 1 ] && [ "$(id -u)" = 0 ]; then
  # The node tests (tests/node): Debian packages first (apt-get takes one lock), then the images
  # (pause, the operator from the Dockerfile, the training image with torch) built in the
  # background: mostly downloads and pip, they overlap with the Go builds below, which are mostly
  # compiling. Without root, tests/node fails with one line that says so (use --no-node).
  bash "$root/tools/node/packages.sh"
  step "building the images in the background (log: $images_log)"
  bash "$root/tools/images/build.sh" pause operator training >"$images_log" 2>&1 &
  images_pid=$!
fi
# The cluster tests (tests/cluster) run a real kube-apiserver built from Go modules, and the
# benchmark's smoke test kwok and Kubeflow's training operator; build them (and cache them) now so
# that a cold build (about 8 + 4 minutes on 2 cores) is not charged to a test's timeout.
for build in build.sh build-peers.sh; do
  step "tools/controlplane/$build"
  if ! bash "$root/tools/controlplane/$build" >/dev/null; then
    command -v go >/dev/null || echo "the cluster tests (tests/cluster) need the Go toolchain (go >= 1.24) on PATH to build the control plane" >&2
    exit 1
  fi
done
# The chart tests (tests/cluster/test_chart.py, tests/node/test_helm.py) run helm, built from Go
# modules too (about 4 minutes cold on 2 cores) and cached.
step "tools/helm/build.sh"
bash "$root/tools/helm/build.sh" >/dev/null
if [ "$node" = 1 ] && [ "$(id -u)" = 0 ]; then
  step "tools/node/build.sh"
  bash "$root/tools/node/build.sh" >/dev/null
  # The node runs Kueue (tests/node/test_kueue_install.py; issue 24): its manager from Go modules,
  # about 12 minutes cold on 2 cores, then cached; its image and manifests take a second after.
  step "tools/kueue/build.sh"
  bash "$root/tools/kueue/build.sh" >/dev/null
  step "waiting for the images"
  if ! wait "$images_pid"; then
    images_pid=
    echo "building the images failed:" >&2
    tail -n 40 "$images_log" >&2
    exit 1
  fi
  images_pid=
  # tests/local/test_podman.py runs replicas in the base and training images from podman's store:
  # imported now (a first import of the training image copies 6.7 GB), not while the node tests
  # run, whose kubelet deletes images under disk pressure.
  step "tools/images/podman-import.sh base training"
  bash "$root/tools/images/podman-import.sh" base training >/dev/null
fi
[ "$node" = 1 ] || args=(-m "not node" "${args[@]}")
if [ "$stress" = 1 ]; then
  case "$repeat$hogs" in *[!0-9]*) echo "--repeat and --hogs take a whole number" >&2; exit 2 ;; esac
  git -C "$root" rev-parse --verify -q "$since^{commit}" >/dev/null || { echo "--since=$since: not a commit here" >&2; exit 2; }
  hog_pids=()
  for _ in $(seq "$hogs"); do
    # A busy loop per core, bounded in time, ended with the script (the trap below).
    timeout 14400 bash -c 'while :; do :; done' &
    hog_pids+=($!)
  done
  trap 'rm -f "$images_log"; [ -z "$images_pid" ] || kill "$images_pid" 2>/dev/null || true; kill "${hog_pids[@]}" 2>/dev/null || true' EXIT
  step "pytest under load ($hogs CPU hogs beside it; three workers: the two lanes plus one)"
  set +e
  "$bin/python" -m pytest -p no:cacheprovider --durations=20 -n 3 "${args[@]}"
  code=$?
  set -e
  [ "$code" -ne 5 ] || code=1
  mapfile -t changed < <(cd "$root" && "$bin/python" scripts/changed_tests.py "$since")
  if [ "${#changed[@]}" -eq 0 ]; then
    echo "no test file changed since $since, and none names a changed module of src/: nothing to repeat" >&2
  fi
  for round in $(seq "$repeat"); do
    [ "${#changed[@]}" -gt 0 ] || break
    round_seed="$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
    step "the tests of what changed since $since, round $round of $repeat under load (seed $round_seed): ${changed[*]}"
    set +e
    "$bin/python" -m pytest -p no:cacheprovider -q -n 2 --randomly-seed="$round_seed" "${changed[@]}"
    again=$?
    set -e
    [ "$code" -ne 0 ] || code=$again
  done
  step "done (stress, exit $code)"
  summary
  exit "$code"
fi
step "pytest"
set +e
# Two lanes (see the top): the node tests share one node, so one worker runs them all, in order.
"$bin/python" -m pytest -p no:cacheprovider --durations=20 -n 2 "${args[@]}"
code=$?
set -e
step "done (pytest exit $code)"
summary
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$code"
