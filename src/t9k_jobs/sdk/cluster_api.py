"""Day-two verbs against a cluster: connect, create, get, list, describe, wait, delete, patch
(``logs`` is :mod:`t9k_jobs.sdk.cluster_logs`).

Async functions over :class:`~t9k_jobs.cluster.client.KubeClient`; :class:`t9k_jobs.Client`
runs them on a private event loop for synchronous callers (:mod:`t9k_jobs.sdk.cluster`), and
the CLI prints what they return. Every failure is one of :mod:`t9k_jobs.errors` with the one
line the CLI prints.

A job's pods are found by the labels the operator puts on every child
(``tensorstack.dev/owner-kind``, ``tensorstack.dev/owner-name``), their replica by
``batch.tensorstack.dev/replica-type`` and ``replica-index``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api import GROUP, Job, JobStatus, ManifestError
from ..api.common import ReplicaStatus
from ..cluster.client import (
    CONFIGMAPS,
    EVENTS,
    JOB_RESOURCES,
    NATIVE_PODGROUPS,
    PODS,
    ApiError,
    BadAnswer,
    KubeClient,
    Resource,
    api_client,
    checked_items,
    checked_object,
)
from ..cluster.kubeconfig import IN_CLUSTER, kubectl_source
from ..cluster.kubeconfig import read as kubeconfig_read
from ..cluster.oneshot import OneShotClient, plain_connection
from ..engine.replica_status import from_pod
from ..errors import AlreadyExists, ClusterError, InvalidJob, JobsError, NotFound, UsageError
from ..frameworks import parse_job
from ..frameworks.base import (
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from ..words import parse_time, short
from .gang_why import gang_waiting, pod_group_line, preempted_since
from .present import replicas_wanted
from .queue_position import queue_position
from .view import Event, JobView

#: Seconds ``logs -f`` and ``wait`` go on while the API server cannot be reached (no timeout given).
UNREACHABLE_LIMIT = 60.0
#: Where a pod's ServiceAccount namespace is, in a pod.
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _network_errors() -> tuple[type[BaseException], ...]:
    """A connection refused, broken or timed out: ``OSError`` and ``asyncio.TimeoutError`` (the
    one-shot client's, cluster/oneshot.py), and aiohttp's errors once aiohttp is in use."""
    aiohttp = sys.modules.get("aiohttp")
    return (asyncio.TimeoutError, OSError) + ((aiohttp.ClientError,) if aiohttp is not None else ())


@dataclass
class Cluster:
    """A connection to one API server: the client, the namespace used when none is given (the
    kubeconfig context's, or ``default``) and the server's URL."""

    kube: KubeClient
    namespace: str
    server: str

    async def close(self) -> None:
        await self.kube.close()

    def unreachable(self, exc: BaseException) -> ClusterError:
        """The one line for a request that got no answer: a time-out says which part ran out (the
        connection, or the answer of a server that was reached: --request-timeout), anything else
        what the network said."""
        if isinstance(exc, TimeoutError):  # asyncio's, aiohttp's and a socket's time-outs alike
            limit = self.kube.request_timeout
            within = f" within {limit:g} s (--request-timeout)" if limit else ""
            if type(exc).__name__ == "ConnectionTimeoutError" or "connect" in str(exc).lower():
                return Unreachable(f"cannot reach the API server at {self.server}: no connection{within}")
            return Unreachable(
                f"the API server at {self.server} did not answer{within}: it may be overloaded, or the request "
                "too large for that time"
            )
        detail = str(exc) or type(exc).__name__
        return Unreachable(f"cannot reach the API server at {self.server}: {short(detail, 200)}")


class Unreachable(ClusterError):
    """The API server cannot be reached (a connection refused, broken or timed out)."""


class Unavailable(ClusterError):
    """The API server answered that it cannot serve now: 429 Too Many Requests or a 5xx (503 while
    it starts); ``retry_after``: the seconds it asked to wait, None when it did not say. A wait or
    a followed log tries again within its time (:class:`Patience`)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


#: Seconds between two tries while the API server restarts or is overloaded, doubling from the
#: first to the second (unless it says how long: ``Retry-After``).
RETRY_BACKOFF = (0.5, 5.0)


class Patience:
    """How a long verb (``wait``, ``logs -f``) rides out an API server that restarts: after a
    failure that may pass (:class:`Unreachable`, :class:`Unavailable`), :meth:`failed` waits
    (``Retry-After``, else :data:`RETRY_BACKOFF`) and returns, so the caller tries again; any other
    failure, or failures without a success for more than ``limit`` seconds (None: no limit; the
    caller's own timeout bounds it), is raised. :meth:`ok` after each success."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.since: float | None = None
        self.delay = RETRY_BACKOFF[0]

    def ok(self) -> None:
        self.since, self.delay = None, RETRY_BACKOFF[0]

    async def failed(self, exc: JobsError) -> None:
        """Wait before the next try, or raise ``exc`` (see the class)."""
        if not isinstance(exc, (Unreachable, Unavailable)):
            raise exc
        now = asyncio.get_running_loop().time()
        self.since = self.since if self.since is not None else now
        if self.limit is not None and now - self.since > self.limit:
            raise exc
        wait = exc.retry_after if isinstance(exc, Unavailable) and exc.retry_after is not None else self.delay
        self.delay = min(self.delay * 2, RETRY_BACKOFF[1])
        await asyncio.sleep(wait)


# ----------------------------------------------------------------------------- connecting


async def connect(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    namespace: str | None = None,
    request_timeout: float | None = 10.0,
    one_shot: bool = False,
) -> Cluster:
    """Load ``kubeconfig`` (default ``$KUBECONFIG``, then ``~/.kube/config``; in a pod without
    either, its ServiceAccount) with ``context`` (default: the current one). ``namespace``: the
    namespace verbs use when given none (default: the context's, else ``default``).
    ``request_timeout``: seconds one request may take (None: no limit); a kubeconfig credential
    plugin (``users[].user.exec``) runs at the first request, as client-go runs it, within that
    time, and is killed after it (:mod:`~t9k_jobs.cluster.credentials`). Nothing is sent to the
    server, and no plugin runs, yet.

    Raises :class:`UsageError` for a kubeconfig that is not a file, a context it does not have,
    or a file that is not a usable kubeconfig (:meth:`~t9k_jobs.cluster.kubeconfig.KubeConfig.problem`: empty, not a mapping,
    no clusters, a context naming a cluster or user it lacks), :class:`ClusterError` when no
    configuration can be loaded; the first request raises :class:`ClusterError` (one line) when
    the credential plugin fails, is missing or gives no credential in time, or when the TLS
    files (certificate authority, client certificate) cannot be used.

    ``one_shot``: a synchronous caller's connection (:class:`t9k_jobs.Client`): a plain
    kubeconfig is then read without kubernetes_asyncio and requests go over ``http.client``
    (:mod:`~t9k_jobs.cluster.oneshot`; watches and logs the full way)."""
    if one_shot:
        quick = _one_shot(kubeconfig, context, namespace, request_timeout)
        if quick is not None:
            return quick
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config
    from kubernetes_asyncio.config.config_exception import ConfigException

    # The bounded credential plugins, installed on import.
    from ..cluster import credentials  # noqa: F401  # lazy: keeps aiohttp out of the one-shot path

    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise UsageError(f"--kubeconfig: {kubeconfig} is not a file")
    conf = k8s_client.Configuration()
    conf.connection_pool_maxsize = 16
    source = kubectl_source(kubeconfig)
    default_ns = "default"
    kube: KubeClient | None = None
    try:
        if source == IN_CLUSTER:
            k8s_config.load_incluster_config(client_configuration=conf)
            kube = KubeClient(api_client(conf))
            try:
                default_ns = SA_NAMESPACE.read_text().strip() or "default"
            except OSError:
                pass
        else:
            cfg = kubeconfig_read(source)
            files = os.pathsep.join(cfg.files)
            if not cfg.exists:
                raise ClusterError(
                    f"no kubeconfig: {files} does not exist; give --kubeconfig FILE or set KUBECONFIG "
                    "(or --local for this machine's runs)"
                )
            problem = cfg.problem(context)
            if problem is not None:
                raise UsageError(problem)
            if context is not None and context not in cfg.contexts:
                raise UsageError(f"--context: no context {context!r} in {files}; it has {', '.join(cfg.contexts) or 'none'}")
            default_ns = cfg.namespace(context) or "default"

            async def load() -> Any:
                """The connection settings, with the credential (a plugin runs here): one line when not."""
                loaded = k8s_client.Configuration()
                loaded.connection_pool_maxsize = 16
                try:
                    await cfg.loader(context).load_and_set(loaded)
                    return api_client(loaded)
                except ConfigException as exc:
                    raise ClusterError(f"the kubeconfig cannot be used: {short(str(exc), 300)}") from None
                except Exception as exc:  # noqa: BLE001 - a file of another shape: one line, no traceback
                    first = (str(exc).splitlines() or [type(exc).__name__])[0]
                    raise ClusterError(f"the kubeconfig cannot be read: {type(exc).__name__}: {short(first, 200)}") from None

            kube = KubeClient.lazy(cfg.server(context) or "", load)
    except JobsError:
        raise
    except ConfigException as exc:
        raise ClusterError(f"the kubeconfig cannot be used: {short(str(exc), 300)}") from None
    except Exception as exc:  # noqa: BLE001 - bad YAML, a file of another shape: one line, no traceback
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ClusterError(f"the kubeconfig cannot be read: {type(exc).__name__}: {short(first, 200)}") from None
    kube.request_timeout = request_timeout
    return Cluster(kube, namespace or default_ns, kube.host)


def _one_shot(
    kubeconfig: str | os.PathLike[str] | None, context: str | None, namespace: str | None, request_timeout: float | None
) -> Cluster | None:
    """The :func:`connect` of a plain kubeconfig for a synchronous caller (cluster/oneshot.py),
    or None when the kubeconfig is not one (in a pod, missing, with a problem, a plugin...): the
    full way then, which says what is wrong."""
    source = kubectl_source(kubeconfig)
    if source == IN_CLUSTER:
        return None
    cfg = kubeconfig_read(source)
    if not cfg.exists or cfg.problem(context) is not None:
        return None
    plain = plain_connection(cfg, context)
    if plain is None:
        return None

    async def full() -> KubeClient:
        return (await connect(kubeconfig, context, namespace, request_timeout)).kube

    kube = OneShotClient(plain, full)
    kube.request_timeout = request_timeout
    return Cluster(kube, namespace or plain.namespace or "default", kube.host)


# ----------------------------------------------------------------------------- errors


def _api_error(cl: Cluster, exc: ApiError, res: Resource, namespace: str | None, name: str | None) -> JobsError:
    """One line for an API server's refusal, named after what was asked for."""
    if isinstance(exc, BadAnswer):
        return ClusterError(f"the API server at {cl.server} gave an answer t9k-jobs cannot use: {short(exc.message, 300)}")
    details = exc.body.get("details") if isinstance(exc.body.get("details"), dict) else {}
    if exc.status == 404:
        if name is not None and details.get("name") == name:
            return NotFound(f"{res.kind} {name!r} not found in namespace {namespace!r}")
        if details.get("kind") == "namespaces":
            return NotFound(f"namespace {details.get('name') or namespace!r} not found")
        if res.group == GROUP:
            return ClusterError(
                f"the cluster at {cl.server} does not serve {res.plural}.{GROUP}: install the CRDs "
                "(t9k-jobs install, or the Helm chart)"
            )
        return NotFound(short(exc.message, 200))
    if exc.status == 409 and exc.reason == "AlreadyExists":
        return AlreadyExists(f"{res.kind} {name!r} already exists in namespace {namespace!r}")
    if exc.status == 403:
        return ClusterError(f"forbidden: {short(exc.message, 300)}")
    if exc.status == 401:
        return ClusterError(f"unauthorized: the kubeconfig's credentials are not accepted by {cl.server}")
    if exc.status in (400, 422) and exc.reason in ("Invalid", "BadRequest"):
        return InvalidJob([f"{res.kind} {name}: the API server refused it: {short(exc.message, 400)}"])
    if exc.status == 429 or exc.status >= 500:
        return Unavailable(f"the API server at {cl.server} cannot serve now: {exc.status} {exc.reason}: "
                           f"{short(exc.message, 300)}", exc.retry_after)  # fmt: skip
    return ClusterError(f"{exc.status} {exc.reason}: {short(exc.message, 300)}")


async def _call(
    cl: Cluster,
    coro: Any,
    res: Resource,
    namespace: str | None,
    name: str | None,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """Await ``coro`` (a request of ``cl.kube``) and, with ``check``, return ``check(answer)``
    (:func:`~t9k_jobs.cluster.client.checked_object`...); every failure is one of :mod:`t9k_jobs.errors`."""
    try:
        answer = await coro
        return check(answer) if check is not None else answer
    except ApiError as exc:
        raise _api_error(cl, exc, res, namespace, name) from None
    except _network_errors() as exc:
        raise cl.unreachable(exc) from None


# ----------------------------------------------------------------------------- reading jobs


def parse(raw: dict[str, Any]) -> Job | None:
    """The typed job of a server object (its status included), None when it does not validate
    (the operator leaves such a job alone, with an ``InvalidSpec`` event)."""
    try:
        return parse_job(raw, f"{raw.get('kind')}/{(raw.get('metadata') or {}).get('name')}")
    except (ManifestError, ValueError):
        return None


def status_of(raw: dict[str, Any]) -> JobStatus | None:
    """The job's status as the model, None when it has none yet (or an unreadable one)."""
    data = raw.get("status")
    if not isinstance(data, dict) or not data:
        return None
    try:
        return JobStatus.model_validate(data)
    except ValueError:
        return None


def phase_of(raw: dict[str, Any]) -> str:
    """The job's phase (``Pending`` before the operator has written a status)."""
    return str((raw.get("status") or {}).get("phase") or "Pending")


async def get_job(cl: Cluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """The job as the server has it (a dict). Raises :class:`NotFound`, :class:`ClusterError`."""
    ns = namespace or cl.namespace
    res = JOB_RESOURCES[kind]
    return await _call(cl, cl.kube.get(res, ns, name), res, ns, name, _job_check(kind, name))


def _job_check(kind: str, name: str | None = None) -> Callable[[Any], dict[str, Any]]:
    """The check of an answer that is one job (:func:`~t9k_jobs.cluster.client.checked_object`)."""
    return lambda answer: checked_object(answer, f"{kind} {name or ''}".strip(), kind)


async def list_jobs(
    cl: Cluster, kinds: list[str], namespace: str | None = None, all_namespaces: bool = False
) -> list[dict[str, Any]]:
    """Every job of ``kinds`` in ``namespace`` (default: the cluster's) or in all namespaces,
    sorted by kind, namespace and name. Lists page by page (500 a page)."""
    ns = None if all_namespaces else (namespace or cl.namespace)
    out: list[dict[str, Any]] = []
    for kind in kinds:
        res = JOB_RESOURCES[kind]
        token: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 500}
            if token:
                params["continue"] = token
            page, items = await _call(
                cl, cl.kube.list(res, ns, params=params), res, ns, None,
                lambda p: (p, checked_items(p, f"the list of {res.plural}", kind)),
            )  # fmt: skip
            for item in items:
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", kind)
                out.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
    out.sort(key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    return out


# ----------------------------------------------------------------------------- writing jobs


async def create_job(cl: Cluster, manifest: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """Create the job ``manifest`` (a valid manifest, as written) in ``namespace`` (default: its
    own ``metadata.namespace``, else the cluster's). Raises :class:`UsageError` when the manifest
    names another namespace than ``namespace``, :class:`AlreadyExists`, :class:`NotFound` (no such
    namespace), :class:`InvalidJob` (refused by the server's validation), :class:`ClusterError`."""
    body = dict(manifest)
    meta = dict(body.get("metadata") or {})
    own = meta.get("namespace")
    if own and namespace and own != namespace:
        raise UsageError(
            f"-n/--namespace: the manifest's metadata.namespace is {own!r}, not {namespace!r}; "
            "drop one of them or make them agree"
        )
    ns = own or namespace or cl.namespace
    meta["namespace"] = ns
    body["metadata"] = meta
    res = JOB_RESOURCES[body["kind"]]
    return await _call(cl, cl.kube.create(res, ns, body), res, ns, meta.get("name"), _job_check(body["kind"], meta.get("name")))


async def delete_job(cl: Cluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """Delete the job; the garbage collector then deletes its pods, Services, ConfigMaps and
    Secrets (background propagation, as ``kubectl delete``). Raises :class:`NotFound`."""
    ns = namespace or cl.namespace
    res = JOB_RESOURCES[kind]
    return await _call(cl, cl.kube.delete(res, ns, name), res, ns, name)


async def patch_job(
    cl: Cluster, kind: str, name: str, body: dict[str, Any], namespace: str | None = None
) -> dict[str, Any]:
    """A JSON merge patch of the job (``{"spec": {...}}``); with ``metadata.resourceVersion`` in
    ``body`` it applies only to that version (a 409 otherwise, raised as :class:`ClusterError`).
    Raises :class:`NotFound`, :class:`InvalidJob` when the server's validation refuses it."""
    ns = namespace or cl.namespace
    res = JOB_RESOURCES[kind]
    return await _call(cl, cl.kube.patch(res, ns, name, body), res, ns, name, _job_check(kind, name))


# ----------------------------------------------------------------------------- pods and events


async def job_pods(
    cl: Cluster, kind: str, name: str, namespace: str | None = None, uid: str | None = None
) -> list[dict[str, Any]]:
    """The job's pods, sorted by replica type, index and creation: those its owner labels select
    whose controller is the job (:func:`controlled_by`; ``uid``: the job's, when known), as the
    operator counts them; a bare pod that only carries the labels is not a replica."""
    ns = namespace or cl.namespace
    selector = f"{LABEL_OWNER_KIND}={kind},{LABEL_OWNER_NAME}={name}"
    pods = await _call(
        cl, cl.kube.list(PODS, ns, params={"labelSelector": selector}), PODS, ns, None,
        lambda page: [_checked_pod(p) for p in checked_items(page, "the list of pods", "Pod")],
    )  # fmt: skip
    return sorted((p for p in pods if controlled_by(p, kind, name, uid)), key=pod_sort_key)


def controlled_by(obj: dict[str, Any], kind: str, name: str, uid: str | None = None) -> bool:
    """Whether ``obj``'s controller owner reference names the job ``kind``/``name`` (and ``uid``
    when given): the operator acts only on such children (client-go's ``GetControllerOf``)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref.get("kind") == kind and ref.get("name") == name and (uid is None or ref.get("uid") == uid)
    return False


def _checked_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` when the fields the verbs read from a pod (its spec, its status, its containers'
    states) have their shapes: :class:`BadAnswer` otherwise."""
    pod.setdefault("kind", "Pod")
    try:
        pod_replica(pod)
        pod_sort_key(pod)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise BadAnswer(200, f"pod {pod['metadata']['name']}: a field has the wrong shape ({type(exc).__name__}: {exc})") from None
    return pod


def pod_sort_key(pod: dict[str, Any]) -> tuple[str, int, str]:
    """How a job's pods are listed: by replica type, index, then creation."""
    labels = pod["metadata"].get("labels") or {}
    index = labels.get(LABEL_REPLICA_INDEX, "0")
    return (
        labels.get(LABEL_REPLICA_TYPE, ""),
        int(index) if index.isdigit() else 0,
        pod["metadata"].get("creationTimestamp") or "",
    )


async def job_events(
    cl: Cluster, kind: str, name: str, pod_names: set[str], namespace: str | None = None, last: int = 20
) -> list[dict[str, Any]]:
    """The last ``last`` Events of the job and of the pods named ``pod_names``, oldest first."""
    ns = namespace or cl.namespace
    selectors = [f"involvedObject.kind={kind},involvedObject.name={name}"]
    if pod_names:
        selectors.append("involvedObject.kind=Pod")
    found = []
    for selector in selectors:
        items = await _call(
            cl, cl.kube.list(EVENTS, ns, params={"fieldSelector": selector, "limit": 2000}), EVENTS, ns, None,
            lambda page: checked_items(page, "the list of events", "Event"),
        )  # fmt: skip
        for ev in items:
            obj = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), dict) else {}
            if obj.get("kind") == "Pod" and obj.get("name") not in pod_names:
                continue
            found.append(ev)
    found.sort(key=_event_time)
    return found[-last:]


def _event_time(ev: dict[str, Any]) -> float:
    for value in (ev.get("lastTimestamp"), ev.get("eventTime"), (ev.get("metadata") or {}).get("creationTimestamp")):
        when = parse_time(value)
        if when is not None:
            return when
    return 0.0


def pod_replica(pod: dict[str, Any]) -> ReplicaStatus:
    """A live pod as a replica's status (as the operator derives it: ``Creating`` while not
    scheduled, with the scheduler's reason; waiting reasons of init containers)."""
    from ..cluster.projection import project_child  # lazy: keeps projection and kueue out of get and wait

    observed = project_child({**pod, "kind": "Pod"}).pod
    assert observed is not None
    return from_pod(observed, 0)


# ----------------------------------------------------------------------------- describe


def pod_group_name(raw: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    """The name of the job's native PodGroup: its pods' ``schedulingGroup.podGroupName``, else the
    job's own when it asks for ``t9kScheduler``; None when neither."""
    names = [
        ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        for p in pods
        if (p.get("spec") or {}).get("schedulingGroup")
    ]
    name = next((n for n in names if n), None)
    if name is None and ((raw.get("spec") or {}).get("scheduler") or {}).get("t9kScheduler") is not None:
        name = raw["metadata"]["name"]
    return name


async def job_pod_group(
    cl: Cluster, raw: dict[str, Any], pods: list[dict[str, Any]], namespace: str
) -> dict[str, Any] | None:
    """The job's ``scheduling.k8s.io/v1beta1`` PodGroup as the API server returns it (GET
    ``/apis/scheduling.k8s.io/v1beta1/namespaces/NS/podgroups/NAME``), named by its pods'
    ``schedulingGroup.podGroupName``, else by the job when it asks for ``t9kScheduler``; None when
    neither, or when the API server answers with an error (404: none, or the API not served; 403:
    not allowed): describe goes on without it. Network errors raise as for every verb."""
    name = pod_group_name(raw, pods)
    if name is None:
        return None
    try:
        return await cl.kube.get(NATIVE_PODGROUPS, namespace, name)
    except ApiError:
        return None
    except _network_errors() as exc:
        raise cl.unreachable(exc) from None


def raw_view(
    raw: dict[str, Any],
    pods: list[dict[str, Any]] | None = None,
    pod_group: dict[str, Any] | None = None,
    events: list[dict[str, Any]] | None = None,
    detail: bool = False,
    last_words: dict[str, Any] | None = None,
) -> JobView:
    """The view of a job as the server has it (``raw``), with, for ``describe`` (``detail``), its
    pods, its native PodGroup (what :mod:`~t9k_jobs.sdk.gang_why` reads from it and the pods),
    the Events of both as the server returns them, and its last-words ConfigMap (the ended
    attempts and what the lost ones cost: :mod:`t9k_jobs.cluster.last_words`)."""
    ended, lost = [], None
    if last_words is not None:  # describe only: the module brings the operator's client
        from ..cluster.last_words import (  # lazy: keeps prometheus_client out of all but describe
            attempts,
            lost_totals,
        )

        ended, lost = attempts(last_words), lost_totals(last_words)

    job, status = parse(raw), status_of(raw)
    meta = raw.get("metadata") or {}
    pods = pods or []
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    return JobView(
        target="cluster",
        kind=str(raw.get("kind")),
        name=str(meta.get("name")),
        namespace=meta.get("namespace"),
        phase=phase_of(raw),
        status=status,
        created=parse_time(meta.get("creationTimestamp")),
        replicas=replicas_wanted(job, status),
        running=status.aggregate.running if status is not None else 0,
        load_job=lambda: job,
        load_spec=lambda: raw.get("spec") or {},
        load_object=lambda: raw,
        source=raw,
        detailed=detail,
        pods=pods,
        live_replicas=[pod_replica(p) for p in live],
        pod_group=pod_group_line(pod_group) if pod_group is not None else None,
        gang=gang_waiting(live, pod_group),
        preempted=preempted_since(status, pod_group),
        events=[_event(ev) for ev in events or []],
        ended=ended,
        lost=lost,
    )


def _event(ev: dict[str, Any]) -> Event:
    obj = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), dict) else {}
    return Event(
        when=_event_time(ev) or None,
        type=str(ev.get("type", "")),
        reason=str(ev.get("reason", "")),
        object=f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
        message=str(ev.get("message") or ""),
    )


async def read_view(cl: Cluster, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
    """The job's view; ``detail``: with what ``describe`` shows (:func:`detail_view`). Raises
    :class:`NotFound`."""
    raw = await get_job(cl, kind, name, namespace)
    return await detail_view(cl, raw) if detail else raw_view(raw)


async def detail_view(cl: Cluster, raw: dict[str, Any]) -> JobView:
    """The view of ``raw`` with its pods, its native PodGroup (when there is one: its
    ``minCount`` and conditions) and the recent Events of the job and its pods."""
    kind, meta = str(raw.get("kind")), raw.get("metadata") or {}
    name, ns = meta["name"], meta.get("namespace") or cl.namespace
    pods = await job_pods(cl, kind, name, ns, meta.get("uid"))
    pod_group = await job_pod_group(cl, raw, pods, ns)
    status = status_of(raw)
    names = {p["metadata"]["name"] for p in pods} | {
        rs.name for t in (status.tasks if status is not None else []) for rs in t.replicas
    }
    events = await job_events(cl, kind, name, names, ns)
    view = raw_view(raw, pods, pod_group, events, detail=True, last_words=await last_words_of(cl, name, ns))
    view.queue_position = await position_of(cl, view, ns)
    return view


async def position_of(cl: Cluster, view: JobView, namespace: str) -> str | None:
    """Where a queued job stands in its Kueue LocalQueue (:mod:`.queue_position`); ``None`` for a
    job that is not queued (its ``Queued`` condition True) or when Kueue does not say."""
    queued = view.status.condition("Queued") if view.status is not None else None
    job = view.job
    sched = job.scheduler.t9k_scheduler if job is not None and job.scheduler is not None else None
    if queued is None or queued.status != "True" or sched is None:
        return None

    try:
        return await queue_position(cl.kube, namespace, view.name, sched.queue_name)
    except _network_errors() as exc:
        raise cl.unreachable(exc) from None


async def last_words_of(cl: Cluster, name: str, namespace: str) -> dict[str, Any] | None:
    """Job ``name``'s last-words ConfigMap (:mod:`t9k_jobs.cluster.last_words`: the ends the operator
    kept of its deleted pods, what its lost attempts cost); ``None`` when there is none or it cannot
    be read (403): describe goes on without it."""
    from ..cluster.last_words import name_of  # lazy: keeps prometheus_client out of all but describe

    try:
        return await cl.kube.get(CONFIGMAPS, namespace, name_of(name))
    except ApiError:
        return None
    except _network_errors() as exc:
        raise cl.unreachable(exc) from None


# ----------------------------------------------------------------------------- wait


async def wait_job(
    cl: Cluster,
    kind: str,
    name: str,
    done: Callable[[dict[str, Any] | None], bool],
    timeout: float | None = None,
    namespace: str | None = None,
) -> tuple[dict[str, Any] | None, bool]:
    """Watch the job (reconnecting as needed; no polling) until ``done(raw)`` says yes (``raw``
    None: the job was deleted) or ``timeout`` seconds pass (None: no limit) however the server
    behaves (one that never answers included: every request is inside that time). An API server
    that restarts (connection refused, 503 while it starts), is overloaded (429, after its
    ``Retry-After``) or fails for a while (5xx) is tried again within ``timeout``, as ``kubectl
    wait`` does; without a timeout, for :data:`UNREACHABLE_LIMIT` seconds without an answer.
    Returns ``(the job as last read, whether done said yes)``; the job is None when it was deleted,
    or when time ran out before the server answered. Raises :class:`NotFound` when there is no
    such job at the start, :class:`ClusterError` for a refusal that trying again cannot change
    (forbidden, an answer t9k-jobs cannot use)."""
    seen: dict[str, Any] = {}
    if timeout is None:
        return await _wait_job(cl, kind, name, done, namespace, seen, Patience(UNREACHABLE_LIMIT)), True
    try:
        async with asyncio.timeout(timeout):
            return await _wait_job(cl, kind, name, done, namespace, seen, Patience(None)), True
    except TimeoutError:
        return seen.get("raw"), False


async def _wait_job(
    cl: Cluster,
    kind: str,
    name: str,
    done: Callable[[dict[str, Any] | None], bool],
    namespace: str | None,
    seen: dict[str, Any],
    patience: Patience,
) -> dict[str, Any] | None:
    """:func:`wait_job` without its overall limit; ``seen["raw"]`` is the job as last read."""
    ns = namespace or cl.namespace
    res = JOB_RESOURCES[kind]
    check = _job_check(kind, name)
    first = True
    while True:
        try:
            raw = seen["raw"] = await get_job(cl, kind, name, ns)
        except NotFound:
            if first or not done(None):
                raise
            return None
        except JobsError as exc:
            await patience.failed(exc)
            continue
        patience.ok()
        first = False
        if done(raw):
            return raw
        rv = (raw.get("metadata") or {}).get("resourceVersion")
        params = {"fieldSelector": f"metadata.name={name}", "resourceVersion": rv, "timeoutSeconds": 300}
        try:
            async for event in cl.kube.watch(res, ns, params, idle_timeout=330):
                kind_of = event.get("type")
                if kind_of == "ERROR":
                    break  # e.g. 410 Gone: read it again and watch from there
                if kind_of == "DELETED" and done(None):
                    return None
                if kind_of in ("ADDED", "MODIFIED"):
                    raw = seen["raw"] = check(event["object"])
                    if done(raw):
                        return raw
        except ApiError as exc:
            if exc.status != 410:  # 410 Gone: the version is too old; read it again
                await patience.failed(_api_error(cl, exc, res, ns, name))
        except _network_errors() as exc:  # the server restarts, a connection broke: look again
            await patience.failed(cl.unreachable(exc))


__all__ = [
    "UNREACHABLE_LIMIT",
    "Cluster",
    "connect",
    "create_job",
    "delete_job",
    "detail_view",
    "get_job",
    "job_events",
    "job_pods",
    "list_jobs",
    "parse",
    "patch_job",
    "phase_of",
    "raw_view",
    "read_view",
    "status_of",
    "wait_job",
]
