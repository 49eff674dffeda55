"""What the day-two verbs print about a job, for local runs and cluster jobs alike: ages, tables,
the spec summary and conditions of ``describe``, and why replicas wait.

Pure functions of the API models (:mod:`t9k_jobs.api`) and plain values; no I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml

from .api import GROUP, Job, JobStatus
from .api.common import ReplicaStatus


def human_age(seconds: float) -> str:
    """A short age like kubectl's AGE column: ``42s``, ``3m20s``, ``25m``, ``5h``, ``3d``."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60}s"
    if s < 3 * 3600:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def parse_time(value: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (``2024-05-01T10:00:00Z``), None when absent or unreadable."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age_of(value: str | None, now: float) -> str:
    """:func:`human_age` since an RFC 3339 timestamp, ``-`` when there is none."""
    when = parse_time(value)
    return human_age(now - when) if when is not None else "-"


def format_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """Rows under upper-case headers in columns three spaces apart, as kubectl prints them."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["   ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def short(text: str | None, limit: int = 100) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def ref(kind: str, name: str) -> str:
    """``genericjob.batch.tensorstack.dev/NAME``, as ``-o name`` prints a job."""
    return f"{kind.lower()}.{GROUP}/{name}"


def groups(job: Job | None) -> list[Any]:
    """The job's replica groups (:class:`t9k_jobs.frameworks.base.ReplicaGroup`, elastic counts
    applied), ``[]`` for None."""
    if job is None:
        return []
    from .frameworks import framework_for

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
    from .engine.waiting import waiting

    by_text: dict[str, list[str]] = {}
    for rs in replicas:
        for _, text in waiting(rs):
            by_text.setdefault(text, []).append(rs.name)
    parts = []
    for text, names in list(by_text.items())[:5]:
        who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{who} {'is' if len(names) == 1 else 'are'} waiting: {text}")
    return "; ".join(parts)


__all__ = [
    "age_of",
    "condition_lines",
    "ended_why",
    "exit_codes",
    "format_table",
    "groups",
    "human_age",
    "parse_time",
    "ref",
    "replica_problems",
    "replica_reason",
    "replicas_wanted",
    "restarts",
    "run_mode",
    "short",
    "spec_lines",
    "waiting_summary",
]
