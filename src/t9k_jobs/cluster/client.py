"""A small async Kubernetes REST client: kubernetes_asyncio for config and auth, raw JSON on the wire.

kubernetes_asyncio (maintained, async, aiohttp) loads the kubeconfig or the in-cluster
service account, builds the TLS context and refreshes tokens (exec plugins, projected
service-account tokens). Requests go through its aiohttp session but skip its generated
models: bodies are plain ``dict``s decoded with orjson, which is what an informer holding
thousands of pods needs (``reference/python-stack.md`` §1.6: the model layer is the slow part).

Client-side flow control follows client-go: a token bucket (``qps``, ``burst``) in front of
every request except long-running watches, and ``429 Too Many Requests`` retried after the
server's ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from ..loglines import READ_SIZE, split_lines
from . import metrics

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
#: Seconds one request may take unless the client is told otherwise (the operator's default).
DEFAULT_REQUEST_TIMEOUT = 30.0


class ApiError(Exception):
    """A non-2xx answer of the API server.

    ``status`` is the HTTP code, ``reason`` the Status reason (``NotFound``, ``AlreadyExists``,
    ``Conflict``, ``Expired``, ``Invalid``...), ``message`` the server's message.
    """

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` ("" for core), ``version``, ``plural``, ``kind``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path, e.g. ``/api/v1/namespaces/ns/pods/p/status``; ``namespace=None`` is all
        namespaces, ``name=None`` the collection.

        Raises ``ValueError`` for a ``name`` or ``namespace`` that is not one path segment (empty,
        ``.``, ``..``, holding ``/`` or ``%``): ``name=""`` would otherwise make the collection's
        URL, and a DELETE there is a deletecollection of every object in the namespace."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(_segment(namespace, 'namespace'), safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(_segment(name, 'name'), safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


def _segment(value: str, what: str) -> str:
    """``value`` when it can be one path segment of an API URL (client-go's
    ``IsValidPathSegmentName``, and not empty); raises ``ValueError`` otherwise."""
    if not isinstance(value, str) or not value or value in (".", "..") or "/" in value or "%" in value:
        raise ValueError(f"{what} {value!r} cannot be one segment of an API path")
    return value


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
EVENTS = Resource("", "v1", "events", "Event")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
#: Nodes (cluster-scoped): the operator reads their ``Ready`` condition to tell a lost node.
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
PODGROUPS = Resource("scheduler.tensorstack.dev", "v1beta1", "podgroups", "PodGroup")
TENSORBOARDS = Resource("tensorstack.dev", "v1beta1", "tensorboards", "TensorBoard")
#: Kubernetes 1.37's PodGroup (KEP-4671; gate GenericWorkload): a t9kScheduler job's gang where
#: T9k's own PodGroup is not served. Same kind name as T9k's; one runtime uses one of the two.
NATIVE_PODGROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup")
PRIORITYCLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
#: Kueue's Workload (v0.17.0, storage version v1beta2): a t9kScheduler job's request for quota
#: where Kueue is installed (issue 24; frameworks/queueing.py).
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
#: Kueue's ResourceFlavors (cluster-scoped): the node labels of the flavor a Workload is admitted to.
RESOURCEFLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False)
CORE_CHILDREN = {r.kind: r for r in (PODS, SERVICES, CONFIGMAPS, SECRETS)}
OPTIONAL_CHILDREN = {r.kind: r for r in (PODGROUPS, TENSORBOARDS, WORKLOADS)}


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved; ``qps <= 0`` means no limit."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1:
                wait = (1 - self._tokens) / self.qps
                await asyncio.sleep(wait)
                self._last = time.monotonic()
                self._tokens = 1.0
            self._tokens -= 1


_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class KubeClient:
    """Async access to one API server. Create with :meth:`from_config`; close with :meth:`close`.

    Every method raises :class:`ApiError` for a non-2xx answer and ``aiohttp.ClientError`` or
    ``asyncio.TimeoutError`` when the server cannot be reached.
    """

    def __init__(
        self,
        api: k8s_client.ApiClient,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        owns_api: bool = True,
    ) -> None:
        self._api = api
        self._owns_api = owns_api
        self.api_client = api  # for kubernetes_asyncio helpers (leader election)
        self.host = api.configuration.host.rstrip("/")
        # kubernetes_asyncio's own session has trust_env=True, which reads the proxy variables and
        # ~/.netrc on every request; ours shares its connector (TLS, pool) without that.
        pool = api.rest_client.pool_manager
        self._session = aiohttp.ClientSession(
            connector=pool.connector, connector_owner=False, trust_env=False, read_bufsize=2**21
        )
        self._proxy = api.configuration.proxy or None
        self._bucket = TokenBucket(qps, burst)
        #: Seconds one request may take when :meth:`request` is given no ``timeout`` (None: no
        #: limit); also the limit on connecting for watches and log streams.
        self.request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT

    @classmethod
    async def from_config(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> KubeClient:
        """Load ``kubeconfig`` (or ``$KUBECONFIG``, ``~/.kube/config``), else the in-cluster account.

        Raises ``kubernetes_asyncio.config.ConfigException`` when neither is usable.
        """
        conf = k8s_client.Configuration()
        conf.connection_pool_maxsize = 64
        if kubeconfig is None and _in_cluster():
            k8s_config.load_incluster_config(client_configuration=conf)
        else:
            await k8s_config.load_kube_config(
                config_file=None if kubeconfig is None else os.fspath(kubeconfig),
                context=context,
                client_configuration=conf,
            )
        return cls(k8s_client.ApiClient(configuration=conf), qps=qps, burst=burst)

    def sibling(self) -> KubeClient:
        """A client on the same connection pool with its own token bucket (same qps and burst).

        Events go through one, as client-go's event recorder has its own client and rate
        limiter: recording events never slows the reconcile down.
        """
        return KubeClient(self._api, qps=self._bucket.qps, burst=self._bucket.burst, owns_api=False)

    async def close(self) -> None:
        await self._session.close()
        if self._owns_api:
            await self._api.close()

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        await self._api.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        verb: str | None = None,
    ) -> dict[str, Any]:
        """One request; returns the decoded JSON answer. ``timeout`` is in seconds (default
        :attr:`request_timeout`; raises ``asyncio.TimeoutError`` when it runs out).

        ``verb`` labels the request in the metrics (default from ``method``: get, create,
        update, patch, delete). ``429`` answers are retried (up to 5 times) after
        ``Retry-After`` seconds.
        """
        verb = verb or _VERBS[method]
        url = self.host + path
        if params:
            url += "?" + urlencode({k: _param(v) for k, v in params.items() if v is not None})
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        limit = timeout if timeout is not None else self.request_timeout
        for attempt in range(6):
            await self._bucket.take()
            headers = await self._headers(content_type if data is not None else None)
            started = time.perf_counter()
            code = "error"
            try:
                async with self._session.request(
                    method,
                    url,
                    data=data,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(total=limit),
                    proxy=self._proxy,
                ) as resp:
                    raw = await resp.read()
                    code = str(resp.status)
                    if resp.status == 429 and attempt < 5:
                        await asyncio.sleep(_retry_after(resp.headers.get("Retry-After")))
                        continue
                    if resp.status >= 300:
                        raise _error(resp.status, raw)
                    return orjson.loads(raw) if raw else {}
            finally:
                metrics.API_REQUESTS.labels(verb=verb, code=code).inc()
                metrics.API_LATENCY.labels(verb=verb).observe(time.perf_counter() - started)
        raise AssertionError("unreachable")

    def _connect_limit(self) -> float:
        """Seconds to connect (TCP and TLS) for a long-running request: the request timeout, at most 30."""
        return min(30.0, self.request_timeout) if self.request_timeout else 30.0

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        """One object; ``name`` is required (``ValueError`` for None or an empty name)."""
        return await self.request("GET", res.path(namespace, _segment(name, "name")))

    async def list(
        self, res: Resource, namespace: str | None = None, *, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One page of a list (``params`` may carry ``limit``, ``continue``, ``labelSelector``)."""
        return await self.request("GET", res.path(namespace), params=params, verb="list")

    async def create(self, res: Resource, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", res.path(namespace), body=obj)

    async def replace_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` to its status subresource; its ``metadata.resourceVersion`` is the precondition."""
        meta = obj["metadata"]
        return await self.request(
            "PUT", res.path(meta.get("namespace"), _segment(meta.get("name"), "name"), "status"), body=obj
        )

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        content_type: str = "application/merge-patch+json",
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return await self.request(
            "PATCH",
            res.path(namespace, _segment(name, "name"), subresource),
            body=body,
            content_type=content_type,
            params=params,
        )

    async def apply(
        self, res: Resource, obj: dict[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` (create or update), owned by ``field_manager``."""
        meta = obj["metadata"]
        return await self.patch(
            res,
            meta.get("namespace"),
            meta["name"],
            obj,
            content_type="application/apply-patch+yaml",
            params={"fieldManager": field_manager, "force": force},
        )

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: str = "Background",
        grace_period: int | None = None,
    ) -> dict[str, Any]:
        """Delete, only if the object still has ``uid`` when given (a UID precondition).
        ``grace_period``: seconds for a pod to stop (``gracePeriodSeconds``; 0 deletes it at once,
        without waiting for its kubelet); ``None`` keeps the pod's own."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_period is not None:
            body["gracePeriodSeconds"] = grace_period
        return await self.request("DELETE", res.path(namespace, _segment(name, "name")), body=body)

    async def watch(
        self, res: Resource, namespace: str | None, params: dict[str, Any], idle_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield watch events (``{"type": ..., "object": ...}``) until the server ends the stream.

        ``idle_timeout`` (seconds) bounds the silence between two lines: a stalled stream
        raises ``asyncio.TimeoutError`` so the caller reconnects. Watches skip the token bucket,
        like client-go's long-running requests.
        """
        query = urlencode({**{k: _param(v) for k, v in params.items()}, "watch": "true"})
        stream = self._stream(res.path(namespace) + "?" + query, idle_timeout, "watch")
        async with contextlib.aclosing(stream) as lines:
            async for line in lines:
                if line.strip():
                    yield orjson.loads(line)

    async def stream_lines(
        self, path: str, params: dict[str, Any] | None = None, idle_timeout: float | None = None
    ) -> AsyncIterator[str]:
        """Yield the lines (UTF-8, undecodable bytes replaced, without the newline) of a plain-text
        answer as they arrive: a pod's log (``/api/v1/namespaces/NS/pods/P/log``), followed or not.

        ``idle_timeout`` (seconds, None: none) bounds the silence between two reads. Raises
        :class:`ApiError` for a non-2xx answer. Like watches, it skips the token bucket."""
        if params:
            path += "?" + urlencode({k: _param(v) for k, v in params.items() if v is not None})
        stream = self._stream(path, idle_timeout, "get", "*/*", unterminated=True, cut=True)
        async with contextlib.aclosing(stream) as lines:
            async for line in lines:
                yield line.decode("utf-8", errors="replace")

    async def _stream(
        self,
        path: str,
        idle_timeout: float | None,
        verb: str,
        accept: str | None = None,
        unterminated: bool = False,
        cut: bool = False,
    ) -> AsyncIterator[bytes]:
        """Yield the lines (without the newline) of a streamed GET of ``path`` as they arrive (the
        callers close it with :func:`contextlib.aclosing`, so the response goes when they stop);
        ``unterminated``: the text after the last newline too, when the stream ends; ``cut``: lines
        longer than :data:`~t9k_jobs.loglines.MAX_LINE` bytes come as pieces of at most that
        length (a log: memory stays bounded whatever a container prints), else whole (a watch
        event is one JSON document).
        ``idle_timeout`` (seconds, None: none) bounds the silence between two reads; ``verb``: the
        request's label in ``API_REQUESTS``. Raises :class:`ApiError` for a non-2xx answer. Skips
        the token bucket."""
        headers = await self._headers(None)
        if accept is not None:
            headers["Accept"] = accept
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_limit(), sock_read=idle_timeout)
        code = "error"
        try:
            url = self.host + path
            async with self._session.get(url, headers=headers, timeout=timeout, proxy=self._proxy) as resp:
                code = str(resp.status)
                if resp.status >= 300:
                    raise _error(resp.status, await resp.read())
                if cut:
                    partial = b""
                    async for chunk in resp.content.iter_any():
                        for start in range(0, len(chunk), READ_SIZE):
                            lines, partial = split_lines(partial, chunk[start : start + READ_SIZE])
                            if lines is not None:
                                for line in lines.split(b"\n"):
                                    yield line
                    if partial and unterminated:
                        yield partial
                    return
                held: list[bytes] = []  # the unfinished line, in the pieces it came in
                async for chunk in resp.content.iter_any():
                    start = 0
                    end = chunk.find(b"\n")
                    while end >= 0:
                        held.append(chunk[start:end])
                        yield b"".join(held)
                        held = []
                        start = end + 1
                        end = chunk.find(b"\n", start)
                    if start < len(chunk):
                        held.append(chunk[start:])
                if held and unterminated:
                    yield b"".join(held)
        finally:
            metrics.API_REQUESTS.labels(verb=verb, code=code).inc()


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 1), 0.1), 30.0)
    except ValueError:
        return 1.0


def _error(status: int, raw: bytes) -> ApiError:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return ApiError(status, str(body.get("reason") or status), str(body.get("message") or raw[:300]), body)


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")
