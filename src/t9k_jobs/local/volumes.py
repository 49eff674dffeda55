"""Pod volumes in a local run: what each volume of a pod template becomes on this machine.

A kubelet sets up every volume of a pod before its containers start and mounts each at the
``mountPath`` of the containers that name it; a local run does the same with the mount namespace
each replica gets (:mod:`t9k_jobs.local.sandbox`). What a volume is here:

``persistentVolumeClaim``
    the folder given with ``--volume CLAIM=DIR``, shared by every replica that mounts it (as
    pods share a ReadWriteMany claim); read-only where the mount or the claim source says so.
``configMap`` / ``secret``
    the job's own (the hostfile, the ssh keys) from the run directory, where the run writes
    them; another one from ``--volume NAME=DIR`` (its files are the keys). Read-only, as the
    kubelet mounts them; ``items`` project the keys named, with their modes.
``emptyDir``
    a new folder per pod under ``<run dir>/volumes/``, removed when the pod's processes end
    (``medium: Memory``: under the run's own folder in ``/dev/shm``, a tmpfs, removed the same way;
    for root, one with a ``sizeLimit`` is a tmpfs of that size of its own, so a write past it
    fails with ENOSPC; otherwise a start note says the limit is not enforced).
``hostPath``
    the same path on this machine, its ``type`` checked as the kubelet checks it
    (``DirectoryOrCreate`` and ``FileOrCreate`` make what is missing).
``downwardAPI``
    files with the pod's name, namespace, uid, labels and annotations.

Any other type is refused by name before anything starts. ``subPath`` and ``subPathExpr``
(``$(VAR)`` of the container's own env) mount a path inside the volume; a missing one is made, as
the kubelet makes it.

Nothing a run makes outside its run dir has a name another account can guess or make first: the
run's ``/dev/shm`` folder is made by ``mkdtemp`` (random name, mode 0700, ``O_EXCL``), and removing
a pod's folders never follows a symlink a container left there (:func:`_remove_tree`). Sources:
Kubernetes, "Volumes" and "Configure a Pod to Use a
PersistentVolume for Storage" (kubernetes.io/docs/concepts/storage/volumes/): hostPath types and
their checks, emptyDir's lifetime and ``medium``, configMap and secret volumes mounted read-only,
``items``/``defaultMode``/``mode``; the downward API's file format (``key="value"`` lines).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..api import Job
from ..frameworks import framework_for
from ..api.pod_schema import parse_quantity
from .gpus import _template_path
from .rundir import RunDir

#: The volume types a local run sets up (everything else is refused by name).
SUPPORTED_TYPES = ("persistentVolumeClaim", "configMap", "secret", "emptyDir", "hostPath", "downwardAPI")
#: Keys of a volume that are not its type.
_NOT_TYPE = frozenset({"name"})
#: hostPath ``type`` values (Kubernetes HostPathType) and what each checks.
HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice")
#: What a Memory ``emptyDir`` is made under: a tmpfs on every Linux machine.
SHM = Path("/dev/shm")
#: Where a container's own ``/proc`` is: no volume is mounted there or under it.
PROC = PurePosixPath("/proc")
#: The downward API's fields a file may hold (``fieldRef.fieldPath``).
DOWNWARD_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations")
_DOWNWARD_KEY = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class VolumeError(Exception):
    """A volume that cannot be set up here; the message is one line that says which and why."""


@dataclass(frozen=True)
class Mount:
    """One mount of a container: ``source`` on this machine seen at ``path`` (absolute, in the
    container), read-only or not; ``volume`` is the volume's name (for messages)."""

    path: str
    source: Path
    read_only: bool
    volume: str


# --------------------------------------------------------------------------- --volume NAME=DIR


def parse_volume_flags(values: Iterable[str]) -> dict[str, Path]:
    """``--volume NAME=DIR`` values as ``{NAME: DIR}`` (DIR absolute, symlinks resolved).

    NAME is a claim's (or a configMap's or secret's) name, a DNS subdomain; DIR an existing
    directory. Raises :class:`VolumeError` naming the flag and what is accepted; a NAME given
    twice with two folders is refused."""
    out: dict[str, Path] = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or not name or not folder:
            raise VolumeError(f"--volume {value!r}: expected NAME=DIR (a claim's name and a folder of this machine)")
        if len(name) > 253 or not _NAME.match(name):
            raise VolumeError(
                f"--volume {value!r}: {name!r} is not a claim name (lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit)"
            )
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise VolumeError(f"--volume {value!r}: {folder} is not a directory here")
        path = path.resolve()
        if name in out and out[name] != path:
            raise VolumeError(f"--volume {name}: given twice, as {out[name]} and {path}; a claim is one folder")
        out[name] = path
    return out


def volume_type(volume: dict[str, Any]) -> str:
    """The type of a pod ``volumes`` entry: its one key besides ``name`` (``?`` when none)."""
    keys = [k for k in volume if k not in _NOT_TYPE]
    return keys[0] if keys else "?"


def mapped_name(volume: dict[str, Any], own: frozenset[tuple[str, str]] = frozenset()) -> str | None:
    """The name ``--volume`` maps for this volume: a claim's ``claimName``, or the name of a
    configMap or secret that is not one of the job's own objects (``own``: ``(kind, name)``);
    ``None`` for every other volume."""
    kind = volume_type(volume)
    source = volume.get(kind) if isinstance(volume.get(kind), dict) else {}
    if kind == "persistentVolumeClaim":
        return str(source.get("claimName") or "")
    if kind == "configMap":
        name = str(source.get("name") or "")
        return None if ("ConfigMap", name) in own else name
    if kind == "secret":
        name = str(source.get("secretName") or "")
        return None if ("Secret", name) in own else name
    return None


def _optional(volume: dict[str, Any]) -> bool:
    source = volume.get(volume_type(volume))
    return isinstance(source, dict) and source.get("optional") is True


# --------------------------------------------------------------------------- the job's volumes


@dataclass(frozen=True)
class _Use:
    """One volume of one replica type: where it is in the manifest, and where it is mounted."""

    group: str
    path: str  # field path of the volume entry
    volume: dict[str, Any]
    mounts: tuple[str, ...]  # mountPaths


def _uses(job: Job) -> list[_Use]:
    out = []
    for group in framework_for(job).groups(job):
        where, _only = _template_path(job, group)
        spec = group.template.get("spec") or {}
        containers = [c for key in ("initContainers", "containers") for c in spec.get(key) or [] if isinstance(c, dict)]
        for i, volume in enumerate(spec.get("volumes") or []):
            if not isinstance(volume, dict):
                continue
            mounts = tuple(
                str(m.get("mountPath"))
                for c in containers
                for m in c.get("volumeMounts") or []
                if isinstance(m, dict) and m.get("name") == volume.get("name")
            )
            out.append(_Use(group.type, f"{where}.spec.volumes[{i}]", volume, tuple(dict.fromkeys(mounts))))
    return out


def mounts_volumes(job: Job) -> bool:
    """Whether any container of ``job`` (init containers too) has a ``volumeMounts`` entry: such a
    job needs a mount namespace per replica."""
    for group in framework_for(job).groups(job):
        spec = group.template.get("spec") or {}
        for key in ("initContainers", "containers"):
            if any(isinstance(c, dict) and c.get("volumeMounts") for c in spec.get(key) or []):
                return True
    return False


def volume_problems(job: Job, mapping: dict[str, Path], own: frozenset[tuple[str, str]]) -> list[str]:
    """Why the volumes of ``job`` cannot be set up here, one line each (empty: they can).

    Refused: a type a local run does not set up (named, with the types it does), a claim or
    foreign configMap/secret without ``--volume`` (the line names the claim, the mount paths, the
    replicas that mount it and the flag to give), a ``hostPath`` whose ``type`` check fails now, a
    mount or ``subPath`` the kubelet would refuse, a downward API field that is not served.
    ``own``: the job's own ConfigMaps and Secrets as ``(kind, name)``."""
    problems: list[str] = []
    missing: dict[str, tuple[list[str], list[str], str]] = {}
    for use in _uses(job):
        kind = volume_type(use.volume)
        name = use.volume.get("name")
        if kind not in SUPPORTED_TYPES:
            problems.append(
                f"{use.path}: volume {name!r} is a {kind} volume, which a local run does not set up "
                f"(it sets up {', '.join(SUPPORTED_TYPES)}); run the job on a cluster"
            )
            continue
        claim = mapped_name(use.volume, own)
        if claim is not None and claim not in mapping and not _optional(use.volume):
            where, groups, what = missing.setdefault(claim, ([], [], kind))
            where.extend(m for m in use.mounts if m not in where)
            if use.group not in groups:
                groups.append(use.group)
        if kind == "hostPath":
            try:
                check_host_path(use.volume.get("hostPath") or {}, create=False)
            except VolumeError as exc:
                problems.append(f"{use.path}.hostPath: {exc}")
        if kind == "downwardAPI":
            problems.extend(f"{use.path}.downwardAPI.{p}" for p in _downward_problems(use.volume.get("downwardAPI") or {}))
    for claim, (where, groups, kind) in missing.items():
        at = f"mounted at {', '.join(where)}" if where else "not mounted"
        noun = {"persistentVolumeClaim": "claim", "configMap": "configMap", "secret": "secret"}[kind]
        problems.append(
            f"{noun} {claim!r} ({at} by the {', '.join(groups)} replicas) has no folder here: "
            f"give one with --volume {claim}=DIR"
        )
    problems.extend(_mount_problems(job))
    return problems


def unused_mappings(job: Job, mapping: dict[str, Path], own: frozenset[tuple[str, str]]) -> list[str]:
    """``--volume`` names no volume of ``job`` uses, one warning line each."""
    used = {mapped_name(u.volume, own) for u in _uses(job)} | set(tensorboard_claims(job))
    return [f"--volume {name}: no volume of {job.kind} {job.name} names it; ignored" for name in mapping if name not in used]


def _mount_problems(job: Job) -> list[str]:
    """What a container runtime refuses of the mounts that the API server lets by (the names and
    ``subPath`` are checked with the job: :mod:`t9k_jobs.api.pod_schema`): a ``mountPath`` that is
    not absolute, or ``/``; a ``subPathExpr`` that leaves its volume."""
    out = []
    for group in framework_for(job).groups(job):
        where, only = _template_path(job, group)
        spec = group.template.get("spec") or {}
        for key in ("initContainers", "containers"):
            for i, c in enumerate(spec.get(key) or []):
                if not isinstance(c, dict):
                    continue
                for j, m in enumerate(c.get("volumeMounts") or []):
                    at = f"{only or f'{where}.spec.{key}[{i}]'}.volumeMounts[{j}]"
                    if not isinstance(m, dict):
                        continue
                    mount_path = str(m.get("mountPath") or "")
                    if not mount_path.startswith("/"):
                        out.append(f"{at}.mountPath: {mount_path!r} is not an absolute path")
                    elif PurePosixPath(mount_path) == PurePosixPath("/"):
                        out.append(f"{at}.mountPath: a volume cannot be mounted over /")
                    elif PurePosixPath(mount_path) == PROC or PROC in PurePosixPath(mount_path).parents:
                        out.append(
                            f"{at}.mountPath: {mount_path!r} is /proc or under it, where a container runtime "
                            "(runc) refuses a volume: the container's own /proc is mounted there"
                        )
                    sub = m.get("subPathExpr")
                    if sub and (str(sub).startswith("/") or ".." in PurePosixPath(str(sub)).parts):
                        out.append(f"{at}.subPathExpr: {sub!r} must be a relative path without '..'")
    return out


# --------------------------------------------------------------------------- hostPath and downward API


def check_host_path(source: dict[str, Any], create: bool) -> Path:
    """The path of a ``hostPath`` volume once its ``type`` holds, as the kubelet checks it:
    ``Directory``, ``File``, ``Socket``, ``CharDevice``, ``BlockDevice`` must exist as that;
    ``DirectoryOrCreate`` (mode 0755, parents too) and ``FileOrCreate`` (mode 0644, not its parent)
    make what is missing when ``create``; ``""`` checks nothing. Raises :class:`VolumeError`."""
    path = Path(str(source.get("path") or ""))
    kind = source.get("type") or ""
    if not path.is_absolute():
        raise VolumeError(f"path {str(path)!r} is not an absolute path")
    if kind not in HOST_PATH_TYPES:
        accepted = ", ".join(t or '""' for t in HOST_PATH_TYPES)
        raise VolumeError(f"type {kind!r} is not a hostPath type; accepted: {accepted}")
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise VolumeError(f"{path}: {exc.strerror or exc}") from None
    if kind == "DirectoryOrCreate":
        if st is None:
            if create:
                _make(lambda: path.mkdir(mode=0o755, parents=True, exist_ok=True), path)
            return path
        kind = "Directory"
    if kind == "FileOrCreate":
        if st is None:
            if not path.parent.is_dir():
                raise VolumeError(f"{path}: its folder {path.parent} does not exist (FileOrCreate makes the file only)")
            if create:
                _make(lambda: os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)), path)
            return path
        kind = "File"
    tests = {
        "Directory": (stat.S_ISDIR, "a directory"),
        "File": (stat.S_ISREG, "a file"),
        "Socket": (stat.S_ISSOCK, "a socket"),
        "CharDevice": (stat.S_ISCHR, "a character device"),
        "BlockDevice": (stat.S_ISBLK, "a block device"),
    }
    if kind in tests:
        test, what = tests[kind]
        if st is None or not test(st.st_mode):
            raise VolumeError(f"type {kind}: {path} is not {what} on this machine")
    return path


def _make(action: Callable[[], object], path: Path) -> None:
    try:
        action()
    except OSError as exc:
        raise VolumeError(f"cannot make {path}: {exc.strerror or exc}") from None


def _downward_problems(source: dict[str, Any]) -> list[str]:
    out = []
    for i, item in enumerate(source.get("items") or []):
        if not isinstance(item, dict):
            continue
        if "resourceFieldRef" in item:
            out.append(f"items[{i}].resourceFieldRef: not served by a local run (it serves fieldRef: {', '.join(DOWNWARD_FIELDS)})")
            continue
        field = str((item.get("fieldRef") or {}).get("fieldPath") or "")
        if field not in DOWNWARD_FIELDS and not _DOWNWARD_KEY.match(field):
            accepted = ", ".join([*DOWNWARD_FIELDS, "metadata.labels['KEY']", "metadata.annotations['KEY']"])
            out.append(f"items[{i}].fieldRef.fieldPath: {field!r} is not served; accepted: {accepted}")
        path = str(item.get("path") or "")
        if not path or path.startswith("/") or ".." in PurePosixPath(path).parts:
            out.append(f"items[{i}].path: {path!r} must be a relative path without '..'")
    return out


def _quoted(value: str) -> str:
    """A value as Go's ``%q`` writes it (the downward API's label and annotation files)."""
    return json.dumps(value, ensure_ascii=False)


def downward_value(field: str, meta: dict[str, Any], uid: str) -> str:
    """The content of a downward API file for ``fieldRef.fieldPath`` ``field``: the pod's name,
    namespace or uid, or its labels/annotations as sorted ``key="value"`` lines (one key with
    ``metadata.labels['KEY']``)."""
    if field == "metadata.name":
        return str(meta.get("name", ""))
    if field == "metadata.namespace":
        return str(meta.get("namespace") or "default")
    if field == "metadata.uid":
        return uid
    if field in ("metadata.labels", "metadata.annotations"):
        values = meta.get(field.split(".")[1]) or {}
        return "\n".join(f"{k}={_quoted(str(v))}" for k, v in sorted(values.items()))
    m = _DOWNWARD_KEY.match(field)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    raise VolumeError(f"fieldRef.fieldPath {field!r} is not served")


# --------------------------------------------------------------------------- one pod's volumes


class PodVolumes:
    """The volumes of one pod as they are on this machine: made before its first container
    starts (:meth:`prepare`), mounted per container (:meth:`mounts`), removed when its processes
    have ended (:meth:`remove`).

    ``pod``: the pod manifest; ``uid``: the pod's; ``run_dir``: the run's directory (a pod's own
    folders go under ``<run dir>/volumes/<pod>-<uid prefix>/``); ``mapping``: ``--volume``;
    ``own``: the job's own ConfigMaps and Secrets, ``(kind, name)`` -> the folder holding their keys;
    ``shm``: the run's own folder under ``/dev/shm`` (:func:`make_shm_dir`; None: the job has no
    Memory emptyDir).
    """

    def __init__(
        self,
        pod: dict[str, Any],
        uid: str,
        run_dir: Path,
        mapping: dict[str, Path],
        own: dict[tuple[str, str], Path],
        shm: Path | None = None,
    ) -> None:
        self.pod = pod
        self.uid = uid
        self.mapping = mapping
        self.own = own
        name = str(pod["metadata"]["name"])
        self.base = RunDir(run_dir).pod_volumes(name, uid)
        self.shm_base = shm / f"{name}-{uid[:8]}" if shm is not None else None
        self.sources: dict[str, tuple[Path, bool]] = {}  # volume name -> (folder or file, read-only)
        self.made: list[Path] = []
        self.mounted: list[Path] = []  # the tmpfs mounts made for a sizeLimit

    @property
    def volumes(self) -> dict[str, dict[str, Any]]:
        return {str(v.get("name")): v for v in self.pod["spec"].get("volumes") or [] if isinstance(v, dict)}

    def prepare(self) -> None:
        """Set up every volume of the pod. Raises :class:`VolumeError` (a claim without a folder,
        a hostPath whose type check fails, a key missing from a configMap or secret)."""
        for name, volume in self.volumes.items():
            kind = volume_type(volume)
            source = volume.get(kind) if isinstance(volume.get(kind), dict) else {}
            if kind == "persistentVolumeClaim":
                claim = str(source.get("claimName") or "")
                if claim not in self.mapping:
                    raise VolumeError(f"claim {claim!r} has no folder here (--volume {claim}=DIR)")
                self.sources[name] = (self.mapping[claim], source.get("readOnly") is True)
            elif kind in ("configMap", "secret"):
                self.sources[name] = (self._projected(name, kind, source), True)
            elif kind == "emptyDir":
                memory = source.get("medium") == "Memory"
                if memory and self.shm_base is None:
                    raise VolumeError(f"volume {name!r}: the run has no folder under {SHM} for a Memory emptyDir")
                folder = (self.shm_base if memory and self.shm_base is not None else self.base) / name
                self._mkdir(folder, 0o777)  # as the kubelet makes it: any user of the pod may write
                limit = source.get("sizeLimit")
                if memory and limit is not None and enforces_size_limits():
                    self._tmpfs(folder, name, limit)
                self.sources[name] = (folder, False)
            elif kind == "hostPath":
                self.sources[name] = (check_host_path(source, create=True), False)
            elif kind == "downwardAPI":
                self.sources[name] = (self._downward(name, source), True)
            else:
                raise VolumeError(f"volume {name!r}: {kind} volumes are not set up by a local run")

    def _mkdir(self, folder: Path, mode: int) -> None:
        """Make ``folder`` (new) with ``mode`` whatever the umask; its parent is the pod's own folder
        in the run dir or in the run's ``/dev/shm`` folder (both 0700, the run's user's)."""
        top = folder.parent
        _make(lambda: top.mkdir(mode=0o700, parents=True, exist_ok=True), top)
        _make(lambda: folder.mkdir(mode=mode), folder)
        _make(lambda: _chmod_folder(folder, mode), folder)  # not through a link put in its place
        self.made.append(folder)

    def _tmpfs(self, folder: Path, name: str, limit: Any) -> None:
        """Mount a tmpfs of ``sizeLimit`` bytes on ``folder`` (root only), as the kubelet sizes a
        Memory emptyDir: a write past the limit fails with ENOSPC."""
        try:
            size = int(parse_quantity(limit))
        except ValueError:
            raise VolumeError(f"volume {name!r}: sizeLimit {limit!r} is not a quantity") from None
        options = f"size={max(size, 4096)},mode=0777,nosuid,nodev"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "t9k-jobs-emptydir", str(folder)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            raise VolumeError(f"volume {name!r}: cannot mount a tmpfs of sizeLimit {limit}: {why[0]}")
        self.mounted.append(folder)

    def _projected(self, name: str, kind: str, source: dict[str, Any]) -> Path:
        """A configMap's or secret's keys as files: the job's own from the run directory, another
        from its ``--volume`` folder; with ``items`` or modes, a copy of the keys named."""
        object_name = str(source.get("name") if kind == "configMap" else source.get("secretName") or "")
        key = ("ConfigMap" if kind == "configMap" else "Secret", object_name)
        folder = self.own.get(key) or self.mapping.get(object_name)
        if folder is None:
            if source.get("optional") is True:
                empty = self.base / name
                self._mkdir(empty, 0o755)
                return empty
            raise VolumeError(f"{kind} {object_name!r} has no folder here (--volume {object_name}=DIR)")
        items = source.get("items")
        default_mode = source.get("defaultMode")
        if key in self.own or items or default_mode is not None:
            out = self.base / name
            self._mkdir(out, 0o755)
            keys = {str(i.get("key")): (str(i.get("path") or i.get("key")), i.get("mode")) for i in items or []}
            if not items:
                keys = {p.name: (p.name, None) for p in sorted(folder.iterdir()) if p.is_file()} if folder.is_dir() else {}
            for k, (rel, mode) in keys.items():
                src = folder / k
                if not src.is_file():
                    if source.get("optional") is True:
                        continue
                    raise VolumeError(f"{kind} {object_name!r} has no key {k!r}")
                dest = out / rel
                _make(lambda dest=dest: dest.parent.mkdir(parents=True, exist_ok=True), dest.parent)
                _make(lambda src=src, dest=dest: shutil.copyfile(src, dest), dest)
                final = mode if isinstance(mode, int) else default_mode if isinstance(default_mode, int) else 0o644
                os.chmod(dest, final & 0o777)
            return out
        return folder

    def _downward(self, name: str, source: dict[str, Any]) -> Path:
        out = self.base / name
        self._mkdir(out, 0o755)
        meta = self.pod["metadata"]
        default_mode = source.get("defaultMode")
        for item in source.get("items") or []:
            field = str((item.get("fieldRef") or {}).get("fieldPath") or "")
            dest = out / str(item.get("path"))
            _make(lambda dest=dest: dest.parent.mkdir(parents=True, exist_ok=True), dest.parent)
            _make(lambda dest=dest, field=field: dest.write_text(downward_value(field, meta, self.uid)), dest)
            mode = item.get("mode") if isinstance(item.get("mode"), int) else default_mode
            os.chmod(dest, (mode if isinstance(mode, int) else 0o644) & 0o777)
        return out

    def mounts(self, container: dict[str, Any], env: dict[str, str]) -> list[Mount]:
        """The container's mounts in its ``volumeMounts`` order, after :meth:`prepare`. A
        ``subPath`` (``subPathExpr`` expanded against ``env``, the container's own variables) is made
        in a writable volume when missing, as the kubelet makes it. Raises :class:`VolumeError`
        (a subPath that leaves its volume, one missing in a read-only volume)."""
        out = []
        for m in container.get("volumeMounts") or []:
            name = str(m.get("name"))
            if name not in self.sources:
                raise VolumeError(f"volumeMounts {name!r}: not a volume of the pod")
            source, read_only = self.sources[name]
            read_only = read_only or m.get("readOnly") is True
            sub = m.get("subPath") or ""
            if m.get("subPathExpr"):
                sub = _VAR.sub(lambda v: env.get(v.group(1), ""), str(m["subPathExpr"]))
            if sub:
                target = source / sub
                real_base = os.path.realpath(source)
                resolved = os.path.realpath(target)
                if os.path.commonpath([real_base, resolved]) != real_base:
                    raise VolumeError(f"volume {name!r}: subPath {sub!r} leads outside the volume")
                if not os.path.lexists(target):
                    if read_only:
                        raise VolumeError(f"volume {name!r}: subPath {sub!r} does not exist in a read-only volume")
                    _make(lambda target=target: Path(target).mkdir(parents=True, exist_ok=True), target)
                source = Path(resolved)
            out.append(Mount(os.path.normpath(str(m.get("mountPath"))), source, read_only, name))
        return out

    def remove(self) -> None:
        """Remove what :meth:`prepare` made (emptyDirs and projected files), as the kubelet removes
        a pod's volumes with it; a claim's, a hostPath's and a ``--volume`` folder stay."""
        for folder in self.mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)
        for root in (self.base, self.shm_base):
            if root is not None:
                with contextlib.suppress(OSError):
                    _remove_tree(root)


def _chmod_folder(folder: Path, mode: int) -> None:
    """``chmod`` of the folder at ``folder`` itself: opened without following a symlink (``O_PATH |
    O_NOFOLLOW | O_DIRECTORY``), so a link put in its place makes this fail instead of changing
    the link's target. Raises ``OSError`` (ENOTDIR for a link or a file)."""
    fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chmod(f"/proc/self/fd/{fd}", mode)  # an O_PATH descriptor: fchmod refuses it, its /proc link does not
    finally:
        os.close(fd)


def _open_writable(parent: int | None, name: str | Path) -> int | None:
    """The folder ``name`` (in the folder open as ``parent``), made 0700 then opened to be read:
    through no symlink (a link or a file there gives None). A container may leave a folder it
    made read-only, as it may in an emptyDir: removing its entries needs it writable."""
    flags = os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        fd = os.open(name, os.O_PATH | flags, dir_fd=parent)
    except OSError:
        return None
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | flags)
    except OSError:
        return None
    finally:
        os.close(fd)


def _make_writable(parent: int | None, name: str | Path, depth: int = 0) -> None:
    """Make the folder ``name`` and every folder under it 0700, each opened relative to its parent's
    descriptor and never through a symlink: a container that swaps a folder for a link to
    elsewhere while this runs (root running it) changes nothing outside the tree."""
    fd = _open_writable(parent, name)
    if fd is None:
        return
    try:
        if depth < 256:
            with os.scandir(fd) as entries:
                subfolders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
            for sub in subfolders:
                _make_writable(fd, sub, depth + 1)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_tree(root: Path) -> None:
    """Remove ``root`` and everything under it, making folders writable first (:func:`_make_writable`),
    then with :func:`shutil.rmtree`, which on Linux works through descriptors and never follows a
    symlink (``rmtree.avoids_symlink_attacks``)."""
    if not os.path.lexists(root) or os.path.islink(root):
        return
    _make_writable(None, root)
    shutil.rmtree(root, ignore_errors=True)


def make_shm_dir() -> Path:
    """A new folder of this run under ``/dev/shm`` for its Memory emptyDirs: a random name made
    with ``O_EXCL`` semantics and mode 0700 (:func:`tempfile.mkdtemp`), the run's user's: no other
    account can have made it first, look into it, or put a link in it. Raises ``OSError``."""
    return Path(tempfile.mkdtemp(prefix="t9k-jobs-", dir=SHM))


def remove_shm_dir(folder: Path) -> None:
    """Remove the run's ``/dev/shm`` folder and what its pods left there (tmpfs mounts unmounted)."""
    for mount in _mounts_under(folder):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
    _remove_tree(folder)


def _mounts_under(folder: Path) -> list[str]:
    """The mount points at or under ``folder`` (``/proc/self/mountinfo``), deepest first."""
    prefix = str(folder).rstrip("/") + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")
            if point.startswith(prefix):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def uses_memory(pod: dict[str, Any]) -> bool:
    """Whether ``pod`` (a manifest) has an ``emptyDir`` of medium Memory (its run then makes a
    ``/dev/shm`` folder of its own: :func:`make_shm_dir`)."""
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return any(
        isinstance(v, dict) and isinstance(v.get("emptyDir"), dict) and v["emptyDir"].get("medium") == "Memory"
        for v in volumes
    )


def enforces_size_limits() -> bool:
    """Whether a Memory emptyDir's ``sizeLimit`` is enforced here: a tmpfs of that size is mounted
    for it, which needs root (CAP_SYS_ADMIN in the host's mount namespace)."""
    return os.geteuid() == 0


def size_limit_notes(job: Job) -> list[str]:
    """``emptyDir.sizeLimit`` that a run here does not enforce, one line each: a disk emptyDir's (the
    kubelet evicts a pod past it; here it is a folder of the run dir) and, for a user other than
    root, a Memory one's."""
    out = []
    for use in _uses(job):
        source = use.volume.get("emptyDir")
        if volume_type(use.volume) != "emptyDir" or not isinstance(source, dict) or source.get("sizeLimit") is None:
            continue
        limit = source["sizeLimit"]
        if source.get("medium") != "Memory":
            out.append(
                f"{use.path}.emptyDir.sizeLimit: {limit} is not enforced by a local run (a kubelet evicts a pod "
                "past it); the volume is a folder of the run dir"
            )
        elif not enforces_size_limits():
            out.append(
                f"{use.path}.emptyDir.sizeLimit: {limit} is not enforced for a user other than root (a tmpfs of "
                f"that size needs root); the volume is a folder in {SHM}, bounded by its free memory only"
            )
    return out


# --------------------------------------------------------------------------- TensorBoard's log folders


def tensorboard_claims(job: Job) -> list[str]:
    """The claims ``spec.tensorboardSpec`` reads from (``trainingLogFilesets`` ``t9k://pvc/CLAIM/...``
    and ``logDir.pvc[].name``)."""
    return [claim for claim, _ in _tensorboard_entries(job)]


def _tensorboard_entries(job: Job) -> list[tuple[str, str]]:
    spec = getattr(job.spec, "tensorboard_spec", None)
    if not isinstance(spec, dict):
        return []
    out = []
    for entry in spec.get("trainingLogFilesets") or []:
        text = str(entry)
        if text.startswith("t9k://pvc/"):
            claim, _, rest = text[len("t9k://pvc/") :].partition("/")
            out.append((claim, rest))
    log_dir = spec.get("logDir")
    if isinstance(log_dir, dict):
        for pvc in log_dir.get("pvc") or []:
            if isinstance(pvc, dict):
                for sub in pvc.get("subPath") or pvc.get("subpath") or [""]:
                    out.append((str(pvc.get("name") or ""), str(sub)))
    return out


def tensorboard_folders(job: Job, mapping: dict[str, Path]) -> tuple[list[Path], list[str]]:
    """The folders of this machine ``spec.tensorboardSpec`` names, through ``--volume``, and
    one line per entry that names none (a claim without a folder, a MinIO fileset, a path that
    leaves its claim, by ``..`` or through a symbolic link in it)."""
    spec = getattr(job.spec, "tensorboard_spec", None)
    problems = []
    folders = []
    if isinstance(spec, dict):
        for i, entry in enumerate(spec.get("trainingLogFilesets") or []):
            if not str(entry).startswith("t9k://pvc/"):
                problems.append(
                    f"spec.tensorboardSpec.trainingLogFilesets[{i}]: {entry!r} is not t9k://pvc/CLAIM/PATH; a local "
                    "TensorBoard reads claims only"
                )
    for claim, rest in _tensorboard_entries(job):
        if claim not in mapping:
            problems.append(f"spec.tensorboardSpec: claim {claim!r} has no folder here: give one with --volume {claim}=DIR")
            continue
        base = mapping[claim]
        folder = Path(os.path.normpath(base / rest.strip("/")))
        if os.path.commonpath([str(base), str(folder)]) != str(base):
            problems.append(f"spec.tensorboardSpec: {claim}/{rest} leads outside the claim")
            continue
        real_base, real = os.path.realpath(base), os.path.realpath(folder)
        if os.path.commonpath([real_base, real]) != real_base:  # as a subPath through a link is refused
            problems.append(f"spec.tensorboardSpec: {claim}/{rest} leads outside the claim through a symbolic link")
            continue
        folders.append(Path(real))  # resolved once: a link put in its place later is not followed
    return folders, problems


__all__ = [
    "HOST_PATH_TYPES",
    "SUPPORTED_TYPES",
    "Mount",
    "PodVolumes",
    "VolumeError",
    "check_host_path",
    "downward_value",
    "enforces_size_limits",
    "make_shm_dir",
    "mapped_name",
    "mounts_volumes",
    "parse_volume_flags",
    "remove_shm_dir",
    "size_limit_notes",
    "tensorboard_claims",
    "tensorboard_folders",
    "unused_mappings",
    "uses_memory",
    "volume_problems",
    "volume_type",
]
