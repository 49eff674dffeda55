"""The run directory: the one module that names a run's files, reads a run and writes its records.

A local run is a run directory written by :func:`t9k_jobs.local.runtime.run_job` (or prepared by
``run -d``'s parent, :func:`t9k_jobs.local.rundirs.start_detached`, and run by
``python -m t9k_jobs.local RUN_DIR``). Its files, each named once here (:class:`RunDir`):
``runtime.pid`` (the process that runs it, locked by it: :mod:`t9k_jobs.local.ownership`) and
``run-dir.id`` (the directory it was published in), ``run.json`` (kind, name, start, replicas:
what ``get`` reads), ``job.yaml`` (the job as it runs: written at the start and again when an edit
is applied), ``manifest.yaml`` (the run's own copy of its manifest, which ``pause``/``resume``/
``scale`` edit: :mod:`t9k_jobs.local.edits`), ``manifest.path`` (the user's manifest it watches),
``options.json`` (a detached run's options, written by the parent that started it),
``status.yaml`` (written whole; and ``status.json``, the same status for fast reading, trusted only
while it names that very ``status.yaml``), ``events.log``, ``job.log`` (every replica,
``[worker-1] `` prefixes), ``<pod>.<container>.log``, ``objects.yaml`` (the non-pod objects the
operator would create), ``runtime.log`` (a detached runtime's own output), ``stopped.txt`` (why
the runtime stopped before its job finished), ``tensorboard.log`` and ``tensorboard.url``,
``shm.path`` (the run's own folder under ``/dev/shm``, where it made one), ``starting.json``
(while ``run -d``'s parent starts the run), and the
folders ``bin`` (``--python``'s shims), ``children`` (the files of the ConfigMaps and Secrets
the job owns), ``hosts`` (each contained replica's ``/etc/hosts``) and ``volumes`` (each pod's
emptyDirs and mount points) and ``stacks`` (the replicas' stacks when the job made no
progress: :mod:`t9k_jobs.local.stacks`). Runs are found under a runs directory (default ``./t9k-runs``), one level deep.

Whether a run is still going is proven, never guessed (:func:`runtime_state`): the runtime holds a
lock on its ``runtime.pid`` and has that very file open. A run whose runtime is gone while its
status is not terminal (stopped by ``delete``, Ctrl-C, a kill) has the phase ``Stopped`` here; one
whose state cannot be told (``runtime.pid`` or ``status.yaml`` missing or unreadable, a lock held
by a process we cannot see) has the phase ``Unknown``, with the reason.

The readers (:class:`LocalRun`, :func:`list_runs`, :func:`already_running`) serve the verbs
(:mod:`t9k_jobs.local.rundirs`) and the runtime; the writers (:func:`make_run_dir`,
:func:`write_status`, :func:`write_run_info`) serve the runtime and ``run -d``'s parent.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import pwd
import stat
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..api import Job, JobStatus
from ..api.common import TERMINAL_PHASES
from ..api.extensions import extensions
from ..frameworks import framework_for, parse_job
from ..words import STOPPED, UNKNOWN, short_name
from . import ownership
from .inject import Injection
from .inject import from_json as injections_from_json
from .inject import to_json as inject_json
from .ownership import GONE, NO_WORKING_DIR, STOP_NOTE_SIZE, RuntimeState, working_dir, write_atomic

if TYPE_CHECKING:
    from .gpus import GpuInventory

#: The annotations a local run's object carries (:meth:`LocalRun.to_object`): its run dir, its
#: runtime's pid (while it runs), the phase shown (``Stopped``, ``Unknown`` included) and why it
#: is ``Unknown``.
LOCAL_RUN_DIR = "t9k-jobs.local/run-dir"
LOCAL_PID = "t9k-jobs.local/runtime-pid"
LOCAL_PHASE = "t9k-jobs.local/phase"
LOCAL_UNKNOWN_REASON = "t9k-jobs.local/unknown-reason"


class RunDir:
    """The files of the run in ``path``, by name: every path the runtime, its verbs and ``run -d``
    read or write in a run directory is one of these properties (the module docstring says what
    each holds)."""

    JOB = "job.yaml"
    COPY = "manifest.yaml"
    WATCHED = "manifest.path"
    OPTIONS = "options.json"
    INFO = "run.json"
    STATUS = "status.yaml"
    STATUS_JSON = "status.json"
    PID = "runtime.pid"
    DIR_ID = "run-dir.id"
    STOPPED = "stopped.txt"
    EVENTS = "events.log"
    JOB_LOG = "job.log"
    RUNTIME_LOG = "runtime.log"
    OBJECTS = "objects.yaml"
    TENSORBOARD_LOG = "tensorboard.log"
    TENSORBOARD_URL = "tensorboard.url"
    SHM = "shm.path"
    STARTING = "starting.json"
    BIN = "bin"
    CHILDREN = "children"
    HOSTS = "hosts"
    VOLUMES = "volumes"
    STACKS = "stacks"
    LOST = "lost.json"
    #: The files whose change can change what is shown of a run (its logs, but ``events.log``, do not).
    SHOWN = frozenset({INFO, STATUS, STATUS_JSON, PID, JOB, COPY, EVENTS, STOPPED})

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def job(self) -> Path:
        """``job.yaml``: the job as it runs."""
        return self.path / self.JOB

    @property
    def copy(self) -> Path:
        """``manifest.yaml``: the run's own copy of its manifest."""
        return self.path / self.COPY

    @property
    def watched(self) -> Path:
        """``manifest.path``: the user's manifest it watches."""
        return self.path / self.WATCHED

    @property
    def options(self) -> Path:
        """``options.json``: a detached run's options."""
        return self.path / self.OPTIONS

    @property
    def info(self) -> Path:
        """``run.json``: kind, name, start, replicas."""
        return self.path / self.INFO

    @property
    def status(self) -> Path:
        """``status.yaml``: the status, written whole."""
        return self.path / self.STATUS

    @property
    def status_json(self) -> Path:
        """``status.json``: the same, for fast reading."""
        return self.path / self.STATUS_JSON

    @property
    def pid(self) -> Path:
        """``runtime.pid``: the runtime's pid, locked by it."""
        return self.path / self.PID

    @property
    def dir_id(self) -> Path:
        """``run-dir.id``: where the runtime was published."""
        return self.path / self.DIR_ID

    @property
    def stopped(self) -> Path:
        """``stopped.txt``: why the runtime stopped early."""
        return self.path / self.STOPPED

    @property
    def events(self) -> Path:
        """``events.log``: ``HH:MM:SS Type Reason: message``."""
        return self.path / self.EVENTS

    @property
    def lost(self) -> Path:
        """``lost.json``: what the attempts that ended without finishing cost, by why
        (:func:`t9k_jobs.engine.cost.add`'s totals; :mod:`t9k_jobs.local.lost`)."""
        return self.path / self.LOST

    @property
    def job_log(self) -> Path:
        """``job.log``: every replica, prefixed."""
        return self.path / self.JOB_LOG

    @property
    def runtime_log(self) -> Path:
        """``runtime.log``: a detached runtime's output."""
        return self.path / self.RUNTIME_LOG

    @property
    def objects(self) -> Path:
        """``objects.yaml``: the non-pod objects."""
        return self.path / self.OBJECTS

    @property
    def tensorboard_log(self) -> Path:
        """``tensorboard.log``."""
        return self.path / self.TENSORBOARD_LOG

    @property
    def tensorboard_url(self) -> Path:
        """``tensorboard.url``: while served."""
        return self.path / self.TENSORBOARD_URL

    @property
    def starting(self) -> Path:
        """``starting.json``: while ``run -d``'s parent starts the run (its pid, the job's kind and
        name), until the runtime has published it; a lookup by name waits for such a run."""
        return self.path / self.STARTING

    @property
    def shm(self) -> Path:
        """``shm.path``: the run's own folder under ``/dev/shm`` (its Memory emptyDirs), written when
        it is made (it is removed at the run's end, or by the watchdog if the runtime dies)."""
        return self.path / self.SHM

    @property
    def bin(self) -> Path:
        """``bin/``: ``--python``'s shims."""
        return self.path / self.BIN

    def container_log(self, pod: str, container: str) -> Path:
        """``<pod>.<container>.log``: one container's output, whole lines."""
        return self.path / f"{pod}.{container}.log"

    def hosts_file(self, pod: str) -> Path:
        """``hosts/<pod>``: the ``/etc/hosts`` a contained replica sees."""
        return self.path / self.HOSTS / pod

    def pod_volumes(self, pod: str, uid: str) -> Path:
        """``volumes/<pod>-<uid[:8]>``: the emptyDirs (on disk) and mount points of one pod."""
        return self.path / self.VOLUMES / f"{pod}-{uid[:8]}"

    def stacks_file(self, pod: str, attempt: int) -> Path:
        """``stacks/<pod>.attempt-<N>.txt``: the stacks of a replica's processes, dumped when the
        job made no progress on that restart attempt (:mod:`t9k_jobs.local.stacks`)."""
        return self.path / self.STACKS / f"{pod}.attempt-{attempt}.txt"

    def child_file(self, kind: str, name: str, key: str) -> Path:
        """``children/<kind>/<name>/<key>``: a key of a ConfigMap or Secret the job owns."""
        return self.path / self.CHILDREN / kind.lower() / name / key

    def temporary(self, path: Path) -> Path:
        """A file beside ``path`` that no reader takes for it (``.<name>.new``), renamed over it."""
        return path.with_name(f".{path.name}.new")

    @property
    def probe(self) -> Path:
        """``.t9k-jobs-probe``: written and removed once, to prove the run dir can be written."""
        return self.path / ".t9k-jobs-probe"


# ----------------------------------------------------------------------------- the runtime's process


def runtime_state(run_dir: Path) -> RuntimeState:
    """Whether the runtime of the run in ``run_dir`` runs, proven
    (:func:`t9k_jobs.local.ownership.state_of` over its ``runtime.pid`` and ``run-dir.id``)."""
    files = RunDir(run_dir)
    return ownership.state_of(files.pid, files.dir_id)


def publish_runtime(run_dir: Path) -> int:
    """Make this process the runtime of the run in ``run_dir``
    (:func:`t9k_jobs.local.ownership.publish`); the descriptor holding the lock. Raises ``OSError``."""
    files = RunDir(run_dir)
    return ownership.publish(files.pid, files.dir_id)


def pinned(run_dir: Path, pid: int) -> AbstractContextManager[int | None]:
    """A pidfd of ``pid``, proven the runtime of ``run_dir`` (:func:`t9k_jobs.local.ownership.pinned`)."""
    files = RunDir(run_dir)
    return ownership.pinned(files.pid, files.dir_id, pid)


def stop_reason(run_dir: Path) -> str | None:
    """What a stopped run's runtime said of why it stopped (:class:`~t9k_jobs.local.ownership.StopNote`
    in ``stopped.txt``), or None."""
    try:
        text = RunDir(run_dir).stopped.read_bytes()[:STOP_NOTE_SIZE].decode("utf-8", "replace").strip("\x00 \n")
    except OSError:
        return None
    return text or None


#: Where ``t9k-jobs run`` puts run directories by default, relative to the working directory.
DEFAULT_RUNS_DIR = Path("t9k-runs")


def runtime_pid(run_dir: Path) -> int | None:
    """The pid of the runtime of the run in ``run_dir`` while it runs, proven
    (:func:`runtime_state`), else None (gone, or not known)."""
    return runtime_state(run_dir).pid


#: The run-dir file with what ``get`` needs without parsing the manifest: kind, name, when it
#: started (epoch seconds) and how many replicas the job has; written by the runtime.
RUN_INFO = RunDir.INFO


def _yaml_load(text: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


# ----------------------------------------------------------------------------- one run


@dataclass
class Observation:
    """One look at a run: its ``status`` (None before the first, or when unreadable), why the
    status could not be read (``status_problem``, None when it was or when there is none yet),
    its ``runtime`` (:class:`RuntimeState`), the ``phase`` shown (:data:`STOPPED` for a runtime gone
    before a terminal phase, :data:`UNKNOWN` when it cannot be told) and, for :data:`UNKNOWN`, the
    ``reason``."""

    status: JobStatus | None
    status_problem: str | None
    runtime: RuntimeState
    phase: str
    reason: str | None = None

    @property
    def alive(self) -> bool:
        return self.runtime.running

    @property
    def pid(self) -> int | None:
        return self.runtime.pid


@dataclass
class LocalRun:
    """One run directory of a job. ``created``: epoch seconds the run started."""

    run_dir: Path
    kind: str
    name: str
    created: float
    info: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def files(self) -> RunDir:
        """The run's files, by name."""
        return RunDir(self.run_dir)

    @classmethod
    def load(cls, run_dir: Path, resolved: bool = False) -> LocalRun | None:
        """The run in ``run_dir``, or None when it is not one: ``run.json`` (written by the runtime)
        when it is readable, else ``job.yaml`` (a run of an older version). ``resolved``: the
        path is absolute with no links already (a listing resolves its runs dir once)."""
        run_dir = run_dir if resolved else run_dir.resolve()
        try:
            info = json.loads(RunDir(run_dir).info.read_bytes())
            if isinstance(info, dict) and isinstance(info.get("kind"), str) and isinstance(info.get("name"), str):
                created = info.get("created")
                if isinstance(created, (int, float)):
                    return cls(run_dir, info["kind"], info["name"], float(created), info)
        except (OSError, ValueError):
            pass
        try:
            path = RunDir(run_dir).job
            manifest = _yaml_load(path.read_text(encoding="utf-8"))
            created = path.stat().st_mtime
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("metadata"), dict):
            return None
        kind, name = manifest.get("kind"), manifest["metadata"].get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            return None
        run = cls(run_dir, kind, name, created)
        run.__dict__["manifest"] = manifest
        return run

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """The job as it runs (``job.yaml``), ``{}`` when it cannot be read."""
        try:
            data = _yaml_load(self.files.job.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    @cached_property
    def job(self) -> Any:
        """The typed job (one of the API kinds), or None when ``job.yaml`` no longer validates."""
        try:
            return parse_job(self.manifest, str(self.files.job))
        except Exception:  # noqa: BLE001 - written by an older version: shown without the spec
            return None

    def read_status(self) -> tuple[JobStatus | None, str | None]:
        """``(status, problem)``: the status the runtime wrote last (``status.yaml``, written whole)
        and, when there is a ``status.yaml`` that cannot be read as a status, why."""
        path = self.files.status
        data: Any = None
        try:
            st = path.stat()
            cached = json.loads(self.files.status_json.read_bytes())
            ident = cached.get("statusYaml") or {}
            if (ident.get("ino"), ident.get("size"), ident.get("mtime_ns")) == (st.st_ino, st.st_size, st.st_mtime_ns):
                data = cached.get("status")  # the same status, for this very status.yaml: no YAML to parse
        except (OSError, ValueError, AttributeError):
            pass
        try:
            if data is None:
                text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None, None
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"status.yaml cannot be read: {getattr(exc, 'strerror', None) or exc}"
        try:
            if data is None:
                data = _yaml_load(text)
            if not isinstance(data, dict):
                return None, "status.yaml holds no status mapping"
            return JobStatus.model_validate(data), None
        except Exception as exc:  # noqa: BLE001 - damaged, or from another version
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            return None, f"status.yaml is not a status: {first[:120]}"

    def status(self) -> JobStatus | None:
        """The status the runtime wrote last, or None (none yet, or unreadable)."""
        return self.read_status()[0]

    def runtime(self) -> RuntimeState:
        """Its runtime's state, proven (:func:`runtime_state`)."""
        return runtime_state(self.run_dir)

    def pid(self) -> int | None:
        """The runtime's pid while it provably runs."""
        return self.runtime().pid

    def observe(self) -> Observation:
        """Look at the run once (status, runtime) and decide the phase shown: a terminal phase
        in ``status.yaml`` is final; otherwise :data:`UNKNOWN` (with the reason) when the runtime
        or the status cannot be told, the status's phase while the runtime runs (``Pending``
        before its first status), :data:`STOPPED` once it is gone."""
        status, problem = self.read_status()
        runtime = self.runtime()
        if status is not None and status.phase in TERMINAL_PHASES:
            return Observation(status, None, runtime, status.phase)
        if runtime.unknown:
            return Observation(status, problem, runtime, UNKNOWN, runtime.reason)
        if problem is not None:
            return Observation(status, problem, runtime, UNKNOWN, problem)
        if runtime.running:
            return Observation(status, None, runtime, status.phase if status is not None else "Pending")
        if status is None:
            return Observation(
                None, None, runtime, UNKNOWN,
                "its runtime is gone and there is no status.yaml (removed, or the run ended before writing one)",
            )
        return Observation(status, None, runtime, STOPPED)

    def phase(self) -> str:
        """The phase shown for the job now (:meth:`observe`)."""
        return self.observe().phase

    def groups(self) -> list[Any]:
        """The job's replica groups (:class:`t9k_jobs.frameworks.base.ReplicaGroup`), ``[]`` when
        ``job.yaml`` does not validate."""
        if self.job is None:
            return []
        return list(framework_for(self.job).groups(self.job))

    def replicas_wanted(self, status: JobStatus | None) -> int:
        """How many replicas the job has (``run.json``, else its spec, else its status)."""
        count = self.info.get("replicas")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        groups = self.groups()
        if groups:
            return sum(g.replicas for g in groups)
        return sum(len(t.replicas) for t in status.tasks) if status is not None else 0

    def to_object(self) -> dict[str, Any]:
        """The job as an API object (``-o yaml|json``): the manifest it runs, its status, and
        annotations ``t9k-jobs.local/run-dir``, ``.../runtime-pid`` (while it runs),
        ``.../phase`` (with :data:`STOPPED`, :data:`UNKNOWN`) and ``.../unknown-reason``."""
        obj = dict(self.manifest)
        meta = dict(obj.get("metadata") or {})
        seen = self.observe()
        meta["creationTimestamp"] = dt.datetime.fromtimestamp(self.created, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        notes = {
            LOCAL_RUN_DIR: str(self.run_dir),
            LOCAL_PHASE: seen.phase,
        }
        if seen.pid is not None:
            notes[LOCAL_PID] = str(seen.pid)
        if seen.reason is not None:
            notes[LOCAL_UNKNOWN_REASON] = seen.reason
        meta["annotations"] = {**(meta.get("annotations") or {}), **notes}
        obj["metadata"] = meta
        if seen.status is not None:
            obj["status"] = seen.status.dump()
        return obj

    def events(self, last: int = 20) -> list[str]:
        """The last ``last`` lines of ``events.log`` (``HH:MM:SS Type Reason: message``)."""
        try:
            return (
                self.files.events
                .read_text(encoding="utf-8", errors="replace")
                .splitlines()[-last:]
            )
        except OSError:
            return []

# ----------------------------------------------------------------------------- finding runs


def runs_dir_default() -> Path:
    """``./t9k-runs`` under the working directory, where ``t9k-jobs run`` writes by default."""
    return working_dir() / DEFAULT_RUNS_DIR


def list_runs(
    runs_dir: Path | None = None, kind: str | None = None, name: str | None = None, latest: bool = True
) -> list[LocalRun]:
    """Runs under ``runs_dir`` (default ``./t9k-runs``), of ``kind`` and ``name`` when given,
    sorted by kind, name and start. ``latest``: only the newest run of each kind and name, and
    every other one whose runtime still runs (or cannot be told: nothing live is hidden).
    A runs directory that does not exist holds no runs.

    Each run is read from its small ``run.json`` (no manifest is parsed), so a lookup by name over
    a thousand finished runs reads a thousand small files (docs/benchmarks.md)."""
    base = runs_dir if runs_dir is not None else runs_dir_default()
    try:
        root = base.resolve()
        with os.scandir(root) as listing:  # the entries' types come with the listing: no stat each
            entries = sorted(e.name for e in listing if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    runs = []
    for entry in entries:
        run = LocalRun.load(root / entry, resolved=True)
        if run is None or (kind is not None and run.kind != kind) or (name is not None and run.name != name):
            continue
        runs.append(run)
    runs.sort(key=lambda r: (r.kind, r.name, r.created, r.run_dir.name))
    return newest_and_live(runs, lambda r: r.runtime().state != GONE) if latest else runs


def newest_and_live(runs: list[LocalRun], not_gone: Callable[[LocalRun], bool]) -> list[LocalRun]:
    """Of ``runs`` (sorted by kind, name and start), the newest of each kind and name, and every
    other one that ``not_gone`` says may still run (its runtime is not proven gone: nothing live
    is hidden); in the same order."""
    newest: dict[tuple[str, str], LocalRun] = {}
    for run in runs:
        newest[(run.kind, run.name)] = run
    keep = {id(r) for r in newest.values()}
    return [r for r in runs if id(r) in keep or not_gone(r)]


def live_runs(runs: list[LocalRun]) -> list[LocalRun]:
    """Those of ``runs`` whose runtime provably runs."""
    return [r for r in runs if r.runtime().running]


#: What a runtime says when a run of the same job runs in the same runs dir (AlreadyExists).
ALREADY_RUNNING = "already exists: it is running in"


def already_running(runs_dir: Path, kind: str, name: str) -> str | None:
    """The one line refusing a new run of ``kind`` ``name`` in ``runs_dir`` while one runs there
    (as ``kubectl create`` refuses a name that is taken), or None when none runs."""
    live = live_runs(list_runs(runs_dir, kind, name, latest=False))
    if not live:
        return None
    other = live[-1]
    short = short_name(kind)
    return (
        f"{kind} {name} {ALREADY_RUNNING} {other.run_dir} (runtime pid {other.pid()}); stop it first "
        f"(t9k-jobs delete {short} {name}), or start another beside it with --allow-duplicate"
    )


# ----------------------------------------------------------------------------- writing a run


#: The run-dir file naming the manifest a run watches for edits (absent: it watches none).
WATCHED_MANIFEST = RunDir.WATCHED


def default_run_dir(job: Job, runs_dir: Path | None = None) -> Path:
    """``<runs_dir>/<job>-<YYYYmmdd-HHMMSS>`` (default runs dir: ``./t9k-runs``). Raises
    :class:`RunDirError` when the current folder was removed."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    if runs_dir is not None:
        return runs_dir.absolute() / f"{job.name}-{stamp}"
    try:
        here = Path.cwd()
    except FileNotFoundError:
        raise RunDirError(NO_WORKING_DIR) from None
    return here / DEFAULT_RUNS_DIR / f"{job.name}-{stamp}"


def write_status(run_dir: Path, status: dict[str, Any]) -> None:
    """Write ``status.yaml`` whole, then ``status.json``: the same status with the identity of that
    ``status.yaml`` (inode, size, modification time in ns), which :meth:`LocalRun.read_status
    <LocalRun.read_status>` trusts only while it still names the file there.
    Raises ``OSError``."""
    files = RunDir(run_dir)
    path = files.status
    write_atomic(path, yaml.safe_dump(status, sort_keys=False))
    st = path.stat()
    ident = {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    write_atomic(files.status_json, json.dumps({"statusYaml": ident, "status": status}) + "\n")


def write_run_info(run_dir: Path, job: Job, created: float, ttl: int | None = None) -> None:
    """Write ``run.json``: what ``get`` and the lookups by name read without parsing a manifest
    (kind, name, ``created`` in epoch seconds, the number of replicas) and the run's time to live
    once finished (``ttl``, ``run --ttl``, else the job's ``t9k-jobs.io/ttl-seconds-after-finished``;
    :mod:`t9k_jobs.local.prune`), when it has one. Raises ``OSError``."""
    replicas = sum(g.replicas for g in framework_for(job).groups(job))
    info: dict[str, Any] = {"kind": job.kind, "name": job.name, "created": created, "replicas": replicas}
    ttl = ttl if ttl is not None else extensions(job.metadata.annotations).ttl_after_finished
    if ttl is not None:
        info["ttlSecondsAfterFinished"] = ttl
    write_atomic(RunDir(run_dir).info, json.dumps(info) + "\n")


@dataclass(frozen=True)
class RunOptions:
    """What ``run`` was asked besides the job, parsed and checked once by whoever starts the run:
    ``manifest``, the user's file (None: the job came from standard input; its edits are followed
    when ``watch``), ``gpus`` (``--gpus``; None: this machine's, discovered), ``allow_duplicate``,
    ``volumes`` (``--volume``: claim -> folder), ``python`` (``--python``, an absolute path) and
    ``injections`` (``--inject``), ``container_engine`` (``--container-engine``: replicas in
    their images, :mod:`t9k_jobs.local.podman`; None: processes).
    ``run -d``'s parent writes them to ``options.json`` (:meth:`write`) for the runtime it starts,
    which reads them (:meth:`read`)."""

    manifest: Path | None = None
    watch: bool = True
    gpus: GpuInventory | None = None
    allow_duplicate: bool = False
    volumes: dict[str, Path] = field(default_factory=dict)
    python: str | None = None
    #: ``--inject``: failures to make happen on purpose (:mod:`t9k_jobs.local.inject`).
    injections: tuple[Injection, ...] = ()
    #: ``--ttl``: seconds the finished run is kept (:mod:`t9k_jobs.local.prune`), ``None``: its job's
    #: annotation says, else kept.
    ttl: int | None = None
    container_engine: str | None = None

    def write(self, run_dir: Path) -> None:
        """Write ``options.json`` in ``run_dir``, whole. Raises ``OSError``."""
        declared = self.gpus.declared_gpus() if self.gpus is not None else None
        data = {
            "manifest": str(self.manifest) if self.manifest is not None else None,
            "watch": self.watch,
            "gpus": [dataclasses.asdict(g) for g in declared] if declared is not None else None,
            "allowDuplicate": self.allow_duplicate,
            "volumes": {claim: str(folder) for claim, folder in self.volumes.items()},
            "python": self.python,
            "inject": inject_json(self.injections),
            "ttl": self.ttl,
            "containerEngine": self.container_engine,
        }
        write_atomic(RunDir(run_dir).options, json.dumps(data) + "\n", mode=0o600)

    @classmethod
    def read(cls, run_dir: Path) -> RunOptions:
        """The options in ``run_dir``'s ``options.json``. Raises ``OSError``, ``ValueError`` (not
        written by :meth:`write`), ``KeyError`` or ``TypeError``."""
        from .gpus import (  # lazy: keeps subprocess and GPU probes out of day-two verbs
            DECLARED,
            Gpu,
            GpuInventory,
        )

        data = json.loads(RunDir(run_dir).options.read_bytes())
        gpus = data["gpus"]
        return cls(
            manifest=Path(data["manifest"]) if data["manifest"] is not None else None,
            watch=bool(data["watch"]),
            gpus=GpuInventory([Gpu(**g) for g in gpus], DECLARED) if gpus is not None else None,
            allow_duplicate=bool(data["allowDuplicate"]),
            volumes={claim: Path(folder) for claim, folder in data["volumes"].items()},
            python=data["python"],
            injections=injections_from_json(data.get("inject")),
            ttl=data.get("ttl") if isinstance(data.get("ttl"), int) else None,
            container_engine=data.get("containerEngine") if isinstance(data.get("containerEngine"), str) else None,
        )


class RunDirError(Exception):
    """The run directory cannot be used; the message says which and why, in one line."""


def check_runs_dir(folder: Path, what: str) -> None:
    """Refuse a runs directory (the folder that holds run directories) that another account
    controls, as ssh refuses a ``~/.ssh`` others can write: one owned by a user other than this
    one or root, or one that group or others may write without the sticky bit (``/tmp``'s
    ``1777`` is fine: there no one renames another's entries). Such an account could move the run's
    directory away mid-run (which stops the run) or put one of its own making in its place.
    ``what`` names it in the message (``--run-dir PATH's folder``, ``./t9k-runs``). Raises
    :class:`RunDirError` (one line, what is wrong and what to do); ``OSError`` when it cannot be
    looked at."""
    st = os.stat(folder)
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = f"uid {st.st_uid}"
        raise RunDirError(
            f"{what} ({folder}) belongs to {owner}, another account, which could move or replace this run's "
            f"directory: use a folder of your own (--run-dir), or remove it"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise RunDirError(
            f"{what} ({folder}) is writable by {'others' if st.st_mode & 0o002 else 'its group'} (mode "
            f"{stat.S_IMODE(st.st_mode):04o}), who could move or replace this run's directory: chmod go-w it, "
            "or use a folder of your own (--run-dir)"
        )


def make_run_dir(path: Path) -> Path:
    """Create ``path`` as this run's own directory (mode 0700) and return it resolved.

    It must be new, or an empty directory that is not a symlink: a run never shares its
    directory (logs would interleave, the wrong status win) or writes through a link made
    beforehand; its folder must be one no other account controls (:func:`check_runs_dir`).
    Raises :class:`RunDirError` otherwise, or when it cannot be made (a file in the way, no
    permission, a read-only or special file system).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        check_runs_dir(path.parent, f"the folder of --run-dir {path}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if path.is_symlink() or not path.is_dir():
                raise RunDirError(f"--run-dir {path}: exists and is not a directory of its own; give a new path") from None
            if any(path.iterdir()):
                raise RunDirError(f"--run-dir {path}: exists and is not empty; a run needs a directory of its own") from None
            os.chmod(path, 0o700)
        probe = RunDir(path).probe
        probe.write_bytes(b"")
        probe.unlink()
    except RunDirError:
        raise
    except OSError as exc:
        raise RunDirError(f"--run-dir {path}: cannot be used: {exc.strerror or exc}") from None
    return path.resolve()


def new_default_run_dir(job: Job, runs_dir: Path | None = None) -> Path:
    """A new directory ``<runs_dir>/<job>-<YYYYmmdd-HHMMSS>[-<n>]`` (default runs dir
    ``./t9k-runs``, the SDK's ``Client.local(runs_dir)`` names another): made atomically, so two
    runs started in the same second get two directories; the runs dir must be a folder no other
    account controls (:func:`check_runs_dir`). Raises :class:`RunDirError`."""
    base = default_run_dir(job, runs_dir)
    for n in range(1, 1000):
        candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            candidate.parent.mkdir(parents=True, exist_ok=True)
            if n == 1:
                check_runs_dir(candidate.parent, f"./{DEFAULT_RUNS_DIR}" if runs_dir is None else str(runs_dir))
            os.mkdir(candidate, 0o700)
            return candidate.resolve()
        except FileExistsError:
            continue
        except OSError as exc:
            raise RunDirError(f"cannot make a run directory under {base.parent}: {exc.strerror or exc}") from None
    raise RunDirError(f"cannot make a new run directory under {base.parent}")


__all__ = [
    "ALREADY_RUNNING",
    "DEFAULT_RUNS_DIR",
    "LOCAL_PHASE",
    "LOCAL_PID",
    "LOCAL_RUN_DIR",
    "LOCAL_UNKNOWN_REASON",
    "RUN_INFO",
    "WATCHED_MANIFEST",
    "LocalRun",
    "Observation",
    "RunDir",
    "RunDirError",
    "RunOptions",
    "already_running",
    "check_runs_dir",
    "default_run_dir",
    "list_runs",
    "live_runs",
    "make_run_dir",
    "new_default_run_dir",
    "newest_and_live",
    "pinned",
    "publish_runtime",
    "runs_dir_default",
    "runtime_pid",
    "runtime_state",
    "stop_reason",
    "write_run_info",
    "write_status",
]
