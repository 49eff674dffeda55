"""Expectations: what this operator created or deleted and has not yet seen in its cache.

After a pass creates pod ``a`` the informer may not show ``a`` for a while; a second pass in
that window would see it missing. Like kube-controller-manager's ``ControllerExpectations``
(``pkg/controller/controller_utils.go``), a job whose expectations are not met is not
reconciled: its key comes back when the informer reports the pods (which satisfies the
expectations), or once they are older than ``ttl`` seconds (5 minutes, as upstream), in case
an event was lost. Deterministic pod names make a duplicate impossible anyway (the second
create answers ``409 AlreadyExists``); expectations keep the status from flapping and save
the API server the doomed requests.

Unlike the upstream counters, we remember names: a create is met when that pod appears, a
delete when that pod disappears or gets a deletion timestamp.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

DEFAULT_TTL = 300.0

K = TypeVar("K", bound=Hashable)  # a job: the controller's JobKey
C = TypeVar("C", bound=Hashable)  # a child of a job: the controller's ChildRef


@dataclass
class _Pending(Generic[C]):
    creates: set[C] = field(default_factory=set)
    deletes: set[C] = field(default_factory=set)
    since: float = field(default_factory=time.monotonic)


class Expectations(Generic[K, C]):
    """Pending creates and deletes (children ``C``) per job key ``K``."""

    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self._pending: dict[K, _Pending[C]] = {}

    def expect(self, key: K, creates: set[C] | None = None, deletes: set[C] | None = None) -> None:
        """Record children about to be created/deleted; call *before* the API requests."""
        p = self._pending.setdefault(key, _Pending[C]())
        p.creates |= creates or set()
        p.deletes |= deletes or set()
        p.since = time.monotonic()

    def observed_create(self, key: K, child: C) -> None:
        """The cache shows ``child`` (or its create failed for good): stop waiting for it."""
        p = self._pending.get(key)
        if p is not None:
            p.creates.discard(child)
            self._drop_if_empty(key, p)

    def observed_delete(self, key: K, child: C) -> None:
        """The cache shows ``child`` gone or going (or its delete failed for good)."""
        p = self._pending.get(key)
        if p is not None:
            p.deletes.discard(child)
            self._drop_if_empty(key, p)

    def satisfied(self, key: K) -> bool:
        """True when nothing is pending for ``key``, or what is pending is older than ``ttl``."""
        p = self._pending.get(key)
        if p is None:
            return True
        if time.monotonic() - p.since > self.ttl:
            del self._pending[key]
            return True
        return False

    def pending(self, key: K) -> tuple[frozenset[C], frozenset[C]]:
        p = self._pending.get(key)
        return (frozenset(p.creates), frozenset(p.deletes)) if p else (frozenset(), frozenset())

    def forget(self, key: K) -> None:
        self._pending.pop(key, None)

    def _drop_if_empty(self, key: K, p: _Pending[C]) -> None:
        if not p.creates and not p.deletes:
            self._pending.pop(key, None)
