"""The Client over the Backend protocol (issue 34, t9k_jobs/sdk/backend.py): what it accepts as a
backend, what ``run`` needs, and that every verb is checked. No processes, no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_jobs import Client
from t9k_jobs.errors import NotSupported, UsageError
from t9k_jobs.sdk.backend import Backend, Runner
from t9k_jobs.sdk.local import LocalBackend

JOB = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "metadata": {"name": "g"},
    "spec": {"replicaSpecs": [{"type": "worker", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
}


class FakeCluster:
    """A Backend with no ``run``: the methods a cluster has, doing nothing."""

    target, namespace, server = "cluster", "default", "https://example.invalid"

    def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> Any:
        return None

    def list(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def create(self, *args: Any) -> Any:
        return None

    def delete(self, *args: Any) -> list[str]:
        return []

    def set_field(self, *args: Any) -> Any:
        return None

    def logs(self, *args: Any) -> Any:
        return None

    def watch(self, *args: Any) -> Any:
        return None

    def close(self) -> None:
        return None


def test_a_backend_is_checked_against_the_protocol() -> None:
    assert isinstance(FakeCluster(), Backend) and not isinstance(FakeCluster(), Runner)
    assert Client(FakeCluster()).target == "cluster"
    with pytest.raises(TypeError, match="is not a t9k_jobs.sdk.backend.Backend"):
        Client(object())  # type: ignore[arg-type]


def test_the_local_backend_is_a_runner(tmp_path: Any) -> None:
    backend = LocalBackend(tmp_path, None)
    assert isinstance(backend, Backend) and isinstance(backend, Runner)


def test_run_needs_a_runner() -> None:
    with pytest.raises(NotSupported, match="on a cluster use create"):
        Client(FakeCluster()).run(JOB)


@pytest.mark.parametrize(
    "verb", ["create", "run", "get", "summaries", "describe", "wait", "logs", "delete", "pause", "resume", "scale"]
)
def test_every_verb_is_checked(verb: str) -> None:
    assert getattr(getattr(Client, verb), "__t9k_checked__", False), f"Client.{verb} is not @checked"


def test_a_verb_without_a_name_is_refused_before_the_backend() -> None:
    with pytest.raises(UsageError, match="a job name is required"):
        Client(FakeCluster()).get("gj", "")
