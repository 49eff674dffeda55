"""Reading uv.lock, the requirement files exported from it, and the installed distributions.

Pure Python (tomllib, importlib.metadata, packaging): no uv, no pip, no network, so the checks run
in any environment the bootstrap made.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import Distribution
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "uv.lock"
PROJECT = "t9k-jobs"


@dataclass(frozen=True)
class Locked:
    """One package version of the lock: its name (canonical), version, and every file hash."""

    name: str
    version: str
    hashes: frozenset[str]


def read_lock(path: Path = LOCK) -> dict[tuple[str, str], Locked]:
    """``{(name, version): Locked}`` for every package of uv.lock (a name may have several versions,
    each for other environment markers)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[tuple[str, str], Locked] = {}
    for pkg in data["package"]:
        files = [pkg.get("sdist")] + list(pkg.get("wheels", []))
        hashes = frozenset(f["hash"] for f in files if f and "hash" in f)
        name = canonicalize_name(pkg["name"])
        out[(name, pkg["version"])] = Locked(name, pkg["version"], hashes)
    return out


def lock_closure(extras: Iterable[str] = (), groups: Iterable[str] = (), path: Path = LOCK) -> set[tuple[str, str]]:
    """Every ``(name, version)`` the project needs with ``extras`` and dependency ``groups``, over
    every environment (markers are not evaluated, as a universal export keeps them all)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    by_name: dict[str, list[dict]] = {}
    for pkg in data["package"]:
        by_name.setdefault(canonicalize_name(pkg["name"]), []).append(pkg)
    (project,) = by_name[PROJECT]
    todo: list[dict] = list(project.get("dependencies", []))
    for extra in extras:
        todo += project.get("optional-dependencies", {})[extra]
    for group in groups:
        todo += project.get("dev-dependencies", {})[group]
    seen: set[tuple[str, str]] = set()
    expanded: set[tuple[str, str, str]] = set()
    while todo:
        dep = todo.pop()
        name = canonicalize_name(dep["name"])
        candidates = by_name[name]
        if "version" in dep:
            candidates = [p for p in candidates if p["version"] == dep["version"]]
        for pkg in candidates:
            key = (name, pkg["version"])
            if key not in seen:
                seen.add(key)
                todo += pkg.get("dependencies", [])
            for extra in dep.get("extra", []):
                if (name, pkg["version"], extra) not in expanded:
                    expanded.add((name, pkg["version"], extra))
                    todo += pkg.get("optional-dependencies", {}).get(extra, [])
    return seen


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")


def read_requirements(path: Path) -> dict[tuple[str, str], frozenset[str]]:
    """``{(name, version): hashes}`` of a ``--require-hashes`` requirement file (``name==version``
    lines with their ``--hash`` continuation lines)."""
    out: dict[tuple[str, str], set[str]] = {}
    current: tuple[str, str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        pin = _PIN.match(line)
        if pin:
            current = (canonicalize_name(pin.group(1)), pin.group(2))
            out.setdefault(current, set())
        elif line.startswith(" ") and current is not None:
            out[current].update(_HASH.findall(line))
        else:
            current = None
    return {k: frozenset(v) for k, v in out.items()}


@dataclass(frozen=True)
class Conflict:
    """An installed distribution whose declared requirement the installed set does not meet."""

    dist: str
    version: str
    requirement: str
    found: str | None  # the installed version, None when missing

    def __str__(self) -> str:
        have = f"{self.found} is installed" if self.found else "it is not installed"
        return f"{self.dist} {self.version} requires {self.requirement}, but {have}"


def conflicts(dists: Iterable[Distribution]) -> list[Conflict]:
    """What ``pip check`` reports: every requirement (markers evaluated here, without extras) of
    every distribution in ``dists`` that no distribution in ``dists`` meets."""
    dists = list(dists)
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in dists}
    out: list[Conflict] = []
    for d in dists:
        for text in d.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            found = installed.get(canonicalize_name(req.name))
            if found is None or not req.specifier.contains(Version(found), prereleases=True):
                spec = f"{req.name}{req.specifier}"
                out.append(Conflict(canonicalize_name(d.metadata["Name"]), d.version, spec, found))
    return sorted(out, key=str)


#: Where docs/decisions.md lists the conflicts the lock keeps on purpose, one line each:
#: ``- `DIST VERSION` requires `REQUIREMENT`: why, and the measurement``.
_LISTED = re.compile(r"^- `(\S+) (\S+)` requires `([^`]+)`", re.MULTILINE)


def listed_conflicts(decisions: Path = ROOT / "docs" / "decisions.md") -> set[tuple[str, str, str]]:
    """``{(dist, version, requirement)}`` from the "Known conflicts of the locked stack" section."""
    text = decisions.read_text(encoding="utf-8")
    start = text.index("### Known conflicts of the locked stack")
    following = re.search(r"^#", text[start + 1 :], re.MULTILINE)
    section = text[start : start + 1 + following.start()] if following else text[start:]
    return {(canonicalize_name(d), v, r.replace(" ", "")) for d, v, r in _LISTED.findall(section)}
