"""What the tests share: one builder for job manifests and one wait for a condition.

A manifest is built from three pieces: ``job`` (apiVersion, kind, metadata, spec), ``replica``
(one entry of ``spec.replicaSpecs``) and ``template`` (a pod template of one container)::

    job("GenericJob", "g", {"replicaSpecs": [replica("worker", 2, template(["true"]))]})

A test waits for a condition with ``wait_until`` (``await_until`` in a coroutine), never for a
fixed time. Import them as ``from tests.helpers import ...``: ``tests`` is a package, so this
works whichever test file pytest is given.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

API_VERSION = "batch.tensorstack.dev/v1beta1"

T = TypeVar("T")


# --------------------------------------------------------------------------- manifests


def job(
    kind: str,
    name: str,
    spec: dict[str, Any],
    *,
    namespace: str | None = None,
    status: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A manifest of one of our kinds: ``metadata`` holds ``name``, ``namespace`` when given and
    any other ``metadata`` field (uid, labels, ...); ``status`` is added when given."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata)
    manifest: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}
    if status is not None:
        manifest["status"] = status
    return manifest


def replica(type_: str, replicas: int | None, template: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """One entry of ``spec.replicaSpecs``: ``replicas=None`` leaves the count out; ``fields``
    (``restartPolicy``, ``scalingWeight``, ...) stand beside the template."""
    spec: dict[str, Any] = {"type": type_}
    if replicas is not None:
        spec["replicas"] = replicas
    return {**spec, **fields, "template": template}


def template(
    command: list[str] | None = None,
    *,
    name: str = "pytorch",
    image: str | None = "local",
    pod: dict[str, Any] | None = None,
    **container: Any,
) -> dict[str, Any]:
    """A pod template of one container ``name`` running ``command``; ``image`` and ``command`` are
    left out when None. ``container`` adds the container's other fields (env, resources, ...),
    ``pod`` the pod spec's (volumes, terminationGracePeriodSeconds, ...)."""
    one: dict[str, Any] = {"name": name}
    if image is not None:
        one["image"] = image
    if command is not None:
        one["command"] = command
    return {"spec": {**(pod or {}), "containers": [{**one, **container}]}}


# --------------------------------------------------------------------------- waiting


class ConditionTimeout(AssertionError):
    """``wait_until`` gave up: ``what`` was not true within ``timeout`` seconds; ``last`` is what
    the predicate returned (or raised, when that counted as "not yet") the last time."""

    def __init__(self, what: str, timeout: float, last: Any) -> None:
        super().__init__(f"timed out after {timeout} s waiting for {what}; last: {last!r}")
        self.what, self.timeout, self.last = what, timeout, last


def wait_until(
    predicate: Callable[[], T],
    what: str,
    timeout: float = 60,
    *,
    interval: float = 0.1,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something true, and return
    that. An exception of a type in ``ignore`` counts as "not yet"; any other goes up at once.
    After ``timeout`` seconds raise ``ConditionTimeout`` (an AssertionError) naming ``what``."""
    end = time.monotonic() + timeout
    while True:
        try:
            last: Any = predicate()
        except ignore as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= end:
            raise ConditionTimeout(what, timeout, last)
        time.sleep(interval)


async def await_until(
    predicate: Callable[[], T], what: str, timeout: float = 60, *, interval: float = 0.05
) -> T:
    """``wait_until`` inside a coroutine: the event loop runs on between two looks."""
    end = time.monotonic() + timeout
    while True:
        last: Any = predicate()
        if last:
            return last
        if time.monotonic() >= end:
            raise ConditionTimeout(what, timeout, last)
        await asyncio.sleep(interval)
