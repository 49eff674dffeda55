"""A kind's facts are its plug-in's (issue 34, change 3): :meth:`Framework.warnings`,
:meth:`~Framework.local_notes`, :meth:`~Framework.local_requirements` and
:meth:`~Framework.elastic_range`, tabled over the four kinds; then the callers that ask them
(``local.checks``, ``sdk.edits``, the dashboard's actions) with the words they print."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from t9k_jobs.api import parse_job
from t9k_jobs.dashboard.source import JobSource
from t9k_jobs.errors import UsageError
from t9k_jobs.frameworks import LocalRequirement, elastic_kinds, framework_for, spec_warnings
from t9k_jobs.local import checks
from t9k_jobs.sdk.edits import edit_of
from tests.helpers import job, replica, template

KINDS = ["GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"]
SCHEDULER = {"t9kScheduler": {"queue": "q", "priority": 5}}
ELASTIC = {"enabled": True, "minReplicas": 1, "maxReplicas": 4}


def spec_of(kind: str, **extra: Any) -> dict[str, Any]:
    """A plain valid spec of ``kind`` (two replicas of one type), with ``extra`` beside its fields."""
    if kind == "GenericJob":
        spec = {"replicaSpecs": [replica("worker", 2, template(["run"], name="c"))]}
    elif kind == "PyTorchTrainingJob":
        spec = {
            "torchrunConfig": {"enabled": True, "procPerNode": "1"},
            "replicaSpecs": [replica("node", 2, template(["python", "t.py"]))],
        }
    elif kind == "DeepSpeedJob":
        spec = {"config": {"run": {"python": ["t.py"]}}, "worker": {"replicas": 2, "template": template(name="worker")}}
    else:
        spec = {"worker": {"replicas": 2, "command": ["t.py"], "template": template(name="worker")}, "launcher": {"image": "x"}}
    return {**spec, **extra}


def of(kind: str, **extra: Any) -> Any:
    return parse_job(job(kind, "j", spec_of(kind, **extra)))


# --------------------------------------------------------------------------- the four methods


@pytest.mark.parametrize("kind", KINDS)
def test_a_plain_job_of_every_kind_has_no_warning_or_note(kind: str) -> None:
    job_ = of(kind)
    assert framework_for(job_).warnings(job_) == []
    assert framework_for(job_).local_notes(job_) == []
    assert spec_warnings(job_) == framework_for(job_).warnings(job_)


@pytest.mark.parametrize(
    ("kind", "extra", "own"),
    [
        (
            "GenericJob",
            {"replicaSpecs": [replica("worker", 1, template(["run"], name="c"), restartPolicy={"policy": "Never", "limit": 2})]},
            "spec.replicaSpecs[0].restartPolicy.limit: no effect with policy Never (the replica is never restarted)",
        ),
        (
            "PyTorchTrainingJob",
            {"elastic": {"minReplicas": 1}},
            "spec.elastic: minReplicas has no effect without enabled: true (the replica counts are fixed)",
        ),
        (
            "DeepSpeedJob",
            {"config": {"run": {"python": ["t.py"]}, "slotsPerWorker": 2, "slotPerWorker": 3}},
            "spec.config.slotPerWorker: ignored; slotsPerWorker (2) is given too and wins",
        ),
        (
            "ColossalAIJob",
            {"worker": {"replicas": 1, "command": ["t.py"], "template": template(["python", "t.py"], name="worker")}},
            "spec.worker.template.spec.containers[0].command: replaced; a ColossalAIJob worker runs sshd (T9k docs); "
            "the launcher runs the training command on it",
        ),
    ],
)
def test_warnings_every_kind_shares_come_before_the_kinds_own(kind: str, extra: dict[str, Any], own: str) -> None:
    job_ = of(kind, scheduler={"t9kScheduler": {}}, **extra)
    assert framework_for(job_).warnings(job_) == [
        "spec.scheduler.t9kScheduler.queue: not set; the job's pods use the queue 'default'",
        own,
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_a_template_name_is_warned_at_its_kinds_field_path(kind: str) -> None:
    job_ = of(kind)
    framework = framework_for(job_)
    (where, tpl), *_ = framework.templates(job_)
    tpl.setdefault("metadata", {})["name"] = "mine"
    assert framework.warnings(job_) == [f"{where}.metadata.name: no effect; the replica pods are named <job>-<type>-<index>"]
    assert where == ("spec.worker.template" if kind in ("DeepSpeedJob", "ColossalAIJob") else "spec.replicaSpecs[0].template")


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_notes_that_a_local_run_ignores_queue_and_priority(kind: str) -> None:
    job_ = of(kind, scheduler=SCHEDULER)
    assert framework_for(job_).local_notes(job_) == [
        "spec.scheduler.t9kScheduler: a local run ignores queue 'q' and priority 5; its replicas start at once on "
        "this machine, not as a gang"
    ]


@pytest.mark.parametrize(
    ("kind", "extra", "needs"),
    [
        ("GenericJob", {}, []),
        ("PyTorchTrainingJob", {}, []),
        ("DeepSpeedJob", {}, [("program", "deepspeed")]),
        ("DeepSpeedJob", {"runMode": {"debug": {"enabled": True}}}, [("refused", "")]),
        ("DeepSpeedJob", {"config": {"customCommand": "run.sh"}}, [("refused", "")]),
        ("ColossalAIJob", {}, [("sshd", "/usr/sbin/sshd"), ("program", "colossalai")]),
        ("ColossalAIJob", {"ssh": {"sshdPath": "/opt/sshd"}}, [("sshd", "/opt/sshd"), ("program", "colossalai")]),
        ("ColossalAIJob", {"runMode": {"debug": {"enabled": True}}}, []),
    ],
)
def test_local_requirements(kind: str, extra: dict[str, Any], needs: list[tuple[str, str]]) -> None:
    job_ = of(kind, **extra)
    got = framework_for(job_).local_requirements(job_)
    assert [(r.what, r.name) for r in got] == needs
    assert all(isinstance(r, LocalRequirement) and r.missing for r in got)


@pytest.mark.parametrize(
    ("kind", "extra", "span"),
    [
        ("GenericJob", {}, None),
        ("PyTorchTrainingJob", {}, None),
        ("PyTorchTrainingJob", {"elastic": ELASTIC}, (1, 4)),
        ("PyTorchTrainingJob", {"elastic": {**ELASTIC, "enabled": False}}, None),
        ("DeepSpeedJob", {"elastic": {"enabled": True, "minReplicas": 2, "maxReplicas": 3}}, (2, 3)),
        ("DeepSpeedJob", {}, None),
        ("ColossalAIJob", {}, None),
    ],
)
def test_elastic_range(kind: str, extra: dict[str, Any], span: tuple[int, int] | None) -> None:
    job_ = of(kind, **extra)
    assert framework_for(job_).elastic_range(job_) == span


def test_the_kinds_with_an_elastic_mode() -> None:
    assert elastic_kinds() == ["PyTorchTrainingJob", "DeepSpeedJob"]


# --------------------------------------------------------------------------- the callers


def test_a_missing_requirement_is_said_with_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    program = LocalRequirement("program", "no-such-tool", "install it into {where}")
    sshd = LocalRequirement("sshd", str(tmp_path / "sshd"), "no sshd")
    refused = LocalRequirement("refused", "", "not here")
    assert checks.missing_requirement([]) is None
    assert checks.missing_requirement([program]) == "install it into the environment t9k-jobs runs in"
    assert checks.missing_requirement([program], "/v/bin/python") == "install it into the environment of --python /v/bin/python"
    assert checks.missing_requirement([sshd, program]) == "no sshd"
    assert checks.missing_requirement([refused, program]) == "not here"
    monkeypatch.setattr(checks.shutil, "which", lambda name, path=None: f"/bin/{name}")
    monkeypatch.setattr(checks.os, "access", lambda path, mode: True)
    assert checks.missing_requirement([sshd, program]) is None


def test_cannot_run_reason_says_the_plug_ins_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks.shutil, "which", lambda name, path=None: None)
    monkeypatch.setattr(checks.os, "access", lambda path, mode: False)
    assert checks.cannot_run_reason(of("GenericJob")) is None
    assert checks.cannot_run_reason(of("DeepSpeedJob"), python="/v/bin/python") == (
        "DeepSpeedJob runs its workers with deepspeed's launcher, which is not installed here: pip install "
        "deepspeed==0.19.8 into the environment of --python /v/bin/python (bash scripts/bootstrap.sh "
        "examples,test,launchers does)"
    )
    assert checks.cannot_run_reason(of("DeepSpeedJob", runMode={"debug": {"enabled": True}})) == (
        "DeepSpeedJob debug mode runs sshd in the workers for you to log in: use a cluster for it"
    )
    assert checks.cannot_run_reason(of("ColossalAIJob")) == (
        "ColossalAIJob runs each worker as a real sshd (colossalai run reaches workers only over ssh), and "
        "/usr/sbin/sshd (spec.ssh.sshdPath) is not here: install OpenSSH's server (Debian: apt-get install "
        "openssh-server), or run the job on a cluster"
    )
    monkeypatch.setattr(checks.os, "access", lambda path, mode: True)
    assert checks.cannot_run_reason(of("ColossalAIJob")) == (
        "ColossalAIJob's launcher, colossalai, is not installed here: pip install colossalai==0.5.0 into the "
        "environment t9k-jobs runs in (bash scripts/bootstrap.sh examples,test,launchers installs the locked "
        "set; docs/launchers.md)"
    )


@pytest.mark.parametrize(
    ("kind", "extra", "replicas", "problem"),
    [
        ("GenericJob", {}, 2, "scale: GenericJob has no elastic mode; only PyTorchTrainingJob and DeepSpeedJob scale (spec.elastic)"),
        ("ColossalAIJob", {}, 2, "scale: ColossalAIJob has no elastic mode; only PyTorchTrainingJob and DeepSpeedJob scale (spec.elastic)"),
        ("DeepSpeedJob", {}, 2, "scale: DeepSpeedJob j is not elastic (spec.elastic.enabled is not true)"),
        (
            "PyTorchTrainingJob", {"elastic": ELASTIC}, 5,
            "--replicas: 5 is outside PyTorchTrainingJob j's elastic range [1, 4] (spec.elastic.minReplicas, maxReplicas)",
        ),
        (
            "PyTorchTrainingJob", {"elastic": ELASTIC}, 0,
            "--replicas: 0 is outside PyTorchTrainingJob j's elastic range [1, 4] (spec.elastic.minReplicas, maxReplicas)",
        ),
        ("PyTorchTrainingJob", {"elastic": ELASTIC}, 4, None),
    ],
)  # fmt: skip
def test_scale_asks_the_plug_in_for_the_range(kind: str, extra: dict[str, Any], replicas: int, problem: str | None) -> None:
    job_ = of(kind, **extra)
    view: Any = SimpleNamespace(kind=kind, name="j", phase="Running", job=job_)
    if problem is None:
        assert edit_of(view, "scale", replicas) == (["spec", "elastic", "expectedReplicas"], replicas)
        return
    with pytest.raises(UsageError) as raised:
        edit_of(view, "scale", replicas)
    assert str(raised.value) == problem


@pytest.mark.parametrize(
    ("kind", "extra", "scale"),
    [
        ("GenericJob", {}, {"scale": False, "min_replicas": None, "max_replicas": None, "expected_replicas": None}),
        ("DeepSpeedJob", {}, {"scale": False, "min_replicas": None, "max_replicas": None, "expected_replicas": None}),
        (
            "PyTorchTrainingJob",
            {"elastic": {**ELASTIC, "expectedReplicas": 3}},
            {"scale": True, "min_replicas": 1, "max_replicas": 4, "expected_replicas": 3},
        ),
    ],
)
def test_the_dashboard_offers_scale_within_the_plug_ins_range(kind: str, extra: dict[str, Any], scale: dict[str, Any]) -> None:
    view: Any = SimpleNamespace(kind=kind, name="j", phase="Running", job=of(kind, **extra))
    actions = JobSource._actions(SimpleNamespace(allow_actions=True), view)  # type: ignore[arg-type]
    assert actions == {"allowed": True, "pause": True, "resume": False, "delete": True, **scale}
