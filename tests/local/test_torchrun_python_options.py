"""A torchrun job whose command is ``python -u ...`` or ``python -c ...`` runs (issue 32), with real torchrun.

``command: [python, -u, train.py]`` is a common idiom; torchrun read ``-u`` as its own option and
exited 2 ("unrecognized arguments: -u") after ``validate`` had called the job valid. torchrun runs
its workers with ``python -u`` itself, and the options with a variable reach them as that variable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import job, template

# One write a line: two ranks share the container's output.
SCRIPT = (
    "import os, sys\n"
    "os.write(1, ('SEEN ' + os.environ['RANK'] + ' optimize=' + str(sys.flags.optimize)"
    " + ' warnings=' + os.environ.get('PYTHONWARNINGS', '-')"
    " + ' args=' + ' '.join(sys.argv[1:]) + '\\n').encode())\n"
)


@pytest.mark.e2e
def test_python_options_before_the_script_reach_torchruns_workers(start, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    command = ["python", "-u", "-O", "-W", "ignore::DeprecationWarning", str(script), "--epochs", "1"]
    manifest = job(
        "PyTorchTrainingJob",
        "opts",
        {
            "torchrunConfig": {"enabled": True, "procPerNode": 2},
            "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(command)}],
        },
    )
    run = start(manifest, "--quiet")
    assert run.finish() == 0, run.output
    log = (run.run_dir / "opts-worker-0.pytorch.log").read_text()
    seen = sorted(line for line in log.splitlines() if line.startswith("SEEN "))
    assert seen == [
        "SEEN 0 optimize=1 warnings=ignore::DeprecationWarning args=--epochs 1",
        "SEEN 1 optimize=1 warnings=ignore::DeprecationWarning args=--epochs 1",
    ], log


@pytest.mark.e2e
def test_python_dash_c_runs_as_written_on_every_worker(start) -> None:
    """``python -c <code>`` has no script for torchrun to start with python: torchrun runs the
    command itself (``--no-python``) on every worker; it exited 2 on ``-c`` before."""
    code = "import os; os.write(1, ('CODE ' + os.environ['RANK'] + ' of ' + os.environ['WORLD_SIZE'] + '\\n').encode())"
    manifest = job(
        "PyTorchTrainingJob",
        "code",
        {
            "torchrunConfig": {"enabled": True, "procPerNode": 2},
            "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["python", "-c", code])}],
        },
    )
    run = start(manifest, "--quiet")
    assert run.finish() == 0, run.output
    log = (run.run_dir / "code-worker-0.pytorch.log").read_text()
    assert sorted(line for line in log.splitlines() if line.startswith("CODE ")) == ["CODE 0 of 2", "CODE 1 of 2"], log
