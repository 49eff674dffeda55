"""A tiny in-memory runtime for the reconcile engine.

``Sim`` plays the part of the Kubernetes operator: it holds the job and its pods, calls
:func:`reconcile`, carries out the plan (create pods, delete pods, remember other children)
and stores ``plan.status`` back on the job, exactly as a runtime would. Tests drive the pods
(``run``, ``succeed``, ``fail``, ``vanish``) and the clock (``tick``) between passes.

Deletion is immediate unless ``graceful=True``: then a deleted pod stays, marked
``deleting``, until :meth:`Sim.gc` removes it (the kubelet finishing a graceful shutdown).
Creating a pod whose name is taken raises :class:`Conflict`, as the API server would.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from t9k_jobs.api import parse_job
from t9k_jobs.engine import (
    ContainerState,
    Observed,
    ObservedPod,
    Plan,
    Runtime,
    WorkloadState,
    desired_hash_of,
    reconcile,
    restart_attempt_label,
)

LABEL_TYPE = "batch.tensorstack.dev/replica-type"
LABEL_INDEX = "batch.tensorstack.dev/replica-index"
T0 = 1_700_000_000.0


class Conflict(AssertionError):
    """The plan created a pod whose name is already taken."""


class Sim:
    def __init__(
        self,
        manifest: dict[str, Any],
        *,
        now: float = T0,
        graceful: bool = False,
        gang: str = "t9k",
        queueing: bool = False,
        priority_classes: frozenset[str] | None = None,
    ) -> None:
        manifest = copy.deepcopy(manifest)
        # The PriorityClasses the cluster has (Observed.priority_classes; None: not known).
        self.priority_classes = priority_classes
        self.gang = gang  # the runtime's gang mode for t9kScheduler (Runtime.gang)
        # Whether Kueue is served (Runtime.queueing); the job's Workload's status, as Kueue
        # writes it: a new Workload starts pending (tests admit or evict it with `workload`).
        self.queueing = queueing
        self.workload = WorkloadState()
        manifest.setdefault("metadata", {}).setdefault("uid", "job-uid")
        self.job = parse_job(manifest)
        self.now = now
        self.graceful = graceful
        self.pods: dict[str, ObservedPod] = {}
        self.specs: dict[str, dict[str, Any]] = {}  # name -> the pod object last created
        self.others: dict[tuple[str, str], dict[str, Any]] = {}
        self.created: list[str] = []  # every pod name ever created, in order
        self.deleted: list[str] = []  # every pod name ever deleted by a plan, in order
        self.plans: list[Plan] = []
        self._uids = 0
        # Nodes whose kubelet stopped answering (Observed.unreachable_nodes) and the limit
        # (Runtime.node_lost_after).
        self.unreachable: dict[str, float] = {}
        self.node_lost_after = 60.0
        self.grace = 30.0  # a graceful deletion's grace period (deletion_deadline = now + grace)
        # The API server drops a native PodGroup's schedulingConstraints (its gate off).
        self.drops_constraints = False
        # Kueue's Topology Aware Scheduling serves the job's queue (Observed.queue_topology).
        self.queue_topology = False

    # ------------------------------------------------------------------ the runtime

    @property
    def status(self):
        return self.job.status

    def observed(self) -> Observed:
        return Observed(
            pods=dict(self.pods),
            others=frozenset(self.others),
            desired_hashes={key: desired_hash_of(obj) for key, obj in self.others.items() if key[0] != "Secret"},
            priority_classes=self.priority_classes,
            workload=self.workload if ("Workload", self.job.name) in self.others else None,
            unreachable_nodes=dict(self.unreachable),
            unconstrained=frozenset(
                key for key, obj in self.others.items()
                if key[0] == "PodGroup" and obj["apiVersion"].startswith("scheduling.k8s.io/")
                and (self.drops_constraints or not obj["spec"].get("schedulingConstraints"))
            ),
            queue_topology=self.queue_topology,
        )  # fmt: skip

    def runtime(self) -> Runtime:
        """The runtime the engine decides for: a cluster (Services, pods) in this sim's gang mode,
        with or without Kueue, and its node-lost limit."""
        return Runtime(gang=self.gang, queueing=self.queueing, node_lost_after=self.node_lost_after)  # type: ignore[arg-type]

    def plan(self) -> Plan:
        """One reconcile pass on the current world, without applying it."""
        return reconcile(self.job, self.observed(), self.now, self.runtime())

    def step(self, *, start: str | None = None) -> Plan:
        """Reconcile and apply. ``start``: state of new pods: None (unscheduled), "Pending", "Running"."""
        plan = self.plan()
        self.apply(plan, start=start)
        return plan

    def settle(self, *, start: str | None = "Running", passes: int = 6) -> Plan:
        """Step until a pass creates and deletes nothing (at most ``passes`` times)."""
        plan = self.step(start=start)
        for _ in range(passes - 1):
            if not plan.create and not plan.delete:
                break
            plan = self.step(start=start)
        return plan

    def apply(self, plan: Plan, *, start: str | None = None) -> None:
        self.plans.append(plan)
        for obj in plan.create:
            name = obj["metadata"]["name"]
            if obj["kind"] != "Pod":
                key = (obj["kind"], name)
                if key in self.others:
                    raise Conflict(f"{obj['kind']} {name} already exists")
                self.others[key] = obj
                if obj["kind"] == "Workload":
                    self.workload = WorkloadState()
                continue
            if name in self.pods:
                raise Conflict(f"pod {name} already exists")
            self._uids += 1
            labels = obj["metadata"]["labels"]
            containers = tuple(ContainerState(c["name"], "Waiting") for c in obj["spec"]["containers"])
            self.pods[name] = ObservedPod(
                name=name,
                uid=f"uid-{self._uids}",
                replica_type=labels[LABEL_TYPE],
                index=int(labels[LABEL_INDEX]),
                phase="Pending",
                containers=containers,
                scheduled=False,
                desired_hash=desired_hash_of(obj),
                restart_attempt=restart_attempt_label(labels),
            )
            self.specs[name] = obj
            self.created.append(name)
            if start == "Pending":
                self.schedule(name)
            elif start == "Running":
                self.run(name)
        for obj in plan.update:
            key = (obj["kind"], obj["metadata"]["name"])
            assert key in self.others, f"update of {key}, which does not exist"
            self.others[key] = obj
        for d in plan.delete:
            if d.kind != "Pod":
                self.others.pop((d.kind, d.name), None)
                continue
            pod = self.pods.get(d.name)
            if pod is None or (d.uid is not None and pod.uid != d.uid):
                continue
            self.deleted.append(d.name)
            if self.graceful and not d.force:
                if not pod.deleting:
                    self.pods[d.name] = replace(pod, deleting=True, deletion_deadline=self.now + self.grace)
            else:
                del self.pods[d.name]
        self.job = self.job.model_copy(update={"status": plan.status})

    def gc(self) -> None:
        """Graceful deletions finish: pods marked ``deleting`` disappear."""
        self.pods = {n: p for n, p in self.pods.items() if not p.deleting}

    def fork(self) -> Sim:
        """A cheap independent copy (pods and the job are immutable; containers are copied)."""
        other = copy.copy(self)
        other.pods = dict(self.pods)
        other.specs = dict(self.specs)
        other.others = dict(self.others)
        other.created = list(self.created)
        other.deleted = list(self.deleted)
        other.plans = list(self.plans)
        return other

    # ------------------------------------------------------------------ the world

    def tick(self, seconds: float) -> None:
        self.now += seconds

    def edit(self, **spec_changes: Any) -> None:
        """Change the job's spec (keeping its status), like ``kubectl edit``."""
        data = self.job.model_dump(by_alias=True, exclude_none=True, mode="json")
        data["spec"].update(spec_changes)
        status = self.job.status
        data.pop("status", None)
        self.job = parse_job(data).model_copy(update={"status": status})

    def _set(self, name: str, phase: str, state: str, code: int | None = None, **kw: Any) -> None:
        pod = self.pods[name]
        containers = tuple(ContainerState(c.name, state, code) for c in pod.containers)  # type: ignore[arg-type]
        self.pods[name] = replace(pod, phase=phase, containers=containers, scheduled=True, **kw)  # type: ignore[arg-type]

    def schedule(self, name: str) -> None:
        self._set(name, "Pending", "Waiting")

    def run(self, name: str) -> None:
        self._set(name, "Running", "Running", ran_from=self._ran_from(name))

    def succeed(self, name: str) -> None:
        self._set(name, "Succeeded", "Terminated", 0, ran_from=self._ran_from(name), ran_until=self.now)

    def fail(self, name: str, code: int = 1) -> None:
        self._set(name, "Failed", "Terminated", code, ran_from=self._ran_from(name), ran_until=self.now)

    def _ran_from(self, name: str) -> float:
        """When its containers started: when it was first run (now, if never)."""
        started = self.pods[name].ran_from
        return self.now if started is None else started

    def disrupt(
        self,
        name: str,
        reason: str = "PreemptionByScheduler",
        *,
        deleting: bool = True,
        end: int | None = None,
        message: str = "default-scheduler: preempting to accommodate a higher priority podgroup",
    ) -> None:
        """A ``DisruptionTarget=True`` condition with ``reason`` appears on the pod (the scheduler's
        preemption, the Eviction API, the taint manager...), then, with ``deleting``, its graceful
        deletion starts; ``end``: the main containers have then ended with this exit code (143
        after SIGTERM), the pod ``Failed`` (``Succeeded`` for 0)."""
        if end is not None:
            self._set(name, "Succeeded" if end == 0 else "Failed", "Terminated", end)
        pod = self.pods[name]
        self.pods[name] = replace(
            pod, disruption_reason=reason, disruption_message=message, deleting=deleting or pod.deleting
        )

    def vanish(self, name: str) -> None:
        """Someone else deleted the pod (a user, a queue's maxDuration, preemption)."""
        del self.pods[name]

    def run_all(self) -> None:
        for name, pod in self.pods.items():
            if not pod.terminal:
                self.run(name)

    # ------------------------------------------------------------------ reading

    def pod(self, name: str) -> dict[str, Any]:
        """The pod object as created (the latest one of that name)."""
        return self.specs[name]

    def container(self, name: str, container: str | None = None) -> dict[str, Any]:
        containers = self.specs[name]["spec"]["containers"]
        if container is None:
            return containers[0]
        return next(c for c in containers if c["name"] == container)

    def env(self, name: str, container: str | None = None) -> dict[str, str]:
        return {e["name"]: e.get("value") for e in self.container(name, container).get("env") or []}

    def condition(self, type_: str):
        return self.job.status.condition(type_)

    def replica(self, name: str):
        for task in self.job.status.tasks:
            for rs in task.replicas:
                if rs.name == name:
                    return rs
        raise KeyError(name)

    def live(self) -> list[str]:
        return sorted(n for n, p in self.pods.items() if not p.deleting)


# ---------------------------------------------------------------------- shared by the tests


def created_pods(plan: Plan) -> list[str]:
    """Names of the pods ``plan`` creates, in order."""
    return [o["metadata"]["name"] for o in plan.create if o["kind"] == "Pod"]


def deleted_pods(plan: Plan) -> list[str]:
    """Names of the pods ``plan`` deletes, in order."""
    return [d.name for d in plan.delete if d.kind == "Pod"]


def started(manifest: dict[str, Any], **kw: Any) -> Sim:
    """A job whose pods all exist and run (``kw``: :class:`Sim`'s options)."""
    sim = Sim(manifest, **kw)
    sim.settle(start="Running")
    sim.step()
    return sim


def pause(sim: Sim, enabled: bool, resume_specs: list[dict[str, Any]] | None = None) -> None:
    """Set ``runMode.pause`` (with ``resumeSpecs`` when given), as a user's edit would."""
    p: dict[str, Any] = {"enabled": enabled}
    if resume_specs is not None:
        p["resumeSpecs"] = resume_specs
    sim.edit(runMode={"pause": p})
