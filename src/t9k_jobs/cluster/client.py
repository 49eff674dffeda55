"""A small async Kubernetes REST client: kubernetes_asyncio for config and auth, raw JSON on the wire.

kubernetes_asyncio (maintained, async, aiohttp) loads the kubeconfig or the in-cluster
service account, builds the TLS context and refreshes tokens (exec plugins, projected
service-account tokens). Requests go through its aiohttp session but skip its generated
models: bodies are plain ``dict``s decoded with orjson, which is what an informer holding
thousands of pods needs (``reference/python-stack.md`` §1.6: the model layer is the slow part).

Client-side flow control follows client-go: a token bucket (``qps``, ``burst``) in front of
every request except long-running watches, and ``429 Too Many Requests`` (and a ``5xx`` that
carries ``Retry-After``) retried after the server's ``Retry-After``.

Every answer is bounded and checked before use (issue 33): a body is read up to
:data:`MAX_ANSWER` bytes (a watch event up to :data:`MAX_WATCH_LINE`), must be JSON, a JSON
object, nested at most :data:`MAX_DEPTH` deep; :func:`checked_object` and :func:`checked_items`
check the shape a caller uses. Anything else is a :class:`BadAnswer`, one line, as a proxy that
answers with an HTML page or a server that sends gigabytes gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from kubernetes_asyncio import client as k8s_client  # the lazy package (cluster/lazy_client.py)

from ..api import GROUP, KINDS, VERSION
from ..loglines import READ_SIZE, split_lines
from .kubeconfig import IN_CLUSTER, operator_source
from .kubeconfig import read as read_kubeconfig

# aiohttp, kubernetes_asyncio's kubeconfig loader and the metrics (prometheus_client) are imported
# where they are used: a one-shot command (cluster/oneshot.py) reads answers here without them.

#: The largest answer (bytes) one request reads: far above any page of a list (500 objects) or
#: object the API server keeps (etcd's limit is 1.5 MiB), far below what would exhaust memory.
MAX_ANSWER = 64 * 2**20
#: The longest watch event (one object, bytes).
MAX_WATCH_LINE = 16 * 2**20
#: The longest error answer read (a Status is small; the rest of a larger body is not read).
MAX_ERROR_ANSWER = 2**20
#: How deep an answer may nest (objects and lists): a Kubernetes object, a CRD's schema included,
#: stays far below; what is deeper would exhaust the recursion of whatever reads it.
MAX_DEPTH = 128
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
        #: Seconds the server asked to wait before trying again (``Retry-After``), None when it did not.
        self.retry_after: float | None = None


class BadAnswer(ApiError):
    """An answer that cannot be used: larger than :data:`MAX_ANSWER` (or a watch event than
    :data:`MAX_WATCH_LINE`), not JSON (an HTML page of a proxy), not a JSON object, nested deeper
    than :data:`MAX_DEPTH`, or without the fields the caller reads (:func:`checked_object`,
    :func:`checked_items`). ``status`` is the answer's HTTP status (200 mostly), ``reason``
    ``BadAnswer``; ``message`` says what was wrong, in one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, "BadAnswer", message)


def _printable(raw: bytes, limit: int = 60) -> str:
    """The start of ``raw`` as one printable line (for messages)."""
    text = raw[: limit * 4].decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (decoded JSON) nests objects and lists more than ``limit`` deep; walked
    without recursion, so any depth is answered."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def decode_answer(raw: bytes, status: int, what: str, content_type: str | None = None) -> dict[str, Any]:
    """``raw`` (an answer's body) as a JSON object, or :class:`BadAnswer` saying in one line why it
    is not one (``what``: the request, ``GET /api/v1/...``). An empty body is ``{}``."""
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        kind = f" ({content_type})" if content_type and "json" not in content_type else ""
        why = "nested too deep" if "depth limit" in str(exc) or "ecursion" in str(exc) else "not JSON"
        raise BadAnswer(status, f"the answer to {what} is {why}{kind}: {_printable(raw)!r}") from None
    if not isinstance(value, dict):
        raise BadAnswer(status, f"the answer to {what} is a JSON {type(value).__name__}, not an object: {_printable(raw)!r}")
    if too_deep(value):
        raise BadAnswer(status, f"the answer to {what} nests more than {MAX_DEPTH} levels deep")
    return value


def checked_object(obj: Any, what: str, kind: str | None = None) -> dict[str, Any]:
    """``obj`` when it has the shape of a Kubernetes object the verbs read: a mapping whose
    ``metadata`` is a mapping with a non-empty string ``name`` (and ``namespace``, ``labels``,
    ``annotations`` of the right types when present), ``spec`` and ``status`` mappings or absent,
    ``kind`` (when ``kind`` is given, and the object names one) that kind. Raises
    :class:`BadAnswer` naming the field otherwise (``what``: where it came from)."""
    if not isinstance(obj, dict):
        raise BadAnswer(200, f"{what}: expected an object, got a JSON {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise BadAnswer(200, f"{what}: metadata is missing or not an object")
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise BadAnswer(200, f"{what}: metadata.name is missing or not a string")
    for field, typ in (("namespace", str), ("labels", dict), ("annotations", dict), ("ownerReferences", list)):
        if meta.get(field) is not None and not isinstance(meta[field], typ):
            raise BadAnswer(200, f"{what}: metadata.{field} is not a{'n' if typ is dict else ''} {typ.__name__}")
    for field in ("spec", "status"):
        if obj.get(field) is not None and not isinstance(obj[field], dict):
            raise BadAnswer(200, f"{what}: {field} is not an object")
    if kind is not None and obj.get("kind") not in (None, kind):
        raise BadAnswer(200, f"{what}: expected a {kind}, got kind {obj.get('kind')!r}")
    return obj


def checked_items(page: Any, what: str, kind: str | None = None) -> list[dict[str, Any]]:
    """The ``items`` of a list answer, each a :func:`checked_object`; ``items`` absent or null is
    an empty list. Raises :class:`BadAnswer` naming what is wrong."""
    if not isinstance(page, dict):
        raise BadAnswer(200, f"{what}: expected a list object, got a JSON {type(page).__name__}")
    items = page.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise BadAnswer(200, f"{what}: items is not a list")
    for i, item in enumerate(items):
        checked_object(item, f"{what}: items[{i}]", kind)
    meta = page.get("metadata")
    if meta is not None and (not isinstance(meta, dict) or not isinstance(meta.get("continue") or "", str)):
        raise BadAnswer(200, f"{what}: metadata.continue is not a string")
    return items


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
#: Kueue's LocalQueues (a namespace's queue, naming its ClusterQueue) and ClusterQueues (their
#: flavors): whether Kueue's Topology Aware Scheduling places a queued job (cluster/kueue.py).
LOCALQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
CLUSTERQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
#: The REST resource of each job kind (``batch.tensorstack.dev/v1beta1``): the operator's and the SDK's.
JOB_RESOURCES = {kind: Resource(GROUP, VERSION, cls.PLURAL, kind) for kind, cls in KINDS.items()}
#: A gang job's PodDisruptionBudget (policy/v1, served since Kubernetes 1.21; issue 43).
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
CORE_CHILDREN = {r.kind: r for r in (PODS, SERVICES, CONFIGMAPS, SECRETS, PDBS)}
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
    """Async access to one API server. Create with :meth:`from_config` (or :meth:`lazy`); close
    with :meth:`close`.

    Every method raises :class:`ApiError` for a non-2xx answer (:class:`BadAnswer` for one that
    cannot be used) and ``aiohttp.ClientError`` or ``asyncio.TimeoutError`` when the server cannot
    be reached.
    """

    def __init__(
        self,
        api: k8s_client.ApiClient | None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        owns_api: bool = True,
        *,
        host: str | None = None,
        loader: Callable[[], Awaitable[k8s_client.ApiClient]] | None = None,
    ) -> None:
        self._owns_api = owns_api
        self._loader = loader
        self._lock = asyncio.Lock()
        self._api: k8s_client.ApiClient | None = None
        self.api_client: k8s_client.ApiClient | None = None  # for kubernetes_asyncio helpers (leader election)
        self.host = (host or "").rstrip("/")
        self._bucket = TokenBucket(qps, burst)
        if api is not None:
            self._attach(api)
        elif loader is None:
            raise ValueError("a KubeClient needs an ApiClient or a loader")
        #: Seconds one request may take when :meth:`request` is given no ``timeout`` (None: no
        #: limit); also the limit on connecting for watches and log streams.
        self.request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT
        #: The largest answer (bytes) :meth:`request` reads (:data:`MAX_ANSWER`).
        self.max_answer = MAX_ANSWER

    def _attach(self, api: k8s_client.ApiClient) -> None:
        import aiohttp

        self._api = self.api_client = api
        self.host = api.configuration.host.rstrip("/")
        # kubernetes_asyncio's own session has trust_env=True, which reads the proxy variables and
        # ~/.netrc on every request; ours shares its connector (TLS, pool) without that.
        pool = api.rest_client.pool_manager
        self._session = aiohttp.ClientSession(
            connector=pool.connector, connector_owner=False, trust_env=False, read_bufsize=2**21
        )
        self._proxy = api.configuration.proxy or None

    @classmethod
    def lazy(
        cls, host: str, loader: Callable[[], Awaitable[k8s_client.ApiClient]], qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST
    ) -> KubeClient:
        """A client of the API server at ``host`` whose credentials and TLS settings ``loader``
        makes on the first request (:meth:`ready`), as client-go runs a kubeconfig's credential
        plugin when a request first needs it: arguments are checked, and a command given up,
        before any plugin runs. The plugin gets :attr:`request_timeout` (``PLUGIN_LIMIT``)."""
        return cls(None, qps=qps, burst=burst, host=host, loader=loader)

    async def ready(self) -> None:
        """Make the connection settings of a :meth:`lazy` client (once; the first caller's
        failure is raised, and the next caller tries again)."""
        if self._api is not None:
            return
        async with self._lock:
            if self._api is None:
                assert self._loader is not None
                from .credentials import PLUGIN_LIMIT  # lazy: keeps aiohttp out of the one-shot path

                token = PLUGIN_LIMIT.set(self.request_timeout)
                try:
                    self._attach(await self._loader())
                finally:
                    PLUGIN_LIMIT.reset(token)

    @classmethod
    async def from_config(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> KubeClient:
        """Load ``kubeconfig``, else ``$KUBECONFIG``, else the in-cluster account, else
        ``~/.kube/config`` (controller-runtime's order: :func:`.kubeconfig.operator_source`; the
        files read once: :func:`.kubeconfig.read`). A credential plugin gets
        :data:`DEFAULT_REQUEST_TIMEOUT` seconds (:mod:`.credentials`).

        Raises ``kubernetes_asyncio.config.ConfigException`` when none is usable (a missing file, a
        kubeconfig's problem in one line naming it), or when the TLS files (certificate authority,
        client certificate) cannot be used (one line).
        """
        from kubernetes_asyncio import config as k8s_config
        from kubernetes_asyncio.config.config_exception import ConfigException

        from .credentials import PLUGIN_LIMIT  # lazy: keeps aiohttp out of the one-shot path

        conf = k8s_client.Configuration()
        conf.connection_pool_maxsize = 64
        source = operator_source(kubeconfig)
        if source == IN_CLUSTER:
            k8s_config.load_incluster_config(client_configuration=conf)
        else:
            cfg = read_kubeconfig(source)
            if not cfg.exists:
                raise ConfigException(f"no kubeconfig: {os.pathsep.join(cfg.files)} does not exist, and this is not a pod")
            problem = cfg.problem(context)
            if problem is None and context is not None and context not in cfg.contexts:
                problem = f"no context {context!r} in {os.pathsep.join(cfg.read)}; it has {', '.join(cfg.contexts) or 'none'}"
            if problem is not None:
                raise ConfigException(problem)
            token = PLUGIN_LIMIT.set(DEFAULT_REQUEST_TIMEOUT)
            try:
                await cfg.loader(context).load_and_set(conf)
            finally:
                PLUGIN_LIMIT.reset(token)
        return cls(api_client(conf), qps=qps, burst=burst)

    def sibling(self) -> KubeClient:
        """A client on the same connection pool with its own token bucket (same qps and burst).

        Events go through one, as client-go's event recorder has its own client and rate
        limiter: recording events never slows the reconcile down.
        """
        if self._api is not None:
            return KubeClient(self._api, qps=self._bucket.qps, burst=self._bucket.burst, owns_api=False)

        async def parents() -> k8s_client.ApiClient:
            await self.ready()
            assert self._api is not None
            return self._api

        return KubeClient(
            None, qps=self._bucket.qps, burst=self._bucket.burst, owns_api=False, host=self.host, loader=parents
        )

    async def close(self) -> None:
        if self._api is None:
            return
        await self._session.close()
        if self._owns_api:
            await self._api.close()

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        await self.ready()
        assert self._api is not None
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        await self._api.update_params_for_auth(headers, [], ["BearerToken"])
        return headers

    async def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
        content_type: str = "application/json", timeout: float | None = None, verb: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """One request; returns the decoded JSON answer, a JSON object (:class:`BadAnswer` when it
        is larger than :attr:`max_answer`, not JSON, not an object or too deep: :func:`decode_answer`).
        ``timeout`` is in seconds (default :attr:`request_timeout`; raises ``asyncio.TimeoutError``
        when it runs out).

        ``verb`` labels the request in the metrics (default from ``method``: get, create,
        update, patch, delete). ``429`` answers, and ``5xx`` ones that carry ``Retry-After``, are
        retried (up to 5 times) after ``Retry-After`` seconds (:func:`retried`).
        """
        import aiohttp

        from . import metrics  # lazy: keeps prometheus_client out of the one-shot path

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
                    code = str(resp.status)
                    if retried(resp.status, resp.headers.get("Retry-After")) and attempt < 5:
                        await asyncio.sleep(_retry_after(resp.headers.get("Retry-After")))
                        continue
                    what = f"{method} {path}"
                    if resp.status >= 300:
                        body = await _read(resp, MAX_ERROR_ANSWER, what, cut=True)
                        raise _error(resp.status, body, resp.headers.get("Retry-After"))
                    raw = await _read(resp, self.max_answer, what)
                    return decode_answer(raw, resp.status, what, resp.headers.get("Content-Type"))
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
        path = res.path(namespace) + "?" + query
        stream = self._stream(path, idle_timeout, "watch", max_line=MAX_WATCH_LINE)
        async with contextlib.aclosing(stream) as lines:
            async for line in lines:
                if line.strip():
                    event = decode_answer(line, 200, f"the watch of {res.path(namespace)}")
                    if not isinstance(event.get("type"), str) or not isinstance(event.get("object"), dict):
                        raise BadAnswer(200, f"a watch event of {res.path(namespace)} has no type or no object")
                    yield event

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
        max_line: int = MAX_WATCH_LINE,
    ) -> AsyncIterator[bytes]:
        """Yield the lines (without the newline) of a streamed GET of ``path`` as they arrive (the
        callers close it with :func:`contextlib.aclosing`, so the response goes when they stop);
        ``unterminated``: the text after the last newline too, when the stream ends; ``cut``: lines
        longer than :data:`~t9k_jobs.loglines.MAX_LINE` bytes come as pieces of at most that
        length (a log: memory stays bounded whatever a container prints), else whole (a watch
        event is one JSON document) up to ``max_line`` bytes (:class:`BadAnswer` beyond).
        ``idle_timeout`` (seconds, None: none) bounds the silence between two reads; ``verb``: the
        request's label in ``API_REQUESTS``. Raises :class:`ApiError` for a non-2xx answer. Skips
        the token bucket."""
        import aiohttp

        from . import metrics  # lazy: keeps prometheus_client out of the one-shot path

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
                    body = await _read(resp, MAX_ERROR_ANSWER, f"GET {path}", cut=True)
                    raise _error(resp.status, body, resp.headers.get("Retry-After"))
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
                size = 0  # its length so far
                async for chunk in resp.content.iter_any():
                    start = 0
                    end = chunk.find(b"\n")
                    while end >= 0:
                        held.append(chunk[start:end])
                        yield b"".join(held)
                        held, size = [], 0
                        start = end + 1
                        end = chunk.find(b"\n", start)
                    if start < len(chunk):
                        held.append(chunk[start:])
                        size += len(chunk) - start
                        if size > max_line:
                            raise BadAnswer(resp.status, f"a line of GET {path.split('?')[0]} is longer than {max_line} bytes")
                if held and unterminated:
                    yield b"".join(held)
        finally:
            metrics.API_REQUESTS.labels(verb=verb, code=code).inc()


async def _read(resp: Any, limit: int, what: str, cut: bool = False) -> bytes:
    """The body of ``resp``, at most ``limit`` bytes: :class:`BadAnswer` when it says or turns out
    to be longer (``cut``: its first ``limit`` bytes instead, for an error answer whose message is
    all that is read). The rest is never read."""
    length = resp.content_length
    if length is not None and length > limit and not cut:
        raise BadAnswer(resp.status, f"the answer to {what} is {length} bytes, more than the {limit} read")
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(2**20):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if cut:
                return b"".join(chunks)[:limit]
            raise BadAnswer(resp.status, f"the answer to {what} is more than the {limit} bytes read")
    return b"".join(chunks)


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def retried(status: int, retry_after: str | None) -> bool:
    """Whether an answer is tried again after its ``Retry-After``, as client-go does: a ``429``
    always (the server shed it), a ``5xx`` when it says when to come back (a 503 of an API server
    that is starting, or shedding with priority and fairness: the request was not processed)."""
    return status == 429 or (status >= 500 and retry_after is not None)


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 1), 0.1), 30.0)
    except ValueError:
        return 1.0


def _error(status: int, raw: bytes, retry_after: str | None = None) -> ApiError:
    """The :class:`ApiError` of a non-2xx answer ``raw`` (a Status, or anything: its start is the
    message); ``retry_after``: its ``Retry-After`` header."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    message = body.get("message") if isinstance(body.get("message"), str) else _printable(raw, 300)
    exc = ApiError(status, str(body.get("reason") or status), message, body)
    if retry_after is not None:
        exc.retry_after = _retry_after(retry_after)
    return exc


def api_client(conf: k8s_client.Configuration) -> k8s_client.ApiClient:
    """kubernetes_asyncio's ``ApiClient`` of ``conf`` (its TLS context is made here). Raises
    ``ConfigException`` in one line naming the file when a certificate authority, client
    certificate or key cannot be used (not PEM, not a certificate, no such file)."""
    import ssl

    from kubernetes_asyncio.config.config_exception import ConfigException

    try:
        return k8s_client.ApiClient(configuration=conf)
    except (ssl.SSLError, OSError, ValueError) as exc:
        problem = _tls_problem(conf) or f"{type(exc).__name__}: {exc}"
        raise ConfigException(f"the kubeconfig's TLS settings cannot be used: {problem}") from None


def _tls_problem(conf: k8s_client.Configuration) -> str | None:
    """Which of ``conf``'s TLS files is unusable, in words, None when each loads alone."""
    import ssl

    def reason(exc: Exception) -> str:
        return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)

    ca = getattr(conf, "ssl_ca_cert", None)
    if ca:
        try:
            ssl.create_default_context(cafile=ca)
        except (ssl.SSLError, OSError) as exc:
            return f"the certificate authority ({ca}) is not a PEM certificate it can read ({reason(exc)})"
    cert, key = getattr(conf, "cert_file", None), getattr(conf, "key_file", None)
    if cert:
        try:
            ssl.create_default_context().load_cert_chain(cert, keyfile=key)
        except (ssl.SSLError, OSError) as exc:
            return f"the client certificate ({cert}) or its key ({key}) cannot be used ({reason(exc)})"
    return None

