"""The installed stack is uv.lock's, its requirements agree, and the images install the same lock."""

from __future__ import annotations

import sys
from importlib.metadata import distributions
from pathlib import Path

from packaging.utils import canonicalize_name

from .stack import LOCK, PROJECT, ROOT, conflicts, listed_conflicts, lock_closure, read_lock, read_requirements


def installed() -> list:
    """The distributions of the environment running the suite (its site-packages, not the user's)."""
    return [d for d in distributions(path=sys.path) if d.metadata["Name"]]


def test_every_installed_distribution_is_the_locks_version() -> None:
    """scripts/bootstrap.sh installs with `uv sync --locked`: nothing outside the lock, nothing at
    another version (an ad-hoc pip install in a script would show here)."""
    lock = read_lock()
    outside = sorted(
        f"{d.metadata['Name']} {d.version}"
        for d in installed()
        if canonicalize_name(d.metadata["Name"]) != PROJECT
        and (canonicalize_name(d.metadata["Name"]), d.version) not in lock
    )
    assert not outside, f"installed but not in uv.lock at that version: {outside}"


def test_no_requirement_conflict_beyond_the_ones_decisions_lists() -> None:
    """What `pip check` would say of the running environment, against docs/decisions.md's list of
    conflicts kept on purpose (each with the measurement that shows the stack still trains)."""
    found = {(c.dist, c.version, c.requirement.replace(" ", "")): str(c) for c in conflicts(installed())}
    unlisted = sorted(text for key, text in found.items() if key not in listed_conflicts())
    assert not unlisted, "conflicts not listed in docs/decisions.md (Known conflicts of the locked stack): " + "; ".join(unlisted)


def test_the_conflict_check_sees_a_broken_requirement(tmp_path: Path) -> None:
    """The check above is live: a distribution that needs a version nobody installed is reported,
    and one whose marker excludes this interpreter is not."""
    from importlib.metadata import distributions as dists_at

    def dist(name: str, version: str, *requires: str) -> None:
        info = tmp_path / f"{name}-{version}.dist-info"
        info.mkdir()
        body = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
        body += [f"Requires-Dist: {r}" for r in requires]
        (info / "METADATA").write_text("\n".join(body) + "\n")

    dist("alpha", "1.0", "beta<=2.5.1", "gamma; python_version < '3'", "delta; extra == 'x'")
    dist("beta", "2.15.0")
    found = [str(c) for c in conflicts(dists_at(path=[str(tmp_path)]))]
    assert found == ["alpha 1.0 requires beta<=2.5.1, but 2.15.0 is installed"]


def test_the_image_requirements_are_the_locks_export() -> None:
    """requirements/ (what the operator and training images install with --require-hashes) holds
    exactly the lock's versions and hashes for each image's part (the training image without
    py-spy): scripts/lock.sh re-exports them."""
    lock = read_lock()
    req = ROOT / "requirements"
    operator = read_requirements(req / "operator.txt")
    training = read_requirements(req / "training.txt")
    deepspeed = read_requirements(req / "deepspeed.txt")
    own = {k for k in lock if k[0] == PROJECT}
    assert set(operator) == lock_closure(groups=["build"]) - own
    # Less py-spy: it reads a local run's replicas from outside; the training image runs replicas
    # (scripts/lock.sh says why it is left out).
    spy = {k for k in lock if k[0] == "py-spy"}
    assert spy and set(training) | set(deepspeed) == lock_closure(extras=["examples", "launchers"]) - own - spy
    assert [name for name, _ in deepspeed] == ["deepspeed"] and not set(training) & set(deepspeed)
    for pins in (operator, training, deepspeed):
        for key, hashes in pins.items():
            assert hashes and hashes <= lock[key].hashes, f"{key}: hashes differ from uv.lock's"


def test_the_lock_pins_every_extra_the_readme_commands_install() -> None:
    """Both README commands install from the lock: the extras they name exist in it, and torch,
    deepspeed and colossalai each have one version."""
    text = LOCK.read_text(encoding="utf-8")
    for extra in ("examples", "test", "launchers"):
        assert f"\n{extra} = [" in text
    versions = {}
    for name, version in read_lock():
        versions.setdefault(name, []).append(version)
    for name in ("torch", "deepspeed", "colossalai", "pyyaml"):
        assert len(versions[name]) == 1, (name, versions[name])
