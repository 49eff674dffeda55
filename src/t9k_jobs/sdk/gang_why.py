"""Why a native gang waits, and whether it was preempted: ``describe``'s words (issue 22).

Pure functions over the objects as the API server returns them (plain dicts): a job's pods
(core/v1 ``Pod``) and its ``scheduling.k8s.io/v1beta1`` ``PodGroup`` (Kubernetes v1.37.2,
``staging/src/k8s.io/api/scheduling/v1beta1/types.go``: ``spec.schedulingPolicy.gang.minCount``;
``status.conditions`` are ``metav1.Condition`` {type, status, reason, message,
lastTransitionTime}, of types ``PodGroupInitiallyScheduled`` (reasons ``Unschedulable``,
``SchedulerError``; terminal once True) and ``DisruptionTarget`` (reason ``PreemptionByScheduler``)).

What the default scheduler writes, read from v1.37.2 ``pkg/scheduler/schedule_one_podgroup.go``
and ``framework/plugins/gangscheduling``: it tries a gang's pods in one cycle, each on the nodes
left by those placed before it. A pod that finds no node gets ``PodScheduled=False``, reason
``Unschedulable``, with its own fit error (``0/N nodes are available: 1 Insufficient cpu.
preemption: ...``: a count of nodes per reason, never the nodes' names). When the gang as a whole
cannot be placed, the pods that did find a node are rejected too, with the gang's message
instead (``minCount (3) cannot be satisfied: 2 scheduled, 0 remaining``), which the PodGroup's
``PodGroupInitiallyScheduled=False`` condition also carries. Pods waiting in Permit for the rest
of the gang and bound pods carry no ``Unschedulable`` condition.
"""

from __future__ import annotations

import re
from typing import Any

from ..api import JobStatus
from ..engine.types import PREEMPTION_BY_SCHEDULER
from ..words import parse_time

#: The fit error's head (v1.37.2 ``pkg/scheduler/framework/types.go`` ``NoNodeAvailableMsg``).
_FIT_ERROR = re.compile(r"^0/(\d+) nodes are available:\s*")
#: The gang plugin's placement message: ``minCount (3) cannot be satisfied: 2 scheduled, 0 remaining``.
_PLACEMENT = re.compile(r"minCount \((\d+)\) (?:cannot be|is not yet) satisfied: (\d+) scheduled, (\d+) remaining")
_COUNTED = re.compile(r"^(\d+) (.+)$")


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The ``status.conditions`` entry of ``type_`` in ``obj`` (a dict as the API server returns
    it), None when ``obj`` is None or has none."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def node_reasons(message: str | None) -> str | None:
    """Why no node fits, from a scheduler fit error: ``"0/2 nodes are available: 1 Insufficient
    cpu, 1 node(s) had untolerated taint(s). preemption: ..."`` gives ``"1 of 2 nodes: Insufficient
    cpu; 1 of 2 nodes: node(s) had untolerated taint(s)"``; a reason without a count (a PreFilter's,
    said once for all nodes) is kept as it is. The preemption part is left out. None when
    ``message`` is not a fit error."""
    m = _FIT_ERROR.match(message or "")
    if m is None:
        return None
    total, body = m.group(1), (message or "")[m.end():]
    body = body.split(" preemption: ", 1)[0].strip()
    body = body[:-1] if body.endswith(".") else body
    parts = []
    for item in (s.strip() for s in body.split(", ")):
        if not item:
            continue
        counted = _COUNTED.match(item)
        parts.append(f"{counted.group(1)} of {total} nodes: {counted.group(2)}" if counted else item)
    return "; ".join(parts) or None


def _unschedulable(pod: dict[str, Any]) -> dict[str, Any] | None:
    c = condition(pod, "PodScheduled")
    if c is not None and c.get("status") == "False" and not (pod.get("spec") or {}).get("nodeName"):
        return c
    return None


def gang_waiting(pods: list[dict[str, Any]], pod_group: dict[str, Any] | None) -> str | None:
    """``"gang of 3 waiting: 2 of 3 fit (1 of 1 nodes: Insufficient cpu)"`` for a native gang that
    the scheduler has tried and could not place, None otherwise (no pod joins a ``schedulingGroup``,
    every gang pod is bound, or the scheduler has not looked at any yet).

    ``pods``: the job's live pods (dicts); ``pod_group``: its PodGroup, or None when it could not
    be read (404, not served, not allowed). The gang's size is the PodGroup's ``minCount``, else
    the number of gang pods. How many fit: the scheduler's own count when the PodGroup's
    ``PodGroupInitiallyScheduled`` message has one (``N scheduled``, pods placed in its last
    cycle, bound ones included; pods after the first that could not fit may not have been tried);
    else inferred from the pods: every gang pod but those whose ``Unschedulable`` message is a fit
    error (so bound pods, pods waiting in Permit and pods held back only by their gang count as
    fitting: an upper bound). The reasons are the fit errors' per-node reasons, each said once;
    then ``; PodGroup <name>: <reason>: <message>`` when the PodGroup says it is not scheduled."""
    gang = [p for p in pods if ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")]
    if not gang or all((p.get("spec") or {}).get("nodeName") for p in gang):
        return None
    tried = [p for p in gang if (p.get("spec") or {}).get("nodeName") or condition(p, "PodScheduled")]
    pg_cond = condition(pod_group, "PodGroupInitiallyScheduled")
    pg_unscheduled = pg_cond is not None and pg_cond.get("status") == "False"
    if not tried and not pg_unscheduled:
        return None
    reasons: list[str] = []
    no_room = 0
    for p in gang:
        c = _unschedulable(p)
        why = node_reasons(c.get("message")) if c is not None else None
        if why is not None:
            no_room += 1
            if why not in reasons:
                reasons.append(why)
    policy = ((pod_group or {}).get("spec") or {}).get("schedulingPolicy") or {}
    min_count = (policy.get("gang") or {}).get("minCount")
    size = min_count if isinstance(min_count, int) and min_count > 0 else len(gang)
    placed = _PLACEMENT.search(str(pg_cond.get("message") or "")) if pg_unscheduled else None
    fit = int(placed.group(2)) if placed else len(gang) - no_room
    line = f"gang of {size} waiting: {fit} of {len(gang)} fit"
    if reasons:
        line += f" ({'; '.join(reasons)})"
    if len(gang) < size:
        line += f"; {size - len(gang)} of its pods do not exist yet"
    if pg_unscheduled and pg_cond is not None:
        name = ((pod_group or {}).get("metadata") or {}).get("name", "")
        said = ": ".join(str(x) for x in (pg_cond.get("reason"), pg_cond.get("message")) if x)
        if said:
            line += f"; PodGroup {name}: {said}"
    return line


def preempted_since(status: JobStatus | None, pod_group: dict[str, Any] | None) -> str | None:
    """``"preempted by higher priority at <time>"`` while the job waits after a preemption, None
    otherwise.

    From the job's ``Preempted`` condition when True (the engine's, :mod:`t9k_jobs.engine.preemption`;
    the time is its ``lastTransitionTime``), else from the PodGroup's ``DisruptionTarget``
    condition (True, reason ``PreemptionByScheduler``) while the job is Pending and its own
    ``Preempted`` condition is absent or older (the operator has not seen the preemption yet; the
    PodGroup's condition may stay after the gang is placed again, so a Running job or a newer
    condition of the job wins)."""
    own = status.condition("Preempted") if status is not None else None
    if own is not None and own.status == "True":
        return f"preempted by higher priority at {own.last_transition_time or 'an unknown time'}"
    pg = condition(pod_group, "DisruptionTarget")
    if pg is None or pg.get("status") != "True" or pg.get("reason") != PREEMPTION_BY_SCHEDULER:
        return None
    if status is not None and status.phase != "Pending":
        return None
    when = pg.get("lastTransitionTime")
    if own is not None and when and own.last_transition_time:
        pg_time, own_time = parse_time(when), parse_time(own.last_transition_time)
        if pg_time is not None and own_time is not None and own_time >= pg_time:
            return None
    return f"preempted by higher priority at {when or 'an unknown time'}"


def pod_group_line(pod_group: dict[str, Any]) -> str:
    """``describe``'s ``PodGroup:`` line: ``<name> (minCount N)`` and each condition as
    ``<type>=<status> <reason>: <message>``, separated by ``; ``."""
    meta, spec = pod_group.get("metadata") or {}, pod_group.get("spec") or {}
    min_count = ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount")
    head = f"{meta.get('name', '')}" + (f" (minCount {min_count})" if min_count is not None else "")
    conds = []
    for c in (pod_group.get("status") or {}).get("conditions") or []:
        if not isinstance(c, dict):
            continue
        text = f"{c.get('type')}={c.get('status')}"
        said = ": ".join(str(x) for x in (c.get("reason"), c.get("message")) if x)
        conds.append(text + (f" {said}" if said else ""))
    return head + (": " + "; ".join(conds) if conds else "")
