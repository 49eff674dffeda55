"""The SDK's public surface (issue 44: "behaviour and output unchanged ... the SDK's public names"):
what ``import t9k_jobs`` and ``t9k_jobs.errors`` offer, and each public method of ``Client`` with
its parameters. A change here is a change users see: make it on purpose, in this list and in the
docs, not by a reorganisation."""

from __future__ import annotations

import inspect

import t9k_jobs
import t9k_jobs.errors
from t9k_jobs import Client

PACKAGE = ["AsyncClient", "Client", "__version__"]
ERRORS = [
    "AlreadyExists", "ClusterError", "InvalidJob", "JobEndedOtherwise", "JobsError", "NotFound", "NotSupported",
    "UsageError", "WaitTimeout",
]  # fmt: skip
#: Client's public methods and properties, each with its parameters (self left out).
CLIENT = {
    "local": ["runs_dir", "run_dir", "container_engine"],
    "cluster": ["kubeconfig", "context", "namespace", "request_timeout"],
    "close": [],
    "create": ["job", "namespace"],
    "run": ["job", "run_dir", "gpus", "watch", "allow_duplicate", "volumes", "python", "inject", "ttl"],
    "get": ["kind", "name", "namespace"],
    "list": ["kind", "namespace", "all_namespaces"],
    "summaries": ["kind", "name", "namespace", "all_namespaces", "positions"],
    "describe": ["kind", "name", "namespace"],
    "wait": ["kind", "name", "phase", "timeout", "namespace"],
    "logs": ["kind", "name", "replica_type", "index", "container", "follow", "tail", "timestamps", "previous",
             "namespace"],
    "delete": ["kind", "name", "namespace", "purge", "timeout"],
    "edit": ["kind", "name", "verb", "replicas", "namespace"],
    "pause": ["kind", "name", "namespace"],
    "resume": ["kind", "name", "namespace"],
    "scale": ["kind", "name", "replicas", "namespace"],
}  # fmt: skip
PROPERTIES = ["namespace", "server", "target"]


def test_the_package_and_errors_export_the_same_names() -> None:
    assert sorted(t9k_jobs.__all__) == PACKAGE
    assert [n for n in sorted(t9k_jobs.errors.__all__) if n in ERRORS] == ERRORS
    for name in ERRORS:
        assert issubclass(getattr(t9k_jobs.errors, name), Exception)


def test_client_methods_and_their_parameters_are_unchanged() -> None:
    methods = {
        name: [p for p in inspect.signature(member).parameters if p not in ("self", "cls")]
        for name, member in inspect.getmembers(Client)
        if not name.startswith("_") and callable(member)
    }  # fmt: skip
    assert methods == CLIENT
    props = sorted(n for n, m in inspect.getmembers(Client) if isinstance(m, property))
    assert props == PROPERTIES
