"""GPUs in a local run: which ones this machine has, and which replica holds which.

On a cluster the NVIDIA device plugin gives every container the devices of its
``resources.limits["nvidia.com/gpu"]``, never one device to two containers, and a container
sees only its own. A local run has no containers to hide devices in, so it does the same with
``CUDA_VISIBLE_DEVICES``: every replica pod takes devices of its own from an inventory when it
starts and gives them back when its processes have ended.

Ranks that a launcher starts outside the container's environment get their worker's devices
too: a DeepSpeed rank's slots (``CUDA_VISIBLE_DEVICES=0,1`` from deepspeed's launch.py, which in
a pod count the container's devices) are read against its worker's
(:mod:`t9k_jobs.frameworks.rank_gpus`), and a ColossalAI worker's sshd sets its devices in the
sessions the ranks run in (:mod:`t9k_jobs.frameworks.colossalai`); both read ``T9K_JOBS_GPUS``,
which every container gets.

The inventory is declared (``t9k-jobs run --gpus 0,1``, which lets tests run on machines
without GPUs) or discovered: NVML through ``nvidia-ml-py`` (``import pynvml``), else
``nvidia-smi``'s CSV, else none. Discovery never fails: no driver means no GPUs.

Sources: Kubernetes, "Schedule GPUs" and "Assign Extended Resources to a Container"
(kubernetes.io/docs/tasks/): GPUs are given by limits, requests of an extended resource must
equal its limits, quantities are whole numbers, containers do not share devices; the kubelet's
device manager lets init containers reuse the devices the pod's containers get. CUDA's
``CUDA_VISIBLE_DEVICES`` takes indices or ``GPU-<uuid>``/``MIG-<uuid>`` names and stops at the
first entry it cannot match; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA's indices those of
nvidia-smi and NVML.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..api import Job
from ..frameworks import ReplicaGroup, framework_for
from ..frameworks.rank_gpus import DEVICES_ENV

#: The extended resource the NVIDIA device plugin serves.
GPU_RESOURCE = "nvidia.com/gpu"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
ORDER_ENV = "CUDA_DEVICE_ORDER"
#: Seconds ``nvidia-smi`` gets to answer (a wedged driver can make it hang).
NVIDIA_SMI_TIMEOUT = 10.0
NVIDIA_SMI_QUERY = ("--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader")
#: The source of an inventory given with ``--gpus``.
DECLARED = "declared by --gpus"
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*$")


@dataclass(frozen=True)
class Gpu:
    """One device. ``id``: what ``CUDA_VISIBLE_DEVICES`` names it by, an index (``"0"``) or a
    UUID (``"GPU-8c6f..."``); ``uuid``, ``name`` and ``memory_mib`` (MiB) when known."""

    id: str
    uuid: str | None = None
    name: str | None = None
    memory_mib: int | None = None

    @property
    def by_index(self) -> bool:
        return self.id.isdigit()

    def matches(self, entry: str) -> bool:
        """Whether ``entry`` of a ``CUDA_VISIBLE_DEVICES`` list names this device (its index, or its
        UUID or a prefix of it, as CUDA accepts)."""
        if not entry:
            return False
        if entry == self.id:
            return True
        return self.uuid is not None and not entry.isdigit() and self.uuid.startswith(entry)


class GpuRequestError(ValueError):
    """A ``nvidia.com/gpu`` quantity a pod cannot have; the message is one line naming the field."""


def parse_gpus(text: str) -> tuple[Gpu, ...]:
    """The devices ``--gpus`` declares: ``"0,1,2,3"`` (indices), ``"GPU-<uuid>,..."`` (UUIDs; indices
    and UUIDs may be mixed) or ``"none"``. Raises ``ValueError`` (one line, saying what is accepted)
    for anything else: an empty entry, a word, a negative or repeated index."""
    value = text.strip()
    if value.lower() == "none":
        return ()
    accepted = "give GPU indices or UUIDs separated by commas (0,1,2,3 or GPU-<uuid>,...), or none"
    entries = [e.strip() for e in value.split(",")]
    gpus: list[Gpu] = []
    for entry in entries:
        if entry.isdigit():
            gpus.append(Gpu(str(int(entry))))
        elif _UUID.match(entry):
            gpus.append(Gpu(entry, uuid=entry))
        else:
            raise ValueError(
                f"{text!r} is not accepted ({entry!r} is neither an index nor a UUID): {accepted}"
            )
    ids = [g.id for g in gpus]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"{text!r} names {', '.join(repeated)} more than once: {accepted}")
    return tuple(gpus)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def from_nvml() -> tuple[Gpu, ...] | None:
    """The devices NVML lists (by index, with UUID, name and total memory in MiB), or ``None`` when
    NVML cannot be used: ``nvidia-ml-py`` not installed, or no NVIDIA library or driver. Never
    raises; a device NVML cannot read is left out."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, OSError: no NVML here
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            except Exception:  # noqa: BLE001 - a lost or unreadable device
                continue
            try:
                name: str | None = _text(pynvml.nvmlDeviceGetName(handle))
            except Exception:  # noqa: BLE001
                name = None
            try:
                memory: int | None = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // 2**20
            except Exception:  # noqa: BLE001
                memory = None
            gpus.append(Gpu(str(i), uuid=uuid, name=name, memory_mib=memory))
        return tuple(gpus)
    except Exception:  # noqa: BLE001 - the count itself failed
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def parse_nvidia_smi(output: str) -> tuple[Gpu, ...]:
    """Devices from ``nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader``:
    one ``0, GPU-<uuid>, NVIDIA H100 80GB HBM3, 81559 MiB`` a line (a name may hold commas; memory
    may be ``[N/A]``). Lines that are not of that shape are left out."""
    gpus = []
    for line in output.splitlines():
        parts = line.split(",", 2)
        if len(parts) < 3 or not parts[0].strip().isdigit():
            continue
        index, uuid = parts[0].strip(), parts[1].strip()
        name, sep, memory = parts[2].rpartition(",")
        if not sep:
            name, memory = parts[2], ""
        digits = memory.strip().removesuffix("MiB").strip()
        gpus.append(
            Gpu(
                str(int(index)),
                uuid=uuid or None,
                name=name.strip() or None,
                memory_mib=int(digits) if digits.isdigit() else None,
            )
        )
    return tuple(gpus)


def from_nvidia_smi() -> tuple[Gpu, ...] | None:
    """The devices ``nvidia-smi`` (found on PATH) lists, or ``None`` when it is not there, fails
    (no driver: it exits non-zero) or does not answer within :data:`NVIDIA_SMI_TIMEOUT` seconds.
    Never raises."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return parse_nvidia_smi(done.stdout)


def narrow(gpus: tuple[Gpu, ...], visible: str) -> tuple[Gpu, ...]:
    """The devices a ``CUDA_VISIBLE_DEVICES`` value leaves of ``gpus`` (physical indices or UUIDs),
    in its order; as CUDA does, the list ends at the first entry that names no device, and an
    empty value leaves none."""
    out: list[Gpu] = []
    for entry in (e.strip() for e in visible.split(",")):
        found = next((g for g in gpus if g.matches(entry)), None)
        if found is None:
            break
        if found not in out:
            out.append(found)
    return tuple(out)


def discover() -> tuple[tuple[Gpu, ...], str]:
    """This machine's devices and how they were found: ``(gpus, source)``, source ``"NVML"``,
    ``"nvidia-smi"`` or a phrase saying none was usable. NVML first, ``nvidia-smi`` when NVML
    cannot be used, else no GPUs; never raises. A ``CUDA_VISIBLE_DEVICES`` in this process's
    environment narrows the list (:func:`narrow`): the devices a user hid from t9k-jobs stay hidden."""
    gpus, source = from_nvml(), "NVML"
    if gpus is None:
        gpus, source = from_nvidia_smi(), "nvidia-smi"
    if gpus is None:
        return (), "no NVIDIA driver found: neither NVML nor nvidia-smi answered"
    visible = os.environ.get(VISIBLE_ENV)
    if visible is not None:
        gpus, source = narrow(gpus, visible), f"{source}, narrowed by {VISIBLE_ENV}={visible}"
    return gpus, source


class GpuInventory:
    """The devices a run may give out: declared (:meth:`declared`) or discovered (:meth:`discovered`,
    looked up the first time :attr:`gpus` is read, so a job that asks for no GPU never probes)."""

    def __init__(self, gpus: Iterable[Gpu] | None, source: str) -> None:
        self._gpus = tuple(gpus) if gpus is not None else None
        self._source = source

    @classmethod
    def declared(cls, text: str) -> GpuInventory:
        """From ``--gpus`` (:func:`parse_gpus`; raises its ``ValueError``)."""
        return cls(parse_gpus(text), DECLARED)

    @classmethod
    def discovered(cls) -> GpuInventory:
        """This machine's devices (:func:`discover`), found when first needed."""
        return cls(None, "")

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        if self._gpus is None:
            self._gpus, self._source = discover()
        return self._gpus

    @property
    def source(self) -> str:
        self.gpus  # noqa: B018 - resolves a discovered inventory
        return self._source

    def __len__(self) -> int:
        return len(self.gpus)

    def declared_gpus(self) -> tuple[Gpu, ...] | None:
        """The devices ``--gpus`` declared, or None for this machine's (discovered)."""
        return self._gpus if self._source == DECLARED else None


# --------------------------------------------------------------------------- what pods ask for


def gpu_limit(container: dict[str, Any], where: str) -> int:
    """The ``nvidia.com/gpu`` count of one container (0 when it sets none), by Kubernetes' rules:
    the limit gives it; a request needs the limit and must equal it; a whole number, not negative
    (``2`` or ``"2"``). ``where`` is the container's field path, for the message. Raises
    :class:`GpuRequestError` otherwise."""
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        return 0
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    key = f'resources.limits["{GPU_RESOURCE}"]'
    limit = _count(limits.get(GPU_RESOURCE), f"{where}.{key}") if isinstance(limits, dict) else None
    request = (
        _count(requests.get(GPU_RESOURCE), f'{where}.resources.requests["{GPU_RESOURCE}"]')
        if isinstance(requests, dict)
        else None
    )
    if request is not None and limit is None:
        raise GpuRequestError(
            f'{where}.resources.requests["{GPU_RESOURCE}"]: {request} without a limit; GPUs are given by '
            f"{key} (set it, equal to the request)"
        )
    if request is not None and request != limit:
        raise GpuRequestError(
            f'{where}.resources.requests["{GPU_RESOURCE}"]: {request} differs from {key} {limit}; '
            "for GPUs the request must equal the limit"
        )
    return limit or 0


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        number: int | None = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        number = None
    if number is None or number < 0:
        raise GpuRequestError(
            f"{where}: {value!r} is not accepted; a GPU count is a whole number, 0 or more (like 1 or \"2\")"
        )
    return number


@dataclass(frozen=True)
class PodGpus:
    """What one pod asks for: ``containers`` and ``init`` map container names to counts. The pod
    takes :attr:`total` devices: its containers run together, its init containers one at a time
    before them and reuse their devices (as the kubelet's device manager does)."""

    containers: dict[str, int]
    init: dict[str, int]

    @property
    def total(self) -> int:
        return max(sum(self.containers.values()), max(self.init.values(), default=0))


def pod_gpus(pod_spec: dict[str, Any], where: str = "spec", only: str | None = None) -> PodGpus:
    """The GPUs of a PodSpec's containers (:func:`gpu_limit`), ``where`` its field path.
    ``only``: the field path of a single container, used instead of ``where.containers[i]``
    (ColossalAIJob's ``spec.launcher``). Raises :class:`GpuRequestError`."""
    found: dict[str, dict[str, int]] = {"containers": {}, "initContainers": {}}
    for key, out in found.items():
        for i, c in enumerate(pod_spec.get(key) or []):
            out[str(c.get("name"))] = gpu_limit(c, only or f"{where}.{key}[{i}]")
    return PodGpus(found["containers"], found["initContainers"])


def _template_path(job: Job, group: ReplicaGroup) -> tuple[str, str | None]:
    """Where ``group``'s pod template is in the manifest: ``(path, only)``, ``only`` set where the
    template is made from a single container's fields (ColossalAIJob ``spec.launcher``)."""
    spec = job.spec
    for i, r in enumerate(getattr(spec, "replica_specs", None) or []):
        if r.type == group.type:
            return f"spec.replicaSpecs[{i}].template", None
    if group.type == "launcher" and getattr(spec, "launcher", None) is not None:
        return "spec.launcher", "spec.launcher"
    return f"spec.{group.type}.template", None


def job_gpus(job: Job) -> list[tuple[str, int]]:
    """Every replica of ``job`` that runs now with the GPUs its pod takes: ``[(replica, count)]``
    in spec order, replica as ``worker-1`` (the pod name without the job's). Raises
    :class:`GpuRequestError` for the first quantity that cannot be."""
    out = []
    for group in framework_for(job).groups(job):
        path, only = _template_path(job, group)
        count = pod_gpus(group.template.get("spec") or {}, f"{path}.spec", only).total
        for i in range(group.replicas):
            name = group.pod_name(job.name, i)
            out.append((name.removeprefix(job.name + "-"), count))
    return out


def gpu_shortage(job: Job, inventory: GpuInventory) -> str | None:
    """Why ``job`` cannot have its GPUs here (one line), or ``None``.

    A bad ``nvidia.com/gpu`` quantity gives :class:`GpuRequestError`'s line. Every replica of a
    job runs at once, so the job needs the sum of its replicas' GPUs: when the inventory has
    fewer, the line names each replica that would get none and the counts, e.g. ``worker-1 asks
    for 1 GPU; this machine has 1 (GPU 0 for worker-0)``. The inventory is read only when the
    job asks for a GPU.
    """
    try:
        wanted = job_gpus(job)
    except GpuRequestError as exc:
        return str(exc)
    need = sum(n for _, n in wanted)
    if need == 0:
        return None
    gpus = inventory.gpus
    if need <= len(gpus):
        return None
    free = [g.id for g in gpus]
    given: list[str] = []
    short: list[str] = []
    for replica, n in wanted:
        if n == 0:
            continue
        if n <= len(free):
            ids, free = free[:n], free[n:]
            given.append(f"GPU{'s' if n > 1 else ''} {','.join(ids)} for {replica}")
        else:
            short.append(f"{replica} asks for {n} GPU{'s' if n > 1 else ''}")
    has = str(len(gpus)) if gpus else "none"
    notes = "; ".join([inventory.source, *given])
    hint = "" if inventory.source == DECLARED else " (--gpus 0,1,... declares GPUs that were not found)"
    return (
        f"{'; '.join(short)}; this machine has {has} ({notes}): a local run gives every replica GPUs of its "
        f"own, and the job needs {need}; lower the nvidia.com/gpu limits or run it on a cluster{hint}"
    )


# --------------------------------------------------------------------------- giving them out


class GpuAllocator:
    """Gives pods devices of their own from an inventory and takes them back.

    Owners are keys (a pod's UID): a device is held by one owner at a time, never two. Devices
    go out lowest first in inventory order; a restarted replica is a new owner and may get others.
    """

    def __init__(self, inventory: GpuInventory) -> None:
        self.inventory = inventory
        self._held: dict[str, tuple[Gpu, ...]] = {}

    @property
    def held(self) -> dict[str, tuple[Gpu, ...]]:
        """Owner -> its devices, for every owner holding some."""
        return dict(self._held)

    def free(self) -> list[Gpu]:
        taken = {g.id for gpus in self._held.values() for g in gpus}
        return [g for g in self.inventory.gpus if g.id not in taken]

    def assign(self, owner: str, pod_spec: dict[str, Any]) -> dict[str, tuple[Gpu, ...]] | None:
        """Take the devices ``pod_spec`` (a PodSpec) asks for, under ``owner``, and return them per
        container name, init containers included (each of those gets the first of the pod's
        devices); every container of the pod is in the map, ``()`` for one that asks for none.
        ``None`` when too few are free now (nothing is taken). Raises :class:`GpuRequestError` for
        a bad quantity (a job's are checked before it starts) and ``ValueError`` when ``owner``
        holds devices already."""
        if owner in self._held:
            raise ValueError(f"{owner} holds GPUs already")
        asks = pod_gpus(pod_spec)
        devices: tuple[Gpu, ...] = ()
        if asks.total:
            free = self.free()
            if len(free) < asks.total:
                return None
            devices = tuple(free[: asks.total])
            self._held[owner] = devices
        out: dict[str, tuple[Gpu, ...]] = {name: devices[:n] for name, n in asks.init.items()}
        at = 0
        for name, n in asks.containers.items():
            out[name] = devices[at : at + n]
            at += n
        return out

    def release(self, owner: str) -> tuple[Gpu, ...]:
        """Give back what ``owner`` holds; returns it (``()`` when nothing)."""
        return self._held.pop(owner, ())


def visible_devices(devices: tuple[Gpu, ...], own: str | None = None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` of a container given ``devices``: their ids, comma separated;
    ``""`` (no GPU) for none. ``own``: the value the container sets itself, read as it would be in
    a container on a cluster, against its own devices (``"1"`` is the second of them; a UUID one
    of them); as CUDA does, the list ends at the first entry that names none of them."""
    if own is None:
        return ",".join(g.id for g in devices)
    chosen: list[Gpu] = []
    for entry in (e.strip() for e in own.split(",")):
        if entry.isdigit():
            found = devices[int(entry)] if int(entry) < len(devices) else None
        else:
            found = next((g for g in devices if g.matches(entry)), None)
        if found is None:
            break
        if found not in chosen:
            chosen.append(found)
    return ",".join(g.id for g in chosen)


def set_visible_devices(pod: dict[str, Any], assignment: dict[str, tuple[Gpu, ...]]) -> None:
    """Give every container of ``pod`` (a Pod manifest, changed in place) its devices: an env entry
    ``CUDA_VISIBLE_DEVICES`` after its own (so it wins), ``""`` for a container with none, and
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` when the ids are indices (CUDA's indices are then
    nvidia-smi's). A container's own literal ``CUDA_VISIBLE_DEVICES`` is kept in meaning, read
    against its devices (:func:`visible_devices`).

    Every container also gets ``T9K_JOBS_GPUS`` (:data:`~t9k_jobs.frameworks.rank_gpus.DEVICES_ENV`):
    its devices' ids whatever it sets itself, what a container on a cluster has as its devices.
    Launchers whose ranks do not inherit the container's ``CUDA_VISIBLE_DEVICES`` read it: a
    DeepSpeed rank's slots are translated against it (:mod:`t9k_jobs.frameworks.rank_gpus`), and a
    ColossalAI worker's sshd gives it to the sessions its launcher's ranks run in
    (:mod:`t9k_jobs.frameworks.colossalai`)."""
    spec = pod["spec"]
    for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
        devices = assignment.get(str(c.get("name")), ())
        env = copy.deepcopy(list(c.get("env") or []))
        own = next(
            (
                str(e["value"])
                for e in reversed(env)
                if e.get("name") == VISIBLE_ENV and "value" in e and "$(" not in str(e["value"])
            ),
            None,
        )
        value = visible_devices(devices, own)
        env.append({"name": DEVICES_ENV, "value": ",".join(g.id for g in devices)})
        env.append({"name": VISIBLE_ENV, "value": value})
        if value and any(g.by_index for g in devices):
            env.append({"name": ORDER_ENV, "value": "PCI_BUS_ID"})
        c["env"] = env


__all__ = [
    "GPU_RESOURCE",
    "Gpu",
    "GpuAllocator",
    "GpuInventory",
    "GpuRequestError",
    "PodGpus",
    "discover",
    "from_nvidia_smi",
    "from_nvml",
    "gpu_limit",
    "gpu_shortage",
    "job_gpus",
    "narrow",
    "parse_gpus",
    "parse_nvidia_smi",
    "pod_gpus",
    "set_visible_devices",
    "visible_devices",
]
