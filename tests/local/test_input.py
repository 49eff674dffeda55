"""What ``t9k-jobs run`` reads: an edit it cannot read is ignored with a warning (the job goes on),
a manifest from standard input runs, and a job too large for one machine is refused at once."""

from __future__ import annotations

import codecs
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import job, template, wait_until

from .conftest import py

pytestmark = pytest.mark.e2e


def _worker(code: str, replicas: int = 1) -> dict:
    return job("GenericJob", "reader", {"replicaSpecs": [
        {"type": "worker", "replicas": replicas, "restartPolicy": {"policy": "Never"}, "template": template(py(code))}]})  # fmt: skip


def test_an_edit_that_cannot_be_read_is_ignored_and_the_job_goes_on(tmp_path: Path) -> None:
    release = tmp_path / "release"
    code = f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.05)\nprint('released')\n"
    manifest = _worker(code)
    path = tmp_path / "job.yaml"
    text = yaml.safe_dump(manifest, sort_keys=False)
    path.write_text(text)
    output = tmp_path / "output"
    proc = _run_until_running(path, tmp_path / "run", output)
    try:
        for edit, said in (
            (text.replace("reader", "r\xe9ader").encode("latin-1"), "byte 0xe9 is not UTF-8"),  # the wrong encoding
            (codecs.BOM_UTF16_LE + text.encode("utf-16-le"), "is UTF-16 text"),
            (b"\x00\x01binary", "NUL byte"),
        ):
            path.write_bytes(edit)
            wait_until(lambda said=said: said in output.read_text() or proc.poll() is not None, said, 60)
            assert proc.poll() is None, output.read_text()
        release.write_text("go")
        assert proc.wait(timeout=120) == 0, output.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    shown = output.read_text()
    assert shown.count("edit ignored; the job goes on with the previous spec") == 3, shown
    assert "Traceback" not in shown, shown
    assert yaml.safe_load((tmp_path / "run" / "status.yaml").read_text())["phase"] == "Succeeded"


def _run_until_running(path: Path, run_dir: Path, output: Path) -> subprocess.Popen[bytes]:
    """``t9k-jobs run path`` with its output in ``output``, once its job is Running (or it ended)."""
    with output.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--run-dir", str(run_dir)],
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    status = run_dir / "status.yaml"
    try:
        wait_until(lambda: "phase: Running" in (status.read_text() if status.exists() else "") or proc.poll() is not None,
                   "the job to run", 60)
    except BaseException:
        proc.kill()
        raise
    return proc


def test_a_manifest_from_standard_input_runs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "run", "-", "--run-dir", str(tmp_path / "run"), "--quiet"],
        input=yaml.safe_dump(_worker("print('from stdin')")), capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "from stdin" in (tmp_path / "run" / "job.log").read_text()
    assert yaml.safe_load((tmp_path / "run" / "status.yaml").read_text())["phase"] == "Succeeded"


def test_more_replicas_than_a_local_run_starts_is_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(_worker("print(1)", replicas=100_000)))
    out = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "run", str(manifest)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2, out
    assert "asks for 100000 replicas; a local run starts at most 256" in out.stderr
    assert out.stderr.strip().count("\n") == 0 and not (tmp_path / "t9k-runs").exists()


def test_an_edit_of_the_elastic_range_is_refused_and_the_job_goes_on(tmp_path: Path) -> None:
    """T9k: minReplicas/maxReplicas cannot change once the job is created (replicas started with
    --nnodes=1:2 would disagree with later ones); the local reload refuses it as the CRD does."""
    release = tmp_path / "release"
    code = f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.05)\n"
    script = tmp_path / "wait.py"
    script.write_text(code)
    manifest = job("PyTorchTrainingJob", "stretchy", {
        "torchrunConfig": {"enabled": True},
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 2, "expectedReplicas": 1},
        "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["python", str(script)])}],
    })  # fmt: skip
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    output = tmp_path / "output"
    proc = _run_until_running(path, tmp_path / "run", output)
    try:
        manifest["spec"]["elastic"]["maxReplicas"] = 4
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        wait_until(lambda: "spec.elastic.maxReplicas: cannot be changed" in output.read_text() or proc.poll() is not None,
                   "the refusal", 60)
        release.write_text("go")
        assert proc.wait(timeout=120) == 0, output.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "(2 -> 4) (edit ignored; the job goes on with the previous spec)" in output.read_text()
