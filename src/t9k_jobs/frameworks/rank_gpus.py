"""A DeepSpeed rank in a local run: the slots its launcher gives it read as its worker's own GPUs.

DeepSpeed's per-node launcher (``deepspeed/launcher/launch.py``, 0.19.8) sets
``CUDA_VISIBLE_DEVICES`` of every rank of a node to that node's slot list, the integers the
runner took from the hostfile (``worker-1 slots=2`` gives ``0,1``; ``--include`` picks others),
and each rank picks its device by ``LOCAL_RANK``. In a pod those indices count the container's
own devices, the ones the device plugin gave it. On one machine they count the machine's GPUs, so
the ranks of every worker would start at device 0 and collide.

So a local run gives ``deepspeed`` this file as the training script. launch.py starts it as it
would start the script: ``<python> -u rank_gpus.py [--local_rank=<k>] MODE TARGET ARGS...``. It
reads the slots as CUDA reads a container's indices, against the worker's devices
(:data:`DEVICES_ENV`, which the run sets on every container), and replaces itself with the rank
that launch.py would have started:

- ``python``: ``<python> -u TARGET [--local_rank=<k>] ARGS`` (``spec.config.run.python``);
- ``module``: ``<python> -u -m TARGET [--local_rank=<k>] ARGS`` (``run.module``);
- ``exec``: ``TARGET [--local_rank=<k>] ARGS`` (``run.exec``, deepspeed's ``--no_python``).

Without :data:`DEVICES_ENV` (not started by a local run) it changes nothing. The file stands
alone: it runs under deepspeed's interpreter, which need not have t9k_jobs installed.
"""

from __future__ import annotations

import os
import sys

#: Set by a local run on every container: the ids of the devices it was given (physical indices
#: or UUIDs, comma separated; empty for none), what a container on a cluster sees as its devices.
DEVICES_ENV = "T9K_JOBS_GPUS"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
MODES = ("python", "module", "exec")


def translate(devices: list[str], visible: str) -> str:
    """``visible``, a ``CUDA_VISIBLE_DEVICES`` value as a process inside a container would have
    it, in the machine's terms: an index ``i`` is the container's ``devices[i]``, a UUID (or a
    prefix of one) one of ``devices``. As CUDA does, the list ends at the first entry that names
    none of them, and a device named twice counts once. ``translate(["2", "3"], "0,1") == "2,3"``;
    ``translate([], "0") == ""``."""
    chosen: list[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            found = devices[int(entry)] if int(entry) < len(devices) else None
        else:
            found = next((d for d in devices if entry and not d.isdigit() and d.startswith(entry)), None)
        if found is None:
            break
        if found not in chosen:
            chosen.append(found)
    return ",".join(chosen)


def rank_command(argv: list[str], python: str) -> list[str]:
    """The rank launch.py would have started, from this file's arguments (see the module's
    docstring). Raises ``ValueError`` (one line) for arguments it was not given by a local run."""
    local_rank = [argv.pop(0)] if argv and argv[0].startswith("--local_rank=") else []
    if len(argv) < 2 or argv[0] not in MODES:
        raise ValueError(f"expected [--local_rank=K] {'|'.join(MODES)} TARGET [ARGS...], got {argv!r}")
    mode, target, args = argv[0], argv[1], argv[2:]
    head = {"python": [python, "-u", target], "module": [python, "-u", "-m", target], "exec": [target]}[mode]
    return [*head, *local_rank, *args]


def main() -> None:
    try:
        cmd = rank_command(sys.argv[1:], sys.executable)
    except ValueError as exc:
        sys.exit(f"t9k-jobs rank_gpus.py: {exc}")
    devices = os.environ.get(DEVICES_ENV)
    if devices is not None and VISIBLE_ENV in os.environ:
        ids = [d.strip() for d in devices.split(",") if d.strip()]
        os.environ[VISIBLE_ENV] = translate(ids, os.environ[VISIBLE_ENV])
    sys.stdout.flush()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:  # an exec target that is not there or cannot run, as a shell says it
        print(f"t9k-jobs rank_gpus.py: cannot run {cmd[0]}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
