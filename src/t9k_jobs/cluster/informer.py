"""Informers: a local cache of one resource kept true by list-then-watch.

An :class:`Informer` follows client-go's reflector:

1. **List** in pages (``limit``/``continue``), then replace the cache with what came back,
   telling handlers which objects were added, changed or are gone;
2. **watch** from the list's ``resourceVersion`` with ``allowWatchBookmarks`` (bookmarks only
   move the resourceVersion on), a server-side ``timeoutSeconds`` of 5 to 10 minutes, after
   which it watches again from the last resourceVersion seen;
3. **relist** when the server answers ``410 Gone`` (the resourceVersion was compacted);
4. **reconnect** with backoff (0.2 s doubling to 30 s) when the stream fails or stalls, i.e.
   no line arrives for ``idle_timeout`` seconds.

Only what the controller needs is kept: a ``transform`` turns each object into a slim
projection (for pods, a few labels and an :class:`~t9k_jobs.engine.ObservedPod`) before
it is stored, so the cache of ten thousand pods stays small.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .client import ApiError, KubeClient, Resource

log = logging.getLogger("t9k_jobs.informer")

T = TypeVar("T")
Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Key, Any, Any], None]  # (event, key, new or None, old or None)


class Informer(Generic[T]):
    """Cache of ``resource`` in ``namespace`` (``None``: all) matching ``label_selector``.

    ``field_selector`` narrows it further (events of one involved kind). ``transform(obj) -> T`` projects each object (default: keep it whole). ``page_size`` is
    the list page length; ``idle_timeout`` (seconds) the longest silence before a watch is
    deemed stalled; ``watch_timeout`` the range (seconds) the server-side watch timeout is
    drawn from. Handlers added
    with :meth:`add_handler` are called as ``handler(event, key, new, old)`` with ``event``
    one of ``ADDED``, ``MODIFIED``, ``DELETED``; they run on the event loop and must not block.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Callable[[dict[str, Any]], T] | None = None,
        page_size: int = 500,
        idle_timeout: float = 90.0,
        watch_timeout: tuple[int, int] = (300, 600),
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform: Callable[[dict[str, Any]], Any] = transform or (lambda o: o)
        self.page_size = page_size
        self.idle_timeout = idle_timeout
        self.watch_timeout = watch_timeout
        self.store: dict[Key, T] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        #: Why the last list or watch failed (``"403 Forbidden: ..."``), None once one succeeds.
        self.error: str | None = None
        #: Set when the resource is not served (404 on the list) and ``optional`` was asked for.
        self.absent = False
        self._handlers: list[Handler] = []
        self._relist_hooks: list[Callable[[], None]] = []

    @property
    def name(self) -> str:
        where = self.namespace or "*"
        return f"{self.resource.plural}@{where}"

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def on_relist(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` after every completed list (the cache is then at least as new as any write)."""
        self._relist_hooks.append(hook)

    def get(self, namespace: str, name: str) -> T | None:
        return self.store.get((namespace, name))

    async def run(self, optional: bool = False) -> None:
        """List and watch until cancelled. Never returns otherwise; errors are retried (and kept in
        :attr:`error`). ``optional``: a resource the server does not serve (404 on the first list)
        is not retried: :attr:`absent` is set, the cache stays empty and counts as synced."""
        backoff = 0.2
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    self.error = None
                await self._watch()
                backoff = 0.2
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if optional and exc.status == 404 and need_list and not self.synced.is_set():
                    self.absent = True
                    self.synced.set()
                    return
                self.error = str(exc)
                if exc.status == 410:
                    log.info(
                        "%s: resourceVersion %s expired, listing again", self.name, self.resource_version
                    )
                    need_list = True
                    continue
                log.warning("%s: %s; retrying in %.1fs", self.name, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
            except TimeoutError:
                # No line for idle_timeout seconds: a stalled stream, or simply a quiet resource
                # (the API server does not always send bookmarks); reopen from the last version.
                log.debug("%s: watch idle for %.0fs, reopening", self.name, self.idle_timeout)
            except Exception as exc:  # noqa: BLE001 - a broken stream or connection: reconnect
                self.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                log.warning(
                    "%s: watch interrupted (%s: %s); retrying in %.1fs",
                    self.name,
                    type(exc).__name__,
                    exc,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    async def _list(self) -> None:
        params: dict[str, Any] = {"limit": self.page_size}
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        fresh: dict[Key, T] = {}
        while True:
            page = await self.client.list(self.resource, self.namespace, params=params)
            for obj in page.get("items") or []:
                meta = obj.get("metadata") or {}
                obj.setdefault("kind", self.resource.kind)
                obj.setdefault("apiVersion", self.resource.api_version)
                fresh[(meta.get("namespace", ""), meta["name"])] = self.transform(obj)
            cont = (page.get("metadata") or {}).get("continue")
            rv = (page.get("metadata") or {}).get("resourceVersion", "")
            if not cont:
                break
            params["continue"] = cont
        old = self.store
        self.store = fresh
        self.resource_version = rv
        self.relists += 1
        for hook in self._relist_hooks:
            hook()
        for key, new in fresh.items():
            prev = old.get(key)
            if prev is None:
                self._emit("ADDED", key, new, None)
            elif prev != new:
                self._emit("MODIFIED", key, new, prev)
        for key, prev in old.items():
            if key not in fresh:
                self._emit("DELETED", key, None, prev)
        self.synced.set()
        log.debug("%s: listed %d objects at resourceVersion %s", self.name, len(fresh), rv)

    async def _watch(self) -> None:
        params: dict[str, Any] = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": random.randint(*self.watch_timeout),
        }
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        async for event in self.client.watch(self.resource, self.namespace, params, self.idle_timeout):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise ApiError(code, str(obj.get("reason") or code), str(obj.get("message") or ""), obj)
            meta = obj.get("metadata") or {}
            rv = meta.get("resourceVersion")
            if kind == "BOOKMARK":
                if rv:
                    self.resource_version = rv
                continue
            obj.setdefault("kind", self.resource.kind)
            obj.setdefault("apiVersion", self.resource.api_version)
            key = (meta.get("namespace", ""), meta["name"])
            prev = self.store.get(key)
            if kind == "DELETED":
                self.store.pop(key, None)
                if rv:
                    self.resource_version = rv
                self._emit("DELETED", key, None, prev if prev is not None else self.transform(obj))
                continue
            new = self.transform(obj)
            self.store[key] = new
            if rv:
                self.resource_version = rv
            if prev is None:
                self._emit("ADDED", key, new, None)
            elif prev != new:
                self._emit("MODIFIED", key, new, prev)

    def _emit(self, event: str, key: Key, new: Any, old: Any) -> None:
        for handler in self._handlers:
            try:
                handler(event, key, new, old)
            except Exception:
                log.exception("%s: handler failed on %s %s", self.name, event, key)
