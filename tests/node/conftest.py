"""Fixtures for the tests on a real node: the test control plane plus a kubelet, containerd, runc,
bridge CNI, kube-proxy and CoreDNS on this machine (``tools/node``), images built here
(``tools/images``), Kueue v0.17.0 (``tools/kueue``, installed as ``tools/node/up.sh --kueue`` does)
and t9k-jobs' operator running in the cluster as a Deployment. Real pods only: no test writes a
pod's status.

The builds (node binaries, images, Kueue: about 12 minutes cold) run after collection, before the
first test, so a cold build is not charged to a test's timeout; ``scripts/test.sh`` runs them even
earlier. Where a node cannot run (not root, no cgroups, a build that fails) every node test fails
with one line that says why; ``bash scripts/test.sh --no-node`` leaves them out.

Fixtures:
* ``node`` (session): the started :class:`Node` (``kubeconfig``, ``kubectl``, ``plane``), with
  Kueue answering (``node.kueue_seconds``: how long its install took) and the operator installed
  and leading (Kueue before the operator: tests/node/test_kueue_install.py). The last test,
  ``test_tooling.py::test_down_leaves_the_machine_as_it_was``, takes it down.
* ``second_node`` (module): node 2, ``t9k-node-2`` (198.18.0.3, pods in 10.244.1.0/24), joined to
  the session's cluster with ``Node.add_node`` and the images pause and training; yields its name
  (Ready, untainted) and takes it out again (``Node.remove_node``) after the module's tests, unless
  a test removed it already. ``node.second_node_join_s``: the seconds its join took;
  ``node.second_node_before``: the host's state before it joined (hoststate.snapshot of node 2).
* ``kube`` (session): a :class:`~tests.cluster.kube.Kube` client for it.
* ``kubectl`` (session): ``kubectl(*args, check=True, input=None, timeout=120) -> CompletedProcess``.
* ``namespace`` (function): a fresh namespace ``n-<random>``, deleted afterwards.
* ``default_queue`` (function): Kueue's LocalQueue ``default`` in ``namespace``, over a ClusterQueue
  of its own whose quota no test reaches, so that ``t9kScheduler`` jobs (queue ``default``) are
  admitted at once and placed by the scheduler as without Kueue; ``make_queues`` sets up a smaller
  quota.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cluster.kube import Kube, KubeError
from . import hoststate

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO / "tools" / "node"))
from node import CACHE, PRIVATE_PATHS, Node, NodeError, preflight  # noqa: E402

SECOND_NODE_IMAGES = ("pause", "training")

IMAGES = ("pause", "training", "operator", "kueue")
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
VERSION = "0.1.0"
TRAINING_IMAGE = f"localhost/t9k-jobs-training:{VERSION}"
OPERATOR_IMAGE = f"localhost/t9k-jobs:{VERSION}"
LAST = "test_down_leaves_the_machine_as_it_was"
#: Seconds the node's start-up may take in the first node test, beyond that test's own timeout.
NODE_START_BUDGET = 1200

_build: dict[str, Any] = {}


def _is_node_item(item: pytest.Item) -> bool:
    return HERE in Path(item.path).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_node_item(item):
            item.add_marker(pytest.mark.node)
    # Taking the node down is the last thing the session does with it. Under pytest-xdist the node
    # tests come first, so that their lane (tests/conftest.py) starts at once.
    xdist = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    items.sort(key=lambda i: (xdist and not _is_node_item(i), i.name == LAST))
    # The first node test carries the node's start-up, the session fixture's: on a cold machine
    # that imports the images' 14 GB into an empty containerd store, minutes beyond what any test
    # takes (seen: a loaded cold machine ran past the suite's 300 s, and every node test failed with
    # the first). It gets that start-up's budget on top of its own.
    first = next((i for i in items if _is_node_item(i)), None)
    if first is not None and first.get_closest_marker("timeout") is None:
        first.add_marker(pytest.mark.timeout(NODE_START_BUDGET + float(config.getini("timeout") or 300)))


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(_is_node_item(i) for i in session.items) and not session.config.option.collectonly:
        _prepare()


def _run(*cmd: str) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        tail = "\n".join(out.stderr.splitlines()[-20:])
        raise NodeError(f"{' '.join(cmd[1:])} failed (exit {out.returncode}):\n{tail}")
    return out.stdout


def _prepare() -> None:
    """Check the machine, install the packages and build everything once per session. Workers of
    one pytest-xdist run take turns (a file lock): the first builds, the others find it built."""
    if _build:
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "prepare.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        _prepare_locked()


def _prepare_locked() -> None:
    try:
        preflight_root()
        _run("bash", str(REPO / "tools" / "node" / "packages.sh"))
        preflight()
        _build["cp_bin"] = Path(_run("bash", str(REPO / "tools" / "controlplane" / "build.sh")).split()[-1])
        _build["node_bin"] = Path(_run("bash", str(REPO / "tools" / "node" / "build.sh")).split()[-1])
        _build["helm"] = Path(_run("bash", str(REPO / "tools" / "helm" / "build.sh")).split()[-1])
        _build["kueue"] = Path(
            _run("bash", str(REPO / "tools" / "kueue" / "manifests.sh"), "--no-visibility").split()[-1]
        )
        lines = _run("bash", str(REPO / "tools" / "images" / "build.sh"), *IMAGES).splitlines()
        _build["images"] = dict(line.split(None, 1) for line in lines if line.strip())
    except NodeError as exc:
        _build["error"] = f"the node tests cannot run here: {exc} (bash scripts/test.sh --no-node leaves them out)"


def preflight_root() -> None:
    """The node tests need root; say so in one line before anything is installed."""
    if os.geteuid() != 0:
        raise NodeError("a real node needs root (containerd, cgroups, network namespaces)")


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    _prepare()
    if "error" in _build:
        pytest.fail(str(_build["error"]), pytrace=False)
    # A short directory: the containerd socket path must stay under 108 bytes.
    node = Node(tmp_path_factory.mktemp("node"), _build["cp_bin"], _build["node_bin"], [REPO / "deploy" / "crds"])
    before = hoststate.snapshot(node.dir, node.cgroup, node.veth, PRIVATE_PATHS)
    error = ""
    try:
        node.up([_build["images"][name] for name in IMAGES], kueue=_build["kueue"])
        install_operator(node)
    except (NodeError, AssertionError, subprocess.CalledProcessError) as exc:
        error = str(exc)
        node.down()
    if error:
        pytest.fail(f"the node did not start: {error}", pytrace=False)
    node.host_before = before  # type: ignore[attr-defined]
    yield node
    node.down()


def archives(*names: str) -> list[Path]:
    """The OCI archives of the images ``names`` (pause, training, operator, kueue), built once."""
    _prepare()
    return [Path(_build["images"][name]) for name in names]


@pytest.fixture(scope="module")
def second_node(node: Node) -> Iterator[str]:
    m = node.member(2)
    if 2 in node.members():
        node.remove_node(2)  # left behind by a module whose teardown did not finish
    before = hoststate.snapshot(m.home, m.cgroup, m.veth)
    started = time.monotonic()
    try:
        name = node.add_node(2, archives(*SECOND_NODE_IMAGES))
    except NodeError as exc:
        pytest.fail(f"node 2 did not join: {exc}", pytrace=False)
    node.second_node_join_s = time.monotonic() - started  # type: ignore[attr-defined]
    node.second_node_before = before  # type: ignore[attr-defined]
    try:
        yield name
    finally:
        if 2 in node.members():
            node.remove_node(2)


#: The t9kScheduler priorities the node tests use, allowed as a cluster admin would (issue 33: the
#: operator makes no PriorityClass): tests/node/test_gang.py, test_kueue.py, test_examples.py.
JOB_PRIORITIES = (0, 10, 40, 50, 90)


def allow_job_priorities(node: Node, priorities: tuple[int, ...] = JOB_PRIORITIES) -> None:
    """Make the PriorityClasses ``t9k-priority-N`` of ``priorities`` as the chart does (``helm
    template --set jobPriorities.allowed={...}``, its PriorityClasses created; one that exists is
    left as it is)."""
    if "helm" not in _build:  # a benchmark that installs the operator without the session's builds
        _build["helm"] = Path(_run("bash", str(REPO / "tools" / "helm" / "build.sh")).split()[-1])
    out = subprocess.run(
        [str(_build["helm"]), "template", "t9k-jobs", str(REPO / "charts" / "t9k-jobs"),
         "--set", f"jobPriorities.allowed={{{','.join(map(str, priorities))}}}"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    import yaml

    kube = Kube(node.kubeconfig)
    for obj in yaml.safe_load_all(out.stdout):
        if obj and obj["kind"] == "PriorityClass":
            try:
                kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", obj)
            except KubeError as exc:
                if exc.status != 409:
                    raise


def install_operator(node: Node) -> None:
    """The job priorities the tests use allowed (:func:`allow_job_priorities`), then ``t9k-jobs
    install --with-operator`` with the operator image, then wait for a leader."""
    allow_job_priorities(node)
    subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "install", "--kubeconfig", str(node.kubeconfig),
         "--with-operator", "--image", OPERATOR_IMAGE],
        check=True, capture_output=True, text=True, timeout=120,
    )
    kube = Kube(node.kubeconfig)
    Kube.wait_for(
        lambda: kube.get("/apis/apps/v1/namespaces/t9k-jobs-system/deployments/t9k-jobs-operator")
        .get("status", {})
        .get("readyReplicas", 0)
        >= 1,
        timeout=180,
        what="the operator Deployment to have a ready pod",
    )
    Kube.wait_for(lambda: lease_holder(kube), timeout=120, what="an operator pod to hold the Lease")


def lease_holder(kube: Kube) -> str:
    """The identity holding the operator's Lease ('' when none)."""
    try:
        lease = kube.get("/apis/coordination.k8s.io/v1/namespaces/t9k-jobs-system/leases/t9k-jobs-operator")
    except KubeError:
        return ""
    return lease.get("spec", {}).get("holderIdentity") or ""


@pytest.fixture(scope="session")
def kube(node: Node) -> Kube:
    return Kube(node.kubeconfig)


@pytest.fixture(scope="session")
def kubectl(node: Node) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [*node.kubectl, f"--cache-dir={node.dir / 'kubectl-cache'}", *args],
            capture_output=True, text=True, input=input, check=False, timeout=timeout,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
        return out

    return run


def exec_ending_its_container(
    kubectl: Callable[..., subprocess.CompletedProcess[str]], namespace: str, pod: str, *command: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl exec`` of ``command`` in ``pod`` when what it does ends the container (kills its
    main process, or lets it finish). The exec runs inside that container: once PID 1 exits the
    runtime kills what is left there, the exec's own process too when it has not exited yet (under
    load it may not have), and the exec then ends 137. That is not a failure of what it did (the
    caller checks the pod's outcome); any other exit is."""
    out = kubectl("exec", "-n", namespace, pod, "--", *command, check=False)
    assert out.returncode in (0, 137), (command, out.returncode, out.stdout, out.stderr)
    return out


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    name = f"n-{secrets.token_hex(4)}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # Pods need the namespace's default ServiceAccount (the ServiceAccount admission plugin is on).
    Kube.wait_for(
        lambda: kube.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"), timeout=60,
        what=f"the default ServiceAccount of {name}",
    )
    yield name
    try:
        kube.delete(f"/api/v1/namespaces/{name}")
    except KubeError as exc:
        if exc.status != 404:
            raise


def make_queues(
    kube: Kube, namespace: str, cpu: str = "1000", memory: str = "1Ti", preemption: str = "LowerPriority",
    queue: str = "default", topology: list[str] | None = None,
) -> str:
    """Kueue's queues for the jobs of ``namespace``: a ResourceFlavor and a ClusterQueue of its own
    (both named ``<kind>-<namespace>``, so no other test meets them) with a ``cpu`` and ``memory``
    quota and ``withinClusterQueue`` preemption ``preemption``, and the LocalQueue ``queue`` in
    ``namespace`` pointing to it; waits until the LocalQueue is Active. ``topology``: node label
    keys, highest level first: a Topology ``topology-<namespace>`` of those levels, named by the
    flavor (which then selects the Linux nodes: Kueue needs a TAS flavor to have node labels), so
    Kueue places the queue's jobs by topology. Returns the ClusterQueue's name;
    :func:`delete_queues` removes them."""
    flavor, cluster_queue = f"flavor-{namespace}", f"queue-{namespace}"
    # Kueue answers first. After a fault of the control plane (test_faults.py restarts etcd and the
    # API server) Kueue's manager loses its lease, exits, and crash-loops with a growing back-off
    # until its informers sync again; a create meanwhile finds its webhooks without endpoints
    # (seen: every Kueue test of a run erred so, when test_faults ran just before them).
    probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"generateName": "probe-"}}
    Kube.wait_for(lambda: kube.create(f"{KUEUE}/resourceflavors?dryRun=All", probe), timeout=300, interval=1,
                  what="Kueue's webhooks to answer (a dry-run create of a ResourceFlavor)")  # fmt: skip
    flavor_spec: dict[str, Any] = {}
    if topology:
        kube.create(f"{KUEUE}/topologies", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                                            "metadata": {"name": f"topology-{namespace}"},
                                            "spec": {"levels": [{"nodeLabel": key} for key in topology]}})  # fmt: skip
        flavor_spec = {"nodeLabels": {"kubernetes.io/os": "linux"}, "topologyName": f"topology-{namespace}"}
    kube.create(f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                             "metadata": {"name": flavor}, "spec": flavor_spec})
    quota = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    kube.create(f"{KUEUE}/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                                "flavors": [{"name": flavor, "resources": quota}]}],
            "preemption": {"withinClusterQueue": preemption},
        },
    })
    local = f"{KUEUE}/namespaces/{namespace}/localqueues"
    kube.create(local, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                        "metadata": {"name": queue}, "spec": {"clusterQueue": cluster_queue}})
    Kube.wait_for(
        lambda: any(c["type"] == "Active" and c["status"] == "True"
                    for c in kube.get(f"{local}/{queue}").get("status", {}).get("conditions", [])),
        timeout=60, interval=0.2, what=f"LocalQueue {namespace}/{queue} to be Active",
    )
    return cluster_queue


def delete_queues(kube: Kube, namespace: str, queue: str = "default") -> None:
    """Delete what :func:`make_queues` made (Kueue finishes a ClusterQueue's or a flavor's deletion
    once nothing admitted uses it)."""
    for path in (f"{KUEUE}/namespaces/{namespace}/localqueues/{queue}",
                 f"{KUEUE}/clusterqueues/queue-{namespace}", f"{KUEUE}/resourceflavors/flavor-{namespace}",
                 f"{KUEUE}/topologies/topology-{namespace}"):
        try:
            kube.delete(path)
        except KubeError as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def default_queue(kube: Kube, namespace: str) -> Iterator[str]:
    yield make_queues(kube, namespace)
    delete_queues(kube, namespace)


def wait_phase(kube: Kube, path: str, phases: tuple[str, ...], timeout: float = 300) -> dict[str, Any]:
    """Wait until the job at ``path`` is in one of ``phases``; return it."""
    return Kube.wait_for(
        lambda: (job := kube.get(path)).get("status", {}).get("phase") in phases and job,
        timeout=timeout, interval=0.5, what=f"{path} to be {'/'.join(phases)}",
    )


def since(t0: float) -> float:
    return round(time.monotonic() - t0, 1)
