"""Whether this machine can run a job locally, and what it must have first.

:func:`cannot_run_reason` is a predicate: it says why a job cannot run here (one line, with what to
do) and makes nothing; :func:`prepare_host` makes what the replicas need before they start. The
runtime (:func:`t9k_jobs.local.runtime.run_job`), ``run -d``'s parent and an edit of a running job
ask it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from ..api import Job
from ..engine import Observed, Runtime, reconcile
from ..frameworks import LocalRequirement, framework_for
from .addressing import LocalAddressing
from .gpus import GpuInventory, _template_path, gpu_shortage
from .launch import LocalLauncher
from .podman import ENGINE_SANDBOX, job_images, missing_image_line, missing_images
from .processes import base_environment
from .sandbox import Sandbox, SandboxError, detect, mounts_refused
from .volumes import (
    mapped_name,
    mounts_volumes,
    size_limit_notes,
    tensorboard_folders,
    unused_mappings,
    volume_problems,
    volume_type,
)

#: The most replicas one local run starts (each a process group here); more is a cluster's job,
#: and a typo (``replicas: 10000``) must not fork a workstation to its knees.
MAX_LOCAL_REPLICAS = 256


def own_objects(job: Job) -> frozenset[tuple[str, str]]:
    """The ConfigMaps and Secrets a local run of ``job`` makes itself (the hostfile, the ssh key
    pair), as ``(kind, name)``: a volume naming one is the job's own, not a ``--volume``."""
    here = Runtime(LocalAddressing(), LocalLauncher(), unserved=frozenset({"TensorBoard"}))
    plan = reconcile(job, Observed(), 0.0, here)
    return frozenset((o["kind"], o["metadata"]["name"]) for o in plan.create if o["kind"] in ("ConfigMap", "Secret"))


def start_notes(job: Job, volumes: dict[str, Path]) -> list[str]:
    """What a run of ``job`` with ``volumes`` (``--volume``) says as it starts, one line each: a
    ``--volume`` no volume uses, a ``sizeLimit`` it does not enforce, a ``workingDir`` missing from
    its claim's folder (:func:`working_dir_notes`). Never raises."""
    return unused_mappings(job, volumes, own_objects(job)) + size_limit_notes(job) + working_dir_notes(job, volumes)


def working_dir_notes(job: Job, volumes: dict[str, Path]) -> list[str]:
    """A container whose ``workingDir`` is under a claim's mount path, where the claim's folder
    (``--volume``) holds no such folder: the run would make it, empty, as a container runtime does,
    and the program expected there would not be found, far from the cause (T9k's tutorials mount
    the claim at ``/t9k/mnt`` and work in ``/t9k/mnt/tutorial-examples``: the folder given must be
    the one that holds ``tutorial-examples/``). One line each, naming the field, the folder it
    means here and what to give."""
    out = []
    for group in framework_for(job).groups(job):
        where, only = _template_path(job, group)
        spec = group.template.get("spec") or {}
        declared = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)}
        for key in ("initContainers", "containers"):
            for i, c in enumerate(spec.get(key) or []):
                wanted = c.get("workingDir") if isinstance(c, dict) else None
                if not isinstance(wanted, str) or not wanted.startswith("/"):
                    continue
                path = PurePosixPath(wanted)
                mounts = [m for m in c.get("volumeMounts") or [] if isinstance(m, dict) and not m.get("subPathExpr")]
                under = [m for m in mounts if path == PurePosixPath(str(m.get("mountPath"))) or PurePosixPath(str(m.get("mountPath"))) in path.parents]
                if not under:
                    continue
                mount = max(under, key=lambda m: len(PurePosixPath(str(m.get("mountPath"))).parts))
                volume = declared.get(mount.get("name")) or {}
                claim = mapped_name(volume) if volume_type(volume) == "persistentVolumeClaim" else None
                if claim is None or claim not in volumes:
                    continue
                rel = path.relative_to(PurePosixPath(str(mount.get("mountPath"))))
                here = volumes[claim] / str(mount.get("subPath") or "") / rel
                if not here.is_dir():
                    out.append(
                        f"{only or f'{where}.spec.{key}[{i}]'}.workingDir: {wanted} is {here} here, which does not "
                        f"exist (claim {claim!r} is --volume {claim}={volumes[claim]}); the run makes it empty, so what "
                        f"the command expects there is missing: give --volume {claim}= the folder that holds {rel}"
                    )
    return out


def volumes_reason(job: Job, volumes: dict[str, Path], sandbox: Sandbox | None = None) -> str | None:
    """Why the volumes of ``job`` cannot be set up here (one line), or ``None``: the first of
    :func:`t9k_jobs.local.volumes.volume_problems` (``volumes``: ``--volume``), the TensorBoard's
    folders, or a job whose containers mount volumes on a machine without mount namespaces
    (``sandbox``: default, this machine's, probed only for such a job). Raises
    :class:`~t9k_jobs.local.sandbox.SandboxError` when ``$T9K_JOBS_SANDBOX`` names a sandbox that
    cannot be used."""
    problems = volume_problems(job, volumes, own_objects(job))
    if problems:
        return f"{job.kind} {job.name}: {problems[0]}"
    if mounts_volumes(job):
        refused = mounts_refused(sandbox if sandbox is not None else detect())
        if refused is not None:
            return f"{job.kind} {job.name}: {refused}"
    _folders, tb_problems = tensorboard_folders(job, volumes)
    if tb_problems:
        return f"{job.kind} {job.name}: {tb_problems[0]}"
    return None


def cannot_run_reason(
    job: Job,
    gpus: GpuInventory | None = None,
    volumes: dict[str, Path] | None = None,
    sandbox: Sandbox | None = None,
    python: str | None = None,
    engine: str | None = None,
) -> str | None:
    """Why this machine cannot run ``job`` locally (one line, with what to do), or ``None``.

    ``gpus``: the devices the run may give out (default: this machine's, discovered only if the
    job asks for a GPU). A ``nvidia.com/gpu`` quantity that cannot be, or more GPUs over all the
    job's replicas than there are, is refused (:func:`t9k_jobs.local.gpus.gpu_shortage`).
    ``volumes``: ``--volume`` (claim -> folder); a volume that cannot be set up is refused
    (:func:`volumes_reason`; ``sandbox``: the machine's namespaces, probed when needed).
    ``python``: ``--python``, whose environment must hold a kind's launcher. Then what the kind
    needs here, as its plug-in says (:meth:`~t9k_jobs.frameworks.base.Framework.local_requirements`:
    DeepSpeedJob's ``deepspeed``; ColossalAIJob's sshd and ``colossalai``), checked by
    :func:`missing_requirement`. A job of more than :data:`MAX_LOCAL_REPLICAS` replicas is refused.
    ``engine``: ``--container-engine``: the replicas run in their images, which hold what the kind
    needs (no program is looked for here), every volume is mounted by the engine, and an image
    that is not in the engine's store is refused (:mod:`.podman`).
    """
    total = sum(g.replicas for g in framework_for(job).groups(job))
    if total > MAX_LOCAL_REPLICAS:
        return (
            f"{job.kind} {job.name} asks for {total} replicas; a local run starts at most {MAX_LOCAL_REPLICAS} "
            "(each is a process group on this machine): run it on a cluster"
        )
    shortage = gpu_shortage(job, gpus if gpus is not None else GpuInventory.discovered())
    if shortage is not None:
        return f"{job.kind} {job.name}: {shortage}"
    try:
        reason = volumes_reason(job, volumes or {}, ENGINE_SANDBOX if engine is not None else sandbox)
    except SandboxError as exc:
        return str(exc)
    if reason is not None:
        return reason
    if engine is not None:
        missing = missing_images(job_images(job), engine)
        return missing_image_line(missing, engine) if missing else None
    return missing_requirement(framework_for(job).local_requirements(job), python)


def missing_requirement(requirements: list[LocalRequirement], python: str | None = None) -> str | None:
    """The refusal of the first of ``requirements`` (a plug-in's
    :meth:`~t9k_jobs.frameworks.base.Framework.local_requirements`) this machine does not meet,
    or ``None``: a program looked up on the PATH the replicas get (:func:`base_environment` of
    ``python``, ``--python``), an sshd that must be executable, or a job that never runs locally."""
    path = base_environment(python).get("PATH")
    where = f"the environment of --python {python}" if python is not None else "the environment t9k-jobs runs in"
    for need in requirements:
        if need.what == "refused":
            return need.missing
        if need.what == "sshd" and not os.access(need.name, os.X_OK):
            return need.missing
        if need.what == "program" and shutil.which(need.name, path=path) is None:
            return need.missing.replace("{where}", where)
    return None


#: OpenSSH's privilege-separation directory (Debian's build): sshd started as root exits 255 at once
#: without it. Debian's ssh service makes it at boot; a machine that never ran that service lacks it.
SSHD_PRIVSEP_DIR = "/run/sshd"


def prepare_host(job: Job) -> None:
    """Make what this machine must have before the job's replicas start, as a kubelet prepares a
    pod's sandbox: for a job whose replicas run a real sshd (the plug-in's ``sshd``
    :class:`~t9k_jobs.frameworks.LocalRequirement`: a ColossalAIJob's workers) run as root, sshd's
    privilege-separation directory (:data:`SSHD_PRIVSEP_DIR`, mode 0755). Nothing else is made.

    Raises ``OSError`` when the directory cannot be made (a read-only ``/run``)."""
    if any(need.what == "sshd" for need in framework_for(job).local_requirements(job)):
        ensure_sshd_privsep_dir()


def ensure_sshd_privsep_dir() -> None:
    """Make :data:`SSHD_PRIVSEP_DIR` (mode 0755) when this process is root and it is missing; an sshd
    run as another user does not need it. Raises ``OSError`` when it cannot be made."""
    if os.geteuid() == 0:
        os.makedirs(SSHD_PRIVSEP_DIR, mode=0o755, exist_ok=True)


__all__ = [
    "MAX_LOCAL_REPLICAS",
    "SSHD_PRIVSEP_DIR",
    "cannot_run_reason",
    "ensure_sshd_privsep_dir",
    "missing_requirement",
    "own_objects",
    "prepare_host",
    "start_notes",
    "volumes_reason",
    "working_dir_notes",
]
