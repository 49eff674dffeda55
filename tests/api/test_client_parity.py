"""Issue 44, part 1: ``Client`` and ``AsyncClient`` have the same verbs with the same parameters,
and each backend takes the parameters of its protocol, so a verb is written once per target and a
caller moving from one client to the other changes ``await``, nothing else.

Returns may differ (documented in :mod:`t9k_jobs.sdk.async_client`): ``logs`` is a ``LogStream``
in one, an async iterator in the other. The constructors may add ``watch`` (and, on a cluster,
``all_namespaces``) at the end.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from t9k_jobs import AsyncClient, Client
from t9k_jobs.sdk.backend import AsyncBackend, AsyncRunner, Backend, Runner
from t9k_jobs.sdk.cluster import AsyncClusterBackend, ClusterBackend
from t9k_jobs.sdk.local import LocalBackend
from t9k_jobs.sdk.local_aio import AsyncLocalBackend

#: The verbs of both clients (Client's public methods but its constructors and close).
VERBS = (
    "create", "run", "get", "list", "summaries", "describe", "wait", "logs", "delete", "edit", "pause", "resume",
    "scale",
)  # fmt: skip
#: Parameters only the async constructors take, at the end.
ASYNC_EXTRAS = {"local": ("watch",), "cluster": ("watch", "all_namespaces")}


def params(fn: object, own: bool = False) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default (annotations left out: the returns may differ);
    ``own``: without an implementation's own keyword-only extras (``require_pods``)."""
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [
        (p.name, p.kind, p.default) for p in sig.parameters.values()
        if p.name != "self" and not (own and p.kind is p.KEYWORD_ONLY and p.default is not p.empty)
    ]  # fmt: skip


def test_client_verbs_are_exactly_the_listed_ones() -> None:
    public = {
        name for name, member in inspect.getmembers(Client)
        if not name.startswith("_") and callable(member) and not isinstance(member, property)
    }  # fmt: skip
    assert public - {"local", "cluster", "close"} == set(VERBS)


@pytest.mark.parametrize("verb", VERBS)
def test_async_client_has_each_verb_with_the_same_parameters(verb: str) -> None:
    sync_fn, async_fn = getattr(Client, verb), getattr(AsyncClient, verb)
    assert inspect.iscoroutinefunction(inspect.unwrap(async_fn)), f"AsyncClient.{verb} is not a coroutine"
    assert params(async_fn) == params(sync_fn)
    # The same annotations for every parameter (types of what is passed), returns aside.
    sync_ann = {k: v.annotation for k, v in inspect.signature(sync_fn).parameters.items()}
    async_ann = {k: v.annotation for k, v in inspect.signature(async_fn).parameters.items()}
    assert async_ann == sync_ann


@pytest.mark.parametrize("constructor", ["local", "cluster"])
def test_constructors_differ_only_by_the_async_extras_at_the_end(constructor: str) -> None:
    sync_p, async_p = params(getattr(Client, constructor)), params(getattr(AsyncClient, constructor))
    extras = ASYNC_EXTRAS[constructor]
    assert async_p[: len(sync_p)] == sync_p
    assert tuple(p[0] for p in async_p[len(sync_p):]) == extras


def protocol_methods(protocol: type) -> list[str]:
    return [n for n, m in vars(protocol).items() if callable(m) and not n.startswith("_")]


@pytest.mark.parametrize(
    ("protocol", "implementations"),
    [
        (Backend, (LocalBackend, ClusterBackend)),
        (AsyncBackend, (AsyncLocalBackend, AsyncClusterBackend)),
        (Runner, (LocalBackend,)),
        (AsyncRunner, (AsyncLocalBackend,)),
    ],
)
def test_each_backend_takes_its_protocols_parameters(protocol: type, implementations: tuple[type, ...]) -> None:
    for name in protocol_methods(protocol):
        for impl in implementations:
            assert params(getattr(impl, name), own=True) == params(getattr(protocol, name)), f"{impl.__name__}.{name}"
            want_async = inspect.iscoroutinefunction(getattr(protocol, name))
            assert inspect.iscoroutinefunction(getattr(impl, name)) == want_async, f"{impl.__name__}.{name}"


def test_the_async_protocol_has_the_sync_verbs_with_the_same_parameters() -> None:
    for name in protocol_methods(Backend):
        async_name = "open_logs" if name == "logs" else name
        assert params(getattr(AsyncBackend, async_name)) == params(getattr(Backend, name)), name


def test_an_async_client_refuses_what_is_not_an_async_backend(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="is not a t9k_jobs.sdk.backend.AsyncBackend"):
        AsyncClient(LocalBackend(tmp_path))  # type: ignore[arg-type]
