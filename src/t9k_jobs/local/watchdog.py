"""The run's watchdog: what kills a run's processes when its runtime dies without stopping them.

The watchdog is a script of its own (:data:`_WATCHDOG`, run by ``python -c``): it imports nothing
of ours, so it reads ``/proc`` by hand, as :mod:`t9k_jobs.local.procfs` does.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .processes import RUN_ENV
from .rundir import RunDir

_WATCHDOG = """import os, shutil, signal, subprocess, sys, time
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
try:  # the run's own folder under /dev/shm (its Memory emptyDirs), where it made one
    shm = open(os.path.join(sys.argv[2], sys.argv[3])).read().strip()
except OSError:
    shm = ""
if shm.startswith("/dev/shm/t9k-jobs-") and "/" not in shm[len("/dev/shm/"):]:
    points = [line.split()[4] for line in open("/proc/self/mountinfo") if len(line.split()) > 4]
    for point in sorted((p for p in points if p.startswith(shm + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)  # a sizeLimit's tmpfs
    shutil.rmtree(shm, ignore_errors=True)
"""


def start_watchdog(run_marker: str) -> subprocess.Popen[bytes]:
    """A process of its own session that outlives this one: when this process dies, however it
    dies (SIGKILL included), it kills every process carrying the run's marker within a second
    (a contained container's namespace ends with its monitor), then removes the run's own folder
    under ``/dev/shm`` that ``shm.path`` in the run dir (``run_marker``) names, if any
    (:func:`t9k_jobs.local.volumes.make_shm_dir`; its tmpfs mounts unmounted first). The run
    stops it at its normal end. It carries no marker itself."""
    env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), run_marker, RunDir.SHM],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )


__all__ = ["start_watchdog"]
