"""GPUs in local runs: the inventory (declared or discovered), each replica's own devices through
CUDA_VISIBLE_DEVICES, procPerNode gpu, and jobs that ask for more GPUs than there are.

The end-to-end tests declare the inventory with ``--gpus`` and have their replicas print what they
were given, so they run the same on machines with and without GPUs.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from t9k_jobs.api import ManifestError, parse_job
from t9k_jobs.local import gpus as gpus_mod
from t9k_jobs.local.gpus import (
    Gpu,
    GpuAllocator,
    GpuInventory,
    GpuRequestError,
    discover,
    from_nvidia_smi,
    from_nvml,
    gpu_limit,
    gpu_shortage,
    narrow,
    parse_gpus,
    parse_nvidia_smi,
    set_visible_devices,
    visible_devices,
)
from t9k_jobs.render import render

from tests.helpers import await_until, job, template

from .conftest import py

PRINT_CVD = "import os; print('CVD=' + repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"


def _limit(n: Any) -> dict[str, Any]:
    return {"resources": {"limits": {"nvidia.com/gpu": n}}}


def _two_workers(name: str, command: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A PyTorchTrainingJob of 2 workers with 1 GPU each, and a sidecar that asks for none."""
    spec = template(command or py(PRINT_CVD), **_limit(1))
    spec["spec"]["containers"].append({"name": "sidecar", "image": "local", "command": py(PRINT_CVD)})
    return job(
        "PyTorchTrainingJob",
        name,
        {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": spec, **extra}]},
    )


def _cvds(log: Path) -> list[str | None]:
    """Every ``CVD=...`` value a container printed, in order (None: the variable was unset)."""
    return [None if v == "None" else v.strip("'") for v in re.findall(r"^CVD=(.*)$", log.read_text(), re.M)]


# --------------------------------------------------------------------------- the inventory


def test_parse_gpus_indices_uuids_and_none() -> None:
    assert [g.id for g in parse_gpus("0,1,2,3")] == ["0", "1", "2", "3"]
    assert [g.id for g in parse_gpus(" 2 , 0 ")] == ["2", "0"]
    uuid = "GPU-8c6f2a1e-3b7d-4c8e-9f0a-1b2c3d4e5f60"
    declared = parse_gpus(f"{uuid},MIG-0e2a4c6b-1d3f-5a7c-9e1b-3d5f7a9c1e3f")
    assert declared[0] == Gpu(uuid, uuid=uuid) and not declared[0].by_index
    assert parse_gpus("none") == () and parse_gpus("NONE") == ()


@pytest.mark.parametrize("text", ["", "0,,1", "x", "-1", "0,0", "all", "1.5", "GPU-"])
def test_parse_gpus_refuses_what_is_not_a_device(text: str) -> None:
    with pytest.raises(ValueError, match="indices or UUIDs separated by commas"):
        parse_gpus(text)


def test_nvidia_smi_csv_is_parsed() -> None:
    out = (
        "0, GPU-aaaa, NVIDIA H100 80GB HBM3, 81559 MiB\n"
        "1, GPU-bbbb, NVIDIA A100, PCIe, [N/A]\n"
        "No devices were found\n"
    )
    assert parse_nvidia_smi(out) == (
        Gpu("0", "GPU-aaaa", "NVIDIA H100 80GB HBM3", 81559),
        Gpu("1", "GPU-bbbb", "NVIDIA A100, PCIe", None),
    )


def _fake_nvidia_smi(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)


def _no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError


class _FakeNvml(types.ModuleType):
    """What ``pynvml`` offers, for two devices; ``init_error`` makes nvmlInit fail as without a driver."""

    class NVMLError(Exception):
        pass

    def __init__(self, init_error: bool = False) -> None:
        super().__init__("pynvml")
        self.init_error = init_error
        self.shut = False

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.init_error:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetUUID(self, h: int) -> Any:  # noqa: N802
        return [b"GPU-0000", "GPU-1111"][h]  # older nvidia-ml-py returned bytes

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return "NVIDIA L4"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # noqa: N802
        if h == 1:
            raise self.NVMLError("Not Supported")
        return types.SimpleNamespace(total=24 * 2**30)


def test_nvml_lists_devices_and_shuts_down(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert from_nvml() == (Gpu("0", "GPU-0000", "NVIDIA L4", 24576), Gpu("1", "GPU-1111", "NVIDIA L4", None))
    assert fake.shut


def test_nvml_without_driver_or_package_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(init_error=True))
    assert from_nvml() is None
    _no_nvml(monkeypatch)
    assert from_nvml() is None


def test_discovery_falls_back_to_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(init_error=True))
    _fake_nvidia_smi(
        tmp_path / "bin",
        '[ "$1 $2" = "--query-gpu=index,uuid,name,memory.total --format=csv,noheader" ] || exit 3\n'
        "echo '0, GPU-aaaa, Tesla T4, 15360 MiB'\necho '1, GPU-bbbb, Tesla T4, 15360 MiB'\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus, source = discover()
    assert [g.uuid for g in gpus] == ["GPU-aaaa", "GPU-bbbb"] and source == "nvidia-smi"
    # A CUDA_VISIBLE_DEVICES t9k-jobs runs under narrows what it gives out (CUDA's reading: in its
    # order, up to the first entry that names no device).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb,7,0")
    gpus, source = discover()
    assert [g.id for g in gpus] == ["1"] and "narrowed by CUDA_VISIBLE_DEVICES" in source
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert discover()[0] == ()


def test_no_driver_means_no_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_nvml(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert from_nvidia_smi() is None
    gpus, source = discover()
    assert gpus == () and "no NVIDIA driver" in source
    # nvidia-smi present but failing (installed, driver not loaded): no GPUs, no error.
    _fake_nvidia_smi(tmp_path / "bin", "echo 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert from_nvidia_smi() is None
    assert discover()[0] == ()


def test_discovered_inventory_is_found_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(gpus_mod, "discover", lambda: calls.append(1) or ((Gpu("0"),), "NVML"))
    inventory = GpuInventory.discovered()
    cpu_job = parse_job(job("GenericJob", "cpu", {"replicaSpecs": [{"type": "w", "template": template(py("pass"))}]}))
    assert gpu_shortage(cpu_job, inventory) is None and calls == []
    assert len(inventory) == 1 and inventory.source == "NVML" and calls == [1]


def test_narrow_keeps_cuda_order_and_stops_at_unknown() -> None:
    gpus = (Gpu("0", "GPU-a"), Gpu("1", "GPU-b"), Gpu("2", "GPU-c"))
    assert [g.id for g in narrow(gpus, "2,0")] == ["2", "0"]
    assert [g.id for g in narrow(gpus, "1,9,2")] == ["1"]
    assert narrow(gpus, "") == ()


# --------------------------------------------------------------------------- what pods ask for


@pytest.mark.parametrize("value, count", [(2, 2), ("2", 2), (0, 0), (1.0, 1), (None, 0)])
def test_gpu_limit_accepts_whole_numbers(value: Any, count: int) -> None:
    c = {"name": "c"} if value is None else {"name": "c", **_limit(value)}
    assert gpu_limit(c, "spec.containers[0]") == count


@pytest.mark.parametrize("value", [1.5, "1.5", "500m", -1, "-1", True, "one"])
def test_gpu_limit_refuses_other_quantities_naming_the_field(value: Any) -> None:
    with pytest.raises(GpuRequestError, match=re.escape('spec.containers[0].resources.limits["nvidia.com/gpu"]: ')):
        gpu_limit({"name": "c", **_limit(value)}, "spec.containers[0]")


def test_gpu_requests_must_equal_limits() -> None:
    both = {"resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": "1"}}}
    assert gpu_limit(both, "c") == 1
    with pytest.raises(GpuRequestError, match="without a limit"):
        gpu_limit({"resources": {"requests": {"nvidia.com/gpu": 1}}}, "c")
    with pytest.raises(GpuRequestError, match="must equal the limit"):
        gpu_limit({"resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}}}, "c")


def test_shortage_names_the_replicas_and_the_counts() -> None:
    two = parse_job(_two_workers("two"))
    assert gpu_shortage(two, GpuInventory.declared("0,1")) is None
    assert gpu_shortage(two, GpuInventory.declared("0")) == (
        "worker-1 asks for 1 GPU; this machine has 1 (declared by --gpus; GPU 0 for worker-0): a local run "
        "gives every replica GPUs of its own, and the job needs 2; lower the nvidia.com/gpu "
        "limits or run it on a cluster"
    )
    none = gpu_shortage(two, GpuInventory([], "no NVIDIA driver found"))
    assert none is not None and none.startswith(
        "worker-0 asks for 1 GPU; worker-1 asks for 1 GPU; this machine has none (no NVIDIA driver found)"
    )
    assert "--gpus 0,1,... declares" in none


def test_shortage_counts_init_containers_as_the_kubelet_does() -> None:
    spec = template(py("pass"), **_limit(1))
    spec["spec"]["initContainers"] = [{"name": "prep", "image": "local", "command": py("pass"), **_limit(2)}]
    manifest = parse_job(job("GenericJob", "init", {"replicaSpecs": [{"type": "w", "template": spec}]}))
    # The pod takes max(2 for the init container, 1 for the containers) = 2.
    assert gpu_shortage(manifest, GpuInventory.declared("0,1")) is None
    assert "w-0 asks for 2 GPUs; this machine has 1" in (gpu_shortage(manifest, GpuInventory.declared("0")) or "")


def test_bad_quantity_is_named_by_its_path_in_the_job() -> None:
    """Refused when the job is validated, as the API server refuses it (issue 32: a pod template is
    checked as a Pod), before any GPU is counted."""
    manifest = _two_workers("bad")
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][1].update(_limit("0.5"))
    with pytest.raises(ManifestError) as err:
        parse_job(manifest)
    assert err.value.errors[0].startswith(
        'spec.replicaSpecs[0].template.spec.containers[1].resources.limits["nvidia.com/gpu"]: \'0.5\' must be a whole number'
    )


# --------------------------------------------------------------------------- giving them out


def _pod(**containers: int) -> dict[str, Any]:
    return {"containers": [{"name": n, **_limit(k)} for n, k in containers.items()]}


def test_allocator_never_gives_a_device_twice_and_takes_it_back() -> None:
    alloc = GpuAllocator(GpuInventory.declared("0,1,2"))
    a = alloc.assign("a", _pod(main=1, side=1))
    assert a == {"main": (Gpu("0"),), "side": (Gpu("1"),)}
    assert alloc.assign("b", _pod(main=2)) is None, "two devices asked, one free: nothing is taken"
    assert [g.id for g in alloc.free()] == ["2"]
    assert alloc.assign("c", _pod(main=0)) == {"main": ()}
    assert alloc.release("a") == (Gpu("0"), Gpu("1"))
    assert alloc.assign("b", _pod(main=2)) == {"main": (Gpu("0"), Gpu("1"))}
    with pytest.raises(ValueError, match="holds GPUs already"):
        alloc.assign("b", _pod(main=1))
    assert alloc.release("nobody") == ()


def test_init_containers_reuse_the_pods_devices() -> None:
    alloc = GpuAllocator(GpuInventory.declared("0,1,2"))
    spec = {**_pod(a=1, b=1), "initContainers": [{"name": "prep", **_limit(2)}]}
    got = alloc.assign("p", spec)
    assert got == {"prep": (Gpu("0"), Gpu("1")), "a": (Gpu("0"),), "b": (Gpu("1"),)}


def test_visible_devices_reads_a_containers_own_value_against_its_devices() -> None:
    mine = (Gpu("2", "GPU-c"), Gpu("3", "GPU-d"))
    assert visible_devices(mine) == "2,3"
    assert visible_devices(()) == ""
    assert visible_devices(mine, "1") == "3"
    assert visible_devices(mine, "GPU-c,5,1") == "2"
    assert visible_devices(mine, "0,1,0") == "2,3"
    assert visible_devices((), "0") == "", "a container without GPUs sees none, whatever it asks"


def test_set_visible_devices_adds_env_after_the_containers_own() -> None:
    pod = {"spec": {"containers": [
        {"name": "main", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "1"}, {"name": "X", "value": "y"}]},
        {"name": "side"},
    ]}}
    set_visible_devices(pod, {"main": (Gpu("4"), Gpu("5")), "side": ()})
    main, side = pod["spec"]["containers"]
    assert main["env"][-3:] == [
        {"name": "T9K_JOBS_GPUS", "value": "4,5"},  # its devices, whatever it sets itself
        {"name": "CUDA_VISIBLE_DEVICES", "value": "5"},
        {"name": "CUDA_DEVICE_ORDER", "value": "PCI_BUS_ID"},
    ]
    assert side["env"] == [
        {"name": "T9K_JOBS_GPUS", "value": ""},
        {"name": "CUDA_VISIBLE_DEVICES", "value": ""},
    ]


def test_procpernode_gpu_is_the_training_containers_limit() -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "tr",
        {
            "torchrunConfig": {"enabled": True, "procPerNode": "gpu"},
            "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["python", "t.py"], **_limit(2))}],
        },
    )
    pod = next(o for o in render(parse_job(manifest)) if o["kind"] == "Pod")
    assert "--nproc_per_node=2" in pod["spec"]["containers"][0]["args"]


# --------------------------------------------------------------------------- end to end


e2e = pytest.mark.e2e


@e2e
def test_two_replicas_get_a_gpu_each_and_a_sidecar_none(start) -> None:
    run = start(_two_workers("two"), "--gpus", "0,1")
    assert run.finish() == 0, run.output
    got = [_cvds(run.run_dir / f"two-worker-{i}.pytorch.log") for i in range(2)]
    assert sorted(got) == [["0"], ["1"]], got
    for i in range(2):
        assert _cvds(run.run_dir / f"two-worker-{i}.sidecar.log") == [""]


@e2e
def test_job_asking_for_more_gpus_than_declared_is_refused(start) -> None:
    run = start(_two_workers("two"), "--gpus", "0")
    assert run.finish() == 2, run.output
    errors = [line for line in run.output.splitlines() if line.strip()]
    assert len(errors) == 1, run.output
    assert "worker-1 asks for 1 GPU; this machine has 1 (declared by --gpus; GPU 0 for worker-0)" in errors[0]
    assert not run.run_dir.exists(), "nothing starts"


@e2e
def test_without_gpus_the_job_is_refused_naming_the_option(start, monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever this machine has, an empty CUDA_VISIBLE_DEVICES leaves t9k-jobs none.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    run = start(_two_workers("two"))
    assert run.finish() == 2, run.output
    assert "worker-0 asks for 1 GPU; worker-1 asks for 1 GPU; this machine has none" in run.output
    assert "--gpus" in run.output


@e2e
@pytest.mark.parametrize(
    "args, needle",
    [
        (("--gpus", "0,x"), "error: --gpus: '0,x' is not accepted"),
        (("--gpus", "0,0"), "error: --gpus: '0,0' names 0 more than once"),
    ],
)
def test_bad_gpus_option_is_one_line_and_exit_2(start, args: tuple[str, ...], needle: str) -> None:
    run = start(_two_workers("two"), *args)
    assert run.finish() == 2, run.output
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(needle), run.output


@e2e
def test_bad_gpu_quantity_is_refused_with_its_field_path(start) -> None:
    manifest = _two_workers("two")
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0].update(_limit(-1))
    run = start(manifest, "--gpus", "0,1")
    assert run.finish() == 2, run.output
    assert 'spec.replicaSpecs[0].template.spec.containers[0].resources.limits["nvidia.com/gpu"]: -1' in run.output


@e2e
def test_torchrun_procpernode_gpu_runs_one_rank_per_assigned_gpu(start, tmp_path: Path) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(
        "import os\n"
        # One write per line: the two ranks share the container's output pipe, and print() may
        # write the text and its newline apart (unbuffered), so two ranks' lines could interleave.
        "os.write(1, f\"rank {os.environ['LOCAL_RANK']} of {os.environ['LOCAL_WORLD_SIZE']} "
        "CVD={os.environ['CUDA_VISIBLE_DEVICES']}\\n\".encode())\n"
    )
    manifest = job(
        "PyTorchTrainingJob",
        "tr",
        {
            "torchrunConfig": {"enabled": True, "procPerNode": "gpu"},
            "replicaSpecs": [
                {"type": "worker", "replicas": 1, "template": template(["python", str(script)], **_limit(2))}
            ],
        },
    )
    run = start(manifest, "--gpus", "2,3")
    assert run.finish() == 0, run.output
    log = (run.run_dir / "tr-worker-0.pytorch.log").read_text()
    assert sorted(re.findall(r"rank (\d) of (\d) CVD=(\S*)", log)) == [("0", "2", "2,3"), ("1", "2", "2,3")], log


@e2e
def test_restarted_replica_gets_freed_devices_never_held_ones(start, tmp_path: Path) -> None:
    """worker-0 fails once and restarts while worker-1 keeps its GPU: the restarted worker-0 gets
    the device its first pod gave back, never worker-1's. worker-1 ends once worker-0's second
    attempt has run (a file it writes), so both live together throughout."""
    marker, done = tmp_path / "tried", tmp_path / "done"
    code = (
        "import os, pathlib, sys, time\n"
        f"{PRINT_CVD}\n"
        "rank = int(os.environ['RANK'])\n"
        f"m, done = pathlib.Path({str(marker)!r}), pathlib.Path({str(done)!r})\n"
        "if rank == 0 and not m.exists():\n"
        "    m.write_text('x'); sys.exit(1)\n"
        "if rank == 0:\n"
        "    done.write_text('x')\n"
        "while rank == 1 and not done.exists():\n"
        "    time.sleep(0.05)\n"
    )
    manifest = job(
        "PyTorchTrainingJob",
        "rs",
        {
            "runPolicy": {"backoffLimit": 3},
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "restartPolicy": "OnFailure", "template": template(py(code), **_limit(1))}
            ],
        },
    )
    run = start(manifest, "--gpus", "0,1")
    assert run.finish() == 0, run.output
    first = _cvds(run.run_dir / "rs-worker-0.pytorch.log")
    (held,) = _cvds(run.run_dir / "rs-worker-1.pytorch.log")
    assert len(first) == 2 and first[0] == first[1] and held not in first, (first, held)
    assert run.status()["tasks"][0]["restartCount"] == 1


@e2e
def test_single_gpu_restart_reuses_the_device(start, tmp_path: Path) -> None:
    marker = tmp_path / "tried"
    code = (
        "import pathlib, sys\n"
        f"{PRINT_CVD}\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.write_text('x'); sys.exit(1)\n"
    )
    manifest = job(
        "PyTorchTrainingJob",
        "one",
        {
            "runPolicy": {"backoffLimit": 2},
            "replicaSpecs": [
                {"type": "worker", "replicas": 1, "restartPolicy": "OnFailure", "template": template(py(code), **_limit(1))}
            ],
        },
    )
    run = start(manifest, "--gpus", "GPU-0f0f0f0f-aaaa-bbbb-cccc-dddddddddddd")
    assert run.finish() == 0, run.output
    assert _cvds(run.run_dir / "one-worker-0.pytorch.log") == ["GPU-0f0f0f0f-aaaa-bbbb-cccc-dddddddddddd"] * 2


def test_a_pod_waits_for_gpus_still_held_and_starts_when_they_are_given_back(tmp_path: Path) -> None:
    """A pod made while another still holds the only GPU (a replaced pod still stopping) stays
    Pending, and starts with that GPU once the other's processes have ended."""
    import asyncio

    from t9k_jobs.local.display import Display
    from t9k_jobs.local.runtime import LocalRunner

    gate = tmp_path / "gate"
    code = (
        "import os, pathlib, time\n"
        f"{PRINT_CVD}\n"
        f"while os.environ['RANK'] == '0' and not pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
    )
    the_job = parse_job(_two_workers("wait", py(code)))
    first, second = [o for o in render(the_job) if o["kind"] == "Pod"]
    for pod in (first, second):
        pod["spec"]["containers"] = pod["spec"]["containers"][:1]

    async def scenario() -> tuple[list[str | None], list[str | None]]:
        runner = LocalRunner(the_job, None, tmp_path, Display(quiet=True), False, GpuInventory.declared("0"))
        runner._start_pod(first)
        runner._start_pod(second)
        b = runner.pods["wait-worker-1"]
        assert b.task is None and b.observe().phase == "Pending" and b.uid in runner.gpu_waiting
        log_a = tmp_path / "wait-worker-0.pytorch.log"
        await await_until(lambda: log_a.exists() and _cvds(log_a), "worker-0 to print its GPU", 60)
        assert b.task is None, "worker-1 must not start while worker-0 holds the GPU"
        gate.write_text("go")
        await await_until(lambda: b.task is not None and b.task.done(), "worker-1 to run", 60)
        assert not runner.gpu_waiting and not runner.gpus.held
        runner.job_log.close()
        runner.events_log.close()
        return _cvds(log_a), _cvds(tmp_path / "wait-worker-1.pytorch.log")

    assert asyncio.run(scenario()) == (["0"], ["0"])


# --------------------------------------------------------------------------- launchers' ranks

#: A rank that records which node it is on and what it was given, in a file of its own beside the
#: script (``ranks/<node>-<local rank>``; the launcher's log interleaves the output of two nodes):
#: ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER``, ``-`` for unset. DeepSpeed's launch.py sets
#: ``CROSS_RANK`` (the node), torchrun ``GROUP_RANK``; both set ``LOCAL_RANK``. No torch: what
#: counts is the environment each rank starts with.
RECORD_RANK = (
    "import os, pathlib\n"
    "e = os.environ\n"
    "node = e.get('CROSS_RANK', e.get('GROUP_RANK'))\n"
    "out = pathlib.Path(__file__).with_name('ranks')\n"
    "out.mkdir(exist_ok=True)\n"
    "(out / f\"{node}-{e['LOCAL_RANK']}\").write_text("
    "e.get('CUDA_VISIBLE_DEVICES', '-') + ' ' + e.get('CUDA_DEVICE_ORDER', '-'))\n"
)


def _rank_script(tmp_path: Path) -> Path:
    script = tmp_path / "rank.py"
    script.write_text(RECORD_RANK)
    return script


def _ranks(tmp_path: Path) -> dict[str, str]:
    """What each rank recorded: ``{"<node>-<local rank>": "<CUDA_VISIBLE_DEVICES> <CUDA_DEVICE_ORDER>"}``."""
    return {f.name: f.read_text() for f in sorted((tmp_path / "ranks").glob("*"))}


@e2e
def test_deepspeed_ranks_see_the_devices_of_their_own_worker(start, tmp_path: Path) -> None:
    """2 workers x 2 GPUs of 0,1,2,3, 2 slots each: deepspeed's launch.py gives each node's ranks
    that node's slots (0,1), which in a pod are its own devices; locally they are translated into
    the worker's physical devices, so worker-1's ranks see 2,3, never worker-0's 0,1."""
    script = _rank_script(tmp_path)
    worker = {"name": "worker", "image": "local", "env": [{"name": "DS_ACCELERATOR", "value": "cpu"}]}
    worker.update(_limit(2))
    manifest = job(
        "DeepSpeedJob",
        "dsgpu",
        {
            "config": {"slotsPerWorker": 2, "run": {"python": [str(script)]}},
            "worker": {"replicas": 2, "template": {"spec": {"containers": [worker]}}},
        },
    )
    run = start(manifest, "--gpus", "0,1,2,3", "--quiet")
    assert run.finish(300) == 0, run.output
    assert _ranks(tmp_path) == {
        "0-0": "0,1 PCI_BUS_ID",
        "0-1": "0,1 PCI_BUS_ID",
        "1-0": "2,3 PCI_BUS_ID",
        "1-1": "2,3 PCI_BUS_ID",
    }, run.output


@e2e
def test_deepspeed_ranks_of_a_worker_without_gpus_see_none(start, tmp_path: Path) -> None:
    """A worker that asks for no GPU: its pod on a cluster has no device, whatever slots deepspeed
    lists; locally its ranks get an empty CUDA_VISIBLE_DEVICES, not the machine's first GPUs."""
    script = _rank_script(tmp_path)
    worker = {"name": "worker", "image": "local", "env": [{"name": "DS_ACCELERATOR", "value": "cpu"}]}
    manifest = job(
        "DeepSpeedJob",
        "dscpu",
        {
            "config": {"slotsPerWorker": 1, "localRank": False, "run": {"python": [str(script)]}},
            "worker": {"replicas": 1, "template": {"spec": {"containers": [worker]}}},
        },
    )
    run = start(manifest, "--gpus", "0,1", "--quiet")
    assert run.finish(300) == 0, run.output
    assert _ranks(tmp_path) == {"0-0": " -"}, run.output


@e2e
def test_colossalai_ranks_see_the_devices_of_their_own_worker(start, tmp_path: Path) -> None:
    """A launcher with 1 GPU and 2 workers x 2 GPUs of 0..4 (the launcher, first, gets 0), 2
    processes each: the ranks run in ssh sessions of their worker's sshd, which on a cluster see
    the worker container's devices. Locally each worker's sshd gives its sessions the worker's
    devices and the launcher does not export its own: worker-0's ranks see 1,2 and worker-1's 3,4,
    never the launcher's 0."""
    script = _rank_script(tmp_path)
    manifest = job(
        "ColossalAIJob",
        "caigpu",
        {
            "launcher": {"env": [{"name": "OMP_NUM_THREADS", "value": "1"}], **_limit(1)},
            "worker": {
                "replicas": 2,
                "procPerWorker": 2,
                "command": [str(script)],
                "template": {"spec": {"containers": [{"name": "worker", "image": "local", **_limit(2)}]}},
            },
        },
    )
    run = start(manifest, "--gpus", "0,1,2,3,4", "--quiet")
    assert run.finish(300) == 0, run.output
    assert _ranks(tmp_path) == {
        "0-0": "1,2 PCI_BUS_ID",
        "0-1": "1,2 PCI_BUS_ID",
        "1-0": "3,4 PCI_BUS_ID",
        "1-1": "3,4 PCI_BUS_ID",
    }, run.output


# --------------------------------------------------------------------------- launchers: the pieces


def test_translate_reads_slots_against_the_workers_devices_as_cuda_reads_a_containers() -> None:
    from t9k_jobs.frameworks.rank_gpus import translate

    assert translate(["2", "3"], "0,1") == "2,3"
    assert translate(["2", "3"], "1") == "3"
    assert translate(["2", "3"], "0,1,2,3") == "2,3", "an index past its devices ends the list"
    assert translate(["2"], "1,0") == "", "the first entry names none of its devices"
    assert translate([], "0") == "", "a worker given no GPU sees none"
    uuid = "GPU-8c6f2a1e-3b7d-4c8e-9f0a-1b2c3d4e5f60"
    assert translate([uuid, "GPU-aa"], "1,0") == f"GPU-aa,{uuid}"
    assert translate([uuid], "GPU-8c6f") == uuid and translate([uuid], "GPU-ff") == ""
    assert translate(["2", "3"], "0,0,1") == "2,3"


def test_rank_command_is_what_launch_py_would_have_started() -> None:
    from t9k_jobs.frameworks.rank_gpus import rank_command

    py_rank = rank_command(["--local_rank=1", "python", "t.py", "-x"], "/py")
    assert py_rank == ["/py", "-u", "t.py", "--local_rank=1", "-x"]
    assert rank_command(["module", "pkg.train", "-x"], "/py") == ["/py", "-u", "-m", "pkg.train", "-x"]
    exec_rank = rank_command(["--local_rank=0", "exec", "bash", "run.sh"], "/py")
    assert exec_rank == ["bash", "--local_rank=0", "run.sh"]
    with pytest.raises(ValueError, match="expected"):
        rank_command(["t.py"], "/py")


@pytest.mark.parametrize("mode", ["python", "module", "exec"])
def test_rank_gpus_script_sets_the_devices_then_becomes_the_rank(tmp_path: Path, mode: str) -> None:
    """As launch.py runs it: the rank it becomes (same process) sees the worker's devices and the
    arguments deepspeed would have given it; without T9K_JOBS_GPUS nothing is translated."""
    import os
    import subprocess

    from t9k_jobs.frameworks.deepspeed import RANK_GPUS_SCRIPT

    code = "import os, sys; print(os.getpid(), os.environ['CUDA_VISIBLE_DEVICES'], sys.argv[1:])"
    (tmp_path / "rankmod.py").write_text(code)
    prog = tmp_path / "prog"
    prog.write_text(f"#!{sys.executable}\n{code}\n")
    prog.chmod(0o755)
    target = {"python": str(tmp_path / "rankmod.py"), "module": "rankmod", "exec": str(prog)}[mode]

    def rank(env: dict[str, str]) -> tuple[bool, str, str]:
        proc = subprocess.Popen(
            [sys.executable, "-u", RANK_GPUS_SCRIPT, "--local_rank=1", mode, target, "-x"],
            env={**os.environ, **env}, cwd=tmp_path, stdout=subprocess.PIPE, text=True,
        )
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        pid, visible, argv = out.split(" ", 2)
        return int(pid) == proc.pid, visible, argv.strip()

    same_pid, visible, argv = rank({"T9K_JOBS_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert (same_pid, visible, argv) == (True, "2,3", "['--local_rank=1', '-x']")
    assert rank({"T9K_JOBS_GPUS": "", "CUDA_VISIBLE_DEVICES": "0"})[1] == ""
    env = {k: v for k, v in os.environ.items() if k != "T9K_JOBS_GPUS"}
    proc = subprocess.run(
        [sys.executable, RANK_GPUS_SCRIPT, "python", str(tmp_path / "rankmod.py")],
        env={**env, "CUDA_VISIBLE_DEVICES": "0,1"}, capture_output=True, text=True, timeout=60,
    )
    assert proc.stdout.split(" ")[1] == "0,1", proc


def _local_pods(manifest: dict[str, Any], run_dir: Path) -> dict[str, dict[str, Any]]:
    """The pods a local run's first reconcile of ``manifest`` starts, by name."""
    from t9k_jobs.engine import Observed, Runtime, reconcile
    from t9k_jobs.local.launch import LocalLauncher
    from t9k_jobs.local.addressing import LocalAddressing

    plan = reconcile(parse_job(manifest), Observed(), 0.0, Runtime(LocalAddressing(run_dir), LocalLauncher()))
    return {o["metadata"]["name"]: o for o in plan.create if o["kind"] == "Pod"}


@pytest.mark.parametrize(
    "run, tail",
    [
        ({"python": ["t.py", "-x"]}, ["python", "t.py", "-x"]),
        ({"module": ["pkg.train", "-x"]}, ["module", "pkg.train", "-x"]),
        ({"exec": ["bash", "run.sh"]}, ["exec", "bash", "run.sh"]),
    ],
)
def test_local_deepspeed_runs_its_ranks_through_rank_gpus(
    tmp_path: Path, run: dict[str, Any], tail: list[str]
) -> None:
    from t9k_jobs.frameworks.deepspeed import RANK_GPUS_SCRIPT

    manifest = job(
        "DeepSpeedJob",
        "ds",
        {"config": {"run": run}, "worker": {"replicas": 2, "template": template(["x"], **_limit(1))}},
    )
    for pod in _local_pods(manifest, tmp_path).values():
        command = pod["spec"]["containers"][0]["command"]
        assert command[0] == "deepspeed" and command[-len(tail) - 1 :] == [RANK_GPUS_SCRIPT, *tail], command
        assert "--module" not in command and "--no_python" not in command
    # On a cluster nothing changes: deepspeed runs the job's script itself.
    cluster = next(o for o in render(parse_job(manifest)) if o["kind"] == "Pod")
    assert RANK_GPUS_SCRIPT not in " ".join(cluster["spec"]["containers"][0]["command"])


def test_local_colossalai_workers_give_their_sessions_their_devices(tmp_path: Path) -> None:
    manifest = job(
        "ColossalAIJob",
        "cai",
        {
            "worker": {
                "replicas": 2,
                "command": ["t.py"],
                "template": {"spec": {"containers": [{"name": "worker", "image": "i"}]}},
            }
        },
    )
    pods = _local_pods(manifest, tmp_path)
    worker = pods["cai-worker-1"]["spec"]["containers"][0]["command"]
    session_env = "CUDA_VISIBLE_DEVICES=$(T9K_JOBS_GPUS) CUDA_DEVICE_ORDER=PCI_BUS_ID T9K_JOBS_GPUS=$(T9K_JOBS_GPUS)"
    assert worker[-2:] == ["-o", f"SetEnv={session_env}"], worker
    launcher = pods["cai-launcher"]["spec"]["containers"][0]["command"]
    assert launcher[2].startswith("unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER T9K_JOBS_GPUS && "), launcher


def test_command_expands_a_containers_own_env_even_when_the_base_env_holds_the_same(tmp_path: Path) -> None:
    """``$(T9K_JOBS_GPUS)`` in a local worker's command is the container's entry, also when
    t9k-jobs itself runs with the same value (in a container of another local run)."""
    from t9k_jobs.local.processes import LocalPod

    manifest = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "command": ["echo", "$(T9K_JOBS_GPUS)", "$(HOME)"],
                                 "env": [{"name": "T9K_JOBS_GPUS", "value": "2,3"}]}]},
    }
    base = {"T9K_JOBS_GPUS": "2,3", "HOME": "/h"}
    pod = LocalPod(manifest, base, tmp_path, tmp_path, lambda *a: None, lambda: None)
    c = manifest["spec"]["containers"][0]
    assert pod._argv(c, pod._env(c)) == ["echo", "2,3", "$(HOME)"]
