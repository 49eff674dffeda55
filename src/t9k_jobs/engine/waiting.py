"""Replicas that wait for a reason (no image, no ConfigMap, no node): reported once, and in the status."""

from __future__ import annotations

from ..api.common import ReplicaStatus
from .context import ACTIVE, BENIGN_WAITING, SAME_CAUSE, Pass
from .replica_status import being_replaced
from .types import PREEMPTION_BY_SCHEDULER, Event


def waiting(rs: ReplicaStatus) -> list[tuple[str, str]]:
    """Why an active replica's pod cannot go on, as ``(reason, text)`` pairs; empty when none.

    From its status (so a later pass compares with the stored one): the pod-level reason
    (``Unschedulable`` with the scheduler's message, an init container's waiting reason) and each
    container's waiting reason other than the benign ``ContainerCreating``/``PodInitializing``
    (``ErrImageNeverPull``, ``ErrImagePull``/``ImagePullBackOff``, ``CreateContainerConfigError``,
    ``CrashLoopBackOff``...). ``text`` is ``<reason>[ (container <name>)][: <message>]``. A
    replica whose status shows the pod being replaced (:func:`~.replica_status.being_replaced`)
    waits for nothing of its own.
    """
    if rs.phase not in ACTIVE or being_replaced(rs):
        return []
    out: list[tuple[str, str]] = []
    if rs.reason and rs.reason not in BENIGN_WAITING and rs.reason != PREEMPTION_BY_SCHEDULER:
        out.append((rs.reason, rs.reason + (f": {rs.message}" if rs.message else "")))
    several = len(rs.containers) > 1
    for c in rs.containers:
        if c.state == "Waiting" and c.reason and c.reason not in BENIGN_WAITING:
            where = f" (container {c.name})" if several else ""
            out.append((c.reason, c.reason + where + (f": {c.message}" if c.message else "")))
    return out


def waiting_events(p: Pass, replicas: dict[str, ReplicaStatus]) -> list[Event]:
    """One Warning ``ReplicaWaiting`` event per replica when a reason to wait first appears.

    Compared with the replica's status stored by the previous pass, so a reason that stays is
    not reported again on every pass; ``ErrImagePull`` and ``ImagePullBackOff``, which the
    kubelet alternates between for one missing image, count as one reason.
    """
    out = []
    for name, rs in replicas.items():
        now = waiting(rs)
        if not now:
            continue
        prev = p.prior(name)
        before = {SAME_CAUSE.get(r, r) for r, _ in (waiting(prev) if prev is not None else [])}
        new = [text for r, text in now if SAME_CAUSE.get(r, r) not in before]
        if new:
            out.append(Event("Warning", "ReplicaWaiting", f"{name} is waiting: {'; '.join(new)}"))
    return out


def waiting_message(p: Pass, replicas: dict[str, ReplicaStatus]) -> str:
    """``<pod>[, <pod>...] is/are waiting: <reason>: <message>`` for every replica that waits, in
    replica order; replicas waiting for the same reason and message share one entry (three
    names, then ``and N more``); at most five entries. Empty when no replica waits."""
    by_text: dict[str, list[str]] = {}
    for _, _, name in p.desired():
        rs = replicas.get(name)
        for _, text in waiting(rs) if rs is not None else []:
            by_text.setdefault(text, []).append(name)
    parts = []
    for text, names in list(by_text.items())[:5]:
        who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{who} {'is' if len(names) == 1 else 'are'} waiting: {text}")
    if len(by_text) > 5:
        parts.append(f"and {len(by_text) - 5} more reasons")
    return "; ".join(parts)
