"""The run's watchdog: what kills a run's processes when its runtime dies without stopping them.

The watchdog is a script of its own (:data:`_WATCHDOG`, run by ``python -c``): it imports nothing
of ours, so it reads ``/proc`` by hand, as :mod:`t9k_jobs.local.procfs` does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .processes import RUN_ENV
from .volumes import shm_dir

_WATCHDOG = """import os, shutil, signal, sys, time
runtime, marker = int(sys.argv[1]), ("T9K_JOBS_RUN_DIR=" + sys.argv[2]).encode()
def state(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return fields[0], fields[19]
birth = state(runtime)[1]
while True:
    try:
        alive, start = state(runtime)
        if alive == "Z" or start != birth:
            break
    except OSError:
        break
    time.sleep(0.5)
for _ in range(10):  # the run's processes, however they were reparented, a few times over
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker in open(f"/proc/{pid}/environ", "rb").read().split(b"\\0"):
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2)
shutil.rmtree(sys.argv[3], ignore_errors=True)  # the run's Memory emptyDirs
"""


def start_watchdog(run_marker: str) -> subprocess.Popen[bytes]:
    """A process of its own session that outlives this one: when this process dies, however it
    dies (SIGKILL included), it kills every process carrying the run's marker within a second
    (a contained container's namespace ends with its monitor), then removes the run's Memory
    emptyDirs (:func:`t9k_jobs.local.volumes.shm_dir`). The run stops it at its normal end. It
    carries no marker itself."""
    env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), run_marker, str(shm_dir(Path(run_marker)))],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )


__all__ = ["start_watchdog"]
