"""Rehearsal: ``t9k-jobs run FILE --inject ACTION:REPLICA@SECONDS`` (issue 42).

Resume-from-checkpoint code is usually first tested when a real GPU job dies. A local run can
make the failure happen on purpose, and the job then does exactly what the engine does for the
real thing:

- ``kill``: SIGKILL of every process of the replica: its container ends with exit code 137, and
  its restart policy decides (restart, counted; or a final failure);
- ``hang``: SIGSTOP of every process of the replica: it runs on, silent; a job with a progress
  deadline (``t9k-jobs.io/progress-deadline-seconds``) then makes no progress (NoProgress:
  :mod:`t9k_jobs.engine.progress`); one without hangs, as it would on a cluster;
- ``node-lost``: the replica's node is lost (its processes stopped, the node unreachable for
  longer than the limit): the engine's node-loss rule (:mod:`t9k_jobs.engine.node_loss`) fails
  the replica with reason ``NodeLost`` and its restart policy decides;
- ``preempt``: the scheduler's preemption takes the replica (``DisruptionTarget``,
  ``PreemptionByScheduler``): it is recreated without counting a restart
  (:mod:`t9k_jobs.engine.preemption`).

``REPLICA`` is ``<type>-<index>`` (``worker-1``, ``master-0``), one of the job's replicas;
``SECONDS`` (a non-negative number) counts from when the job is first Running. Each injection
fires once, said in an ``Injected`` event; one whose replica is not running then is said and
skipped (:class:`~t9k_jobs.local.injector.Injector` carries them out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..api import Job
from ..frameworks import framework_for

#: The actions ``--inject`` accepts.
ACTIONS = ("kill", "hang", "node-lost", "preempt")
_SPEC = re.compile(r"^(?P<action>[a-z-]+):(?P<type>[A-Za-z0-9]+)-(?P<index>\d+)@(?P<seconds>\d+(?:\.\d+)?)$")


class InjectError(ValueError):
    """An ``--inject`` value that is not accepted; the message names it and what is accepted."""


@dataclass(frozen=True)
class Injection:
    """One ``--inject``: ``action`` (:data:`ACTIONS`), the replica (``replica_type``, ``index``),
    ``seconds`` after the job is first Running."""

    action: str
    replica_type: str
    index: int
    seconds: float

    @property
    def replica(self) -> str:
        return f"{self.replica_type}-{self.index}"

    def __str__(self) -> str:
        return f"{self.action}:{self.replica}@{self.seconds:g}"


def parse(values: list[str], job: Job) -> tuple[Injection, ...]:
    """The injections ``values`` (``--inject``'s) ask for on ``job``. Raises :class:`InjectError`
    for a value that is not ``ACTION:REPLICA@SECONDS`` or names an action or replica ``job`` does
    not have."""
    groups = {g.type: g.replicas for g in framework_for(job).groups(job)}
    out = []
    for value in values:
        m = _SPEC.match(value.strip())
        if m is None:
            raise InjectError(f"--inject: {value!r} is not accepted; expected ACTION:REPLICA@SECONDS, "
                              f"e.g. kill:worker-1@10 (ACTION one of {', '.join(ACTIONS)})")
        action, rtype, index = m["action"], m["type"], int(m["index"])
        if action not in ACTIONS:
            raise InjectError(f"--inject: {value!r}: action {action!r} is not accepted; expected one of {', '.join(ACTIONS)}")
        if rtype not in groups or index >= groups[rtype]:
            have = ", ".join(f"{t}-0..{t}-{n - 1}" if n > 1 else f"{t}-0" for t, n in groups.items() if n > 0)
            raise InjectError(f"--inject: {value!r}: the job has no replica {rtype}-{index}; it has {have or 'none'}")
        out.append(Injection(action, rtype, index, float(m["seconds"])))
    return tuple(out)


def to_json(injections: tuple[Injection, ...]) -> list[dict[str, object]]:
    return [{"action": i.action, "type": i.replica_type, "index": i.index, "seconds": i.seconds} for i in injections]


def from_json(data: list[dict[str, object]] | None) -> tuple[Injection, ...]:
    """Raises ``KeyError``/``TypeError``/``ValueError`` for data :func:`to_json` did not write."""
    return tuple(
        Injection(str(d["action"]), str(d["type"]), int(d["index"]), float(d["seconds"]))  # type: ignore[arg-type]
        for d in data or []
    )

