"""The verbs that run the operator or install it on a cluster: ``operator`` and ``install``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .exits import fail

#: --context of operator and install.
_OperatorContext = Annotated[Optional[str], typer.Option("--context", help="Kubeconfig context to use.")]


def _check_kubeconfig(kubeconfig: Optional[str]) -> None:
    """Exit 2 when ``--kubeconfig`` names no file (operator, install)."""
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        fail([f"--kubeconfig: {kubeconfig} is not a file"])


def operator(
    kubeconfig: Annotated[
        Optional[str], typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")
    ] = None,
    context: _OperatorContext = None,
    namespace: Annotated[
        Optional[list[str]], typer.Option("--namespace", "-n", help="Watch only this namespace (repeatable; default: all).")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, max=256, help="Jobs reconciled at once.")] = 8,
    leader_elect: Annotated[
        bool, typer.Option("--leader-elect/--no-leader-elect", help="Work only while holding the Lease.")
    ] = True,
    lease_name: Annotated[str, typer.Option("--lease-name", help="Name of the leader-election Lease.")] = "t9k-jobs-operator",
    lease_namespace: Annotated[
        str, typer.Option("--lease-namespace", help="Namespace of the Lease (default: $POD_NAMESPACE or 'default').")
    ] = "",
    identity: Annotated[
        str, typer.Option("--identity", help="This candidate's name in the Lease (default: $POD_NAME or host-pid).")
    ] = "",
    bind: Annotated[
        str, typer.Option("--metrics-bind-address", help="HOST:PORT serving /healthz, /readyz and /metrics.")
    ] = ":8080",
    qps: Annotated[float, typer.Option("--kube-api-qps", help="Client requests per second (0: no limit).")] = 50.0,
    burst: Annotated[int, typer.Option("--kube-api-burst", min=1, help="Client request burst.")] = 100,
    log_level: Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
    discovery_interval: Annotated[
        float,
        typer.Option(
            "--discovery-interval",
            min=0,
            help="Seconds between checks of the APIs served (PodGroups); a change restarts the operator (exit 3). 0: at start only.",
        ),
    ] = 300.0,
    node_lost_after: Annotated[
        float,
        typer.Option(
            "--node-lost-after",
            min=1,
            help="Seconds a node may be NotReady/Unknown before the replicas on it fail with reason NodeLost and their pods are deleted, then force-deleted after their grace period.",
        ),
    ] = 60.0,
    ttl_after_finished: Annotated[
        Optional[int],
        typer.Option(
            "--ttl-after-finished",
            min=0,
            help="Seconds a finished job (Succeeded or Failed) is kept before it is deleted with its children, "
            "unless its annotation t9k-jobs.io/ttl-seconds-after-finished says otherwise. Default: kept.",
        ),
    ] = None,
    disruption_budgets: Annotated[
        bool,
        typer.Option(
            "--disruption-budgets/--no-disruption-budgets",
            help="Keep a PodDisruptionBudget per running gang job (t9kScheduler), so a drain waits for the job "
            "instead of evicting one of its ranks.",
        ),
    ] = True,
) -> None:
    """Reconcile GenericJob, PyTorchTrainingJob, DeepSpeedJob and ColossalAIJob on a cluster."""
    import os

    from ..cluster.operator import (  # lazy: kubernetes_asyncio: only operator needs it
        OperatorConfig,
        run_operator,
    )

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        fail([f"--log-level: {log_level!r} is not accepted; use DEBUG, INFO, WARNING or ERROR"])
    _check_kubeconfig(kubeconfig)
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        fail([f"--metrics-bind-address: {bind!r} is not HOST:PORT (for example :8080 or 127.0.0.1:0)"])
    config = OperatorConfig(
        kubeconfig=kubeconfig,
        context=context,
        namespaces=list(namespace or []),
        workers=workers,
        leader_elect=leader_elect,
        lease_name=lease_name,
        lease_namespace=lease_namespace or os.environ.get("POD_NAMESPACE") or "default",
        identity=identity,
        bind=bind,
        qps=qps,
        burst=burst,
        discovery_interval=discovery_interval,
        node_lost_after=node_lost_after,
        ttl_after_finished=ttl_after_finished,
        disruption_budgets=disruption_budgets,
    )
    try:
        code = run_operator(config, log_level)
    except Exception as exc:  # noqa: BLE001 - start-up errors (kubeconfig, unreachable server) as one line
        fail([f"operator: {type(exc).__name__}: {exc}"], 1)
    raise typer.Exit(code)


def install(
    kubeconfig: Annotated[
        Optional[str], typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
    ] = None,
    context: _OperatorContext = None,
    with_operator: Annotated[
        bool, typer.Option("--with-operator", help="Also apply the operator Deployment (needs the image).")
    ] = False,
    image: Annotated[str, typer.Option("--image", help="Operator image for --with-operator.")] = "t9k-jobs:0.1.0",
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for the CRDs to be Established.")] = 30.0,
) -> None:
    """Apply the CRDs, the t9k-jobs-system namespace and the operator's RBAC to the current context."""
    import asyncio

    from ..cluster.client import KubeClient  # lazy: kubernetes_asyncio: only install needs it
    from ..deploy.install import InstallError  # lazy: kubernetes_asyncio: only install needs it
    from ..deploy.install import install as install_objects  # lazy: kubernetes_asyncio: only install needs it

    _check_kubeconfig(kubeconfig)

    async def go() -> list[str]:
        client = await KubeClient.from_config(kubeconfig, context)
        try:
            return await install_objects(client, with_operator=with_operator, image=image, wait=wait)
        finally:
            await client.close()

    try:
        lines = asyncio.run(go())
    except InstallError as exc:
        fail([f"install: {exc}"], 1)
    except Exception as exc:  # noqa: BLE001 - unreachable server, bad kubeconfig: one line, no traceback
        fail([f"install: {type(exc).__name__}: {exc}"], 1)
    for line in lines:
        typer.echo(line)
