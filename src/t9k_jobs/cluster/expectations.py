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
from dataclasses import dataclass, field

DEFAULT_TTL = 300.0


@dataclass
class _Pending:
    creates: set[str] = field(default_factory=set)
    deletes: set[str] = field(default_factory=set)
    since: float = field(default_factory=time.monotonic)


class Expectations:
    """Pending creates and deletes per job key; names are ``Kind/name`` strings of children."""

    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self._pending: dict[str, _Pending] = {}

    def expect(self, key: str, creates: set[str] | None = None, deletes: set[str] | None = None) -> None:
        """Record children about to be created/deleted; call *before* the API requests."""
        p = self._pending.setdefault(key, _Pending())
        p.creates |= creates or set()
        p.deletes |= deletes or set()
        p.since = time.monotonic()

    def observed_create(self, key: str, child: str) -> None:
        """The cache shows ``child`` (or its create failed for good): stop waiting for it."""
        p = self._pending.get(key)
        if p is not None:
            p.creates.discard(child)
            self._drop_if_empty(key, p)

    def observed_delete(self, key: str, child: str) -> None:
        """The cache shows ``child`` gone or going (or its delete failed for good)."""
        p = self._pending.get(key)
        if p is not None:
            p.deletes.discard(child)
            self._drop_if_empty(key, p)

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for ``key``, or what is pending is older than ``ttl``."""
        p = self._pending.get(key)
        if p is None:
            return True
        if time.monotonic() - p.since > self.ttl:
            del self._pending[key]
            return True
        return False

    def pending(self, key: str) -> tuple[frozenset[str], frozenset[str]]:
        p = self._pending.get(key)
        return (frozenset(p.creates), frozenset(p.deletes)) if p else (frozenset(), frozenset())

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)

    def _drop_if_empty(self, key: str, p: _Pending) -> None:
        if not p.creates and not p.deletes:
            self._pending.pop(key, None)
