"""Fixtures for the tests against a real control plane (etcd, kube-apiserver, kube-controller-manager).

The binaries come from ``tools/controlplane/build.sh`` (built once, cached; needs Go). The build runs
after collection, when cluster tests are selected, so that a cold build (about 8 minutes on 2 cores) is not
counted against a test's timeout; ``scripts/test.sh`` runs it even earlier.

Fixtures:
* ``control_plane`` (session): a started ``ControlPlane`` with the CRDs of deploy/crds established
  and served (installed before kube-controller-manager starts, so garbage collection of pods owned by
  our jobs works at once); attributes ``kubeconfig`` (Path), ``server``, ``token``, ``ca_file``, ``bin_dir``, ``dir``.
* ``kube`` (session): a ``Kube`` client for it.
* ``kubectl`` (session): ``kubectl(*args, check=True, input=None) -> CompletedProcess`` with the
  kubeconfig set; text output.
* ``namespace`` (function): the name of a fresh namespace ``t-<random>``, deleted afterwards.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from . import helm
from .gotool import build_go_tool
from .kube import Kube, KubeError

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD = REPO / "tools" / "controlplane" / "build.sh"
CRD_DIR = REPO / "deploy" / "crds"

sys.path.insert(0, str(REPO / "tools" / "controlplane"))
from controlplane import ControlPlane, ControlPlaneError


def _is_cluster_item(item: pytest.Item) -> bool:
    return HERE in Path(item.path).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_cluster_item(item):
            item.add_marker(pytest.mark.cluster)


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(_is_cluster_item(i) for i in session.items) and not session.config.option.collectonly:
        _run_build()
        if any(Path(i.path).name == "test_chart.py" for i in session.items):
            helm.build()


def _run_build() -> Path | str:
    """Build the control plane once per session (:func:`.gotool.build_go_tool`)."""
    return build_go_tool(BUILD, "1.24", needed_by="the cluster tests", builds="the control plane")


def build_bin_dir() -> Path:
    """The control plane's bin dir; fails (never skips) the test when it cannot be built."""
    built = _run_build()
    if isinstance(built, str):
        pytest.fail(built, pytrace=False)
    return built


def started_plane(directory: Path, **options: object) -> Iterator[ControlPlane]:
    """A control plane with the CRDs in ``directory`` (``options``: ControlPlane's), started, and
    stopped when the generator is closed; fails (never skips) the test when it cannot start."""
    plane = ControlPlane(directory, build_bin_dir(), crds=[CRD_DIR], **options)  # type: ignore[arg-type]
    try:
        plane.start()
        error = ""
    except ControlPlaneError as exc:
        error = str(exc)
    if error:
        pytest.fail(f"the control plane did not start: {error}", pytrace=False)
    try:
        yield plane
    finally:  # also when the generator is closed early (a test's own plane): nothing outlives it
        plane.stop()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from started_plane(tmp_path_factory.mktemp("controlplane"))


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Kube:
    return Kube(control_plane.kubeconfig)


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [
                str(control_plane.bin_dir / "kubectl"),
                f"--kubeconfig={control_plane.kubeconfig}",
                f"--cache-dir={control_plane.dir / 'kubectl-cache'}",
                *args,
            ],
            capture_output=True,
            text=True,
            input=input,
            check=False,
            timeout=60,
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {out.returncode}:\n{out.stdout}{out.stderr}"
            )
        return out

    return run


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    try:
        kube.delete(f"/api/v1/namespaces/{name}")
    except KubeError as exc:
        if exc.status != 404:
            raise
