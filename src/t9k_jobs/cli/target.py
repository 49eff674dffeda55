"""The target of a day-two verb: the options that choose a cluster or this machine's runs, each
written once, and :func:`takes_target`, which gives them to a verb as one :class:`Target`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from ..errors import UsageError

_F = TypeVar("_F", bound=Callable[..., Any])

_RunsDir = Annotated[
    Optional[Path],
    typer.Option("--runs-dir", help="Local: where to look for runs (default: ./t9k-runs).", rich_help_panel="Local runs"),
]
_RunDir = Annotated[
    Optional[Path],
    typer.Option(
        "--run-dir",
        help="Local: act on the run in this directory (default: the newest run of NAME).",
        rich_help_panel="Local runs",
    ),
]
_Kubeconfig = Annotated[
    Optional[str],
    typer.Option(
        "--kubeconfig",
        help="Cluster: the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).",
        rich_help_panel="Cluster",
    ),
]
_Context = Annotated[
    Optional[str], typer.Option("--context", help="Cluster: the kubeconfig context.", rich_help_panel="Cluster")
]
_Namespace = Annotated[
    Optional[str],
    typer.Option(
        "--namespace", "-n", help="Cluster: the namespace (default: the context's, else default).", rich_help_panel="Cluster"
    ),
]
_RequestTimeout = Annotated[
    Optional[str],
    typer.Option(
        "--request-timeout",
        help="Cluster: the longest one request to the API server may take: 30s, 1m or seconds; 0 for no "
        "limit (default: 10s).",
        rich_help_panel="Cluster",
    ),
]
_AllNamespaces = Annotated[
    bool,
    typer.Option("--all-namespaces", "-A", help="Cluster: jobs of every namespace.", rich_help_panel="Cluster"),
]
_Local = Annotated[
    bool,
    typer.Option("--local", help="Act on this machine's runs, even with $KUBECONFIG set.", rich_help_panel="Target"),
]
_Cluster = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Act on the cluster ($KUBECONFIG or ~/.kube/config) without other cluster options.",
        rich_help_panel="Target",
    ),
]


@dataclass(frozen=True)
class Target:
    """The target options of a day-two verb, as given (:func:`takes_target` adds them to a verb)."""

    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    namespace: Optional[str] = None
    request_timeout: Optional[str] = None
    all_namespaces: bool = False
    local: bool = False
    cluster: bool = False
    runs_dir: Optional[Path] = None
    run_dir: Optional[Path] = None

    def client(self):  # noqa: ANN201 - a t9k_jobs.Client
        """The client the options choose (:meth:`is_cluster`)."""
        from ..sdk.client import (  # lazy: keeps pydantic out of --help and version
            DEFAULT_REQUEST_TIMEOUT,
            Client,
        )

        if self.is_cluster():
            limit = self.request_timeout if self.request_timeout is not None else DEFAULT_REQUEST_TIMEOUT
            return Client.cluster(self.kubeconfig, self.context, self.namespace, limit)
        return Client.local(self.runs_dir, self.run_dir)

    def is_cluster(self) -> bool:
        """Whether the options choose a cluster (docs/decisions.md, "Day-two verbs: which target"):
        a cluster option given, or --cluster, or $KUBECONFIG set and no local option; else this
        machine's runs. Options of both kinds together are a usage error."""
        from ..sdk.client import default_target  # lazy: keeps pydantic out of --help and version

        cluster_opts = [
            flag
            for flag, value in (
                ("--kubeconfig", self.kubeconfig),
                ("--context", self.context),
                ("-n/--namespace", self.namespace),
                ("-A/--all-namespaces", self.all_namespaces or None),
                ("--request-timeout", self.request_timeout),
            )
            if value is not None
        ]
        local_opts = [
            flag
            for flag, value in (("--runs-dir", self.runs_dir), ("--run-dir", self.run_dir))
            if value is not None
        ]
        if self.local and self.cluster:
            raise UsageError("--local and --cluster cannot be combined")
        if self.local and cluster_opts:
            raise UsageError(f"--local: {cluster_opts[0]} is a cluster option; drop one of them")
        if self.cluster and local_opts:
            raise UsageError(f"--cluster: {local_opts[0]} is for local runs; drop one of them")
        if cluster_opts and local_opts:
            raise UsageError(f"{cluster_opts[0]} (a cluster) and {local_opts[0]} (local runs) cannot be combined")
        return bool(self.cluster or cluster_opts or (not self.local and not local_opts and default_target() == "cluster"))

    async def async_client(self, watch: bool = True):  # noqa: ANN201 - a t9k_jobs.AsyncClient
        """The async client (:class:`t9k_jobs.AsyncClient`) of the same target as :meth:`client`,
        watching (the dashboard's)."""
        from ..sdk.async_client import AsyncClient  # lazy: keeps pydantic out of --help and version
        from ..sdk.client import DEFAULT_REQUEST_TIMEOUT  # lazy: keeps pydantic out of --help and version

        if self.is_cluster():
            limit = self.request_timeout if self.request_timeout is not None else DEFAULT_REQUEST_TIMEOUT
            return await AsyncClient.cluster(
                self.kubeconfig, self.context, self.namespace, limit, watch=watch, all_namespaces=self.all_namespaces
            )
        return AsyncClient.local(self.runs_dir, self.run_dir, watch=watch)


#: Each target option once: its :class:`Target` field, its typer annotation and its default, in the
#: order ``--help`` lists them.
_TARGET_OPTIONS = (
    ("kubeconfig", _Kubeconfig, None),
    ("context", _Context, None),
    ("namespace", _Namespace, None),
    ("request_timeout", _RequestTimeout, None),
    ("all_namespaces", _AllNamespaces, False),
    ("local", _Local, False),
    ("cluster", _Cluster, False),
    ("runs_dir", _RunsDir, None),
    ("run_dir", _RunDir, None),
)
#: The options of create, which acts on a cluster only.
_CLUSTER_OPTIONS = ("kubeconfig", "context", "namespace", "request_timeout")


def takes_target(*, all_namespaces: bool = False, cluster_only: bool = False) -> Callable[[_F], _F]:
    """Give a day-two verb the target options after its own (``all_namespaces``: -A too;
    ``cluster_only``: the cluster's four, and the target is a cluster) and hand them to it as its
    keyword parameter ``target`` (a :class:`Target`), so that each verb states only its own."""

    def wanted(field: str) -> bool:
        if cluster_only:
            return field in _CLUSTER_OPTIONS
        return all_namespaces or field != "all_namespaces"

    fixed = {"cluster": True} if cluster_only else {}
    options = [
        inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for field, annotation, default in _TARGET_OPTIONS
        if wanted(field)
    ]

    def decorate(verb: _F) -> _F:
        own = [p for p in inspect.signature(verb, eval_str=True).parameters.values() if p.name != "target"]

        @functools.wraps(verb)
        def command(**kwargs: Any) -> Any:
            target = Target(**{p.name: kwargs.pop(p.name) for p in options}, **fixed)
            return verb(**kwargs, target=target)

        params = own + options
        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate
