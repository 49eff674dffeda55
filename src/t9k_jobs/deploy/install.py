"""``t9k-jobs install``: server-side apply the CRDs, namespace and RBAC (and the operator).

The objects are those of :mod:`t9k_jobs.deploy.rbac` (the same ones written to ``deploy/``),
applied in order with one field manager, so running it again converges and shows no conflicts
with an earlier ``kubectl apply --server-side`` under the same manager.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ..cluster.client import CRDS, NAMESPACES, ApiError, Resource
from .rbac import DEFAULT_IMAGE, REPLICAS, deployment_objects, install_objects

__all__ = ["FIELD_MANAGER", "KIND_RESOURCES", "InstallError", "install", "resource_for", "wait_established"]

FIELD_MANAGER = "t9k-jobs"

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")

KIND_RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        CRDS,
        NAMESPACES,
        SERVICE_ACCOUNTS,
        CLUSTER_ROLES,
        CLUSTER_ROLE_BINDINGS,
        ROLES,
        ROLE_BINDINGS,
        DEPLOYMENTS,
    )
}
"""Kind -> REST resource of every object :func:`install` applies."""


class InstallError(Exception):
    """An object could not be applied, or a CRD did not become Established in time."""


class _Client(Protocol):
    async def apply(
        self, res: Resource, obj: dict[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]: ...

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]: ...


def resource_for(obj: dict[str, Any]) -> Resource:
    """The REST resource of ``obj`` by its ``apiVersion`` and ``kind``; ``InstallError`` for others."""
    kind = obj.get("kind")
    res = KIND_RESOURCES.get(kind) if isinstance(kind, str) else None
    if res is None or obj.get("apiVersion") != res.api_version:
        raise InstallError(
            f"cannot install {obj.get('apiVersion')}/{kind}: not one of {', '.join(KIND_RESOURCES)}"
        )
    return res


def _label(obj: dict[str, Any]) -> str:
    """kubectl's ``kind/name`` form, e.g. ``customresourcedefinition/genericjobs.batch.tensorstack.dev``."""
    return f"{obj['kind'].lower()}/{obj['metadata']['name']}"


async def install(
    client: _Client,
    *,
    with_operator: bool = False,
    image: str = DEFAULT_IMAGE,
    replicas: int = REPLICAS,
    field_manager: str = FIELD_MANAGER,
    wait: float = 30.0,
    poll: float = 0.25,
) -> list[str]:
    """Server-side apply the CRDs, namespace and RBAC, then (``with_operator``) the Deployment.

    ``client`` is a :class:`~t9k_jobs.cluster.client.KubeClient` (anything with its ``apply``
    and ``get``). Objects are applied in the order of :func:`~t9k_jobs.deploy.rbac.install_objects`
    with ``force`` (this field manager takes over fields that another manager set). When
    ``wait > 0`` the call then waits up to ``wait`` seconds (polling every ``poll`` seconds)
    until every CRD is Established, before the Deployment is applied, so the operator starts
    against served APIs. Returns one line per object, ``<kind>/<name> applied``, in order.

    Raises :class:`InstallError` naming the object when the API server refuses one (its
    ``ApiError`` is the cause: 403 when the caller may not create cluster-wide RBAC), and naming
    the CRDs that are not Established in time (with the API server's reason, e.g. a name
    conflict). ``aiohttp.ClientError`` and ``asyncio.TimeoutError`` pass through when the
    server cannot be reached.
    """
    lines: list[str] = []
    objects = install_objects()
    await _apply_all(client, objects, field_manager, lines)
    if wait > 0:
        crds = [o["metadata"]["name"] for o in objects if o["kind"] == CRDS.kind]
        await wait_established(client, crds, timeout=wait, poll=poll)
    if with_operator:
        await _apply_all(client, deployment_objects(image, replicas), field_manager, lines)
    return lines


async def _apply_all(
    client: _Client, objects: list[dict[str, Any]], field_manager: str, lines: list[str]
) -> None:
    for obj in objects:
        res = resource_for(obj)
        try:
            await client.apply(res, obj, field_manager)
        except ApiError as exc:
            raise InstallError(f"{_label(obj)}: {exc}") from exc
        lines.append(f"{_label(obj)} applied")


async def wait_established(client: _Client, names: list[str], *, timeout: float, poll: float = 0.25) -> None:
    """Wait until every CRD in ``names`` has condition ``Established=True``; ``timeout`` in seconds.

    Raises :class:`InstallError` as soon as a CRD reports ``NamesAccepted=False`` (its names
    clash with another CRD), or at the deadline naming each CRD still not Established and the
    last condition message seen.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pending = {name: "no status yet" for name in names}
    while True:
        for name in list(pending):
            try:
                crd = await client.get(CRDS, None, name)
            except ApiError as exc:
                if exc.status != 404:
                    raise InstallError(f"customresourcedefinition/{name}: {exc}") from exc
                pending[name] = "not found"
                continue
            conditions = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
            names_accepted = conditions.get("NamesAccepted", {})
            if names_accepted.get("status") == "False":
                raise InstallError(
                    f"customresourcedefinition/{name}: names not accepted: "
                    f"{names_accepted.get('reason', '')} {names_accepted.get('message', '')}".rstrip()
                )
            established = conditions.get("Established", {})
            if established.get("status") == "True":
                del pending[name]
            else:
                pending[name] = (
                    established.get("message") or established.get("reason") or "not Established yet"
                )
        if not pending:
            return
        if loop.time() >= deadline:
            detail = "; ".join(f"customresourcedefinition/{n}: {why}" for n, why in pending.items())
            raise InstallError(f"CRDs not Established after {timeout:g}s: {detail}")
        await asyncio.sleep(min(poll, max(0.0, deadline - loop.time())))
