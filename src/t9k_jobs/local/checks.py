"""Whether this machine can run a job locally, and what it must have first.

:func:`cannot_run_reason` is a predicate: it says why a job cannot run here (one line, with what to
do) and makes nothing; :func:`prepare_host` makes what the replicas need before they start. The
runtime (:func:`t9k_jobs.local.runtime.run_job`), ``run -d``'s parent and an edit of a running job
ask it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..api import Job
from ..engine import Observed, Runtime, reconcile
from ..frameworks import LocalRequirement, framework_for
from .addressing import LocalAddressing
from .gpus import GpuInventory, gpu_shortage
from .launch import LocalLauncher
from .processes import base_environment
from .sandbox import Sandbox, SandboxError, detect, mounts_refused
from .volumes import mounts_volumes, tensorboard_folders, volume_problems

#: The most replicas one local run starts (each a process group here); more is a cluster's job,
#: and a typo (``replicas: 10000``) must not fork a workstation to its knees.
MAX_LOCAL_REPLICAS = 256


def own_objects(job: Job) -> frozenset[tuple[str, str]]:
    """The ConfigMaps and Secrets a local run of ``job`` makes itself (the hostfile, the ssh key
    pair), as ``(kind, name)``: a volume naming one is the job's own, not a ``--volume``."""
    here = Runtime(LocalAddressing(), LocalLauncher(), unserved=frozenset({"TensorBoard"}))
    plan = reconcile(job, Observed(), 0.0, here)
    return frozenset((o["kind"], o["metadata"]["name"]) for o in plan.create if o["kind"] in ("ConfigMap", "Secret"))


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
        reason = volumes_reason(job, volumes or {}, sandbox)
    except SandboxError as exc:
        return str(exc)
    if reason is not None:
        return reason
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
    "volumes_reason",
]
