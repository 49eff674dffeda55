"""How replicas are named and reach each other: the vocabulary the engine and the frameworks share.

It lives below both (``engine`` calls the frameworks; the frameworks build pods with these
names), so that neither imports the other to get it.
"""

from __future__ import annotations

from typing import Protocol


class Addressing(Protocol):
    """How replicas reach each other: host names and port numbers.

    On a cluster a replica's host is its per-replica Service name and a named port is the
    declared port. The local runtime maps every host to this machine and gives each
    replica its own ports so replicas never collide.
    """

    def host(self, job_name: str, replica_type: str, index: int) -> str: ...

    def port(self, job_name: str, replica_type: str, index: int, name: str, declared: int) -> int: ...

    def child_file(self, kind: str, name: str, key: str) -> str | None:
        """Where a replica reads ``key`` of the child ``kind``/``name`` (a ConfigMap, a Secret) as a
        file: ``None`` on a cluster (the pod mounts it where its framework says), a path in the
        run directory locally."""
        ...

    def own_address(self, job_name: str, replica_type: str, index: int) -> str:
        """An IPv4 address that is this replica's alone, for servers that must tell replicas
        apart by address (an sshd per worker): its Service name's address on a cluster, a
        loopback address of its own locally."""
        ...


class ClusterAddressing:
    """Addressing inside a Kubernetes cluster: ``<job>-<type>-<index>`` Services, declared ports."""

    def host(self, job_name: str, replica_type: str, index: int) -> str:
        return replica_name(job_name, replica_type, index)

    def port(self, job_name: str, replica_type: str, index: int, name: str, declared: int) -> int:
        return declared

    def child_file(self, kind: str, name: str, key: str) -> str | None:
        return None

    def own_address(self, job_name: str, replica_type: str, index: int) -> str:
        return self.host(job_name, replica_type, index)


def replica_name(job_name: str, replica_type: str, index: int | None) -> str:
    """Pod and Service name of a replica: ``<job>-<type>-<index>``, or ``<job>-<type>`` without index."""
    if index is None:
        return f"{job_name}-{replica_type}"
    return f"{job_name}-{replica_type}-{index}"
