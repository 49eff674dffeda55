#!/usr/bin/env bash
# Run train_deepspeed.py under DeepSpeed's real launcher with WORKERS workers (default 2) on this machine.
#
#   bash tools/launchers/deepspeed.sh nossh [train_deepspeed.py args]   one `deepspeed --no_ssh --node_rank=i` per worker
#   bash tools/launchers/deepspeed.sh ssh   [train_deepspeed.py args]   an sshd per worker on 127.0.0.1 (own port each);
#                                               worker-0's `deepspeed --launcher=pdsh` reaches them
#
# Needs `deepspeed` on PATH (the python that runs it runs the ranks). ssh mode also needs root,
# /usr/sbin/sshd (openssh-server), ssh and pdsh. Everything lives in a temporary folder; on exit,
# whatever still carries this run's marker variable (sshd sessions' children included) is stopped.
# docs/launchers.md explains each flag.
set -euo pipefail

mode=${1:-nossh}
shift || true
workers=${WORKERS:-2}
here=$(cd "$(dirname "$0")/../../examples/deepspeed-digits" && pwd)
tmp=$(mktemp -d /tmp/ds-launch.XXXXXX)
marker="T9K_LAUNCH_ID=$tmp"
pids=()

# Run a command in the background and wait for it: a trapped SIGTERM/SIGINT interrupts `wait` at
# once (a foreground command would delay the trap until it ended).
run() {
    "$@" &
    pids+=($!)
    wait $!
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Stop every process whose environment carries this run's marker (the ranks started through
# sshd are not our descendants), then our own background processes.
cleanup() {
    local p left
    unset T9K_LAUNCH_ID
    for sig in TERM KILL; do
        left=
        for p in /proc/[0-9]*; do
            [ "${p#/proc/}" = "$$" ] && continue
            if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF "$marker"; then
                kill "-$sig" "${p#/proc/}" 2>/dev/null && left=1
            fi
        done
        [ -z "$left" ] && break
        sleep 2
    done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

master_port=$(free_port)
: >"$tmp/hostfile"
for ((i = 0; i < workers; i++)); do echo "worker-$i slots=1" >>"$tmp/hostfile"; done
export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1
cd "$here"

if [ "$mode" = nossh ]; then
    # One launcher per worker, as the local runtime would start each replica. With --no_ssh the
    # launcher neither reads .deepspeed_env nor uses ssh: the env is this process's env.
    export "$marker"
    for ((i = 1; i < workers; i++)); do
        deepspeed --hostfile="$tmp/hostfile" --no_ssh --node_rank=$i --master_addr=127.0.0.1 \
            --master_port="$master_port" train_deepspeed.py "$@" >"$tmp/worker-$i.log" 2>&1 &
        pids+=($!)
    done
    code=0
    run deepspeed --hostfile="$tmp/hostfile" --no_ssh --node_rank=0 --master_addr=127.0.0.1 \
        --master_port="$master_port" train_deepspeed.py "$@" || code=$?
    for p in "${pids[@]:0:workers-1}"; do wait "$p" || echo "a worker's launcher exited $?" >&2; done
    pids=()
    exit "$code" # worker-0 decides, as in a DeepSpeedJob
fi

[ "$mode" = ssh ] || { echo "usage: $0 nossh|ssh [train_deepspeed.py args]" >&2; exit 2; }
mkdir -p -m 700 "$tmp/ssh"
ssh-keygen -q -t ed25519 -N '' -C t9k-launch -f "$tmp/ssh/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -C host -f "$tmp/ssh/host_key"
cp "$tmp/ssh/id_ed25519.pub" "$tmp/ssh/authorized_keys"
chmod 600 "$tmp/ssh/authorized_keys"
mkdir -p -m 755 /run/sshd # Debian's sshd exits 255 without its privilege separation directory
for ((i = 0; i < workers; i++)); do
    port=$(free_port)
    printf 'Host worker-%s\n  HostName 127.0.0.1\n  Port %s\n' "$i" "$port" >>"$tmp/ssh/config"
    # The marker reaches sshd's own environment only; the ranks get it from the env file below.
    # StrictModes=no: the keys are under /tmp, which is world-writable (sshd checks every parent).
    env "$marker" /usr/sbin/sshd -D -e -p "$port" -o ListenAddress=127.0.0.1 -h "$tmp/ssh/host_key" \
        -o AuthorizedKeysFile="$tmp/ssh/authorized_keys" -o StrictModes=no -o PidFile=none \
        >"$tmp/sshd-$i.log" 2>&1 &
    pids+=($!)
done
cat >>"$tmp/ssh/config" <<EOF
Host worker-*
  User root
  IdentityFile $tmp/ssh/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
EOF
for ((i = 0; i < workers; i++)); do
    n=0
    until ssh -F "$tmp/ssh/config" "worker-$i" true 2>/dev/null; do
        n=$((n + 1))
        [ $n -ge 50 ] && { echo "sshd for worker-$i did not answer" >&2; cat "$tmp/sshd-$i.log" >&2; exit 1; }
        sleep 0.2
    done
done
# What the launcher exports on every worker (the T9k env file): NAME=VALUE lines, no blank lines.
printf 'DS_ACCELERATOR=cpu\nOMP_NUM_THREADS=1\n%s\n' "$marker" >"$tmp/deepspeed_env"
# pdsh's ssh gets the config through PDSH_SSH_ARGS_APPEND; the launcher's own ssh check and its
# `ssh worker-0 hostname -I` master lookup do not, hence --no_ssh_check and --master_addr.
run env "$marker" DS_ENV_FILE="$tmp/deepspeed_env" PDSH_SSH_ARGS_APPEND="-F $tmp/ssh/config" \
    deepspeed --hostfile="$tmp/hostfile" --launcher=pdsh --no_ssh_check --master_addr=127.0.0.1 \
    --master_port="$master_port" train_deepspeed.py "$@"
