"""A replica's status from what exists: its pod, or the status recorded before its pod went."""

from __future__ import annotations

from ..api.common import ContainerStatus, ReplicaStatus
from ..frameworks import Final, ReplicaGroup
from .context import ACTIVE, BENIGN_WAITING, MESSAGE_LIMIT, PLAIN_REASONS
from .types import ContainerState, ObservedPod


def from_pod(pod: ObservedPod, restart_count: int) -> ReplicaStatus:
    """A replica's status from its pod. A pod not yet scheduled is ``Creating`` with no uid
    (a pod being replaced is ``Creating`` too: :func:`on_its_way_out`).

    The phase is the pod's :attr:`~ObservedPod.effective_phase`. ``reason``/``message``: the
    pod's own, else those of ``PodScheduled=False`` while unscheduled, else those of an init
    container that waits for a reason other than the benign ones. A pod the scheduler preempts
    (:attr:`~ObservedPod.preempted`) says so instead (``PreemptionByScheduler`` with the
    scheduler's message): the status remembers it when the pod vanishes before the next pass.
    """
    phase: str = pod.effective_phase
    uid = pod.uid
    reason, message = pod.reason, pod.message
    if pod.preempted:
        reason, message = pod.disruption_reason, pod.disruption_message
    if phase == "Pending" and not pod.scheduled:
        phase, uid = "Creating", ""
        if reason is None:
            reason, message = pod.scheduling_reason, pod.scheduling_message
    if reason is None and phase in ACTIVE:
        for ic in pod.init_containers:
            if ic.state == "Waiting" and ic.reason and ic.reason not in BENIGN_WAITING:
                reason = ic.reason
                message = f"init container {ic.name}" + (f": {ic.message}" if ic.message else "")
                break
    return ReplicaStatus(
        name=pod.name,
        uid=uid,
        phase=phase,  # type: ignore[arg-type]
        reason=reason,
        message=cut(message),
        restart_count=restart_count,
        containers=[container_status(c) for c in pod.containers],
    )


def on_its_way_out(pod: ObservedPod, restart_count: int) -> ReplicaStatus:
    """The status of a replica whose pod ``pod`` is being replaced (restarted, relaunched,
    preempted): ``Creating``, with what that pod showed and no uid. The engine knows the pod
    being replaced by the pod itself (its restart-attempt label, its deletion), never by the
    status (docs/decisions.md, "Restart marker: the attempt label alone")."""
    return from_pod(pod, restart_count).model_copy(update={"phase": "Creating", "uid": ""})


def being_replaced(rs: ReplicaStatus) -> bool:
    """Whether a replica's status shows the pod being replaced rather than its new one: ``Creating``
    with containers that have run (a new pod is ``Creating`` only while not scheduled, so its
    containers have not started), or, in a status an older version wrote, with the uid it kept
    as its restart marker."""
    return rs.phase == "Creating" and (bool(rs.uid) or any(c.state != "Waiting" for c in rs.containers))


def container_status(c: ContainerState) -> ContainerStatus:
    """A container's status for ``status.tasks[].replicas[].containers`` (see :class:`ContainerStatus`)."""
    terminated = c.state == "Terminated"
    keep_message = not terminated or c.reason not in PLAIN_REASONS
    return ContainerStatus(
        name=c.name,
        state=c.state,
        exit_code=c.exit_code if terminated else None,
        reason=c.reason,
        message=cut(c.message) if keep_message else None,
    )


def cut(text: str | None) -> str | None:
    if not text:
        return None
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def final_from_status(rs: ReplicaStatus, g: ReplicaGroup) -> Final:
    """The end of a replica whose pod is gone, as its last status recorded it."""
    code, creason = None, None
    for c in rs.containers:
        if c.name == g.training_container:
            code, creason = c.exit_code, c.reason
    if rs.phase == "Deleted":
        return Final(rs.name, False, code, "deleted")
    return Final(rs.name, rs.phase == "Succeeded", code, informative(rs.reason, creason))


def informative(*reasons: str | None) -> str | None:
    """The reasons that add to an exit code, without repeats, joined by ``, ``; ``None`` if none."""
    out: list[str] = []
    for r in reasons:
        if r and r not in PLAIN_REASONS and r not in out:
            out.append(r)
    return ", ".join(out) or None


def end_reason(pod: ObservedPod, container: str) -> str | None:
    """Why the pod ended, beyond its exit code: the pod's reason (``Evicted``) and the container's
    terminated reason (``OOMKilled``), or the init container that failed when no container ran."""
    c = pod.ended_container(container)
    reason = informative(pod.reason, c.reason if c is not None and c.state == "Terminated" else None)
    if reason is None and (c is None or c.exit_code is None):
        for ic in pod.init_containers:
            if ic.state == "Terminated" and ic.exit_code not in (None, 0):
                return f"init container {ic.name} exited with code {ic.exit_code}"
    return reason
