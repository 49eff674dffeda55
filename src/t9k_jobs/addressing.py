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


def replica_prefix(job_name: str, pod: str, container: str | None = None) -> str:
    """The tag of a replica's lines in a job's merged log, inside ``[...]``: the pod's name
    without ``<job>-`` (``worker-1``), then ``/<container>`` when ``container`` is given
    (``worker-1/sidecar``; a caller names the container only when the pod has several). The
    local runtime writes it before each line of ``job.log`` and the cluster's ``logs`` before
    each line it merges, so a job's log reads the same on both targets (and ``logs --type``
    finds a type's lines by it)."""
    tag = pod[len(job_name) + 1 :] if pod.startswith(job_name + "-") else pod
    return f"{tag}/{container}" if container is not None else tag
