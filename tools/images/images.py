#!/usr/bin/env python3
"""Build t9k-jobs' container images as OCI archives without a Docker engine, and import them.

    images.py build [--force] [-v] NAME...     # NAME: pause, base, operator, training, kueue, or all
    images.py import SOCKET ARCHIVE...         # into a containerd's k8s.io namespace (ctr)
    images.py verify [-v] NAME...              # build, import into a throw-away containerd, run checks
    images.py clean [--all]                    # drop buildah's layer cache (--all: the archives too)

``build`` prints one line per image, ``NAME ARCHIVE``, on stdout; progress and timings go to
stderr and each image's full tool output to ``<cache>/logs/NAME.log``. The archives live in
``${XDG_CACHE_HOME:-~/.cache}/t9k-jobs/images/`` as ``NAME-KEY.oci.tar``, KEY being a hash of
everything that goes into the image, so an unchanged image is returned at once.

* ``pause``, ``base`` and ``kueue`` are written by :func:`write_image` (one uncompressed layer)
  from a statically linked pause.c, a debootstrap root file system and the static Kueue manager
  that tools/kueue/build.sh compiles from Go modules.
* ``operator`` and ``training`` are built by buildah (chroot isolation, overlay storage under
  the cache, ``--layers``) from the root Dockerfile and images/training/Dockerfile, FROM ``base``.

Every archive names its image in the ``io.containerd.image.name`` annotation, so
``ctr -n k8s.io images import ARCHIVE`` tags it with the full reference. Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "t9k-jobs" / "images"
#: buildah's run state (locks, mount counts), one per cache: /run is a tmpfs on most machines,
#: so a reboot clears it, as it clears the mounts it counts.
RUNROOT = Path("/run/t9k-jobs-images") / hashlib.sha256(str(CACHE).encode()).hexdigest()[:12]
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
NAME_ANNOTATION = "io.containerd.image.name"
REF_ANNOTATION = "org.opencontainers.image.ref.name"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PAUSE_VERSION = "3.10"


def version() -> str:
    m = re.search(r'^version\s*=\s*"([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE)
    if not m:
        raise Failure("read the version", 'pyproject.toml has no version = "..." line')
    return m.group(1)


# ----------------------------------------------------------------------------- errors, logs


class Failure(Exception):
    """An expected failure: one line naming the step, and the tail of the tool's output."""

    def __init__(self, step: str, message: str, tail: list[str] | None = None, log: Path | None = None):
        super().__init__(f"{step}: {message}")
        self.step, self.message, self.tail, self.log = step, message, tail or [], log


class Usage(Exception):
    pass


VERBOSE = False
T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[images {time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


class Log:
    """One image's build log file (the latest build's); every tool's output goes there."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # the latest run only; closed by close()
        self.f = open(path, "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
        self.f.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}\n")

    def write(self, line: str) -> None:
        self.f.write(line if line.endswith("\n") else line + "\n")

    def close(self) -> None:
        self.f.close()


def run(
    step: str,
    argv: list[str],
    log: Log | None = None,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    echo: Callable[[str], bool] | None = None,
    check: bool = True,
) -> tuple[int, str]:
    """Run a tool; its output goes to the log (and stderr with -v). Returns (code, output).

    A non-zero exit raises Failure naming ``step`` with the last lines of the output.
    """
    if log:
        log.write(f"$ {' '.join(argv)}")
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except FileNotFoundError:
        raise Failure(step, f"{argv[0]} not found") from None
    out: list[str] = []
    tail: collections.deque[str] = collections.deque(maxlen=25)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            tail.append(line.rstrip("\n"))
            if log:
                log.write(line)
            if VERBOSE or (echo and echo(line)):
                sys.stderr.write("    " + line)
        code = proc.wait()
    except BaseException:
        # Interrupted (Ctrl-C or SIGTERM): stop the tool too, so it can unmount and clean up.
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    if code != 0 and check:
        raise Failure(step, f"{Path(argv[0]).name} exited with {code}", list(tail), log.path if log else None)
    return code, "".join(out)


# ----------------------------------------------------------------------------- host packages

#: command -> Debian package that provides it
PACKAGES = {
    "buildah": ["buildah"],
    "debootstrap": ["debootstrap", "debian-archive-keyring"],
    "gcc": ["gcc", "libc6-dev"],
    "ctr": ["containerd"],
    "containerd": ["containerd"],
    "runc": ["runc"],
    "tar": ["tar"],
}


def ensure_commands(*commands: str) -> None:
    """Install the Debian packages behind missing commands (tests run as root on a fresh machine)."""
    missing = [c for c in commands if shutil.which(c) is None]
    if "debootstrap" in commands and not Path("/usr/share/keyrings/debian-archive-keyring.gpg").exists():
        missing.append("debootstrap")
    if not missing:
        return
    pkgs = sorted({p for c in missing for p in PACKAGES[c]})
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise Failure(
            "install tools",
            f"need {', '.join(missing)}: install the Debian packages {' '.join(pkgs)} (as root)",
        )
    say(f"installing {' '.join(pkgs)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run("apt-get update", ["apt-get", "update", "-q"], env=env)
    run("apt-get install", ["apt-get", "install", "-y", "-q", "--no-install-recommends", *pkgs], env=env)
    still = [c for c in commands if shutil.which(c) is None]
    if still:
        raise Failure("install tools", f"{', '.join(still)} still missing after installing {' '.join(pkgs)}")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise Failure(what, "needs root (debootstrap, buildah with chroot isolation and containerd all do)")


# ----------------------------------------------------------------------------- hashing


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tree_files(root: Path, rel: str) -> Iterator[Path]:
    """The files under REPO/rel (one file or a directory), without __pycache__ and .pyc (.dockerignore)."""
    p = root / rel
    if p.is_file():
        yield p
        return
    if not p.is_dir():
        raise Failure("hash inputs", f"{rel} is missing")
    for dirpath, dirnames, filenames in os.walk(p):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(".pyc"):
                yield Path(dirpath) / name


class Key:
    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def add(self, label: str, value: str | bytes) -> Key:
        data = value.encode() if isinstance(value, str) else value
        self.h.update(f"{label}\0{len(data)}\0".encode() + data)
        return self

    def files(self, rels: list[str]) -> Key:
        for rel in rels:
            for path in tree_files(REPO, rel):
                self.add(str(path.relative_to(REPO)), path.read_bytes())
                self.add("mode", str(os.stat(path).st_mode & 0o111))
        return self

    def hex(self) -> str:
        return self.h.hexdigest()[:16]


# ----------------------------------------------------------------------------- OCI archives


def copy_into(src: Path, dst: io.RawIOBase, size: int) -> None:
    """Append ``size`` bytes of ``src`` to ``dst`` (in the kernel where it can: layers are GBs)."""
    with open(src, "rb") as f:
        left = size
        try:
            while left:
                n = os.copy_file_range(f.fileno(), dst.fileno(), min(left, 1 << 30))
                if n == 0:
                    raise Failure("write archive", f"{src} is shorter than {size} bytes")
                left -= n
        except OSError:  # no copy_file_range across these files: copy through user space
            f.seek(size - left)
            shutil.copyfileobj(f, dst, 1 << 20)


def oci_archive(layout: Path, ref: str, out: Path) -> str:
    """Tar an OCI layout directory (one manifest) into ``out``, naming the image ``ref``.

    Sets ``io.containerd.image.name`` (what ``ctr images import`` tags) and
    ``org.opencontainers.image.ref.name`` on the manifest. Writes ``out`` atomically and
    returns the manifest digest.
    """
    index = json.loads((layout / "index.json").read_text())
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise Failure("write archive", f"{layout}/index.json has {len(manifests)} manifests, expected 1")
    manifests[0].setdefault("annotations", {}).update({NAME_ANNOTATION: ref, REF_ANNOTATION: ref})
    index_bytes = json.dumps(index, indent=None, separators=(",", ":")).encode()
    blobs = sorted((layout / "blobs" / "sha256").iterdir(), key=lambda p: (p.stat().st_size, p.name))
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb", buffering=0) as f:  # unbuffered: copy_file_range writes at the fd offset

            def header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> None:
                info = tarfile.TarInfo(name)
                info.size, info.type, info.mtime = size, kind, 0
                info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
                f.write(info.tobuf(tarfile.PAX_FORMAT))

            def pad(size: int) -> None:
                if size % tarfile.BLOCKSIZE:
                    f.write(b"\0" * (tarfile.BLOCKSIZE - size % tarfile.BLOCKSIZE))

            def add_bytes(name: str, data: bytes) -> None:
                header(name, len(data))
                f.write(data)
                pad(len(data))

            add_bytes("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add_bytes("index.json", index_bytes)
            header("blobs/", 0, tarfile.DIRTYPE)
            header("blobs/sha256/", 0, tarfile.DIRTYPE)
            for blob in blobs:
                size = blob.stat().st_size
                header(f"blobs/sha256/{blob.name}", size)
                copy_into(blob, f, size)
                pad(size)
            f.write(b"\0" * (2 * tarfile.BLOCKSIZE))  # end of archive
            os.fsync(f.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return manifests[0]["digest"]


def write_image(
    rootfs: Path, ref: str, out: Path, work: Path, config: dict, tar_args: list[str], log: Log
) -> str:
    """A one-layer OCI image from a directory: uncompressed layer, config, manifest, archive."""
    layout = work / "layout"
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> tuple[str, int]:
        d = hashlib.sha256(data).hexdigest()
        (blobs / d).write_bytes(data)
        return "sha256:" + d, len(data)

    layer = work / "layer.tar"
    # GNU tar: numeric owners, file capabilities and other xattrs, a stable order.
    run(
        "tar the layer",
        [
            "tar",
            "--numeric-owner",
            "--xattrs",
            "--xattrs-include=*",
            "--sort=name",
            *tar_args,
            "-C",
            str(rootfs),
            "-cf",
            str(layer),
            ".",
        ],
        log,
    )
    ldigest = sha256_file(layer)
    lsize = layer.stat().st_size
    layer.rename(blobs / ldigest)
    cfg = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + ldigest]},
        "history": [
            {
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "created_by": "tools/images/images.py",
            }
        ],
    }
    cdigest, csize = put(json.dumps(cfg, separators=(",", ":")).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": cdigest, "size": csize},
        "layers": [{"mediaType": LAYER_TAR, "digest": "sha256:" + ldigest, "size": lsize}],
    }
    mdigest, msize = put(json.dumps(manifest, separators=(",", ":")).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": MANIFEST, "digest": mdigest, "size": msize}],
    }
    (layout / "index.json").write_text(json.dumps(index))
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    return oci_archive(layout, ref, out)


def read_index(archive: Path) -> dict:
    """index.json of an OCI archive (near the start of the ones written here; any order works)."""
    try:
        with tarfile.open(archive, "r|") as tar:
            for member in tar:
                if member.name.lstrip("./") == "index.json":
                    f = tar.extractfile(member)
                    assert f is not None
                    return json.loads(f.read())
    except (OSError, tarfile.TarError, json.JSONDecodeError) as e:
        raise Failure("read archive", f"{archive}: {e}") from None
    raise Failure("read archive", f"{archive} has no index.json")


def archive_image(archive: Path) -> tuple[str, str]:
    """(ref, manifest digest) of a one-image archive written here."""
    manifests = read_index(archive).get("manifests") or []
    if len(manifests) != 1:
        raise Failure("read archive", f"{archive} holds {len(manifests)} manifests, expected 1")
    ref = (manifests[0].get("annotations") or {}).get(NAME_ANNOTATION)
    if not ref:
        raise Failure(
            "read archive", f"{archive} has no {NAME_ANNOTATION} annotation (not written by images.py?)"
        )
    return ref, manifests[0]["digest"]


# ----------------------------------------------------------------------------- mounts, cleanup


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path``, deepest first (from /proc/self/mountinfo)."""
    prefix = str(path).rstrip("/")
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp == prefix or mp.startswith(prefix + "/"):
                found.append(mp)
    return sorted(set(found), key=len, reverse=True)


def unmount_all(path: Path, log: Log | None = None) -> None:
    for mp in mounts_under(path):
        if log:
            log.write(f"umount {mp}")
        subprocess.run(["umount", mp], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if mp in mounts_under(path):
            subprocess.run(
                ["umount", "-l", mp], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )


def remove_tree(path: Path, log: Log | None = None) -> None:
    """rm -rf, but never through a live mount (a bind-mounted /proc or /dev in a rootfs)."""
    if not path.exists():
        return
    unmount_all(path, log)
    left = mounts_under(path)
    if left:
        raise Failure("clean up", f"{path} still has mounts ({', '.join(left)}); not removing it")
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scratch(prefix: str, log: Log | None = None) -> Iterator[Path]:
    """A work directory under the cache (same file system as the archives); removed afterwards."""
    (CACHE / "work").mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix=prefix + "-", dir=CACHE / "work"))
    try:
        yield d
    finally:
        remove_tree(d, log)


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One build at a time per cache (two buildah builds of the same image would race)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another build to finish (lock {CACHE / '.lock'})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def clean_stale_work() -> None:
    """Work dirs and partial archives left by a build that was killed (we hold the lock)."""
    work = CACHE / "work"
    if work.is_dir():
        for d in work.iterdir():
            remove_tree(d)
    for p in CACHE.glob(".*.tmp-*"):
        p.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- the images


@dataclass
class Image:
    name: str
    ref: str
    deps: list[str] = field(default_factory=list)
    key: Callable[[Builder], str] = lambda b: ""
    build: Callable[[Builder, Image, Path, Log], None] = lambda b, i, out, log: None


class Builder:
    def __init__(self, force: bool = False):
        self.force = force
        self.archives: dict[str, Path] = {}
        self.keys: dict[str, str] = {}

    # -- keys

    def key(self, name: str) -> str:
        if name not in self.keys:
            self.keys[name] = IMAGES[name].key(self)
        return self.keys[name]

    def archive_path(self, name: str) -> Path:
        return CACHE / f"{name}-{self.key(name)}.oci.tar"

    # -- building

    def ensure(self, name: str, requested: bool = True) -> Path:
        if name in self.archives:
            return self.archives[name]
        image = IMAGES[name]
        for dep in image.deps:
            self.ensure(dep, requested=False)
        out = self.archive_path(name)
        if out.exists() and not (self.force and requested):
            say(f"{name}: cached {out.name}")
            self.archives[name] = out
            return out
        require_root(f"build {name}")
        log = Log(CACHE / "logs" / f"{name}.log")
        t = time.monotonic()
        say(f"{name}: building {image.ref} (key {self.key(name)}; log {log.path})")
        try:
            image.build(self, image, out, log)
        except Failure as e:
            e.step = f"{name}: {e.step}"
            raise
        finally:
            log.close()
        size = out.stat().st_size
        say(f"{name}: built {out.name} ({size / 1e6:.1f} MB) in {time.monotonic() - t:.1f}s")
        # older archives of this image are superseded
        for old in CACHE.glob(f"{name}-*.oci.tar"):
            if old != out:
                old.unlink(missing_ok=True)
        self.archives[name] = out
        return out


# -- pause


def pause_source() -> Path:
    """kubernetes' build/pause/linux/pause.c from the Go module cache (downloaded if missing)."""
    k8s = REPO / "tools" / "controlplane" / "k8s"
    m = re.search(r"^require k8s\.io/kubernetes (v\S+)", (k8s / "go.mod").read_text(), re.MULTILINE)
    kver = m.group(1) if m else "v1.37.2"
    env = dict(os.environ, GOFLAGS="-modcacherw", GOTOOLCHAIN="local")
    if shutil.which("go") is None:
        raise Failure(
            "find pause.c",
            "the Go toolchain is needed to locate k8s.io/kubernetes' pause.c (go env GOMODCACHE)",
        )
    _, modcache = run("go env GOMODCACHE", ["go", "env", "GOMODCACHE"], env=env)
    src = Path(modcache.strip()) / f"k8s.io/kubernetes@{kver}" / "build/pause/linux/pause.c"
    if not src.exists():
        say(f"pause: downloading k8s.io/kubernetes@{kver} into the Go module cache")
        run(
            "go mod download k8s.io/kubernetes",
            ["go", "mod", "download", "k8s.io/kubernetes"],
            cwd=k8s,
            env=env,
        )
    if not src.exists():
        raise Failure("find pause.c", f"{src} is missing after go mod download")
    return src


def pause_key(b: Builder) -> str:
    ensure_commands("gcc")
    _, gcc = run("gcc --version", ["gcc", "--version"])
    return (
        Key()
        .add("recipe", "pause-1")
        .add("ref", IMAGES["pause"].ref)
        .add("version", PAUSE_VERSION)
        .add("pause.c", pause_source().read_bytes())
        .add("gcc", gcc.splitlines()[0])
        .hex()
    )


def build_pause(b: Builder, image: Image, out: Path, log: Log) -> None:
    ensure_commands("gcc", "tar")
    src = pause_source()
    with scratch("pause", log) as work:
        root = work / "rootfs"
        root.mkdir()
        t = time.monotonic()
        run(
            "gcc pause.c",
            [
                "gcc",
                "-Os",
                "-static",
                "-Wall",
                f"-DVERSION={PAUSE_VERSION}-t9k-jobs",
                "-o",
                str(root / "pause"),
                str(src),
            ],
            log,
        )
        run("strip pause", ["strip", str(root / "pause")], log)
        say(f"pause: compiled {src.name} in {time.monotonic() - t:.1f}s")
        write_image(
            root,
            image.ref,
            out,
            work,
            {"Env": [f"PATH={DEFAULT_PATH}"], "Entrypoint": ["/pause"]},
            ["--owner=0", "--group=0", "--mtime=@0"],
            log,
        )


# -- base

BASE_SUITE = "bookworm"
BASE_PACKAGES = ["python3", "python3-venv", "python-is-python3", "ca-certificates"]
#: Files added to the debootstrap root, as Debian's official images have them.
BASE_FILES = {
    # no daemon starts while a package is installed in a build (openssh-server's postinst)
    "usr/sbin/policy-rc.d": (
        "#!/bin/sh\n# images.py: no services start inside image builds\nexit 101\n",
        0o755,
    ),
    # apt leaves no .deb files and no package caches behind in a layer
    "etc/apt/apt.conf.d/docker-clean": (
        (
            'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb'
            ' /var/cache/apt/*.bin || true"; };\n'
            'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb'
            " /var/cache/apt/archives/partial/*.deb"
            ' /var/cache/apt/*.bin || true"; };\n'
            'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n'
        ),
        0o644,
    ),
    "etc/apt/apt.conf.d/docker-no-languages": ('Acquire::Languages "none";\n', 0o644),
    "etc/apt/apt.conf.d/docker-autoremove-suggests": ('Apt::AutoRemove::SuggestsImportant "false";\n', 0o644),
}


def base_key(b: Builder) -> str:
    k = Key().add("recipe", "base-1").add("ref", IMAGES["base"].ref).add("suite", BASE_SUITE)
    k.add("mirror", DEBIAN_MIRROR).add("packages", ",".join(BASE_PACKAGES))
    for path, (text, mode) in sorted(BASE_FILES.items()):
        k.add(path, f"{mode:o}:{text}")
    return k.hex()


def build_base(b: Builder, image: Image, out: Path, log: Log) -> None:
    ensure_commands("debootstrap", "tar")
    debs = CACHE / "debootstrap-debs"  # downloaded .debs, reused by the next debootstrap
    debs.mkdir(parents=True, exist_ok=True)
    with scratch("base", log) as work:
        root = work / "rootfs"
        t = time.monotonic()
        try:
            run(
                "debootstrap",
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    f"--cache-dir={debs}",
                    BASE_SUITE,
                    str(root),
                    DEBIAN_MIRROR,
                ],
                log,
                echo=lambda line: line.startswith(("I: Retrieving InRelease", "I: Base system installed")),
            )
        finally:
            unmount_all(root, log)  # debootstrap mounts proc and sys in the target
        say(f"base: debootstrap in {time.monotonic() - t:.1f}s")
        # as small and as neutral as Debian's own images: no caches, lists, logs, host files
        for pattern in [
            "var/cache/apt/archives/*.deb",
            "var/cache/apt/archives/partial/*",
            "var/cache/apt/*.bin",
            "var/lib/apt/lists/*",
            "var/log/*.log",
            "var/log/apt/*",
            "var/cache/debconf/*-old",
            "var/lib/dpkg/*-old",
            "dev/*",
            "proc/*",
            "sys/*",
            "run/*",
            "tmp/*",
            "etc/hostname",
            "etc/resolv.conf",
            "etc/machine-id",
            "var/lib/dbus/machine-id",
        ]:
            for p in root.glob(pattern):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink(missing_ok=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
        for rel, (text, mode) in BASE_FILES.items():
            p = root / rel
            p.write_text(text)
            p.chmod(mode)
        for need in [
            "usr/bin/python3",
            "usr/bin/python",
            "usr/sbin/useradd",
            "etc/ssl/certs/ca-certificates.crt",
        ]:
            if not (root / need).exists():
                raise Failure("check base rootfs", f"/{need} is missing after debootstrap", log=log.path)
        write_image(
            root,
            image.ref,
            out,
            work,
            {"Env": [f"PATH={DEFAULT_PATH}", "LANG=C.UTF-8"], "Cmd": ["python3"]},
            [],
            log,
        )


# -- buildah images


def buildah(*args: str) -> list[str]:
    return [
        "buildah",
        "--root",
        str(CACHE / "buildah" / "storage"),
        "--runroot",
        str(RUNROOT),
        "--storage-driver",
        "overlay",
        *args,
    ]


def buildah_cleanup(log: Log) -> None:
    """No working containers and no mounts of buildah's storage stay behind."""
    run("buildah rm --all", buildah("rm", "--all"), log, check=False)
    unmount_all(CACHE / "buildah" / "storage", log)
    unmount_all(RUNROOT, log)


def prune_storage(log: Log) -> None:
    """Drop the layer-cache images no tagged image builds on (earlier versions of an image).

    buildah --layers keeps one untagged image per build step. Those on the layer chain of a
    tagged image are the cache of its next build; the others (and their layers: a torch layer is
    6 GB) are removed. Reads containers/storage's own index files (overlay-images/images.json,
    overlay-layers/layers.json).
    """
    root = CACHE / "buildah" / "storage"
    try:
        images = json.loads((root / "overlay-images" / "images.json").read_text())
        layers = json.loads((root / "overlay-layers" / "layers.json").read_text())
    except (OSError, ValueError) as e:
        log.write(f"prune: cannot read the storage index: {e}")
        return
    parent = {layer["id"]: layer.get("parent") for layer in layers}
    keep: set[str] = set()
    for image in images:
        if image.get("names"):
            layer = image.get("layer")
            while layer and layer not in keep:
                keep.add(layer)
                layer = parent.get(layer)
    stale = [image["id"] for image in images if not image.get("names") and image.get("layer") not in keep]
    if stale:
        log.write(f"prune: {len(stale)} stale layer-cache images")
        run("buildah rmi (stale cache)", buildah("rmi", *stale), log, check=False)


def image_id(ref: str, log: Log) -> str | None:
    code, out = run(
        "buildah inspect",
        buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", ref),
        log,
        check=False,
    )
    return out.strip() if code == 0 else None


def load_base(b: Builder, log: Log) -> str:
    """The base image in buildah's storage, from its archive (pulled only when it changed)."""
    archive = b.archives["base"]
    ref = IMAGES["base"].ref
    with tarfile.open(archive, "r|") as tar:
        blobs: dict[str, bytes] = {}
        index = None
        for m in tar:
            if m.name == "index.json" or (
                m.name.startswith("blobs/sha256/") and m.size < 1 << 16 and m.isfile()
            ):
                f = tar.extractfile(m)
                assert f is not None
                data = f.read()
                if m.name == "index.json":
                    index = json.loads(data)
                else:
                    blobs[m.name.rsplit("/", 1)[1]] = data
    if index is None:
        raise Failure("read base archive", f"{archive} has no index.json")
    manifest = json.loads(blobs[index["manifests"][0]["digest"].split(":", 1)[1]])
    want = manifest["config"]["digest"].split(":", 1)[1]
    if image_id(ref, log) == want:
        return want
    t = time.monotonic()
    _, out = run("buildah pull base", buildah("pull", "--quiet", f"oci-archive:{archive}"), log)
    got = out.strip().splitlines()[-1] if out.strip() else ""
    run("buildah tag base", buildah("tag", got, ref), log)
    if image_id(ref, log) != want:
        raise Failure(
            "buildah pull base", f"{ref} has id {image_id(ref, log)}, expected {want}", log=log.path
        )
    say(f"base: loaded into buildah storage in {time.monotonic() - t:.1f}s")
    return want


def pip_cache_dir() -> Path:
    d = os.environ.get("PIP_CACHE_DIR")
    if d:
        return Path(d)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip"


#: Mount points that buildah 1.28 creates for a RUN step and leaves in the layer as empty files
#: and directories (containers/buildah#4242); the build's own -v targets are added to these.
BUILDAH_MOUNT_TARGETS = ["/etc/hosts", "/etc/hostname", "/etc/resolv.conf"]


def base_layers(archive: Path) -> set[str]:
    """Digests of the base archive's layers (shared by the images built FROM it: not scrubbed)."""
    with tarfile.open(archive, "r|") as tar:
        small = {
            m.name: tar.extractfile(m).read()
            for m in tar  # type: ignore[union-attr]
            if m.isfile() and m.size < 1 << 16
        }
    index = json.loads(small["index.json"])
    manifest = json.loads(small["blobs/sha256/" + index["manifests"][0]["digest"].split(":", 1)[1]])
    return {layer["digest"] for layer in manifest["layers"]}


def residue(members: list[tarfile.TarInfo], targets: list[str]) -> set[str]:
    """Names of the members that are only leftover mount points of ``targets`` in one layer.

    A target counts when it is an empty regular file or a directory with nothing else of this
    layer below it; its parent directories count too when all they hold in this layer is residue.
    """
    names = {m.name.rstrip("/").removeprefix("./"): m for m in members}
    drop: set[str] = set()
    for target in targets:
        rel = target.strip("/")
        m = names.get(rel)
        if m is None or not ((m.isfile() and m.size == 0) or m.isdir()):
            continue
        below = [n for n in names if n.startswith(rel + "/")]
        if below:
            continue
        drop.add(rel)
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        while parent and parent in names and names[parent].isdir():
            if any(n.startswith(parent + "/") and n not in drop for n in names):
                break
            drop.add(parent)
            parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
    return drop


def export_layout(pushed: Path, layout: Path, shared: set[str], targets: list[str], log: Log) -> Path:
    """An OCI layout from ``buildah push dir:`` output, without buildah's mount-point residue.

    Layers that hold residue (usually only the first RUN step's of a stage, a few MB) are
    rewritten without it, and the config and manifest get the new digests.
    """
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    manifest = json.loads((pushed / "manifest.json").read_text())
    cdigest = manifest["config"]["digest"].split(":", 1)[1]
    config = json.loads((pushed / cdigest).read_text())
    all_targets = BUILDAH_MOUNT_TARGETS + targets
    for i, layer in enumerate(manifest["layers"]):
        hexd = layer["digest"].split(":", 1)[1]
        src = pushed / hexd
        if layer["mediaType"] != LAYER_TAR:
            raise Failure(
                "export", f"layer {hexd[:12]} is {layer['mediaType']}, expected an uncompressed tar"
            )
        if layer["digest"] not in shared:
            with tarfile.open(src, "r") as tar:
                members = tar.getmembers()
                drop = residue(members, all_targets)
                if drop:
                    log.write(f"layer {hexd[:12]}: dropping build mount points {sorted(drop)}")
                    new = pushed / f"{hexd}.scrubbed"
                    with tarfile.open(new, "w", format=tarfile.PAX_FORMAT) as out:
                        for m in members:
                            if m.name.rstrip("/").removeprefix("./") not in drop:
                                out.addfile(m, tar.extractfile(m) if m.isreg() else None)
            if drop:
                src.unlink()
                hexd = sha256_file(new)
                src = pushed / hexd
                new.rename(src)
                layer["digest"] = config["rootfs"]["diff_ids"][i] = "sha256:" + hexd
                layer["size"] = src.stat().st_size
        src.rename(blobs / hexd)

    def put(data: bytes) -> tuple[str, int]:
        d = hashlib.sha256(data).hexdigest()
        (blobs / d).write_bytes(data)
        return "sha256:" + d, len(data)

    cd, cs = put(json.dumps(config, separators=(",", ":")).encode())
    manifest["config"].update(digest=cd, size=cs)
    md, ms = put(json.dumps(manifest, separators=(",", ":")).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": MANIFEST, "digest": md, "size": ms}],
    }
    (layout / "index.json").write_text(json.dumps(index))
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    return layout


#: What buildah 1.28 prints when the copy of its own binary that its chroot isolation re-executes
#: (runc 1.1's nsenter/cloned_binary.c, vendored) cannot be sealed: fcntl(F_ADD_SEALS) answers
#: EBUSY while the kernel still holds a transient reference on one of the memfd's pages. Seen in
#: the CI run of 2026-11-25 on this VM, never before; the step's command had not started, so
#: trying again is safe.
TRANSIENT_BUD_FAILURE = "sealing memfd copy"

#: How many times one ``buildah bud`` is tried when it fails with TRANSIENT_BUD_FAILURE.
BUD_ATTEMPTS = 3


def bud_with_retries(name: str, argv: list[str], log: Log, env: dict[str, str]) -> None:
    """Run ``buildah bud``; try again (steps already built come from the layer cache) only when it
    failed with :data:`TRANSIENT_BUD_FAILURE`, at most :data:`BUD_ATTEMPTS` times.

    Raises Failure as :func:`run` does for any other failure, or for the last transient one.
    """
    for attempt in range(1, BUD_ATTEMPTS + 1):
        code, output = run("buildah bud", argv, log, env=env, echo=lambda line: line.startswith("STEP "), check=False)
        if code == 0:
            return
        transient = TRANSIENT_BUD_FAILURE in output
        if not transient or attempt == BUD_ATTEMPTS:
            tail = output.rstrip("\n").splitlines()[-25:]
            raise Failure("buildah bud", f"buildah exited with {code}", tail, log.path)
        say(f"{name}: buildah bud failed with {TRANSIENT_BUD_FAILURE!r} (a transient kernel EBUSY); attempt {attempt + 1} of {BUD_ATTEMPTS}")


def build_with_buildah(dockerfile: str, ignorefile: str | None, extra_args: list[str]):
    def build(b: Builder, image: Image, out: Path, log: Log) -> None:
        ensure_commands("buildah", "tar")
        (CACHE / "buildah" / "storage").mkdir(parents=True, exist_ok=True)
        RUNROOT.mkdir(parents=True, exist_ok=True)
        tmp = CACHE / "buildah" / "tmp"  # buildah's big temporary files, on the cache's file system
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        env = dict(os.environ, TMPDIR=str(tmp), BUILDAH_ISOLATION="chroot")
        try:
            load_base(b, log)
            # The host's pip configuration and CA bundle (PyPI is reached through a TLS-intercepting
            # proxy here) and pip's cache, for the RUN steps only: bind mounts never land in a layer.
            volumes: list[str] = []
            for path in ["/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt"]:
                if Path(path).is_file():
                    volumes += ["-v", f"{path}:{path}:ro"]
            cache = pip_cache_dir()
            cache.mkdir(parents=True, exist_ok=True)
            volumes += ["-v", f"{cache}:/root/.cache/pip"]
            t = time.monotonic()
            argv = buildah(
                "bud",
                "--isolation",
                "chroot",
                "--layers",
                "--pull=never",
                "--force-rm",
                "--format",
                "oci",
                "-f",
                str(REPO / dockerfile),
                "-t",
                image.ref,
                "--build-arg",
                f"BASE={IMAGES['base'].ref}",
                *extra_args,
                *volumes,
                *(["--ignorefile", str(REPO / ignorefile)] if ignorefile else []),
                *(["--no-cache"] if b.force else []),
                str(REPO),
            )
            bud_with_retries(image.name, argv, log, env)
            say(f"{image.name}: buildah bud in {time.monotonic() - t:.1f}s")
            t = time.monotonic()
            with scratch(image.name, log) as work:
                # dir: keeps the layers uncompressed (buildah 1.28's oci: transport gzips them even
                # with --disable-compression); export_layout() makes the OCI layout.
                pushed = work / "pushed"
                run(
                    "buildah push",
                    buildah(
                        "push",
                        "--quiet",
                        "--disable-compression",
                        "--format",
                        "oci",
                        image.ref,
                        f"dir:{pushed}",
                    ),
                    log,
                    env=env,
                )
                t_push = time.monotonic() - t
                layout = export_layout(
                    pushed,
                    work / "layout",
                    base_layers(b.archives["base"]),
                    [v.split(":")[1] for v in volumes[1::2]],
                    log,
                )
                oci_archive(layout, image.ref, out)
            prune_storage(log)
            say(
                f"{image.name}: exported in {time.monotonic() - t:.1f}s (buildah push {t_push:.1f}s, archive "
                f"{time.monotonic() - t - t_push:.1f}s)"
            )
        finally:
            buildah_cleanup(log)
            shutil.rmtree(tmp, ignore_errors=True)

    return build


def operator_key(b: Builder) -> str:
    return (
        Key()
        .add("recipe", "operator-1")
        .add("ref", IMAGES["operator"].ref)
        .add("base", b.key("base"))
        .files(["Dockerfile", ".dockerignore", "requirements/operator.txt", "pyproject.toml", "README.md", "src"])
        .hex()
    )


def training_files() -> list[str]:
    """What goes into the training image: its Dockerfile, its ignore file, and every file the
    ignore file lets into the build context (its ``!path`` lines), so the key follows the COPY."""
    ignore = "images/training/Dockerfile.dockerignore"
    allowed = [
        line[1:].strip()
        for line in (REPO / ignore).read_text().splitlines()
        if line.startswith("!") and line[1:].strip()
    ]
    return ["images/training/Dockerfile", ignore, *allowed]


def training_key(b: Builder) -> str:
    return (
        Key()
        .add("recipe", "training-1")
        .add("ref", IMAGES["training"].ref)
        .add("base", b.key("base"))
        .files(training_files())
        .hex()
    )


# -- kueue

KUEUE_DIR = REPO / "tools" / "kueue"
#: What the manager binary is built from (tools/kueue/build.sh keys its own cache on the same).
KUEUE_FILES = ["tools/kueue/go.mod", "tools/kueue/go.sum", "tools/kueue/tools.go", "tools/kueue/build.sh"]
#: The files distroless/static:nonroot (Kueue's own base) gives the manager besides /manager.
KUEUE_FILES_IN_IMAGE = {
    "etc/passwd": (
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
        0o644,
    ),
    "etc/group": ("root:x:0:\nnonroot:x:65532:\n", 0o644),
}


def kueue_version() -> str:
    m = re.search(r"^require sigs\.k8s\.io/kueue (v\S+)", (KUEUE_DIR / "go.mod").read_text(), re.MULTILINE)
    if not m:
        raise Failure("read tools/kueue/go.mod", "no `require sigs.k8s.io/kueue vX.Y.Z` line")
    return m.group(1)


def kueue_key(b: Builder) -> str:
    k = Key().add("recipe", "kueue-1").add("ref", IMAGES["kueue"].ref).files(KUEUE_FILES)
    for path, (text, mode) in sorted(KUEUE_FILES_IN_IMAGE.items()):
        k.add(path, f"{mode:o}:{text}")
    return k.hex()


def build_kueue(b: Builder, image: Image, out: Path, log: Log) -> None:
    """The manager as Kueue's Dockerfile has it: /manager, user 65532, no shell."""
    ensure_commands("tar")
    t = time.monotonic()
    _, printed = run("tools/kueue/build.sh", ["bash", str(KUEUE_DIR / "build.sh")], log)
    manager = Path(printed.strip().splitlines()[-1])
    if not manager.is_file():
        raise Failure("tools/kueue/build.sh", f"printed {manager}, which is not a file", log=log.path)
    say(f"kueue: manager binary ready in {time.monotonic() - t:.1f}s ({manager})")
    with scratch("kueue", log) as work:
        root = work / "rootfs"
        (root / "tmp").mkdir(parents=True)
        (root / "tmp").chmod(0o1777)
        shutil.copyfile(manager, root / "manager")
        (root / "manager").chmod(0o755)
        for path, (text, mode) in KUEUE_FILES_IN_IMAGE.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
            (root / path).chmod(mode)
        write_image(
            root,
            image.ref,
            out,
            work,
            {
                "Env": [f"PATH={DEFAULT_PATH}"],
                "Entrypoint": ["/manager"],
                "User": "65532:65532",
                "WorkingDir": "/",
            },
            ["--owner=0", "--group=0", "--mtime=@0"],
            log,
        )


IMAGES: dict[str, Image] = {}


def define_images() -> None:
    v = version()
    IMAGES.update(
        {
            "pause": Image("pause", f"registry.k8s.io/pause:{PAUSE_VERSION}", [], pause_key, build_pause),
            "base": Image("base", f"localhost/t9k-jobs-base:{BASE_SUITE}", [], base_key, build_base),
            "operator": Image(
                "operator",
                f"localhost/t9k-jobs:{v}",
                ["base"],
                operator_key,
                build_with_buildah("Dockerfile", None, []),
            ),
            # PIP_NO_CACHE_DIR empty: pip uses the bind-mounted host cache (the Dockerfile's default keeps
            # the cache out of the image when built elsewhere).
            "training": Image(
                "training",
                f"localhost/t9k-jobs-training:{v}",
                ["base"],
                training_key,
                build_with_buildah(
                    "images/training/Dockerfile",
                    "images/training/Dockerfile.dockerignore",
                    ["--build-arg", "PIP_NO_CACHE_DIR="],
                ),
            ),
            "kueue": Image("kueue", f"localhost/kueue:{kueue_version()}", [], kueue_key, build_kueue),
        }
    )


def names_from(args: list[str]) -> list[str]:
    if not args:
        raise Usage("name at least one image: " + ", ".join(IMAGES) + ", or all")
    names: list[str] = []
    for a in args:
        for n in list(IMAGES) if a == "all" else [a]:
            if n not in IMAGES:
                raise Usage(f"unknown image {n!r}; images: {', '.join(IMAGES)}, all")
            if n not in names:
                names.append(n)
    return names


def cmd_build(args: argparse.Namespace) -> dict[str, Path]:
    names = names_from(args.names)
    b = Builder(force=args.force)
    result: dict[str, Path] = {}
    # The cache check needs no lock: archives appear by rename, complete or not at all.
    if not args.force and all(b.archive_path(n).exists() for n in names):
        for n in names:
            result[n] = b.archive_path(n)
            say(f"{n}: cached {result[n].name}")
    else:
        with build_lock():
            clean_stale_work()
            for n in names:
                result[n] = b.ensure(n)
    for n in names:
        print(f"{n} {result[n]}", flush=True)
    return result


# ----------------------------------------------------------------------------- import


def ctr(socket: str, *args: str) -> list[str]:
    return ["ctr", "-a", socket, "--connect-timeout", "10s", "-n", "k8s.io", *args]


def containerd_images(socket: str) -> dict[str, str]:
    """ref -> manifest digest of the images in the k8s.io namespace."""
    _, out = run("ctr images ls", ctr(socket, "images", "ls"))
    images = {}
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[2].startswith("sha256:"):
            images[parts[0]] = parts[2]
    return images


def import_archives(socket: str, archives: list[Path]) -> list[tuple[str, str, bool]]:
    """Import each archive unless its ref is already there with the same manifest digest; an
    image of that ref with another digest (an older build) is removed first."""
    ensure_commands("ctr")
    if not Path(socket).exists():
        raise Failure("import", f"no containerd socket at {socket}")
    present = containerd_images(socket)
    done = []
    for archive in archives:
        if not archive.is_file():
            raise Failure("import", f"{archive}: no such file")
        ref, digest = archive_image(archive)
        if present.get(ref) == digest:
            say(f"import: {ref} already there ({digest[:19]}), skipped")
            done.append((ref, digest, False))
            continue
        t = time.monotonic()
        if ref in present:
            # Another build of the image: it goes first, with what only it used (--sync waits for
            # containerd's garbage collection), so a store holds one training image (~13 GB
            # unpacked), not one per build, and the disk is not full before the import ends.
            run(f"ctr images rm {ref}", ctr(socket, "images", "rm", "--sync", ref))
            say(f"import: {ref} {present[ref][:19]} removed (another build of it)")
        run(f"ctr images import {archive.name}", ctr(socket, "images", "import", str(archive)))
        present = containerd_images(socket)
        if present.get(ref) != digest:
            raise Failure(
                f"ctr images import {archive.name}",
                f"{ref} is {present.get(ref, 'absent')} after the import, expected {digest}",
            )
        say(f"import: {ref} {digest[:19]} imported in {time.monotonic() - t:.1f}s")
        done.append((ref, digest, True))
    return done


def cmd_import(args: argparse.Namespace) -> None:
    for ref, digest, _ in import_archives(args.socket, [Path(a) for a in args.archives]):
        print(f"{ref} {digest}", flush=True)


# ----------------------------------------------------------------------------- verify

#: Paths that are in an image only if a build's bind mounts leaked into it.
LEFTOVERS = ["etc/pip.conf", "etc/hosts", "etc/resolv.conf", "etc/hostname", "root/.cache/pip"]
#: name -> (paths its layers must hold, paths they must not)
ARCHIVE_CHECKS: dict[str, tuple[list[str], list[str]]] = {
    "pause": (["pause"], []),
    "operator": (["opt/t9k-jobs/bin/t9k-jobs"], LEFTOVERS),
    # ctr run mounts a tmpfs on /run (the kubelet's CRI does not), so /run/sshd is checked here
    "training": (["run/sshd", "workspace/train.py", "workspace/exchange.py"], LEFTOVERS),
    "kueue": (["manager", "tmp", "etc/passwd"], []),
}


def archive_paths(archive: Path) -> set[str]:
    """Every path in the image's layers (names only; whiteouts are not resolved)."""
    names: set[str] = set()
    with tarfile.open(archive, "r") as outer:
        index = json.load(outer.extractfile("index.json"))  # type: ignore[arg-type]
        mdigest = index["manifests"][0]["digest"][7:]
        manifest = json.load(outer.extractfile("blobs/sha256/" + mdigest))  # type: ignore[arg-type]
        for layer in manifest["layers"]:
            f = outer.extractfile("blobs/sha256/" + layer["digest"][7:])
            with tarfile.open(fileobj=f, mode="r") as tar:  # seeks over the file data
                names.update(m.name.rstrip("/").removeprefix("./") for m in tar)
    return names


#: name -> [(what, argv in the container, text the output must contain)]
CHECKS: dict[str, list[tuple[str, list[str], str]]] = {
    "pause": [("pause -v", ["/pause", "-v"], "pause.c")],
    "base": [
        (
            "python stdlib",
            ["python", "-c", "import ssl, venv, http.client, sqlite3; print('base ok')"],
            "base ok",
        )
    ],
    "operator": [
        ("t9k-jobs --help", ["t9k-jobs", "--help"], "operator"),
        (
            "runs as 65532",
            ["python", "-c", "import os; print('uid', os.getuid(), os.getgid())"],
            "uid 65532 65532",
        ),
    ],
    "training": [
        (
            "imports",
            ["python", "-c", "import torch, sklearn, numpy; print('torch', torch.__version__)"],
            "torch ",
        ),
        (
            "ssh tools",
            [
                "sh",
                "-c",
                "mkdir -p /run/sshd && /usr/sbin/sshd -t && command -v ssh pdsh ps && echo tools ok",
            ],
            "tools ok",
        ),
        ("train.py", ["python", "train.py", "--epochs", "1"], "accuracy"),
        ("exchange.py", ["python", "exchange.py", "--help"], "--peers"),
    ],
    "kueue": [("manager --help", ["/manager", "--help"], "zap-log-level")],
}


@contextlib.contextmanager
def throwaway_containerd(log: Log) -> Iterator[tuple[str, Path]]:
    """A containerd of our own under /tmp (short socket path), stopped and removed afterwards."""
    ensure_commands("containerd", "ctr", "runc")
    # containerd 1.6 puts its shims' sockets in /run/containerd/s whatever the config says;
    # remove those directories afterwards if this run made them (and they are empty).
    made = [d for d in (Path("/run/containerd"), Path("/run/containerd/s")) if not d.exists()]
    top = Path(tempfile.mkdtemp(prefix="t9k-img-", dir="/tmp"))
    sock = top / "c.sock"
    cfg = top / "config.toml"
    cfg.write_text(
        "version = 2\n"
        f'root = "{top}/root"\n'
        f'state = "{top}/state"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n'
        f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{top}/opt"\n'
    )
    out = open(top / "containerd.log", "w")  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(
        ["containerd", "--config", str(cfg)],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for _ in range(100):
            if proc.poll() is not None:
                break
            if (
                sock.exists()
                and subprocess.run(ctr(str(sock), "version"), check=False, capture_output=True).returncode
                == 0
            ):
                break
            time.sleep(0.1)
        if proc.poll() is not None or not sock.exists():
            tail = (top / "containerd.log").read_text(errors="replace").splitlines()[-20:]
            raise Failure("start containerd", "it did not come up", tail)
        say(f"verify: containerd {proc.pid} at {sock}")
        yield str(sock), top
    finally:
        if proc.poll() is None:
            # leftover tasks first (a check that was interrupted), then containerd itself
            code, tasks = run("ctr tasks ls", ctr(str(sock), "tasks", "ls", "-q"), log, check=False)
            for task in tasks.split() if code == 0 else []:
                run("ctr tasks kill", ctr(str(sock), "tasks", "kill", "-s", "KILL", task), log, check=False)
                time.sleep(0.5)
                run("ctr tasks rm", ctr(str(sock), "tasks", "rm", "-f", task), log, check=False)
                run("ctr containers rm", ctr(str(sock), "containers", "rm", task), log, check=False)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()
        log.write((top / "containerd.log").read_text(errors="replace")[-4000:])
        remove_tree(top, log)
        for d in [*Path("/sys/fs/cgroup").glob("*/t9k-img-verify"), *reversed(made)]:
            with contextlib.suppress(OSError):
                d.rmdir()


def cmd_verify(args: argparse.Namespace) -> None:
    names = names_from(args.names)
    archives = cmd_build(argparse.Namespace(names=names, force=False))
    CACHE.mkdir(parents=True, exist_ok=True)
    log = Log(CACHE / "logs" / "verify.log")
    failures = []
    try:
        for n in names:
            present, absent = ARCHIVE_CHECKS.get(n, ([], []))
            if present or absent:
                t = time.monotonic()
                paths = archive_paths(archives[n])
                missing = [p for p in present if p not in paths]
                leaked = [p for p in absent if p in paths]
                ok = not missing and not leaked
                say(
                    f"verify: {n}: archive holds {', '.join(present)}; none of {', '.join(absent) or '-'}: "
                    f"{'ok' if ok else 'FAILED'} ({time.monotonic() - t:.1f}s)"
                )
                if not ok:
                    failures.append(f"{n}: archive: missing {missing}, leaked build mounts {leaked}")
        with throwaway_containerd(log) as (sock, top):
            t = time.monotonic()
            first = import_archives(sock, [archives[n] for n in names])
            _, du = run("du containerd root", ["du", "-sm", f"{top}/root"], log)
            say(
                f"verify: first import {time.monotonic() - t:.1f}s; containerd root now {du.split()[0]} MB"
                " (content store + unpacked snapshots)"
            )
            t = time.monotonic()
            second = import_archives(sock, [archives[n] for n in names])
            say(f"verify: second import {time.monotonic() - t:.1f}s")
            if any(imported for _, _, imported in second) or not all(imported for _, _, imported in first):
                failures.append("import: the second import did not skip every image")
            for n in names:
                ref = IMAGES[n].ref
                for i, (what, argv, expect) in enumerate(CHECKS[n]):
                    cid = f"t9k-img-verify-{n}-{i}-{os.getpid()}"
                    t = time.monotonic()
                    code, out = run(
                        f"ctr run {n}",
                        ctr(
                            sock,
                            "run",
                            "--rm",
                            "--runc-root",
                            f"{top}/runc",
                            "--fifo-dir",
                            f"{top}/fifo",
                            "--cgroup",
                            f"/t9k-img-verify/{cid}",
                            ref,
                            cid,
                            *argv,
                        ),
                        log,
                        check=False,
                    )
                    ok = code == 0 and expect in out
                    last = out.strip().splitlines()[-1] if out.strip() else ""
                    say(
                        f"verify: {n}: {what}: {'ok' if ok else 'FAILED'} ({time.monotonic() - t:.1f}s)"
                        f" {last[:100]}"
                    )
                    if not ok:
                        failures.append(
                            f"{n}: {what} (exit {code}): " + " | ".join(out.strip().splitlines()[-5:])
                        )
    finally:
        log.close()
    if failures:
        raise Failure("verify", f"{len(failures)} check(s) failed", failures, log.path)


def cmd_clean(args: argparse.Namespace) -> None:
    """Drop buildah's storage (its layer cache) and, with --all, the archives too."""
    with build_lock():
        clean_stale_work()
        storage = CACHE / "buildah"
        if storage.exists():
            run("buildah rm --all", buildah("rm", "--all"), check=False)
            unmount_all(storage)
            unmount_all(RUNROOT)
            remove_tree(storage)
            remove_tree(RUNROOT)
            say(f"removed {storage}")
        if args.all:
            for p in CACHE.glob("*.oci.tar"):
                p.unlink()
                say(f"removed {p}")


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    global VERBOSE
    ap = argparse.ArgumentParser(prog="images.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build", help="build images (cached); prints NAME ARCHIVE lines")
    p.add_argument("--force", action="store_true", help="rebuild the named images (buildah --no-cache)")
    p.add_argument("-v", "--verbose", action="store_true", help="show the tools' output on stderr")
    p.add_argument("names", nargs="*", metavar="NAME")
    p = sub.add_parser(
        "import", help="import archives into containerd's k8s.io namespace, skipping present ones"
    )
    p.add_argument("socket", metavar="SOCKET")
    p.add_argument("archives", nargs="+", metavar="ARCHIVE")
    p = sub.add_parser(
        "verify", help="build, import into a throw-away containerd and run checks in each image"
    )
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("names", nargs="*", metavar="NAME")
    p = sub.add_parser("clean", help="remove buildah's storage (layer cache); --all: the archives too")
    p.add_argument("--all", action="store_true")
    args = ap.parse_args(argv)
    VERBOSE = getattr(args, "verbose", False)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # unwinds through the clean-up (finally) blocks, as Ctrl-C does

    signal.signal(signal.SIGTERM, on_term)
    try:
        define_images()
        {"build": cmd_build, "import": cmd_import, "verify": cmd_verify, "clean": cmd_clean}[args.cmd](args)
    except Usage as e:
        print(f"images.py {args.cmd}: {e}", file=sys.stderr)
        return 2
    except Failure as e:
        print(f"images.py {args.cmd}: error: {e.step} failed: {e.message}", file=sys.stderr)
        for line in e.tail:
            print(f"    {line}", file=sys.stderr)
        if e.log:
            print(f"    (full output: {e.log})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"images.py {args.cmd}: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
