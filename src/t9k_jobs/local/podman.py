"""Replicas in their own images (issue 45): the pod runner of ``t9k-jobs run --container-engine podman``.

:class:`PodmanRunner` plugs into the pod-runner seam (:mod:`.pod_runner`) beside the process runner:
the engine, the run directory, restarts, back-off, GPUs, logs and events are the local runtime's as
for processes; what changes is how one container starts. Each container of a replica pod is one
``podman run`` in the foreground (:class:`PodmanPod`), so its output, exit code and signals are the
container's own (podman proxies SIGTERM and SIGINT to it; ``podman run`` exits with the container's
code, 125-127 when podman itself could not start it):

- the image the manifest names, from podman's local store only (``--pull never``: a missing image
  is refused before anything starts, :func:`missing_images`);
- Kubernetes' command and args: ``command`` replaces the image's ENTRYPOINT and ``args`` its CMD
  (``--entrypoint`` is ``command[0]``, the rest of ``command`` and ``args`` follow the image);
  neither: the image's own; ``workingDir``: ``--workdir``, else the image's;
- the container's own env entries (the job's env as the engine made it, the GPUs the runtime gave
  it), not this machine's: ``--env`` each, plus the run's marker and ``PYTHONUNBUFFERED=1``;
- the host's network (``--network host``): every replica keeps its own loopback address, as
  processes do, and its host name resolves to it (``--hostname``, ``--add-host``), so the job's
  addresses (MASTER_ADDR, Services) are the same as for processes;
- every volume at its mount path (``--volume SOURCE:PATH[:ro]``), prepared by the runtime as for a
  process (:mod:`.volumes`: ``--volume`` claims, emptyDirs, the job's ConfigMaps and Secrets,
  hostPath), and the job's own objects (``<run dir>/children``: hostfile, ssh keys) and the rank
  script of a local DeepSpeed launch (:mod:`t9k_jobs.frameworks.rank_gpus`) read-only at the
  paths the local launcher gives them by;
- GPUs: ``--device nvidia.com/gpu=ID`` where a CDI spec for NVIDIA devices is installed
  (``/etc/cdi``, ``/var/run/cdi``), else the device nodes (``/dev/nvidiaN``, ``/dev/nvidiactl``,
  ``/dev/nvidia-uvm``); ``CUDA_VISIBLE_DEVICES`` and ``T9K_JOBS_GPUS`` then count the container's
  devices from 0 (a UUID stays a UUID);
- every container carries the label ``t9k-jobs.run=<run dir>``: whatever outlives its ``podman
  run`` (SIGKILL to the client leaves the container to conmon) is removed with ``podman rm -f``
  when the container, the pod or the run ends (:meth:`PodmanRunner.kill_all`), so nothing is left
  running, as for processes.

Facts of podman 4.3 (Debian 12) it relies on: ``--replace`` (a name left by an earlier attempt),
``--pull never``, ``--sig-proxy`` (default on without a terminal), ``podman inspect --format
{{.State.Pid}}`` (the container's first process on this machine: what ``--inject`` and the stack
dumps signal and read), ``podman image exists`` (exit 1 when absent).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..api import Job
from ..frameworks import framework_for
from ..frameworks import rank_gpus
from ..frameworks.rank_gpus import DEVICES_ENV
from .gpus import VISIBLE_ENV
from .pod_runner import ProcessRunner
from .processes import CONTAINER_ENV, RUN_ENV, ContainerSetupError, LocalContainer, LocalPod, descendants, expand
from .rundir import RunDir
from .volumes import Mount

#: The container engines ``run --container-engine`` accepts.
ENGINES = ("podman",)
#: The label every container of a run carries: the run directory.
RUN_LABEL = "t9k-jobs.run"
#: Seconds one podman command that changes nothing may take (inspect, rm, image exists).
PODMAN_TIMEOUT = 60.0
#: The rank script a local DeepSpeed launch names by its path here (mounted there, read-only).
RANK_GPUS_SCRIPT = str(Path(rank_gpus.__file__).resolve())
#: Where a CDI spec of NVIDIA's devices is looked for.
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


def engine_problem(engine: str) -> str | None:
    """Why ``--container-engine ENGINE`` cannot be used here (one line), or None."""
    if engine not in ENGINES:
        return f"--container-engine: {engine!r} is not one of {', '.join(ENGINES)}"
    if shutil.which(engine) is None:
        return f"--container-engine: {engine} is not installed here (Debian: apt-get install {engine})"
    return None


def job_images(job: Job) -> list[str]:
    """Every image the job's containers name (init containers too), in order, each once."""
    out: list[str] = []
    for _path, template in framework_for(job).templates(job):
        pod = template.get("spec") or {}
        for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            image = str(c.get("image") or "")
            if image and image not in out:
                out.append(image)
    return out


def missing_images(images: Iterable[str], engine: str = "podman") -> list[str]:
    """The images of ``images`` that are not in the engine's local store (``podman image exists``)."""
    missing = []
    for image in images:
        done = subprocess.run([engine, "image", "exists", image], capture_output=True, timeout=PODMAN_TIMEOUT, check=False)
        if done.returncode != 0:
            missing.append(image)
    return missing


def missing_image_line(missing: list[str], engine: str = "podman") -> str:
    """The one line that refuses a run whose images are not here, and how to get them."""
    names = ", ".join(missing)
    return (
        f"image {names} is not in {engine}'s local store (--container-engine {engine} never pulls): "
        f"{engine} pull {missing[0]}, or build it (buildah bud -t {missing[0]} ...; {engine} load -i ARCHIVE)"
    )


def container_name(run_dir: Path, pod: str, container: str) -> str:
    """The engine's name of a container: unique per run (a hash of its directory), pod and container."""
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:10]
    return f"t9k-{digest}-{pod}-{container}"[:250]


def cdi_gpus(dirs: Iterable[Path] = CDI_DIRS) -> bool:
    """Whether a CDI spec names NVIDIA's GPUs (``kind: nvidia.com/gpu``): podman then injects the
    devices and the driver's libraries by name."""
    for folder in dirs:
        try:
            files = sorted(folder.iterdir())
        except OSError:
            continue
        for f in files:
            try:
                text = f.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "nvidia.com/gpu" in text:
                return True
    return False


def gpu_arguments(env: dict[str, str], cdi: bool) -> tuple[list[str], dict[str, str]]:
    """The ``--device`` arguments for the container's GPUs (its ``T9K_JOBS_GPUS``, given by the
    runtime) and its env with ``CUDA_VISIBLE_DEVICES``/``T9K_JOBS_GPUS`` counted from 0 inside the
    container (UUIDs kept)."""
    ids = [g for g in (env.get(DEVICES_ENV) or "").split(",") if g]
    if not ids:
        return [], env
    inside = {g: (g if not g.isdigit() else str(i)) for i, g in enumerate(ids)}
    args: list[str] = []
    if cdi:
        for g in ids:
            args += ["--device", f"nvidia.com/gpu={g}"]
    else:
        for g in ids:
            if g.isdigit():
                args += ["--device", f"/dev/nvidia{g}"]
        for node in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"):
            if os.path.exists(node):
                args += ["--device", node]
    out = dict(env)
    out[DEVICES_ENV] = ",".join(inside[g] for g in ids)
    if out.get(VISIBLE_ENV):
        out[VISIBLE_ENV] = ",".join(inside.get(g, g) for g in out[VISIBLE_ENV].split(","))
    return args, out


#: The RLIMIT_NPROC podman 4.3 gives conmon (measured on Debian 12: a container asking more fails).
CONMON_NPROC = 32768
#: CAP_SYS_RESOURCE's bit in ``CapEff`` (linux/capability.h).
CAP_SYS_RESOURCE = 24


def ulimit_arguments(status: str | None = None) -> list[str]:
    """``--ulimit`` arguments where this process may not raise its hard limits (no
    CAP_SYS_RESOURCE, as root in some VMs and containers): podman's defaults (nofile 1048576, nproc
    above conmon's) would then fail every container with "error setting rlimit ... operation not
    permitted" (exit 126), so the container gets this process's own limits (nproc at most
    :data:`CONMON_NPROC`). ``status``: ``/proc/self/status``'s text (read when None)."""
    import resource

    if status is None:
        try:
            status = Path("/proc/self/status").read_text(encoding="utf-8")
        except OSError:
            return []
    caps = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), None)
    if caps is None or int(caps, 16) >> CAP_SYS_RESOURCE & 1:
        return []
    out = []
    for name, which, most in (("nofile", resource.RLIMIT_NOFILE, None), ("nproc", resource.RLIMIT_NPROC, CONMON_NPROC)):
        soft, hard = resource.getrlimit(which)
        if most is not None:
            hard = most if hard == resource.RLIM_INFINITY else min(hard, most)
            soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        if hard != resource.RLIM_INFINITY:
            out += ["--ulimit", f"{name}={soft}:{hard}"]
    return out


def run_argv(
    engine: str,
    name: str,
    labels: dict[str, str],
    spec: dict[str, Any],
    env: dict[str, str],
    hostname: str,
    address: str,
    mounts: Iterable[Any],
    devices: list[str],
    limits: Iterable[str] = (),
) -> list[str]:
    """``podman run`` for one container (module docstring): ``spec`` the container's manifest, ``env``
    what it is given, ``mounts`` its :class:`~.volumes.Mount`\\ s, ``devices`` ``--device``
    arguments, ``limits`` ``--ulimit`` ones (:func:`ulimit_arguments`)."""
    # $(VAR) names one of the container's own env entries (Kubernetes expands it in command and args).
    command = [expand(str(x), env) for x in spec.get("command") or []]
    args = [expand(str(x), env) for x in spec.get("args") or []]
    argv = [
        engine, "run", "--rm", "--replace", "--name", name, "--pull", "never", "--network", "host",
        "--hostname", hostname, "--add-host", f"{hostname}:{address}", "--sig-proxy=true", "--stop-timeout", "0",
        "--log-driver", "passthrough", "--interactive=false", "--tty=false",
    ]  # fmt: skip
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    for m in mounts:
        argv += ["--volume", f"{m.source}:{m.path}" + (":ro" if m.read_only else "")]
    if spec.get("workingDir"):
        argv += ["--workdir", str(spec["workingDir"])]
    argv += [*devices, *limits]
    if command:
        argv += ["--entrypoint", json.dumps(command[:1])]
    argv.append(str(spec.get("image") or ""))
    return argv + command[1:] + args


class PodmanPod(LocalPod):
    """A replica pod whose containers run in their images with podman (module docstring); the rest
    (phases, logs, waits, restarts) is :class:`~.processes.LocalPod`'s."""

    engine: str = "podman"
    cdi: bool = False
    limits: tuple[str, ...] = ()

    def container_name(self, c: LocalContainer) -> str:
        return container_name(self.log_dir, self.name, c.name)

    def _prepare_volumes(self) -> None:
        """A container engine mounts every volume kind: they are prepared whatever the sandbox."""
        sandbox = self.sandbox
        try:
            self.sandbox = ENGINE_SANDBOX
            super()._prepare_volumes()
        finally:
            self.sandbox = sandbox

    def _launch(self, c: LocalContainer) -> tuple[list[str], str | Path, dict[str, str]]:
        mounts = self._mounts(c.spec)
        # The job's own objects (hostfile, ssh keys: <run dir>/children) at the path the local
        # launcher names them by, read-only, as a pod mounts its ConfigMaps and Secrets.
        children = RunDir(self.log_dir).path / RunDir.CHILDREN
        if children.is_dir():
            mounts = [*mounts, Mount(str(children), children, True, "children")]
        # The script a local DeepSpeed launch runs each rank through (it imports nothing of ours).
        mounts.append(Mount(RANK_GPUS_SCRIPT, Path(RANK_GPUS_SCRIPT), True, "rank-gpus"))
        full = self._env(c.spec)
        declared = {str(e.get("name")) for e in c.spec.get("env") or [] if isinstance(e, dict)}
        own = {k: v for k, v in full.items() if k in declared}
        env = {**own, RUN_ENV: full[RUN_ENV], CONTAINER_ENV: full[CONTAINER_ENV], "PYTHONUNBUFFERED": "1"}
        devices, env = gpu_arguments(env, self.cdi)
        labels = {RUN_LABEL: full[RUN_ENV], "t9k-jobs.pod": self.name, "t9k-jobs.container": c.name}
        argv = run_argv(self.engine, self.container_name(c), labels, c.spec, env, self.name, self.address,
                        mounts, devices, self.limits)  # fmt: skip
        if not c.spec.get("image"):
            raise ContainerSetupError(f"container {c.name!r} names no image: --container-engine runs each in its image")
        return argv, self.log_dir, full

    def _signal_targets(self) -> tuple[list[int], list[int], list[int]]:
        """The ``podman run`` clients (their groups) and every process of the running containers."""
        groups, tree, monitors = super()._signal_targets()
        inside = [p for p in self._container_pids() if p not in tree]
        return groups, tree + inside + descendants(inside), monitors

    def _container_pids(self) -> list[int]:
        """The first process of each running container of the pod, on this machine."""
        live = [self.container_name(c) for c in self.init + self.main if c.proc is not None and c.exit_code is None]
        if not live:
            return []
        done = _podman(self.engine, "inspect", "--format", "{{.State.Pid}}", *live)
        return [int(x) for x in done.split() if x.isdigit() and int(x) > 0]

    def kill_leftovers(self, pid: int, container: str) -> None:
        super().kill_leftovers(pid, container)
        names = [self.container_name(c) for c in self.init + self.main if not container or c.name == container]
        _podman(self.engine, "rm", "--force", "--ignore", "--time", "0", *names)

    async def terminate(self) -> None:
        await super().terminate()
        _podman(self.engine, "rm", "--force", "--ignore", "--time", "0", *[self.container_name(c) for c in self.init + self.main])


class _Mounts:
    """A stand-in sandbox that says volumes are mounted (what :meth:`LocalPod._prepare_volumes` and
    :func:`~.sandbox.mounts_refused` ask): the container engine mounts them."""

    mounts = True
    pids = False
    kind = "podman"


#: What a container engine is as a sandbox: every volume mounted.
ENGINE_SANDBOX: Any = _Mounts()


def _podman(engine: str, *args: str) -> str:
    """Run ``engine args`` (a quick command); its output, ``""`` when it fails."""
    try:
        done = subprocess.run([engine, *args], capture_output=True, text=True, timeout=PODMAN_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def remove_run_containers(run_dir: str, engine: str = "podman") -> int:
    """Remove every container of the run (label :data:`RUN_LABEL`), running or not: how many."""
    ids = _podman(engine, "ps", "--all", "--quiet", "--filter", f"label={RUN_LABEL}={run_dir}").split()
    if ids:
        _podman(engine, "rm", "--force", "--ignore", "--time", "0", *ids)
    return len(ids)


class PodmanRunner(ProcessRunner):
    """The process runner's lifecycle (watchdog, ``/dev/shm``, the orphan sweep of the clients),
    with :class:`PodmanPod`\\ s, and the run's containers removed when it ends."""

    def __init__(self, *, engine: str = "podman", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.cdi = cdi_gpus()
        self.limits = tuple(ulimit_arguments())

    pod_class = PodmanPod

    def _made(self, pod: LocalPod) -> None:
        assert isinstance(pod, PodmanPod)
        pod.engine, pod.cdi, pod.limits = self.engine, self.cdi, self.limits

    def kill_all(self) -> None:
        super().kill_all()
        remove_run_containers(self.base_env[RUN_ENV], self.engine)


__all__ = [
    "ENGINES", "ENGINE_SANDBOX", "RUN_LABEL", "PodmanPod", "PodmanRunner", "container_name", "engine_problem", "gpu_arguments",
    "job_images", "missing_image_line", "missing_images", "remove_run_containers", "run_argv",
]  # fmt: skip
