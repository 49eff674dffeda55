"""``t9k-jobs validate`` on the fields of issue 21, as a user runs it: a refusal is one line with
the field path and exit 2; a field without effect or a silent default is a warning, exit 0."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TIMEOUT = 60


def validate(tmp_path: Path, text: str, command: str = "validate") -> subprocess.CompletedProcess[str]:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: batch.tensorstack.dev/v1beta1\n" + textwrap.dedent(text), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", command, str(path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )


COLOSSALAI_TORCH_ARGS = """\
kind: ColossalAIJob
metadata: {name: cai}
spec:
  worker:
    command: [train.py]
    torchArgs: ["--rdzv_conf", "join_timeout=30"]
    template: {spec: {containers: [{name: worker, image: x}]}}
"""
COLOSSALAI_MIXED = """\
kind: ColossalAIJob
metadata: {name: cai}
spec:
  torchConfig: {procPerWorker: 8, script: [train.py]}
  worker:
    command: [train.py]
    template: {spec: {containers: [{name: worker, image: x}]}}
"""
COLOSSALAI_LAUNCHERS = """\
kind: ColossalAIJob
metadata: {name: cai}
spec:
  torchConfig: {script: [train.py]}
  replicaSpecs:
    - {type: launcher, replicas: 2, template: {spec: {containers: [{name: launcher, image: x}]}}}
    - {type: worker, template: {spec: {containers: [{name: worker, image: x}]}}}
"""
COLOSSALAI_LAUNCHER_ENV = """\
kind: ColossalAIJob
metadata: {name: cai}
spec:
  launcher: {env: [{name: OMP_NUM_THREADS, value: 1}]}
  worker:
    command: [train.py]
    template: {spec: {containers: [{name: worker, image: x}]}}
"""
GENERIC_RULES = """\
kind: GenericJob
metadata: {name: g}
spec:
  successRules: [{master: [0]}]
  replicaSpecs:
    - {type: worker, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}
"""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (COLOSSALAI_TORCH_ARGS, "spec.worker.torchArgs[1]: 'join_timeout=30' holds '='"),
        (COLOSSALAI_MIXED, "spec.torchConfig: belongs to the older form"),
        (COLOSSALAI_LAUNCHERS, "spec.replicaSpecs[0].replicas: 2 launchers asked for"),
        (COLOSSALAI_LAUNCHER_ENV, "spec.launcher.env[0].value: must be a string"),
        (GENERIC_RULES, "spec.successRules[0].master: no replica type 'master' in replicaSpecs (types: worker)"),
    ],
    ids=["torch-args", "mixed-forms", "launchers", "launcher-env", "rules"],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_refused_in_one_line_with_exit_2(tmp_path: Path, text: str, line: str, command: str) -> None:
    result = validate(tmp_path, text, command)
    output = f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 2, output
    assert "Traceback" not in output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path / 'job.yaml'}: {line}"), output
    assert not (tmp_path / "t9k-runs").exists(), "nothing ran"


def test_an_unset_queue_is_said_and_the_job_is_valid(tmp_path: Path) -> None:
    result = validate(
        tmp_path,
        """\
        kind: GenericJob
        metadata: {name: g}
        spec:
          scheduler: {t9kScheduler: {queue: null, priority: 3}}
          service: {ports: [{port: 2222}]}
          replicaSpecs:
            - {type: worker, template: {spec: {containers: [{name: c, image: x}]}}}
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "GenericJob/g: valid\n"
    assert result.stderr == (
        f"warning: {tmp_path / 'job.yaml'}: spec.scheduler.t9kScheduler.queue: not set; "
        "the job's pods use the queue 'default'\n"
        f"note: {tmp_path / 'job.yaml'}: spec.scheduler.t9kScheduler: a local run ignores queue 'default' "
        "and priority 3; its replicas start at once on this machine, not as a gang\n"
    )


def test_render_warns_on_stderr_and_keeps_stdout_yaml(tmp_path: Path) -> None:
    result = validate(
        tmp_path,
        """\
        kind: ColossalAIJob
        metadata: {name: cai}
        spec:
          torchConfig: {script: [train.py]}
          replicaSpecs:
            - type: worker
              restartPolicy: {policy: OnFailure, limit: 2}
              template: {spec: {containers: [{name: worker, image: x}]}}
        """,
        "render",
    )
    assert result.returncode == 0, result.stderr
    assert "spec.replicaSpecs[0].restartPolicy: no effect; a ColossalAIJob never restarts a replica" in result.stderr
    assert result.stdout.startswith("apiVersion: v1\nkind: ConfigMap\n")
