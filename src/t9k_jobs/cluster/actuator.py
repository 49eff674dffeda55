"""The controller's carry-out: a pass's :class:`~t9k_jobs.engine.Plan` made real through the API.

Creates (slow-start batches, children before pods; a 409 checked for a name held by another
object; a terminating namespace ends the pass quietly), merge-patched updates with the cached
resourceVersion as precondition, deletes with UID preconditions, the status written through the
status subresource when it changed, then the plan's Events; and the status of a job left alone
(an invalid spec). The expectations learn of every
create and delete sent (and of those not sent), so the next pass waits for the cache.

:class:`Actuator` is a part of :class:`~t9k_jobs.cluster.controller.Controller` (its base
class): the controller holds the client, the expectations, the queue and the jobs' records it
uses, and says how to reach a child kind (:meth:`resource`) and how to tell an Event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ..api import Job, JobStatus
from ..api.common import TERMINAL_PHASES
from ..engine import Observed, Plan, invalid_spec_status
from ..sshkeys import materialize
from . import metrics
from .client import JOB_RESOURCES, OPTIONAL_CHILDREN, ApiError, KubeClient, Resource
from .expectations import Expectations
from .last_words import LastWords
from .projection import ChildRef, JobKey
from .state import JobState, Written
from .workqueue import WorkQueue

log = logging.getLogger("t9k_jobs.controller")


class Actuator:
    """Carries out plans; the :class:`~t9k_jobs.cluster.controller.Controller` is one and
    provides what is declared here."""

    client: KubeClient
    expectations: Expectations[JobKey, ChildRef]
    queue: WorkQueue[JobKey]
    jobs: dict[JobKey, JobState]
    last_words: LastWords

    def _state(self, key: JobKey) -> JobState:
        raise NotImplementedError

    def observe(self, key: JobKey, uid: str | None) -> Observed:
        raise NotImplementedError

    def resource(self, kind: str) -> Resource:
        raise NotImplementedError

    @property
    def served_optional_kinds(self) -> set[str]:
        raise NotImplementedError

    def _emit_event(self, raw: dict[str, Any], type_: str, reason: str, message: str) -> None:
        raise NotImplementedError

    async def _carry_out(self, key: JobKey, job: Job, raw: dict[str, Any], plan: Plan) -> list[Exception]:
        errors: list[Exception] = []
        creates = []
        for obj in plan.create:
            if obj["kind"] in OPTIONAL_CHILDREN and obj["kind"] not in self.served_optional_kinds:
                continue
            creates.append(obj)
        if creates:
            self.expectations.expect(key, creates={_ref(o) for o in creates})
            errors += await self._create_all(key, job, raw, creates)
            if any(isinstance(e, NamespaceTerminating) for e in errors):
                # The namespace, and the job with it, is going away: the pass ends here (no
                # deletes, no status, no events), and without an error, so nothing retries it.
                return []
        if plan.update:
            results = await asyncio.gather(*(self._update(key, job, raw, o) for o in plan.update), return_exceptions=True)
            errors += [r for r in results if isinstance(r, Exception)]
        new_status = plan.status.dump()
        # A new job's first pass: the status it would write only says "creating", and the pass
        # that sees the new pods writes the real one; the budget goes to the creates. (That pass
        # derives the same events again, so these are not sent either.)
        first = not raw.get("status") and any(o["kind"] == "Pod" for o in creates) and not errors
        old_phase = (raw.get("status") or {}).get("phase")
        # What a user waits for goes first: the pass that ends the job writes its phase before the
        # clean-up (last words, deleting its pods), which no one waits for (issue 46: at 50 qps a
        # job's Succeeded waited behind its own and other jobs' deletes).
        ending = not first and new_status.get("phase") in TERMINAL_PHASES and old_phase != new_status.get("phase")
        if ending and not await self._write_status(key, job, raw, new_status, errors):
            return errors
        if plan.delete or plan.lost:
            # What the pods to delete printed last, kept before their logs go with them; what the
            # attempts that ended unfinished cost.
            await self.last_words.keep(job, plan.delete, self.observe(key, job.metadata.uid).pods, plan.lost)
        if plan.delete:
            self.expectations.expect(key, deletes={ChildRef(d.kind, d.name) for d in plan.delete})
            results = await asyncio.gather(
                *(self._delete(key, job, d) for d in plan.delete), return_exceptions=True
            )
            errors += [r for r in results if isinstance(r, Exception)]
        if first:
            return errors
        if not ending and not await self._write_status(key, job, raw, new_status, errors):
            return errors
        for ev in plan.events:
            self._emit_event(raw, ev.type, ev.reason, ev.message)
        if plan.dump_stacks:
            # A job that made no progress: its stacks are read locally (py-spy), not here, where that
            # would take pods/exec into every job's containers (docs/hangs.md).
            self._emit_event(raw, "Normal", "StacksNotDumped", (
                f"the stacks of {', '.join(plan.dump_stacks)} are not dumped: the operator does not exec into "
                "pods; rehearse the hang locally (t9k-jobs run FILE --inject hang:REPLICA@SECONDS) to see them"))  # fmt: skip
        return errors

    async def _write_status(
        self, key: JobKey, job: Job, raw: dict[str, Any], new_status: dict[str, Any], errors: list[Exception]
    ) -> bool:
        """Write ``new_status`` when it differs from the stored one; False (the error added to
        ``errors``) when the API server refused it: the pass then sends no events, since the
        retried pass derives them again from the stored status."""
        if new_status == (raw.get("status") or {}):
            return True
        body = dict(raw)
        body["status"] = new_status
        res = JOB_RESOURCES[job.kind]
        try:
            written = await self.client.replace_status(res, body)
        except ApiError as exc:
            metrics.API_ERRORS.labels(verb="update", reason=exc.reason).inc()
            if exc.status == 409:
                self._state(key).written = None  # stale: read the cache again next time
            errors.append(exc)
            return False
        written.setdefault("kind", job.kind)
        written.setdefault("apiVersion", res.api_version)
        state = self._state(key)
        state.written = Written(written, str(raw["metadata"].get("resourceVersion", "")))
        state.parsed = None
        if new_status.get("phase") != (raw.get("status") or {}).get("phase"):
            log.info("%s: phase %s", key, new_status.get("phase"))
        return True

    async def _create_all(
        self, key: JobKey, job: Job, raw: dict[str, Any], creates: list[dict[str, Any]]
    ) -> list[Exception]:
        """Create ``creates`` in slow-start batches; return the errors of the batch that failed.

        Children other than pods go first (a pod may mount the ConfigMap or Secret), then pods;
        a batch never mixes the two. Batches of 1, 2, 4... requests, each sent at once and
        awaited before the next, as kube-controller-manager's ``slowStartBatch``
        (``pkg/controller/replicaset``, ``pkg/controller/job``): the first failure ends the
        pass's creates, so a refusal that would repeat (quota, a terminating namespace) costs
        one request, not one per child. The children not sent are no longer expected.
        """
        ordered = [o for o in creates if o["kind"] != "Pod"] + [o for o in creates if o["kind"] == "Pod"]
        size, i = 1, 0
        while i < len(ordered):
            batch = ordered[i : i + size]
            if batch[0]["kind"] != "Pod":
                batch = [o for o in batch if o["kind"] != "Pod"]
            results = await asyncio.gather(
                *(self._create(key, job, raw, o) for o in batch), return_exceptions=True
            )
            i += len(batch)
            errors = [r for r in results if isinstance(r, Exception)]
            if errors:
                for o in ordered[i:]:
                    self.expectations.observed_create(key, _ref(o))
                return errors
            size *= 2
        return []

    async def _create(self, key: JobKey, job: Job, raw: dict[str, Any], obj: dict[str, Any]) -> None:
        ref = _ref(obj)
        kind, name = ref.kind, ref.name
        res = self.resource(kind)
        try:
            await self.client.create(res, job.namespace, materialize(obj))
        except ApiError as exc:
            self.expectations.observed_create(key, ref)
            metrics.API_ERRORS.labels(verb="create", reason=exc.reason).inc()
            if exc.status == 409:
                if kind == "Secret":
                    # Ours from an earlier pass or process: Secrets cannot be read (rbac.py), so
                    # a name taken by another object is not told apart here.
                    self._state(key).secrets.add(name)
                    return
                # Exists already: our cache is behind (fine), or the name is someone else's.
                await self._check_conflict(key, job, res, kind, name)
                return
            if namespace_terminating(exc):
                # The namespace is being deleted, and the job with it: every later create would be
                # refused too, so this is no failure to retry (client-go's controllers do the same);
                # the caller ends the pass.
                log.debug(
                    "%s: not creating %s %s: namespace %s is terminating", key, kind, name, job.namespace
                )
                raise NamespaceTerminating(job.namespace) from exc
            self._emit_event(
                raw, "Warning", f"FailedCreate{kind}", f"cannot create {kind.lower()} {name}: {exc.message}"
            )
            raise
        except Exception:
            self.expectations.observed_create(key, ref)
            raise
        if kind == "Pod":
            metrics.PODS_CREATED.labels(kind=job.kind).inc()
        else:
            metrics.CHILDREN_CREATED.labels(kind=kind).inc()
        if kind == "Secret":  # no informer will report it: it exists now
            self._state(key).secrets.add(name)
            self.expectations.observed_create(key, ref)

    async def _check_conflict(self, key: JobKey, job: Job, res: Resource, kind: str, name: str) -> None:
        """After a 409 on create: whether ``kind/name`` is controlled by another object. If so it
        is remembered as a conflict (the engine stops asking for it and says why) and the job is
        looked at again at once; :meth:`_recheck_conflicts` forgets it when the name is free."""
        holder = await self._holder(res, job, name)
        if holder is None:
            return
        self._state(key).conflicts[ChildRef(kind, name)] = holder
        self.queue.add(key)

    async def _holder(self, res: Resource, job: Job, name: str) -> str | None:
        """Who controls ``name`` of ``res`` in the job's namespace, when it is not this job:
        ``Kind/name`` of its controller, or ``no controller``; None when it is this job's or gone."""
        try:
            obj = await self.client.get(res, job.namespace, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        uid = job.metadata.uid
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("controller"):
                return None if ref.get("uid") == uid else f"{ref.get('kind')}/{ref.get('name')}"
        return "an object with no controller"

    async def _recheck_conflicts(self, key: JobKey, job: Job) -> None:
        """Forget the conflicts of ``key`` whose names are free again (deleted, or now this job's)."""
        state = self.jobs.get(key)
        if state is None or not state.conflicts:
            return
        for ref in list(state.conflicts):
            res = self.resource(ref.kind)
            holder = await self._holder(res, job, ref.name)
            if holder is None:
                del state.conflicts[ref]
            else:
                state.conflicts[ref] = holder

    async def _update(self, key: JobKey, job: Job, raw: dict[str, Any], obj: dict[str, Any]) -> None:
        """Bring a child to ``obj`` (its desired state): a merge patch of its content, labels and
        desired hash, with the cached resourceVersion as the precondition (a 409 means the cache was
        behind: the pass is retried with what the informer brings)."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        res = self.resource(kind)
        state = self.jobs.get(key)
        cached = state.children.get(ChildRef(kind, name)) if state is not None else None
        meta = obj["metadata"]
        body: dict[str, Any] = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        body["metadata"] = {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}
        if cached is not None and cached.resource_version:
            body["metadata"]["resourceVersion"] = cached.resource_version
        try:
            await self.client.patch(res, job.namespace, name, body)
        except ApiError as exc:
            metrics.API_ERRORS.labels(verb="patch", reason=exc.reason).inc()
            if exc.status not in (404, 409):
                self._emit_event(
                    raw, "Warning", f"FailedUpdate{kind}", f"cannot update {kind.lower()} {name}: {exc.message}"
                )
            raise
        log.info("%s: updated %s %s", key, kind, name)

    async def _delete(self, key: JobKey, job: Job, d: Any) -> None:
        res = self.resource(d.kind)
        try:
            await self.client.delete(res, job.namespace, d.name, uid=d.uid, grace_period=0 if d.force else None)
        except ApiError as exc:
            self.expectations.observed_delete(key, ChildRef(d.kind, d.name))
            if exc.status in (404, 409):
                return  # gone already, or a different object now has the name
            metrics.API_ERRORS.labels(verb="delete", reason=exc.reason).inc()
            raise
        except Exception:
            self.expectations.observed_delete(key, ChildRef(d.kind, d.name))
            raise
        if d.kind == "Pod":
            metrics.PODS_DELETED.labels(kind=job.kind, reason=d.reason).inc()

    async def _write_invalid(self, key: JobKey, raw: dict[str, Any]) -> None:
        """Write the status of a job left alone (:func:`~t9k_jobs.engine.invalid_spec_status`: its
        status as it was, and ``SpecValid`` False, reason ``InvalidSpec``), when it changes.
        Raises ApiError (the pass is retried with backoff)."""
        state = self._state(key)
        try:
            old = JobStatus.model_validate(raw["status"]) if raw.get("status") else None
        except ValueError:
            old = None  # a status this version cannot read: written afresh
        new_status = invalid_spec_status(old, state.invalid_message or "the spec cannot be acted on", time.time()).dump()
        if new_status == (raw.get("status") or {}):
            return
        res = JOB_RESOURCES[key.kind]
        body = dict(raw)
        body["status"] = new_status
        try:
            written = await self.client.replace_status(res, body)
        except ApiError as exc:
            metrics.API_ERRORS.labels(verb="update", reason=exc.reason).inc()
            if exc.status == 409:
                state.written = None
            raise
        written.setdefault("kind", key.kind)
        written.setdefault("apiVersion", res.api_version)
        state.written = Written(written, str(raw["metadata"].get("resourceVersion", "")))


class NamespaceTerminating(Exception):
    """A create was refused because the job's namespace is being deleted: the pass ends, no error."""


def namespace_terminating(exc: ApiError) -> bool:
    """Whether ``exc`` is the API server refusing a create because the namespace is being deleted.

    The answer is 403 Forbidden with the status cause ``NamespaceTerminating`` (core/v1
    ``NamespaceTerminatingCause``).
    """
    causes = (exc.body.get("details") or {}).get("causes") or []
    return exc.status == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)


def _ref(obj: dict[str, Any]) -> ChildRef:
    return ChildRef(obj["kind"], obj["metadata"]["name"])
