"""What the day-two verbs print about a job, written once for local runs and cluster jobs alike:
the ``get`` row, ``why`` (the waiting explanation), ``describe`` and the wait messages, over the
one job view both backends return (:class:`t9k_jobs.sdk.view.JobView`); and the pieces they are made
of (the spec summary, conditions, why replicas wait; ages, tables and names are
:mod:`t9k_jobs.words`').

Pure functions of the view, the API models (:mod:`t9k_jobs.api`) and plain values; no I/O.
Times are printed as RFC 3339 in UTC (``2024-05-01T10:00:00Z``), as the API server writes
``creationTimestamp`` and ``-o yaml`` prints it (docs/decisions.md, issue 23).
"""

from __future__ import annotations

from typing import Any

import yaml

from ..api import Job, JobStatus
from ..api.common import TERMINAL_PHASES, ReplicaStatus
from ..frameworks import framework_for
from ..frameworks.base import T9K_SCHEDULER_NAME
from ..words import STOPPED, UNKNOWN, format_table, human_age, rfc3339, short, short_name
from .view import JobView


def groups(job: Job | None) -> list[Any]:
    """The job's replica groups (:class:`t9k_jobs.frameworks.base.ReplicaGroup`, elastic counts
    applied), ``[]`` for None."""
    if job is None:
        return []
    return list(framework_for(job).groups(job))


def replicas_wanted(job: Job | None, status: JobStatus | None) -> int:
    """How many replicas the job has: its spec's, else those in its status."""
    wanted = groups(job)
    if wanted:
        return sum(g.replicas for g in wanted)
    return sum(len(t.replicas) for t in status.tasks) if status is not None else 0


def restarts(status: JobStatus | None) -> int:
    """Restarts of every replica type together (``status.tasks[].restartCount``)."""
    return sum(t.restart_count for t in status.tasks) if status is not None else 0


def run_mode(job: Job | None) -> str:
    """``Immediate``, ``Debug`` or ``Pause``: the job's ``spec.runMode``."""
    if job is None:
        return "-"
    mode = job.run_mode
    return "Pause" if mode.pause_enabled else "Debug" if mode.debug_enabled else "Immediate"


def spec_lines(job: Job | None, spec: dict[str, Any] | None = None) -> list[str]:
    """``describe``'s spec summary: per replica type its count, restart policy (and limit), GPUs
    and command; then runPolicy, runMode, cleanUpPolicy and elastic when set. ``spec`` is the raw
    spec those last come from (default: the job's)."""
    if job is None:
        return ["  (the spec does not validate: see it with -o yaml)"]
    out = []
    for group in groups(job):
        containers = (group.template.get("spec") or {}).get("containers") or []
        main = next(
            (c for c in containers if c.get("name") == group.training_container),
            containers[0] if containers else {},
        )
        command = " ".join(str(x) for x in (main.get("command") or []) + (main.get("args") or []))
        gpus = ((main.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        line = f"  {group.type}: {group.replicas} replica(s), restart {group.restart_policy}"
        if group.limit is not None:
            line += f" (limit {group.limit})"
        if gpus is not None:
            line += f", {gpus} GPU(s)"
        out.append(line)
        if command:
            out.append(f"    command: {short(command)}")
    raw = spec if spec is not None else job.dump().get("spec") or {}
    for key in ("runPolicy", "runMode", "cleanUpPolicy", "elastic"):
        if key in raw and raw[key] not in (None, {}, "None"):
            out.append(f"  {key}: {short(yaml.safe_dump(raw[key], default_flow_style=True).strip(), 120)}")
    return out


def condition_lines(status: JobStatus | None) -> list[str]:
    """``describe``'s conditions table (TYPE STATUS REASON MESSAGE), indented; ``<none>`` without."""
    conds = status.conditions if status is not None else []
    if not conds:
        return ["  <none>"]
    return [
        "  " + line
        for line in format_table(
            ["TYPE", "STATUS", "REASON", "MESSAGE"],
            [[c.type, c.status, c.reason, short(c.message, 80)] for c in conds],
        )
    ]


def exit_codes(rs: ReplicaStatus) -> str:
    """A replica's containers' exit codes, ``,``-joined; ``-`` when none has ended."""
    return ",".join(str(c.exit_code) for c in rs.containers if c.exit_code is not None) or "-"


def replica_reason(rs: ReplicaStatus) -> str:
    """``reason[: message]`` of a replica: its own, else its first container's telling one; ``-``."""
    reason = rs.reason or next((c.reason for c in rs.containers if c.reason and c.reason != "Completed"), "") or "-"
    message = rs.message or next((c.message for c in rs.containers if c.message), "") or ""
    return reason if not message else f"{reason}: {short(message, 80)}"


def replica_problems(status: JobStatus | None) -> str:
    """``"<pod>: <phase> (<reason>: <message>)"`` for each replica not running well, ``; ``-joined."""
    if status is None:
        return ""
    out = []
    for task in status.tasks:
        for rs in task.replicas:
            reason, message = rs.reason, rs.message
            for c in rs.containers:
                if c.state in ("Waiting", "Terminated") and (
                    c.message or (c.reason not in (None, "Completed"))
                ):
                    reason, message = reason or c.reason, message or c.message
            healthy = rs.phase in ("Running", "Succeeded") and not message
            if healthy or (rs.phase == "Succeeded"):
                continue
            if rs.phase == "Running" and not (reason or message):
                continue
            detail = ": ".join(x for x in (reason, message) if x)
            out.append(f"{rs.name}: {rs.phase}" + (f" ({detail})" if detail else ""))
    return "; ".join(out)


def ended_why(status: JobStatus) -> str:
    """Why a finished job ended: its ``Failed`` (or ``Completed``) condition's message, and for a
    failed job the replicas that did not end well (:func:`replica_problems`)."""
    phase = status.phase
    cond = status.condition("Failed" if phase == "Failed" else "Completed")
    head = cond.message if cond is not None and cond.message else phase
    problems = replica_problems(status)
    return head + (f"; {problems}" if phase == "Failed" and problems else "")


def waiting_summary(replicas: list[ReplicaStatus]) -> str:
    """``<pod>[, <pod>...] is/are waiting: <reason>: <message>`` for every replica that waits for a
    reason (unschedulable, an image that cannot be pulled, a missing ConfigMap...), replicas with
    the same reason sharing one entry; ``""`` when none waits (:func:`t9k_jobs.engine.waiting.waiting`)."""
    from ..engine.waiting import waiting  # lazy: keeps the engine out of a local wait and list

    by_text: dict[str, list[str]] = {}
    for rs in replicas:
        for _, text in waiting(rs):
            by_text.setdefault(text, []).append(rs.name)
    parts = []
    for text, names in list(by_text.items())[:5]:
        who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{who} {'is' if len(names) == 1 else 'are'} waiting: {text}")
    return "; ".join(parts)


# ----------------------------------------------------------------------------- names and times


# ----------------------------------------------------------------------------- the get row


def row(view: JobView, now: float) -> dict[str, Any]:
    """One row of ``get``: ``phase``, ``ready`` (``"running/replicas"``), ``restarts``, ``age``,
    ``backoff``; ``wide``: the columns of ``-o wide`` (local: ``pid``, ``run_dir``; cluster:
    ``mode``, ``queue``, ``priority``: the job's ``t9kScheduler``, None without one: a local run
    has no queue). ``now``: epoch seconds."""
    status = view.status
    if view.target == "local":
        wide: dict[str, Any] = {"pid": view.pid, "run_dir": str(view.run_dir)}
    else:
        sched = view.job.scheduler.t9k_scheduler if view.job is not None and view.job.scheduler else None
        wide = {
            "mode": run_mode(view.job),
            "queue": sched.queue_name if sched is not None else None,
            "priority": sched.priority if sched is not None else None,
        }
    return {
        "phase": view.phase,
        "ready": f"{view.running}/{view.replicas}",
        "restarts": restarts(status),
        "age": human_age(now - view.created) if view.created is not None else "-",
        "backoff": status.backoff_count if status is not None else 0,
        "wide": wide,
    }


# ----------------------------------------------------------------------------- why


def why(view: JobView) -> str | None:
    """One line saying why the job is not (or no longer) Running, None when it runs well.

    In order: a local run whose state cannot be told or whose runtime is gone; no status yet;
    how a finished job ended; pause; resuming; a job its Kueue queue has not admitted (the
    ``Queued`` condition's message: ``waiting in LocalQueue q: LocalQueue q doesn't exist``); a native gang the scheduler could not place
    (``gang of 3 waiting: 2 of 3 fit (1 of 1 nodes: Insufficient cpu)``: the view's ``gang``);
    replicas that wait for a reason
    (unschedulable with the scheduler's message, an image that cannot be pulled, a missing
    ConfigMap: from the live pods, then from the status); pods no scheduler has looked at (a queue
    of the T9k scheduler, a native gang waiting for all its pods, or no scheduler running, with the
    ``GangScheduling`` condition's message where the gang is not enforced); replicas recreated
    after a preemption; replicas being restarted (with the backoff count); replicas not running
    well (their reason and message); the ``ReplicaFailure`` condition. A job waiting after a
    preemption says so first: ``preempted by higher priority at <time>; <the rest>`` (the view's
    ``preempted``). A cluster job without pods whose events hold a ``FailedCreate<Kind>`` Warning
    says that event's message (the API server refused its PodGroup, say), not only its phase."""
    line = _why(view)
    status = view.status
    if status is None or status.phase in TERMINAL_PHASES or status.phase == "Paused" or view.preempted is None:
        return line
    return view.preempted + (f"; {line}" if line else "")


def _why(view: JobView) -> str | None:
    from ..engine.conditions import SPEC_VALID  # lazy: keeps the engine out of a local wait and list
    from ..engine.node_loss import NODE_LOST  # lazy: keeps the engine out of a local wait and list
    from ..engine.replica_status import being_replaced  # lazy: keeps the engine out of a local wait and list
    from ..engine.types import PREEMPTION_BY_SCHEDULER  # lazy: keeps the engine out of a local wait and list

    status, phase = view.status, view.phase
    if phase == UNKNOWN and view.unknown_reason is not None:
        return f"its state cannot be told: {view.unknown_reason}"
    if phase == STOPPED:
        if view.stop_reason:
            return f"its runtime stopped before the job finished: {view.stop_reason}"
        return "its runtime is not running (stopped by delete, Ctrl-C or a kill) before the job finished"
    invalid = status.condition(SPEC_VALID) if status is not None else None
    if invalid is not None and invalid.status == "False":
        # The operator cannot act on the spec (it does not validate, or the engine cannot handle it).
        return f"the operator leaves it alone until its spec changes: {invalid.message}"
    if status is None:
        if view.target == "local":
            return "the runtime has not written a status yet"
        if view.job is None:
            return "its spec does not validate, so the operator leaves it alone (see its InvalidSpec event)"
        return (
            "no status yet: the operator has not reconciled it (is it running? t9k-jobs install "
            "--with-operator, or the Helm chart)"
        )
    if phase in TERMINAL_PHASES:
        return ended_why(status)
    if phase == "Paused":
        return f"paused (spec.runMode.pause): t9k-jobs resume {short_name(view.kind)} {view.name}"
    live = [p for p in view.pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    waits = waiting_summary(view.live_replicas) or waiting_summary([rs for t in status.tasks for rs in t.replicas])
    if phase == "Resuming":
        return "resuming from pause" + (f": {waits}" if waits else "")
    queued = status.condition("Queued")
    if queued is not None and queued.status == "True":
        # Not admitted by its Kueue queue yet (or evicted): Kueue's own words (engine/admission.py),
        # and where it stands when Kueue's visibility API says (sdk/queue_position.py).
        return queued.message + (f"; {view.queue_position}" if view.queue_position else "")
    if view.gang:
        return view.gang
    if waits:
        return waits
    unseen = _unseen(view, live)
    if unseen:
        return unseen
    replacing = [
        rs
        for t in status.tasks
        for rs in t.replicas
        if being_replaced(rs) or (rs.phase == "Creating" and rs.reason == PREEMPTION_BY_SCHEDULER)
    ]
    preempted = [rs for rs in replacing if rs.reason == PREEMPTION_BY_SCHEDULER]
    lost = [rs for rs in replacing if rs.reason == NODE_LOST]
    if lost:
        # Its node stopped answering (engine/node_loss.py): what happened and what follows.
        return "; ".join(
            f"{rs.name} lost with its node ({rs.message or 'unreachable'}): its pod is deleted, force-deleted "
            f"once its grace period has passed, and the replica restarted (restart {rs.restart_count}, "
            f"backoff count {status.backoff_count})"
            for rs in lost
        )
    if preempted:
        names = ", ".join(rs.name for rs in preempted)
        return f"{names} preempted: recreated once the scheduler's deletion ends (no restart counted)"
    if replacing:
        job = view.job
        limit = job.spec.run_policy.backoff_limit if job is not None and hasattr(job.spec, "run_policy") else None
        of = f" of {limit}" if isinstance(limit, int) else ""
        names = ", ".join(rs.name for rs in replacing)
        return f"restarting {names} (backoff count {status.backoff_count}{of})"
    problems = replica_problems(status)
    if problems:
        return problems
    failure = status.condition("ReplicaFailure")
    if failure is not None and failure.status == "True":
        return failure.message
    if phase != "Running":
        if view.target == "cluster" and not live:
            refused = _refused_child(view)
            return refused or f"{phase}: no pods yet"
        return f"{phase}: no replica reports a reason"
    return None


def _refused_child(view: JobView) -> str | None:
    """The newest ``FailedCreate<Kind>`` Warning among the job's events (the API server refused a
    child the operator made: a PodGroup, a Workload, a pod), as ``<its message> (<reason>)``: why a
    job without pods has none. None when there is none (the events are read for ``describe``)."""
    refused = [e for e in view.events if e.type == "Warning" and e.reason.startswith("FailedCreate")]
    if not refused:
        return None
    newest = max(refused, key=lambda e: e.when or 0.0)
    return f"{newest.message} ({newest.reason})"


def _unseen(view: JobView, live: list[dict[str, Any]]) -> str | None:
    """Why pods that no scheduler has looked at yet wait (a cluster job's; None locally)."""
    unseen = [
        p["metadata"]["name"]
        for p in live
        if not (p.get("spec") or {}).get("nodeName")
        and not any(c.get("type") == "PodScheduled" for c in (p.get("status") or {}).get("conditions") or [])
    ]
    if not unseen:
        return None
    who = ", ".join(unseen[:3]) + (f" and {len(unseen) - 3} more" if len(unseen) > 3 else "")
    job = view.job
    sched = job.scheduler.t9k_scheduler if job is not None and job.scheduler else None
    specs = [p.get("spec") or {} for p in live if p["metadata"]["name"] in unseen]
    if sched is not None and any(sp.get("schedulerName") == T9K_SCHEDULER_NAME for sp in specs):
        return f"{who} wait for the T9k scheduler to admit the job's PodGroup (queue {sched.queue_name})"
    pod_groups = [sp["schedulingGroup"].get("podGroupName") for sp in specs if sp.get("schedulingGroup")]
    if pod_groups:
        return (
            f"{who} wait for the gang (PodGroup {pod_groups[0]}): the scheduler binds the job's pods "
            "together or not at all"
        )
    gang = view.status.condition("GangScheduling") if view.status is not None else None
    not_enforced = f" ({gang.message})" if gang is not None and gang.reason == "NotEnforced" else ""
    them = "it" if len(unseen) == 1 else "them"
    return f"{who} not scheduled yet: no scheduler has looked at {them}{not_enforced}"


# ----------------------------------------------------------------------------- describe


def describe(view: JobView, now: float) -> list[str]:
    """``describe``'s lines: identity (and a local run's dir and runtime), created (RFC 3339 UTC
    and age), phase, run mode, backoff, start and completion, the native PodGroup when there is
    one, a priority not enforced (the ``Priority`` condition), why it is not Running, the spec summary, conditions, replicas (phase, restarts, exit
    codes, reason; on a cluster the node, and pods the status does not name yet) and the recent
    Events. ``view`` is a detailed view (a backend's ``get(..., detail=True)``); ``now``: epoch
    seconds."""
    status, phase = view.status, view.phase
    out = [f"Name:        {view.name}"]
    if view.namespace is not None:
        out.append(f"Namespace:   {view.namespace}")
    out.append(f"Kind:        {view.kind}")
    if view.target == "local":
        if view.pid is not None:
            runtime = f"running, pid {view.pid}"
        elif view.runtime_reason is not None:
            runtime = f"unknown: {view.runtime_reason}"
        else:
            runtime = "not running"
        out += [f"Run dir:     {view.run_dir}", f"Runtime:     {runtime}"]
    age = human_age(now - view.created) if view.created is not None else "-"
    out += [
        f"Created:     {rfc3339(view.created)} ({age} ago)",
        f"Phase:       {phase}",
        f"Run mode:    {run_mode(view.job)}",
    ]
    if status is not None:
        # Restarts counted against backoffLimit, and all restarts (a lost node's, a failure rule's
        # RestartIgnoringBackoff, do not count: t9k_jobs.engine.failure_policy).
        restarts = sum(rs.restart_count for t in status.tasks for rs in t.replicas)
        out.append(f"Backoff:     {status.backoff_count} (restarts: {restarts})")
        for label, value in (("Started:", status.start_time), ("Completed:", status.completion_time)):
            if value:
                out.append(f"{label:<12} {value}")
    if view.pod_group is not None:
        out.append(f"PodGroup:    {view.pod_group}")
    unranked = status.condition("Priority") if status is not None else None
    if unranked is not None and unranked.status == "False":  # its priority has no PriorityClass
        out.append(f"Priority:    {unranked.message}")
    tb = status.tensorboard if status is not None else None
    if view.tensorboard_url is not None:
        out.append(f"TensorBoard: {view.tensorboard_url}")
    elif tb is not None:
        ended = view.target == "local" and tb.ready and view.pid is None  # served while its run runs
        out.append(f"TensorBoard: {'not served: its run has ended' if ended else tb.note or tb.reason}")
    reason = why(view)
    if reason and phase != "Succeeded":
        out.append(f"Why:         {reason}")
    out.append("Spec:")
    out += spec_lines(view.job, view.spec)
    out.append("Conditions:")
    out += condition_lines(status)
    out.append("Replicas:")
    out += _replica_lines(view)
    if view.ended:
        out.append("Ended attempts (pods deleted; their last lines: t9k-jobs logs):")
        rows = [[e.get("replica", "?"), e.get("attempt", 0), e.get("container", "?"),
                 "-" if e.get("exitCode") is None else e["exitCode"], e.get("reason") or "-",
                 e.get("why") or "-", e.get("deleted") or "-"] for e in view.ended[-20:]]  # fmt: skip
        out += ["  " + line for line in format_table(
            ["REPLICA", "ATTEMPT", "CONTAINER", "EXIT CODE", "REASON", "DELETED FOR", "AT"], rows)]  # fmt: skip
    lost = _lost_rows(view.lost)
    if lost:
        out.append("Lost to attempts that ended without finishing:")
        out += ["  " + line for line in format_table(["REASON", "ATTEMPTS", "REPLICA-SECONDS", "GPU-SECONDS"],
                                                     [[r, n, f"{s:.0f}", f"{g:.0f}"] for r, n, s, g in lost])]  # fmt: skip
    if view.stacks:
        out.append("Stacks (the job made no progress):")
        for what, frames in view.stacks:
            out.append(f"  {what}")
            out += [f"    {line}" for line in frames] or ["    <no Python stack read>"]
    out.append("Events:")
    out += _event_lines(view, now)
    return out


def _lost_rows(totals: dict[str, Any] | None) -> list[tuple[str, int, float, float]]:
    """:func:`t9k_jobs.engine.cost.rows` of ``totals`` (imported only when there are some)."""
    if not totals:
        return []
    from ..engine.cost import rows  # lazy: keeps the engine out of a local wait and list

    return rows(totals)


def _replica_lines(view: JobView) -> list[str]:
    on_cluster = view.target == "cluster"
    nodes = {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "-" for p in view.pods}
    rows: list[list[Any]] = []
    named = set()
    status = view.status
    for task in status.tasks if status is not None else []:
        for rs in task.replicas:
            named.add(rs.name)
            rows.append([rs.name, rs.phase, rs.restart_count, exit_codes(rs), nodes.get(rs.name, "-"), replica_reason(rs)])
    for rs in view.live_replicas:  # pods the status does not name yet
        if rs.name not in named:
            rows.append([rs.name, rs.phase, 0, exit_codes(rs), nodes.get(rs.name, "-"), replica_reason(rs)])
    if not rows:
        return ["  <none>"]
    headers = ["NAME", "PHASE", "RESTARTS", "EXIT CODE", "NODE", "REASON"]
    if not on_cluster:
        headers.remove("NODE")
        rows = [r[:4] + r[5:] for r in rows]
    return ["  " + line for line in format_table(headers, rows)]


def _event_lines(view: JobView, now: float) -> list[str]:
    """The job's events: a local run's as its ``events.log`` has them, a cluster job's as a table."""
    if not view.events:
        return ["  <none>"]
    if view.target == "local":  # as events.log has them
        return [f"  {ev.line if ev.line is not None else ev.message}" for ev in view.events]
    rows = [
        [human_age(now - ev.when) if ev.when else "-", ev.type, ev.reason, ev.object, short(ev.message, 100)]
        for ev in view.events
    ]
    return ["  " + line for line in format_table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows)]


# ----------------------------------------------------------------------------- wait


def wait_ended(view: JobView, wanted: str) -> str:
    """``<Kind> <name> ended <phase>, not <wanted>: <why>``: a wait that cannot be met."""
    reason = why(view)
    return f"{view.kind} {view.name} ended {view.phase}, not {wanted}" + (f": {reason}" if reason else "")


def wait_unknown(view: JobView, wanted: str) -> str:
    """A wait on a local run whose state cannot be told (waiting would never end)."""
    return f"cannot wait for {view.kind} {view.name} to be {wanted}: {why(view)}"


def wait_deleted(kind: str, name: str, wanted: str) -> str:
    """A wait whose job was deleted."""
    return f"{kind} {name} was deleted while waiting for it to be {wanted}"


def wait_timed_out(kind: str, name: str, wanted: str, timeout: float | None, last: JobView | None, server: str | None) -> str:
    """A wait that ran out of time: where the job was (``last``), or that the API server at
    ``server`` never answered."""
    where = f"it is {last.phase}" if last is not None else f"the API server at {server} has not answered"
    limit = f"{timeout:g}s" if timeout is not None else "-"
    return f"timed out after {limit} waiting for {kind} {name} to be {wanted}; {where}"


__all__ = [
    "describe",
    "row",
    "wait_deleted",
    "wait_ended",
    "wait_timed_out",
    "wait_unknown",
    "why",
    "condition_lines",
    "ended_why",
    "exit_codes",
    "groups",
    "replica_problems",
    "replica_reason",
    "replicas_wanted",
    "restarts",
    "run_mode",
    "spec_lines",
    "waiting_summary",
]
