#!/usr/bin/env bash
# Run train_colossalai.py under ColossalAI's real launcher, `colossalai run`, on this machine.
#
#   bash tools/launchers/colossalai.sh local [train_colossalai.py args]  no hostfile: torchrun here with WORKERS processes
#   bash tools/launchers/colossalai.sh ssh   [train_colossalai.py args]  an sshd per worker, each on its own loopback address
#                                              (127.0.1.1, 127.0.1.2, ...); `colossalai run
#                                              --hostfile` reaches them with fabric (paramiko)
#
# WORKERS defaults to 2. Needs `colossalai` and `torchrun` on PATH (one environment). ssh mode also
# needs root and /usr/sbin/sshd (openssh-server); no ssh client (paramiko speaks ssh itself).
# Everything lives in a temporary folder; on exit, whatever still carries this run's marker
# variable (sshd sessions' children included) is stopped. docs/launchers.md explains each flag.
set -euo pipefail

mode=${1:-local}
shift || true
workers=${WORKERS:-2}
here=$(cd "$(dirname "$0")/../../examples/colossalai-digits" && pwd)
tmp=$(mktemp -d /tmp/cai-launch.XXXXXX)
marker_name=T9K_LAUNCH_ID
marker="$marker_name=$tmp"
pids=()

# A port free on every address (the sshds share one port, each on its own address).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1])'; }

run() {
    "$@" &
    pids+=($!)
    wait $!
}

# Stop every process whose environment carries this run's marker (colossalai run exports its
# whole environment to the workers, so the ranks under sshd carry it), then our own children.
cleanup() {
    local p left
    unset "$marker_name"
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
export OMP_NUM_THREADS=1 "$marker"
cd "$here"

if [ "$mode" = local ]; then
    # Without --hostfile/--host, colossalai run runs torchrun on this host itself (no ssh).
    run colossalai run --nproc_per_node="$workers" --master_port="$master_port" train_colossalai.py "$@"
    exit 0
fi

[ "$mode" = ssh ] || { echo "usage: $0 local|ssh [train_colossalai.py args]" >&2; exit 2; }
# paramiko finds its key and ssh config under $HOME/.ssh (Python's expanduser reads $HOME).
home="$tmp/home"
mkdir -p -m 700 "$home/.ssh" "$tmp/sshd"
ssh-keygen -q -t ed25519 -N '' -C t9k-launch -f "$home/.ssh/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -C host -f "$tmp/sshd/host_key"
cp "$home/.ssh/id_ed25519.pub" "$tmp/sshd/authorized_keys"
printf 'Host 127.0.1.*\n  User root\n  IdentityFile %s\n' "$home/.ssh/id_ed25519" >"$home/.ssh/config"
chmod 600 "$home/.ssh/config" "$tmp/sshd/authorized_keys"
mkdir -p -m 755 /run/sshd # Debian's sshd exits 255 without its privilege separation directory
ssh_port=$(free_port)
: >"$tmp/hostfile"
for ((i = 0; i < workers; i++)); do
    # Each worker's own address: colossalai run resolves every hostfile name (an ssh-config alias
    # fails) and runs a name that is this host (127.0.0.1, localhost) locally, without ssh.
    addr=127.0.1.$((i + 1))
    echo "$addr" >>"$tmp/hostfile"
    # StrictModes=no: the keys are under /tmp, which is world-writable (sshd checks every parent).
    /usr/sbin/sshd -D -e -p "$ssh_port" -o ListenAddress="$addr" -h "$tmp/sshd/host_key" \
        -o AuthorizedKeysFile="$tmp/sshd/authorized_keys" -o StrictModes=no -o PidFile=none \
        >"$tmp/sshd-$i.log" 2>&1 &
    pids+=($!)
done
for ((i = 0; i < workers; i++)); do
    n=0
    until python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).recv(4)' \
        "127.0.1.$((i + 1))" "$ssh_port" 2>/dev/null; do
        n=$((n + 1))
        [ $n -ge 50 ] && { echo "sshd for worker-$i did not answer" >&2; cat "$tmp/sshd-$i.log" >&2; exit 1; }
        sleep 0.2
    done
done
# --ssh-port (with a hyphen) is one port for every host; the ranks run in this folder (the
# launcher's working directory) with the launcher's environment, PATH included.
run env HOME="$home" colossalai run --nproc_per_node=1 --hostfile="$tmp/hostfile" --ssh-port="$ssh_port" \
    --master_addr=127.0.1.1 --master_port="$master_port" train_colossalai.py "$@"
