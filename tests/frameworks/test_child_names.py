"""The names of what a job's plug-in makes are checked when the manifest is read (issue 23: the
check lives in frameworks, one layer above the models, and is the same for every reader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from t9k_jobs import api, frameworks
from t9k_jobs.api import ManifestError
from tests.helpers import job, replica, template


def generic(name: str, replicas: int = 2, service: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicaSpecs": [replica("worker", replicas, template(name="c", image="i"))]}
    if service:
        spec["service"] = {"ports": [{"name": "http", "port": 80}]}
    return job("GenericJob", name, spec)


def test_a_replica_name_over_63_characters_is_refused_with_the_room_left() -> None:
    name = "a" * 55  # "<name>-worker-1" is 63 + 1
    with pytest.raises(ManifestError) as err:
        frameworks.parse_job(generic(name), "job.yaml")
    assert err.value.lines() == [
        f"job.yaml: metadata.name: {name!r} makes the replica name '{name}-worker-1' (64 characters), "
        "longer than the 63 Kubernetes accepts; use a job name of at most 54 characters"
    ]
    assert frameworks.parse_job(generic(name[:-1])).name == name[:-1]


def test_services_need_a_job_name_that_starts_with_a_letter() -> None:
    assert frameworks.parse_job(generic("1job")).name == "1job"
    with pytest.raises(ManifestError, match="must start with a letter"):
        frameworks.parse_job(generic("1job", service=True))


def test_the_models_alone_do_not_know_what_a_plug_in_makes() -> None:
    assert api.parse_job(generic("a" * 60)).name == "a" * 60


def test_load_manifest_reads_then_checks_the_names(tmp_path: Path) -> None:
    import json

    path = tmp_path / "job.json"
    path.write_text(json.dumps(generic("a" * 60)))
    assert api.load_manifest(path).name == "a" * 60
    with pytest.raises(ManifestError) as err:
        frameworks.load_manifest(path)
    assert err.value.source == str(path) and "63 Kubernetes accepts" in err.value.errors[0]
