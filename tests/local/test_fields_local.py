"""Local runs of the fields issue 21 fixed, where the fix changes what runs: real processes,
real torchrun and deepspeed; GPUs declared with ``--gpus`` so they run the same anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import job, template

from .conftest import py

e2e = pytest.mark.e2e

# One write per line: two ranks share the container's output pipe, and an unbuffered print() may
# write the text and its newline apart, so their lines could interleave.
ARGV_SCRIPT = (
    "import json, os, sys\n"
    "os.write(1, ('ARGV=' + json.dumps(sys.argv[1:]) + ' RANK=' + os.environ['RANK'] + '\\n').encode())\n"
)


@e2e
def test_torchrun_runs_the_script_of_a_python_command_with_its_args(start, tmp_path: Path) -> None:
    """``command: [python, train.py]`` with ``args``: torchrun got the args without the script and
    failed with a usage error; it now runs the script with them."""
    script = tmp_path / "train.py"
    script.write_text(ARGV_SCRIPT)
    manifest = job(
        "PyTorchTrainingJob",
        "tr",
        {
            "torchrunConfig": {"enabled": True, "procPerNode": 2},
            "replicaSpecs": [
                {"type": "worker", "replicas": 1, "template": template(["python", str(script)], args=["--lr", "0.1"])}
            ],
        },
    )
    run = start(manifest, "--quiet")
    assert run.finish() == 0, run.output
    log = (run.run_dir / "tr-worker-0.pytorch.log").read_text()
    lines = sorted(line for line in log.splitlines() if line.startswith("ARGV="))
    assert lines == ['ARGV=["--lr", "0.1"] RANK=0', 'ARGV=["--lr", "0.1"] RANK=1'], log


RECORD_SLOTS = (
    "import os, pathlib\n"
    "e = os.environ\n"
    "out = pathlib.Path(__file__).with_name('ranks')\n"
    "out.mkdir(exist_ok=True)\n"
    "(out / e['RANK']).write_text(e['LOCAL_RANK'] + ' of ' + e['LOCAL_SIZE'] + ' ' + e.get('CUDA_VISIBLE_DEVICES', '-'))\n"
)


@e2e
def test_deepspeed_runs_one_rank_per_gpu_of_the_worker_without_slots_per_worker(start, tmp_path: Path) -> None:
    """A worker with 2 GPUs and no ``slotsPerWorker`` ran ``slots=1``: one rank on one GPU. It now
    runs a rank per GPU (deepspeed gives every rank of a node the node's slots as its devices)."""
    script = tmp_path / "rank.py"
    script.write_text(RECORD_SLOTS)
    worker = {
        "name": "worker",
        "image": "local",
        "env": [{"name": "DS_ACCELERATOR", "value": "cpu"}],
        "resources": {"limits": {"nvidia.com/gpu": 2}},
    }
    manifest = job(
        "DeepSpeedJob",
        "dsslots",
        {"config": {"run": {"python": [str(script)]}}, "worker": {"replicas": 1, "template": {"spec": {"containers": [worker]}}}},
    )
    run = start(manifest, "--gpus", "0,1", "--quiet")
    assert run.finish(300) == 0, run.output
    ranks = {f.name: f.read_text() for f in sorted((tmp_path / "ranks").glob("*"))}
    assert ranks == {"0": "0 of 2 0,1", "1": "1 of 2 0,1"}, run.output


@e2e
def test_generic_job_with_one_unnamed_service_port_runs(start) -> None:
    """One unnamed Service port was refused although Kubernetes allows it."""
    code = "import sys; print('PEER=' + sys.argv[1])"
    manifest = job(
        "GenericJob",
        "unnamed",
        {
            "service": {"ports": [{"port": 2222}]},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "template": template([*py(code), "$(service.worker[1].host)"]),
                }
            ],
        },
    )
    run = start(manifest, "--quiet")
    assert run.finish() == 0, run.output
    assert "PEER=127.0.0.1" in (run.run_dir / "unnamed-worker-0.pytorch.log").read_text()


@e2e
def test_a_deadline_with_every_replica_running_is_no_replica_failure(start) -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "late",
        {
            "runPolicy": {"activeDeadlineSeconds": 2},
            "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(py("import time; time.sleep(600)"))}],
        },
    )
    run = start(manifest, "--quiet")
    assert run.finish() != 0, run.output
    conditions = {c["type"]: c for c in run.status()["conditions"]}
    assert conditions["Failed"]["reason"] == "DeadlineExceeded", json.dumps(conditions)
    assert (conditions["ReplicaFailure"]["status"], conditions["ReplicaFailure"]["message"]) == (
        "False",
        "No replica has failed.",
    ), json.dumps(conditions)
