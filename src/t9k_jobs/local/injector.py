"""Carrying out a local run's ``--inject`` failures (:mod:`.inject` says what each does)."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..engine import ObservedPod
from ..engine.types import PREEMPTION_BY_SCHEDULER
from .inject import Injection
from .processes import signal_each

if TYPE_CHECKING:
    from .pod_runner import ReplicaPod

#: The node a replica lost by ``node-lost`` is said to have been on: ``<prefix><pod>``.
LOST_NODE_PREFIX = "lost-node-of-"


class Injector:
    """A run's injections: fires each once its time has come (:meth:`fire`) and shows the engine
    what it did (:meth:`observe`, :meth:`unreachable`): a preempted pod carries the scheduler's
    notice, a pod whose node is lost is on a node of its own, unreachable since the loss (the
    local runtime's node-lost limit is 0: nothing else loses a node here)."""

    def __init__(self, injections: Iterable[Injection] = ()) -> None:
        self.pending = list(injections)
        #: When the job was first Running (``time.time()``), ``None`` before.
        self.running_since: float | None = None
        #: Pods (by UID) an injection took: their node lost (since when), or preempted.
        self.lost: dict[str, float] = {}
        self.preempted: set[str] = set()

    def fire(self, phase: str | None, job_name: str, pods: dict[str, ReplicaPod], now: float) -> list[str]:
        """Carry out the injections due at ``now`` (the job's ``phase`` says when it is Running);
        the lines that say what each did."""
        if not self.pending:
            return []
        if self.running_since is None:
            if phase != "Running":
                return []
            self.running_since = now
        out = []
        for injection in [i for i in self.pending if now - self.running_since >= i.seconds]:
            self.pending.remove(injection)
            name = f"{job_name}-{injection.replica}"
            pod = pods.get(name)
            if pod is None or pod.deleting or pod.observe().terminal:
                out.append(f"{injection} (--inject) skipped: {name} is not running")
                continue
            pids = pod.processes()
            if injection.action == "kill":
                signal_each(pids, signal.SIGKILL)
                what = f"SIGKILL to {len(pids)} process(es) of {name}"
            elif injection.action == "hang":
                signal_each(pids, signal.SIGSTOP)
                what = f"SIGSTOP to {len(pids)} process(es) of {name}: it runs on, silent"
            elif injection.action == "node-lost":
                signal_each(pids, signal.SIGSTOP)  # what runs on a lost node is out of reach
                self.lost[pod.uid] = now
                what = f"the node of {name} is lost (its processes stopped, the node unreachable)"
            else:
                self.preempted.add(pod.uid)
                what = f"{name} is preempted by the scheduler"
            out.append(f"{injection} (--inject): {what}")
        return out

    def observe(self, pod: ReplicaPod) -> ObservedPod:
        """``pod`` as the engine reads it, with what an injection did to it."""
        seen = pod.observe()
        if pod.uid in self.preempted:
            seen = dataclasses.replace(seen, disruption_reason=PREEMPTION_BY_SCHEDULER,
                                       disruption_message="preempted by --inject")  # fmt: skip
        if pod.uid in self.lost:
            seen = dataclasses.replace(seen, node=f"{LOST_NODE_PREFIX}{pod.name}")
        return seen

    def unreachable(self, pods: Iterable[ReplicaPod]) -> dict[str, float]:
        """The nodes lost by injection of ``pods`` (:attr:`~t9k_jobs.engine.Observed.unreachable_nodes`)."""
        return {f"{LOST_NODE_PREFIX}{p.name}": self.lost[p.uid] for p in pods if p.uid in self.lost}
