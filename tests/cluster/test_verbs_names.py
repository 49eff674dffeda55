"""On the real API server, a verb acts only on the job it names (issue 20).

``t9k-jobs delete gj ''`` used to send a DELETE to ``.../genericjobs/`` (the collection: every
GenericJob of the namespace went, exit 0), ``Client.cluster().delete("gj", None)`` did the same,
and ``describe gj ''`` printed a traceback. Each verb with an empty, blank or missing name is now
a usage error (exit 2, one line) and the jobs of the namespace are all still there afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from t9k_jobs import Client
from t9k_jobs.errors import UsageError

from .kube import Kube, job_path
from .test_verbs import cli, generic, one_line_error, put


@pytest.fixture
def kc(control_plane) -> Path:
    return control_plane.kubeconfig


def _names(kube: Kube, ns: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in kube.list(job_path(ns, "GenericJob")))


def test_verbs_with_an_empty_name_delete_nothing_on_the_api_server(kc: Path, kube: Kube, namespace: str) -> None:
    put(kube, namespace, generic("keep-a"))
    put(kube, namespace, generic("keep-b"))
    for args in (
        ("delete", "gj", ""),
        ("delete", "gj", "  "),
        ("describe", "gj", ""),
        ("get", "gj", ""),
        ("logs", "gj", ""),
        ("wait", "gj", "", "--for=Succeeded", "--timeout", "1s"),
        ("pause", "gj", ""),
        ("resume", "gj", ""),
        ("scale", "pj", "", "--replicas", "2"),
    ):
        line = one_line_error(cli(kc, *args, "-n", namespace), 2)
        assert line.startswith("NAME: a job name is required"), (args, line)
    assert _names(kube, namespace) == ["keep-a", "keep-b"]

    with Client.cluster(kc, namespace=namespace) as client:
        for name in (None, "", " "):
            for call in (
                lambda: client.delete("gj", name),
                lambda: client.describe("gj", name) if name is not None else client.get("gj", name),
                lambda: client.get("gj", name),
                lambda: client.pause("gj", name),
                lambda: client.wait("gj", name, timeout=1),
                lambda: list(client.logs("gj", name)),
            ):
                with pytest.raises(UsageError, match="NAME: a job name is required"):
                    call()
        with pytest.raises(UsageError, match="NAME: '..' is not a name"):
            client.delete("gj", "..")
        with pytest.raises(UsageError, match="namespace: '..' is not a name"):
            client.delete("gj", "keep-a", namespace="..")
        assert [j.name for j in client.list("gj")] == ["keep-a", "keep-b"]
        # describe KIND without a name describes every job of the kind, as kubectl does.
        every = client.describe("gj")
        assert [line for line in every.splitlines() if line.startswith("Name:")] == [
            "Name:        keep-a",
            "Name:        keep-b",
        ]
    assert _names(kube, namespace) == ["keep-a", "keep-b"]
    # The name given is the one deleted, and only it.
    done = cli(kc, "delete", "gj", "keep-a", "-n", namespace)
    assert done.returncode == 0 and done.stdout == "genericjob.batch.tensorstack.dev/keep-a deleted\n"
    Kube.wait_for(lambda: _names(kube, namespace) == ["keep-b"], timeout=90, what="keep-a deleted")
