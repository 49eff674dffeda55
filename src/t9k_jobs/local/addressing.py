"""Where a local run's replicas find each other: :class:`LocalAddressing`, the local twin of a
cluster's Services and mounted ConfigMaps and Secrets (:class:`t9k_jobs.addressing.Addressing`).
"""

from __future__ import annotations

import base64
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from .ownership import working_dir
from .rundir import RunDir


class LocalAddressing:
    """Every replica's host is this machine; every (replica, port name) gets its own free port.

    Ports are picked once, by binding port 0 on the loopback interface, and kept for the
    whole run so a restarted replica listens where its peers expect it. ConfigMaps and Secrets
    the job owns are files under ``<run dir>/children/<kind>/<name>/<key>``
    (:func:`write_child_files`).
    """

    def __init__(self, run_dir: Path | None = None) -> None:
        self._ports: dict[tuple[str, str, int, str], int] = {}
        self.run_dir = run_dir
        self._addresses: dict[tuple[str, str, int], str] = {}
        self._net = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"

    def child_file(self, kind: str, name: str, key: str) -> str | None:
        return str(RunDir(self.run_dir or working_dir()).child_file(kind, name, key))

    def own_address(self, job_name: str, replica_type: str, index: int) -> str:
        """``127.<a>.<b>.<n>``: the whole of 127/8 reaches this machine, so every replica that asks
        gets an address of its own; ``<a>.<b>`` are random per run, so two runs never share one."""
        key = (job_name, replica_type, index)
        if key not in self._addresses:
            self._addresses[key] = f"{self._net}.{len(self._addresses) + 1}"
        return self._addresses[key]

    def host(self, job_name: str, replica_type: str, index: int) -> str:
        return "127.0.0.1"

    def port(self, job_name: str, replica_type: str, index: int, name: str, declared: int) -> int:
        key = (job_name, replica_type, index, name)
        if key not in self._ports:
            self._ports[key] = _free_port(set(self._ports.values()))
        return self._ports[key]


def _free_port(taken: set[int]) -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port
    raise RuntimeError("no free TCP port on 127.0.0.1")



def write_child_files(addressing: LocalAddressing, obj: dict[str, Any]) -> None:
    """Write a ConfigMap's or Secret's keys where :meth:`LocalAddressing.child_file` says, as a
    pod would see them mounted: directories 0700, a Secret's files 0600."""
    kind = obj.get("kind")
    if kind not in ("ConfigMap", "Secret"):
        return
    name = obj["metadata"]["name"]
    data: dict[str, bytes] = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()} if kind == "ConfigMap" else {}
    if kind == "Secret":
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
    for key, value in data.items():
        path = Path(addressing.child_file(kind, name, key) or "")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if kind == "Secret" else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(value)


__all__ = ["LocalAddressing", "write_child_files"]
