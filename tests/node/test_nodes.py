"""Issue 25, infrastructure: more than one real node. Node 2 (``t9k-node-2``) joins the session's
cluster (conftest's module-scoped ``second_node``: ``Node.add_node``); both nodes are Ready; a pod
pinned to node 2 reaches a pod on node 1 by pod IP, through a Service's ClusterIP and by DNS name,
and the host (the API server's address) reaches node 2's pod network; ``tools/node/fault.sh``
loses node 2 (every process of it frozen, the control plane marks it Unknown after the
node-lifecycle-controller's grace period) and restores it in two steps (a pod deleted meanwhile
never runs again, one that still exists runs on); ``Node.remove_node`` leaves nothing of node 2 on
the host. Waits are condition-based, with bounds sized for a loaded 2-core machine.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ..cluster.kube import Kube, KubeError, core_path, pod_path
from . import hoststate
from .conftest import REPO, SECOND_NODE_IMAGES, TRAINING_IMAGE, Node, archives

from node import NODE_IP, NODE_NAME, cgroup_pids, node_ip, pod_cidr, pod_processes  # noqa: E402

FAULT = str(REPO / "tools" / "node" / "fault.sh")
# kube-controller-manager's --node-monitor-grace-period (50 s by default in 1.37) plus the
# controller's 5 s monitor period and the lag of a loaded machine.
UNKNOWN_TIMEOUT = 240.0
SERVE = ["python", "-m", "http.server", "8080"]


def pod(name: str, node_name: str, command: list[str], labels: dict[str, str] | None = None,
        volumes: dict[str, str] | None = None, restart: str = "Never") -> dict[str, Any]:
    """A pod of the training image bound to ``node_name``; ``volumes``: host path -> mount path."""
    vols = [{"name": f"v{i}", "hostPath": {"path": host}} for i, host in enumerate(volumes or {})]
    mounts = [{"name": f"v{i}", "mountPath": path} for i, path in enumerate((volumes or {}).values())]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeName": node_name, "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
            "volumes": vols,
            "containers": [{"name": "main", "image": TRAINING_IMAGE, "imagePullPolicy": "Never",
                            "command": command, "volumeMounts": mounts}],
        },
    }


def running(kube: Kube, namespace: str, name: str, timeout: float = 180) -> dict[str, Any]:
    """Wait until the pod is Running with its container ready; return it."""
    def ready() -> dict[str, Any] | None:
        p = kube.get(pod_path(namespace, name))
        statuses = p["status"].get("containerStatuses", [])
        return p if p["status"].get("phase") == "Running" and statuses and statuses[0]["ready"] else None

    return Kube.wait_for(ready, timeout=timeout, interval=0.2, what=f"pod {namespace}/{name} Running")


def condition(node_obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in node_obj.get("status", {}).get("conditions", []) if c["type"] == type_), {})


def fault(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", FAULT, str(node.dir), *args], capture_output=True, text=True, timeout=300)


def test_two_nodes_are_ready(node: Node, kube: Kube, second_node: str) -> None:
    """Both nodes Ready and untainted, each at its own address, node 1 as it always was."""
    assert second_node == "t9k-node-2"
    assert node.node_names() == [NODE_NAME, second_node]
    nodes = {n["metadata"]["name"]: n for n in kube.list("/api/v1/nodes")}
    assert sorted(nodes) == [NODE_NAME, second_node]
    for name, ip in ((NODE_NAME, NODE_IP), (second_node, node_ip(2))):
        assert condition(nodes[name], "Ready").get("status") == "True", nodes[name]["status"]
        assert not nodes[name]["spec"].get("taints"), nodes[name]["spec"]
        addresses = {a["type"]: a["address"] for a in nodes[name]["status"]["addresses"]}
        assert addresses["InternalIP"] == ip, addresses
    join_s = node.second_node_join_s  # type: ignore[attr-defined]
    print(f"node 2 joined (Ready, untainted) in {join_s:.1f} s")


def test_a_pod_on_node_2_reaches_node_1_by_ip_service_and_dns(
    node: Node, kube: Kube, kubectl, namespace: str, second_node: str
) -> None:
    """A server on node 1 behind a Service; from node 2 a client fetches it by pod IP, by ClusterIP
    and by the Service's DNS names (CoreDNS lives on node 1), and reaches the API server through
    ``kubernetes.default.svc`` as the operator's pods do; the host fetches a server on node 2 by
    its pod IP (the API server reaches every pod network)."""
    kube.create(pod_path(namespace), pod("server", NODE_NAME, SERVE, labels={"app": "server"}))
    kube.create(pod_path(namespace), pod("server-2", second_node, SERVE))
    kube.create(core_path(namespace, "services"), {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "server"},
        "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]},
    })
    server = running(kube, namespace, "server")
    server2 = running(kube, namespace, "server-2")
    cluster_ip = kube.get(core_path(namespace, "services", "server"))["spec"]["clusterIP"]
    assert server["status"]["podIP"].startswith(pod_cidr(1).rsplit(".", 2)[0] + ".")
    assert server2["status"]["podIP"].startswith(pod_cidr(2).rsplit(".", 2)[0] + ".")
    urls = [f"http://{server['status']['podIP']}:8080/", f"http://{cluster_ip}/",
            f"http://server.{namespace}.svc.cluster.local/", "http://server/"]
    # Endpoints and kube-proxy's rules may lag the pod's readiness a moment: each URL is retried.
    client = (
        "import sys, time, urllib.request\n"
        "for url in sys.argv[1:]:\n"
        "    end = time.monotonic() + 90\n"
        "    while True:\n"
        "        try:\n"
        "            print(url, urllib.request.urlopen(url, timeout=5).status, flush=True)\n"
        "            break\n"
        "        except OSError as exc:\n"
        "            if time.monotonic() > end:\n"
        "                sys.exit(f'{url}: {exc}')\n"
        "            time.sleep(0.5)\n"
        "import ssl, urllib.error\n"
        "try:\n"
        "    code = urllib.request.urlopen('https://kubernetes.default.svc/readyz', timeout=10,\n"
        "                                  context=ssl._create_unverified_context()).status\n"
        "except urllib.error.HTTPError as exc:\n"
        "    code = exc.code  # an answer all the same (anonymous requests may be refused)\n"
        "print('api', code)\n"
    )
    kube.create(pod_path(namespace), pod("client", second_node, ["python", "-c", client, *urls]))
    done = Kube.wait_for(
        lambda: (p := kube.get(pod_path(namespace, "client")))["status"].get("phase")
        in ("Succeeded", "Failed") and p,
        timeout=300, interval=0.5, what="the client on node 2 to finish",
    )
    logs = kubectl("logs", "-n", namespace, "client").stdout
    assert done["spec"]["nodeName"] == second_node
    assert done["status"]["phase"] == "Succeeded", logs
    words = logs.split()
    assert words[:-2] == [word for url in urls for word in (url, "200")], logs
    assert words[-2] == "api" and words[-1] in ("200", "401", "403"), logs
    with urllib.request.urlopen(f"http://{server2['status']['podIP']}:8080/", timeout=10) as resp:
        assert resp.status == 200


def _freezer_state(pid: int) -> str:
    """The freezer state of the cgroup ``pid`` is in ('' when it is gone)."""
    try:
        line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ":freezer:" in x)
        cgroup = line.split(":", 2)[2].lstrip("/")
        return Path("/sys/fs/cgroup/freezer", cgroup, "freezer.state").read_text().strip()
    except (OSError, StopIteration):
        return ""


def _ticks(path: Path) -> list[float]:
    return [float(x) for x in path.read_text().split()] if path.exists() else []


@pytest.mark.timeout(900)
def test_lose_and_restore_node_2(node: Node, kube: Kube, namespace: str, second_node: str, tmp_path) -> None:
    """``fault.sh lose`` freezes every process of node 2 at once; the control plane marks it
    Unknown once the grace period has passed (measured); a pod deleted meanwhile (as the operator
    deletes the ranks of a lost node) never runs again after ``fault.sh restore``, which thaws the
    daemons, waits for the kubelet's heartbeat and the SIGKILL of the deleted pod's processes,
    then thaws the pods: a pod that still exists runs on, and node 2 is Ready again."""
    out_dir = tmp_path / "ticks"
    out_dir.mkdir()
    os.chmod(out_dir, 0o777)
    tick = ("import sys, time\n"
            "while True:\n"
            "    with open(sys.argv[1], 'a') as f:\n"
            "        f.write(f'{time.time()}\\n')\n"
            "    time.sleep(0.1)\n")
    for name in ("stale", "keep"):
        kube.create(pod_path(namespace), pod(name, second_node, ["python", "-c", tick, f"/out/{name}"],
                                             volumes={str(out_dir): "/out"}))
    stale_uid = running(kube, namespace, "stale")["metadata"]["uid"]
    running(kube, namespace, "keep")
    Kube.wait_for(lambda: _ticks(out_dir / "stale") and _ticks(out_dir / "keep"), timeout=60,
                  what="both pods ticking")
    m = node.member(2)

    lost = fault(node, "lose", second_node)
    lost_at = time.time()
    assert lost.returncode == 0, lost.stderr
    assert "FROZEN" in lost.stderr, lost.stderr
    pids = cgroup_pids(m.cgroup)
    assert len(pids) >= 6, pids  # anchor, containerd, kubelet, kube-proxy, shims, pause and python
    states = {pid: _freezer_state(pid) for pid in pids}
    assert set(states.values()) == {"FROZEN"}, states
    assert stale_uid in pod_processes(f"{m.cgroup}/kubepods")
    assert node.lost() == [second_node]
    # Bad input: one line, exit 2.
    for args, words in ((("lose", second_node), "lost already"), (("lose", NODE_NAME), "CoreDNS"),
                        (("restore", "t9k-node-9"), "no node"), (("lose",), "usage")):
        bad = fault(node, *args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and words in bad.stderr, (args, bad)

    # The control plane notices: Ready becomes Unknown (the kubelet stopped posting status).
    Kube.wait_for(
        lambda: condition(kube.get(f"/api/v1/nodes/{second_node}"), "Ready").get("status") == "Unknown",
        timeout=UNKNOWN_TIMEOUT, interval=0.5, what=f"{second_node} Ready=Unknown",
    )
    unknown_s = time.time() - lost_at
    print(f"{second_node} lost: Ready=Unknown {unknown_s:.1f} s after the freeze")
    assert set(_freezer_state(p) for p in cgroup_pids(m.cgroup)) == {"FROZEN"}
    # The ranks of a lost node are deleted (force: its kubelet cannot confirm).
    kube.request("DELETE", pod_path(namespace, "stale"),
                 {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    Kube.wait_for(lambda: not kube.exists(pod_path(namespace, "stale")), timeout=60, what="stale deleted")
    last_stale = max(_ticks(out_dir / "stale"))
    assert last_stale < lost_at

    restored = fault(node, "restore", second_node)
    restored_at = time.time()
    assert restored.returncode == 0, restored.stderr
    lines = restored.stderr.strip().splitlines()
    print("\n".join(lines))
    assert len(lines) == 4 and "WARNING" not in restored.stderr, lines
    assert "(1 processes of 1 pods" in lines[2], lines
    # The deleted pod's processes die without running again; the kept pod ticks on.
    Kube.wait_for(lambda: stale_uid not in pod_processes(f"{m.cgroup}/kubepods"), timeout=120,
                  what="the deleted pod's processes gone")
    assert max(_ticks(out_dir / "stale")) == last_stale
    Kube.wait_for(lambda: max(_ticks(out_dir / "keep")) > restored_at, timeout=60, what="keep ticking again")
    Kube.wait_for(
        lambda: condition(n := kube.get(f"/api/v1/nodes/{second_node}"), "Ready").get("status") == "True"
        and not n["spec"].get("taints"),
        timeout=180, interval=0.5, what=f"{second_node} Ready and untainted again",
    )
    assert running(kube, namespace, "keep")["status"]["containerStatuses"][0]["restartCount"] == 0
    assert node.lost() == []
    assert fault(node, "restore", second_node).returncode == 2


def test_remove_node_leaves_nothing_of_node_2(node: Node, kube: Kube, second_node: str) -> None:
    """``remove_node(2)`` stops everything of node 2 (its pods included), deletes its Node object
    and leaves the host as before it joined; node 1 serves on. Node 2 joins again afterwards: the
    module's other tests, in whatever order they run, still have it."""
    try:
        check_removed(node, kube, second_node)
    finally:
        if 2 not in node.members():
            node.add_node(2, archives(*SECOND_NODE_IMAGES))


def check_removed(node: Node, kube: Kube, second_node: str) -> None:
    node.remove_node(2)
    assert node.node_names() == [NODE_NAME]
    with pytest.raises(KubeError) as err:
        kube.get(f"/api/v1/nodes/{second_node}")
    assert err.value.status == 404
    m = node.member(2)
    after = hoststate.snapshot(m.home, m.cgroup, m.veth)
    diff = hoststate.differences(node.second_node_before, after)  # type: ignore[attr-defined]
    assert not diff, "\n".join(diff)
    assert not any(r.startswith(pod_cidr(2)) for r in hoststate.routes())
    assert condition(kube.get(f"/api/v1/nodes/{NODE_NAME}"), "Ready").get("status") == "True"
