#!/usr/bin/env python3
"""Real Kubernetes nodes on this machine: the test control plane plus, per node, a kubelet,
containerd, runc, bridge CNI and kube-proxy (and CoreDNS on the first), for tests and trials
(``tools/node/up.sh``, ``down.sh``, ``fault.sh``).

    node.py up --dir DIR [--cp-bin BINDIR] [--node-bin BINDIR] [--crds PATH]... [--image ARCHIVE]...
               [--kueue MANIFESTS]   # also install Kueue (tools/kueue/manifests.sh) and wait for it
               [--nodes N]           # N real nodes (default 1): t9k-node, t9k-node-2, ...
    node.py down --dir DIR
    node.py status --dir DIR
    node.py restart --dir DIR COMPONENT   # stop and start one daemon of node 1 (containerd, kubelet, etcd...)
    node.py fault --dir DIR lose|restore NODE   # freeze a node whole / thaw it in two steps

The shape (docs/cluster.md has the walk-through):

* **Several nodes.** Node 1 is ``t9k-node`` (``NODE_IP`` 198.18.0.2, pods in 10.244.0.0/24); node
  K >= 2 is ``t9k-node-K`` (198.18.0.(K+1), pods in 10.244.(K-1).0/24), each with its own
  namespaces, cgroup, containerd (image store ``~/.cache/t9k-jobs/node/containerd-K``), kubelet
  and kube-proxy, everything below said of "the node" holding for each. CoreDNS runs on node 1
  only; every kubelet gives its pods ``CLUSTER_DNS`` (node 1's address). The host side of every
  node's veth is a port of one host bridge that holds ``HOST_IP``/24: the nodes reach each other
  over it, each node routes the other nodes' pod networks via their addresses and the host routes
  every pod network to its node. Pods talk to pods without NAT.
* **A namespace of its own.** Everything of the node runs in one network namespace and one private
  mount namespace, held open by an anchor process: the pod bridge ``cni0``, kube-proxy's iptables
  rules, ``ip_forward``, the pods' network namespaces and every mount the kubelet and containerd make
  live there, and vanish with the node's last process. The host gets one veth pair into it: the host
  side is a port of the host bridge, which holds ``HOST_IP`` (the API server binds it), the node
  side ``NODE_IP`` (the kubelet, CoreDNS). The node has no default route, so nothing leaves this
  machine (an image pull fails at once). The host routes the pod network ``POD_CIDR`` to
  ``NODE_IP`` over the bridge (the route goes with the bridge), and the API server runs with
  ``--enable-aggregator-routing``, so that it reaches
  webhooks and aggregated APIs served by pods (Kueue's) at their pod IPs.
* **A cgroup of its own.** The daemons run in ``<cgroup>/system`` and the kubelet puts pods under
  ``<cgroup>/kubepods`` (its ``cgroupRoot``), so ``down`` finds every process of the node,
  containers and the shims that containerd double-forks included, freezes, kills and removes them.
  ``fault lose`` freezes ``system`` and ``kubepods`` (the cgroup freezer) so that the node looks
  powered off to the control plane; ``fault restore`` thaws the daemons first and the pods only
  once every process of a pod deleted meanwhile has SIGKILL pending (see :meth:`Node.restore`).
* **State in DIR**: logs in DIR/logs, the control plane in DIR/cp, the kubelet's root in
  DIR/kubelet, CNI and containerd configuration, ``node.json`` (what ``down`` undoes). containerd's
  image store is kept in the cache (``~/.cache/t9k-jobs/node/containerd``) so that images survive a
  restart of the node; one cluster runs at a time on a machine (a lock on each store).
* **Host settings restored**: the kubelet sets a few kernel sysctls (``vm.overcommit_memory``...);
  ``up`` records them and ``down`` puts them back.

Needs root, cgroups and the Debian packages containerd, runc, containernetworking-plugins, iptables
and conntrack (up.sh installs them), and the binaries of tools/controlplane/build.sh and
tools/node/build.sh.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import hashlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "controlplane"))
from controlplane import ControlPlane, ControlPlaneError  # noqa: E402

NODE_NAME = "t9k-node"
HOST_IP, NODE_IP, PREFIX = "198.18.0.1", "198.18.0.2", 24  # RFC 2544 benchmarking range: never routed
POD_CIDR = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"  # every node's pod network (kube-proxy's clusterCIDR)
MAX_NODES = 20  # node K: 198.18.0.(K+1), 10.244.(K-1).0/24, link names within 15 characters
LOSE_REFUSED = (
    "t9k-node (node 1) hosts CoreDNS, the cluster's DNS at 198.18.0.2 for the pods of every node: "
    "losing it would take name resolution from the whole cluster; lose another node"
)
RESTORE_TIMEOUT = 120.0  # seconds restore waits (kubelet heartbeat, stale pods' SIGKILL) before thawing pods
# The API server calls webhooks, CRD conversion webhooks and aggregated APIs at an endpoint pod IP
# of their Service (not its ClusterIP, which only kube-proxy's rules inside the node know); the
# host reaches POD_CIDR through the route up() adds.
APISERVER_ARGS = ("--enable-aggregator-routing=true",)
# Kubernetes 1.37's topology-aware gang placement (a PodGroup's schedulingConstraints; alpha, off
# by default) on the API server and the scheduler, with the Workload API the plane turns on: the
# node places a t9k-jobs.io/topology-key gang in one domain (docs/lifecycle.md).
TOPOLOGY_GATES = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
KUEUE_NAMESPACE, KUEUE_DEPLOYMENT = "kueue-system", "kueue-controller-manager"
KUEUE_API = "/apis/kueue.x-k8s.io"
KUEUE_TIMEOUT = 180.0  # seconds for Kueue to be Available and answer once its manifests are applied
# Kueue's manager makes its webhook certificate itself (cert-controller) into the Secret its pod
# mounts, then waits until the kubelet projects the new content into the mounted volume. The
# kubelet does that on the pod's next sync (syncFrequency, 1 min by default, plus its cache's
# delay), and cert-controller looks for the files with an exponential backoff (1 s doubling, with
# jitter): a miss at ~60 s means the next look at ~130-250 s, past KUEUE_TIMEOUT
# (kubernetes-sigs/kueue#1372, open-policy-agent/cert-controller#35). Once the Secret holds the
# certificate and the manager is still not Ready after this many seconds, its pod is deleted:
# the replacement mounts the filled Secret at its start (cert-controller's own remedy,
# RestartOnSecretRefresh) and is Ready in seconds.
KUEUE_REMOUNT_AFTER = 45.0
KUEUE_CERT_SECRET = "kueue-webhook-server-cert"
CLUSTER_DNS = NODE_IP
CNI_BIN = Path("/usr/lib/cni")
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "t9k-jobs" / "node"
REGISTRY = Path("/run/t9k-jobs-node.json")  # which DIR runs the node of this machine
# Host paths that containerd, the CNI plugins and the kubelet use whatever they are told; the node
# mounts a tmpfs of its own on each inside its mount namespace, so nothing of the node lands there.
PRIVATE_PATHS = (
    "/run/containerd",  # shim sockets, runc state
    "/run/netns",  # the pods' network namespaces
    "/var/lib/cni",  # CNI results cache, host-local leases
    "/etc/cni",  # the CRI plugin's lock file
    "/var/lib/kubelet",  # the device-plugin manager's fixed directory
    "/var/log/containers",  # the kubelet's log symlinks
    "/var/log/pods",
)
# Kernel settings the kubelet changes at start (its setupKernelTunables); down puts them back.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
REQUIRED = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "conntrack": "conntrack",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "ip": "iproute2",
}
CGROUP_FS = Path("/sys/fs/cgroup")
NODE_DAEMONS = ("containerd", "kubelet", "kube-proxy", "coredns")  # started by up, in the node's namespaces
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)  # in /proc/PID/status SigPnd, ShdPnd


def node_name(k: int) -> str:
    """The name of node ``k`` (1-based): ``t9k-node``, ``t9k-node-2``..."""
    return NODE_NAME if k == 1 else f"{NODE_NAME}-{k}"


def node_ip(k: int) -> str:
    """The address of node ``k`` on the host bridge: 198.18.0.(k+1)."""
    return f"198.18.0.{k + 1}"


def pod_cidr(k: int) -> str:
    """The pod network of node ``k``: 10.244.(k-1).0/24."""
    return f"10.244.{k - 1}.0/24"


class NodeError(RuntimeError):
    """The node cannot start here, or a component failed; the message is one line (plus a log tail)."""


class NodeInputError(NodeError):
    """A request that names no node of the cluster, or asks for what is already so (a node lost
    twice); one line, the command line exits 2."""


# ------------------------------------------------------------------------------------------ cgroups


def cgroup_hierarchies(everywhere: bool = False) -> list[Path]:
    """The cgroup hierarchies to place the node in: every v1 controller mount, or the v2 root.
    ``everywhere`` adds the v2 hierarchy of a hybrid layout (``unified``), where runc also puts
    containers: the node is cleaned up there too."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        return [CGROUP_FS]
    seen: dict[Path, Path] = {}
    for entry in sorted(CGROUP_FS.iterdir()):
        if (entry.name == "unified" and not everywhere) or not (entry / "cgroup.procs").exists():
            continue
        seen.setdefault(entry.resolve(), entry)
    return list(seen.values())


def make_cgroup(name: str) -> None:
    """Create ``name`` and ``name/system`` in every hierarchy (cpuset copies its parent's cpus/mems)."""
    for h in cgroup_hierarchies():
        for rel in (name, f"{name}/system"):
            path = h / rel
            path.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (path / knob).exists() and not (path / knob).read_text().strip():
                    (path / knob).write_text((path.parent / knob).read_text())
        if h == CGROUP_FS:  # v2: let the node's children (system, kubepods) use the controllers
            ctrl = (h / "cgroup.controllers").read_text().split()
            _write(h / name / "cgroup.subtree_control", " ".join(f"+{c}" for c in ctrl))


def join_cgroup(name: str):
    """A ``preexec_fn`` that moves the new process into ``name/system`` before it execs."""
    targets = [h / name / "system" / "cgroup.procs" for h in cgroup_hierarchies()]

    def join() -> None:
        pid = str(os.getpid())
        for t in targets:
            with open(t, "w") as f:
                f.write(pid)

    return join


def cgroup_pids(name: str) -> set[int]:
    """Every process in the cgroup ``name`` or below it, in any hierarchy."""
    pids: set[int] = set()
    for h in cgroup_hierarchies(everywhere=True):
        top = h / name
        if not top.exists():
            continue
        for dirpath, _, files in os.walk(top):
            if "cgroup.procs" in files:
                try:
                    pids |= {int(p) for p in Path(dirpath, "cgroup.procs").read_text().split()}
                except OSError:
                    pass
    return pids


def kill_cgroup(name: str, spare: int | None = None, timeout: float = 30.0) -> None:
    """SIGKILL every process under ``name`` but ``spare`` (frozen first where the freezer allows,
    so nothing forks away; sub-cgroups frozen by ``fault lose`` are thawed under the frozen parent)
    until none is left. Raises NodeError on a timeout."""
    freezer = next((h / name for h in cgroup_hierarchies() if (h / name / "freezer.state").exists()), None)
    end = time.monotonic() + timeout
    while pids := cgroup_pids(name) - {spare}:
        if freezer is not None:
            _write(freezer / "freezer.state", "FROZEN")
            # Below a frozen parent a thawed child stays frozen until the parent thaws: sub-cgroups
            # that froze themselves (fault lose) thaw with SIGKILL pending and die at once.
            for dirpath, _, _ in os.walk(freezer):
                if dirpath != str(freezer):
                    _write(Path(dirpath) / "freezer.state", "THAWED")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if freezer is not None:
            _write(freezer / "freezer.state", "THAWED")
        if time.monotonic() > end:
            raise NodeError(f"processes {sorted(pids)} of cgroup {name} did not die in {timeout:.0f} s")
        time.sleep(0.05)


def remove_cgroup(name: str) -> None:
    """Remove the (empty) cgroup ``name`` and its children, depth-first, in every hierarchy."""
    for h in cgroup_hierarchies(everywhere=True):
        top = h / name
        if not top.exists():
            continue
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
            for _ in range(50):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # a cgroup whose last process just died can be busy briefly
            else:
                raise NodeError(f"cannot remove cgroup {dirpath}")


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass


def freezer_dir(name: str) -> Path | None:
    """The cgroup ``name`` in the hierarchy that freezes (v1 ``freezer``, v2 root), None without one."""
    for h in cgroup_hierarchies():
        if (h / name / "freezer.state").exists() or (h / name / "cgroup.freeze").exists():
            return h / name
    return None


def set_frozen(path: Path, frozen: bool) -> None:
    """Freeze or thaw the cgroup at ``path`` (v1 freezer.state, v2 cgroup.freeze); OSError passes up."""
    if (path / "freezer.state").exists():
        (path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
    else:
        (path / "cgroup.freeze").write_text("1" if frozen else "0")


def frozen_state(path: Path) -> str:
    """FROZEN, FREEZING or THAWED for the cgroup at ``path`` (v2: from cgroup.events); '' if absent."""
    try:
        if (path / "freezer.state").exists():
            return (path / "freezer.state").read_text().strip()
        events = dict(line.split() for line in (path / "cgroup.events").read_text().splitlines())
        if events.get("frozen") == "1":
            return "FROZEN"
        return "FREEZING" if (path / "cgroup.freeze").read_text().strip() == "1" else "THAWED"
    except (OSError, ValueError):
        return ""


def thaw_tree(name: str) -> None:
    """Thaw the cgroup ``name`` and every cgroup below it, top down (a v1 cgroup frozen by itself
    stays frozen when only its parent is thawed, and its processes cannot be killed meanwhile)."""
    top = freezer_dir(name)
    if top is None:
        return
    for dirpath, _, _ in sorted(os.walk(top), key=lambda w: len(w[0])):
        try:
            set_frozen(Path(dirpath), False)
        except OSError:
            pass


def sigkill_pending(pid: int) -> bool:
    """Whether ``pid`` has SIGKILL pending (for a thread or the whole process); False once it is gone."""
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
    except OSError:
        return False
    return any(int(fields.get(k, "0").strip() or "0", 16) & SIGKILL_BIT for k in ("SigPnd", "ShdPnd"))


def uncovered(pids: list[int]) -> list[int]:
    """Of ``pids`` (the processes of containers the kubelet is stopping), those that may still run
    user code when thawed: without SIGKILL pending, and not in a pid namespace whose first process
    (a container's init, pid 1 inside) has it. runc's kill reaches a container's init only; when
    the init dies the kernel kills every other process of its pid namespace, so a container whose
    init wakes with SIGKILL pending runs nothing more, but its other processes may be scheduled for
    the moment that teardown takes."""
    dying_namespaces = set()
    for pid in pids:
        if _ns_pid(pid) == 1 and sigkill_pending(pid):
            dying_namespaces.add(_pid_namespace(pid))
    return [p for p in pids if not sigkill_pending(p) and _pid_namespace(p) not in dying_namespaces]


def _ns_pid(pid: int) -> int | None:
    """``pid``'s number in its own (innermost) pid namespace (``NSpid``'s last field)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return f"gone-{pid}"


def pod_processes(cgroup: str) -> dict[str, set[int]]:
    """pod uid -> the processes under ``cgroup`` whose cgroup path has a ``pod<uid>`` component (the
    kubelet's pod cgroups; the systemd driver writes the uid's dashes as underscores)."""
    out: dict[str, set[int]] = {}
    top = freezer_dir(cgroup) or next((h / cgroup for h in cgroup_hierarchies()), None)
    if top is None or not top.exists():
        return out
    for dirpath, _, files in os.walk(top):
        uid = next((c[3:].replace("_", "-") for c in Path(dirpath).relative_to(top).parts
                    if c.startswith("pod") and len(c) > 30), None)
        if uid is None or "cgroup.procs" not in files:
            continue
        try:
            procs = Path(dirpath, "cgroup.procs").read_text().split()
            out.setdefault(uid, set()).update(int(p) for p in procs)
        except OSError:
            pass
    return out


# ------------------------------------------------------------------------------------------- helpers


def run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a short command; NodeError with its output when it fails and ``check``."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise NodeError(f"{' '.join(cmd)}: no answer in {timeout:.0f} s") from exc
    if check and out.returncode != 0:
        raise NodeError(f"{' '.join(cmd)}: {(out.stderr or out.stdout).strip()}")
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def preflight() -> None:
    """Refuse, in one line, where a node cannot run: not root, no cgroups, missing commands."""
    if os.geteuid() != 0:
        raise NodeError("a real node needs root (containerd, cgroups, network namespaces); run as root")
    if not cgroup_hierarchies():
        raise NodeError(f"no cgroup hierarchy is mounted under {CGROUP_FS}; a node needs cgroups")
    missing = sorted({pkg for cmd, pkg in REQUIRED.items() if shutil.which(cmd) is None})
    if not (CNI_BIN / "bridge").exists():
        missing.append("containernetworking-plugins")
    if missing:
        raise NodeError(f"missing Debian packages: {' '.join(missing)} (tools/node/up.sh installs them)")


# ---------------------------------------------------------------------------------------------- node


@dataclass(frozen=True)
class Member:
    """What node ``k`` of a cluster is called and where its things are (see :meth:`Node.member`)."""

    k: int
    name: str  # its Node object
    ip: str  # its address on the host bridge (the kubelet's node IP)
    cidr: str  # its pod network
    cgroup: str  # its cgroup, in every hierarchy: daemons in <cgroup>/system, pods in <cgroup>/kubepods
    veth: str  # the host end of its veth pair (a port of the host bridge); the node end is eth0
    home: Path  # its configuration and the kubelet's root: DIR for node 1, DIR/node-K
    logs: Path  # its daemons' logs
    socket: Path  # its containerd's socket
    store: Path  # its containerd's root (in the cache: images persist)
    lock: Path  # the lock on that store


class Node:
    """The cluster whose state lives in ``dir``. ``up()`` starts the control plane and node 1 (more
    with ``nodes=N`` or :meth:`add_node`) and waits until every node is Ready and DNS answers;
    ``down()`` (also from another process) undoes everything. After ``up()``: ``plane`` (the
    ControlPlane: ``kubeconfig``, ``server``, ``token``, ``bin_dir``), ``containerd_socket`` (node
    1's), ``kubectl`` (argv prefix), ``cgroup`` and ``veth`` (node 1's), ``bridge`` (the host bridge)."""

    def __init__(
        self,
        dir: str | os.PathLike,
        cp_bin: str | os.PathLike | None = None,
        node_bin: str | os.PathLike | None = None,
        crds: list[str | os.PathLike] | tuple = (),
    ) -> None:
        self.dir = Path(dir).resolve()
        self.cp_bin = Path(cp_bin).resolve() if cp_bin else None
        self.node_bin = Path(node_bin).resolve() if node_bin else None
        self.crds = list(crds)
        self.logs = self.dir / "logs"
        self.state_file = self.dir / "node.json"
        self.containerd_socket = self.dir / "containerd.sock"
        digest = hashlib.sha256(str(self.dir).encode()).hexdigest()
        self.cgroup = "t9k-node-" + digest[:8]
        self.veth = "t9kn-" + digest[:6]
        self.bridge = "t9kb-" + digest[:6]
        self.plane = ControlPlane(
            self.dir / "cp", cp_bin, scheduler=True, crds=self.crds, address=HOST_IP, serve_pods=True,
            apiserver_args=(*APISERVER_ARGS, TOPOLOGY_GATES), scheduler_args=(TOPOLOGY_GATES,),
        )
        self.state: dict = {}
        self.kueue_seconds: float | None = None  # how long install_kueue() took

    def member(self, k: int) -> Member:
        """Names and paths of node ``k`` (1 to MAX_NODES); NodeInputError otherwise."""
        if not isinstance(k, int) or not 1 <= k <= MAX_NODES:
            raise NodeInputError(f"no node {k!r}: nodes are numbered 1 to {MAX_NODES}")
        if k == 1:
            return Member(1, NODE_NAME, NODE_IP, POD_CIDR, self.cgroup, self.veth, self.dir, self.logs,
                          self.containerd_socket, CACHE / "containerd", CACHE / "containerd.lock")
        home = self.dir / f"node-{k}"
        return Member(k, node_name(k), node_ip(k), pod_cidr(k), f"{self.cgroup}-{k}", f"{self.veth}-{k}",
                      home, home / "logs", self.dir / f"containerd-{k}.sock", CACHE / f"containerd-{k}",
                      CACHE / f"containerd-{k}.lock")

    # -- state ------------------------------------------------------------------------------------
    def _save(self) -> None:
        self.state_file.write_text(json.dumps(self.state, indent=1))

    def _load(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _st(self, k: int) -> dict:
        """The recorded state of node ``k``: node 1's at the top of node.json, node K's in nodes[K]."""
        return self.state if k == 1 else self.state.setdefault("nodes", {}).setdefault(str(k), {})

    def members(self) -> list[int]:
        """The numbers of the nodes recorded in node.json (started, or half started), ascending."""
        state = self._load() or self.state
        if not state:
            return []
        return [1, *sorted(int(k) for k in state.get("nodes", {}))]

    def node_names(self) -> list[str]:
        """The names of the cluster's nodes, node 1's first (``t9k-node``, ``t9k-node-2``...)."""
        return [node_name(k) for k in self.members()]

    def index(self, name: str) -> int:
        """The number of the node called ``name``; NodeInputError naming the nodes there are."""
        for k in self.members():
            if node_name(k) == name:
                return k
        known = ", ".join(self.node_names()) or "none: the cluster is down"
        raise NodeInputError(f"no node {name!r} in the cluster of {self.dir} (nodes: {known})")

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def kubectl(self) -> list[str]:
        return [str(self.plane.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}"]

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 600, k: int = 1
    ) -> subprocess.CompletedProcess:
        """``ctr`` against node ``k``'s containerd, namespace k8s.io."""
        socket = str(self.member(k).socket)
        return run("ctr", "-a", socket, "-n", "k8s.io", *args, check=check, timeout=timeout)

    def nsenter(self, *cmd: str, k: int = 1) -> list[str]:
        """argv that runs ``cmd`` inside node ``k``'s network and mount namespaces."""
        return ["nsenter", "-t", str(self._st(k)["anchor"]), "--mount", "--net", "--", *cmd]

    # -- up ---------------------------------------------------------------------------------------
    def up(
        self,
        images: list[str | os.PathLike] = (),
        timeout: float = 120.0,
        kueue: str | os.PathLike | None = None,
        nodes: int = 1,
    ) -> Node:
        """Start everything and wait (``timeout`` seconds per step) until the node is Ready, untainted,
        serves DNS and the ``default`` ServiceAccount exists. ``images``: OCI archives to import into
        containerd (the sandbox image must be among them or already there). ``kueue``: Kueue's
        install manifests (``tools/kueue/manifests.sh --no-visibility``; its image among ``images``):
        installed once the node is Ready, see :meth:`install_kueue`. ``nodes``: how many real nodes
        (1 to MAX_NODES); nodes 2..N join after node 1 (and Kueue) as :meth:`add_node` joins them,
        with the same images. On failure everything started is stopped and NodeError (or
        ControlPlaneError) is raised; NodeInputError for a bad ``nodes``."""
        if not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
            raise NodeInputError(f"--nodes must be 1 to {MAX_NODES}, not {nodes!r}")
        preflight()
        self.node_bin = self.node_bin or Path(
            subprocess.run(["bash", str(HERE / "build.sh")], stdout=subprocess.PIPE, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        other = _registered()
        if other and Node(other)._live():
            raise NodeError(f"a node already runs from {other}; stop it with: tools/node/down.sh {other}")
        if other and other != str(self.dir):
            Node(other).down()  # a node of another DIR that crashed: its bridge, rules and sysctls go
        self._remove_stale_bridges()
        if self._load():
            self.down()  # a stale node of this DIR (crashed, never taken down)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        m = self.member(1)
        lock = self._lock(m)
        self.state = {"dir": str(self.dir), "cgroup": self.cgroup, "veth": self.veth, "pids": {}, "made_dirs": []}
        self.state["sysctls"] = {k: Path("/proc/sys", k).read_text().strip() for k in KUBELET_SYSCTLS}
        self._save()
        REGISTRY.write_text(json.dumps({"dir": str(self.dir)}))
        try:
            self._host_bridge()
            self._namespaces(m, lock)
            self.plane.start()
            self._start_containerd(m)
            self.import_images(list(images))
            self._start_kubelet(m)
            self._start_kube_proxy(m)
            self._start_coredns()
            self._wait_ready(timeout)
            if kueue is not None:
                self.install_kueue(kueue)
        except BaseException:
            self.down()
            raise
        finally:
            os.close(lock)  # the anchor holds it from here on, as long as the node lives
        try:
            for k in range(2, nodes + 1):
                self.add_node(k, images, timeout)
        except BaseException:
            self.down()
            raise
        return self

    def add_node(self, k: int, images: list[str | os.PathLike] = (), timeout: float = 120.0) -> str:
        """Join node ``k`` (2 to MAX_NODES) to the running cluster: its namespaces, cgroup, veth and
        routes, its containerd (``images`` imported, those already there skipped), kubelet and
        kube-proxy; wait (``timeout`` seconds per step) until it is Ready and untainted and its
        kube-proxy healthy. Returns its name. NodeInputError when ``k`` is out of range or already
        a node, NodeError when no cluster runs from this DIR or the node does not come up (then
        nothing of it is left: :meth:`remove_node`)."""
        self.state = self._load()
        m = self.member(k)
        if k == 1:
            raise NodeInputError("node 1 is started by up, not added")
        if not self.state or not alive(self.state.get("anchor", 0)):
            raise NodeError(f"no cluster runs from {self.dir}; start one with tools/node/up.sh {self.dir}")
        if str(k) in self.state.get("nodes", {}):
            raise NodeInputError(f"{m.name} is already a node of the cluster of {self.dir}")
        self.node_bin = self.node_bin or Path(self.state["node_bin"])
        m.logs.mkdir(parents=True, exist_ok=True)
        lock = self._lock(m)
        self._st(k).update({"cgroup": m.cgroup, "veth": m.veth, "pids": {}, "made_dirs": []})
        self._save()
        try:
            self._namespaces(m, lock)
            self._start_containerd(m)
            self.import_images(list(images), k=k)
            self._start_kubelet(m)
            proxy = self._start_kube_proxy(m)
            self._wait_member(m, timeout)
            self._until(m, "kube-proxy", "healthy", lambda: _http_ok(f"http://{m.ip}:10256/healthz"), timeout,
                        proxy)
        except BaseException:
            self.remove_node(k)
            raise
        finally:
            os.close(lock)
        return m.name

    def _lock(self, m: Member) -> int:
        """Lock ``m``'s containerd store; its anchor inherits the descriptor and holds it."""
        CACHE.mkdir(parents=True, exist_ok=True)
        lock = os.open(m.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise NodeError(
                f"another node holds containerd's store {m.store} (see {REGISTRY}); stop it first"
            ) from None
        return lock

    def _remove_stale_bridges(self) -> None:
        """Delete the host bridges (``t9kb-*``) that no live node owns: a node whose runner was killed
        before ``down`` and whose registration is gone leaves its bridge holding HOST_IP, and a second
        bridge with that address sends the kubelet's packets for the API server nowhere. A bridge
        with ports (a live node's veths) is refused in one line instead."""
        other = _registered()
        owned = {self.bridge} | ({Node(other).bridge} if other and Node(other)._live() else set())
        for path in sorted(Path("/sys/class/net").glob("t9kb-*")):
            if path.name in owned:
                continue
            ports = sorted(p.name for p in (path / "brif").iterdir()) if (path / "brif").is_dir() else []
            if ports:
                raise NodeError(
                    f"the host bridge {path.name} (ports: {', '.join(ports)}) belongs to a node that still "
                    f"runs outside {REGISTRY}; stop it first (tools/node/down.sh DIR)"
                )
            run("ip", "link", "del", path.name, check=False)
            rule = ["FORWARD", "-i", path.name, "-o", path.name, "-j", "ACCEPT"]
            while shutil.which("iptables") and run("iptables", "-w", "-D", *rule, check=False).returncode == 0:
                pass

    def _host_bridge(self) -> None:
        """The host bridge that holds HOST_IP and joins the nodes' veths; where the host passes
        bridged traffic through iptables (br_netfilter), a FORWARD rule that accepts it (recorded,
        removed by down)."""
        self.state["bridge"] = self.bridge
        self._save()
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{HOST_IP}/{PREFIX}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        try:
            bridged = Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
        except OSError:
            bridged = False
        if bridged:
            rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]
            self.state["iptables"] = [rule]
            self._save()
            run("iptables", "-w", "-I", *rule[:1], "1", *rule[1:])

    def _namespaces(self, m: Member, lock: int) -> None:
        st = self._st(m.k)
        make_cgroup(m.cgroup)
        # The anchor also holds the lock on containerd's store: containerd would hand its copy on to
        # the shims it starts (Go leaves inherited descriptors open), which outlive a containerd
        # restart, so that a restarted containerd could not lock the store again.
        anchor = subprocess.Popen(
            ["unshare", "--mount", "--net", "--propagation", "private", "--", "sleep", "infinity"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=join_cgroup(m.cgroup),
            pass_fds=(lock,),
        )
        st["anchor"] = anchor.pid
        self._save()
        end = time.monotonic() + 10
        while os.readlink(f"/proc/{anchor.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            if anchor.poll() is not None or time.monotonic() > end:
                raise NodeError(f"unshare of the node's namespaces failed (exit {anchor.poll()})")
            time.sleep(0.02)
        peer = m.veth + "p"
        run("ip", "link", "add", m.veth, "type", "veth", "peer", "name", peer)
        run("ip", "link", "set", peer, "netns", str(anchor.pid))
        run("ip", "link", "set", m.veth, "master", self.bridge)
        run("ip", "link", "set", m.veth, "up")
        ns = lambda *cmd: self.nsenter(*cmd, k=m.k)  # noqa: E731
        run(*ns("ip", "link", "set", "lo", "up"))
        run(*ns("ip", "link", "set", peer, "name", "eth0"))
        run(*ns("ip", "addr", "add", f"{m.ip}/{PREFIX}", "dev", "eth0"))
        run(*ns("ip", "link", "set", "eth0", "up"))
        # The API server (on the host) reaches pods, webhook servers among them, through the node;
        # the route is the bridge's and goes with it. The nodes route each other's pod networks.
        run("ip", "route", "replace", m.cidr, "via", m.ip, "dev", self.bridge)
        for j in self.members():
            if j == m.k or not self._st(j).get("anchor"):
                continue
            other = self.member(j)
            run(*ns("ip", "route", "replace", other.cidr, "via", other.ip, "dev", "eth0"))
            run(*self.nsenter("ip", "route", "replace", m.cidr, "via", m.ip, "dev", "eth0", k=j), check=False)
        for path in PRIVATE_PATHS:
            real = os.path.realpath(path)
            if not os.path.isdir(real):
                os.makedirs(real)
                st["made_dirs"].append(real)
            run(*ns("mount", "-t", "tmpfs", "-o", "mode=0755", "t9k-node", real))
        self._save()

    def _spawn(self, name: str, *argv: str, k: int = 1, **kw) -> subprocess.Popen:
        m, st = self.member(k), self._st(k)
        st.setdefault("argv", {})[name] = list(argv)  # for start_component()
        with open(m.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                self.nsenter(*argv, k=k),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=join_cgroup(m.cgroup),
                **kw,
            )
        st["pids"][name] = proc.pid
        self._save()
        return proc

    def _fail(self, m: Member, name: str, why: str) -> NodeError:
        log = m.logs / f"{name}.log"
        try:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        except OSError:
            tail = "(no log)"
        where = "" if m.k == 1 or name.startswith("kube-controller") else f" of {m.name}"
        return NodeError(f"{name}{where} {why}\n--- tail of {log} ---\n{tail}")

    def _until(self, m: Member, name: str, what: str, check, timeout: float,
               proc: subprocess.Popen | None = None) -> None:
        end = time.monotonic() + timeout
        while True:
            if proc is not None and proc.poll() is not None:
                raise self._fail(m, name, f"exited with status {proc.returncode} before {what}")
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - readiness polling: retry until the deadline
                pass
            if time.monotonic() > end:
                raise self._fail(m, name, f"not {what} after {timeout:.0f} s")
            time.sleep(0.2)

    def _start_containerd(self, m: Member) -> None:
        root = m.store
        conf = m.home / "containerd.toml"
        cni = m.home / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-t9k-bridge.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": "t9k-bridge",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": "cni0",
                            "isGateway": True,
                            # No NAT: the host and every node route each pod network to its node.
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": m.cidr}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                },
                indent=1,
            )
        )
        conf.write_text(
            f"""version = 2
root = "{root}"
state = "/run/containerd"
[grpc]
  address = "{m.socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{CACHE / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni / 'net.d'}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"""
        )
        m.socket.unlink(missing_ok=True)
        proc = self._spawn("containerd", "containerd", "--config", str(conf), k=m.k)
        self._until(
            m,
            "containerd",
            "serving",
            lambda: run("ctr", "-a", str(m.socket), "version", check=False, timeout=5).returncode == 0,
            60,
            proc,
        )
        self._remove_stale_containers(m.k)

    def _remove_stale_containers(self, k: int = 1) -> None:
        """Containers a node left in the store when it died without ``down`` (their processes are
        gone with its cgroup; the records would make the kubelet chase dead sandboxes)."""
        for c in self.ctr("containers", "ls", "-q", timeout=60, k=k).stdout.split():
            self.ctr("tasks", "rm", "-f", c, check=False, timeout=30, k=k)
            self.ctr("containers", "rm", c, check=False, timeout=30, k=k)

    def import_images(self, archives: list[str | os.PathLike], k: int = 1) -> None:
        """Import OCI archives into node ``k``'s containerd (namespace k8s.io), skipping those whose
        image is already there with the same manifest digest (tools/images/images.py import)."""
        if archives:
            run(sys.executable, str(ROOT / "tools" / "images" / "images.py"), "import",
                str(self.member(k).socket), *map(str, archives), timeout=1800)

    def _start_kubelet(self, m: Member) -> None:
        self.state["node_bin"] = str(self.node_bin)  # for add_node() from another process
        kdir = m.home / "kubelet"
        kdir.mkdir(parents=True, exist_ok=True)
        (m.home / "resolv.conf").write_text(f"nameserver {CLUSTER_DNS}\n")
        conf = m.home / "kubelet.yaml"
        conf.write_text(
            f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{m.socket}
cgroupDriver: cgroupfs
cgroupRoot: /{m.cgroup}
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
failCgroupV1: false
authentication: {{anonymous: {{enabled: true}}, webhook: {{enabled: false}}, x509: {{}}}}
authorization: {{mode: AlwaysAllow}}
clusterDomain: cluster.local
clusterDNS: ["{CLUSTER_DNS}"]
resolvConf: {m.home / 'resolv.conf'}
address: {m.ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: {m.ip}
healthzPort: 10248
podLogsDir: {m.home / 'pod-logs'}
volumePluginDir: {m.home / 'volume-plugins'}
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
evictionHard: {{memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}}
"""
        )
        proc = self._spawn(
            "kubelet",
            str(self.node_bin / "kubelet"),
            f"--config={conf}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={kdir}",
            f"--cert-dir={kdir / 'pki'}",
            f"--node-ip={m.ip}",
            f"--hostname-override={m.name}",
            "--v=2",
            k=m.k,
        )
        self._until(m, "kubelet", "serving", lambda: _http_ok(f"http://{m.ip}:10248/healthz"), 90, proc)

    def _start_kube_proxy(self, m: Member) -> subprocess.Popen:
        conf = m.home / "kube-proxy.yaml"
        conf.write_text(
            f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {CLUSTER_CIDR}
hostnameOverride: {m.name}
clientConnection: {{kubeconfig: {self.kubeconfig}}}
conntrack: {{maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: {m.ip}:10256
"""
        )
        proc = self._spawn("kube-proxy", str(self.node_bin / "kube-proxy"), f"--config={conf}", k=m.k)
        if m.k == 1:
            self._kube_proxy = proc
        return proc

    def _start_coredns(self) -> None:
        conf = self.dir / "Corefile"
        conf.write_text(
            f"""cluster.local:53 in-addr.arpa:53 {{
    bind {NODE_IP}
    errors
    ready {NODE_IP}:8181
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {self.kubeconfig} t9k-jobs-test
        pods insecure
    }}
    cache 5
}}
"""
        )
        self._coredns = self._spawn("coredns", str(self.node_bin / "coredns"), "-conf", str(conf))

    def _wait_member(self, m: Member, timeout: float) -> None:
        """Wait (``timeout`` seconds) until node ``m`` is Ready and untainted; NodeError otherwise."""
        def node_ready() -> bool:
            node = self.api(f"/api/v1/nodes/{m.name}")
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])
            )
            return ready and not node.get("spec", {}).get("taints")

        self._until(m, "kubelet", "Ready and untainted", node_ready, timeout)

    def _wait_ready(self, timeout: float) -> None:
        m = self.member(1)
        self._wait_member(m, timeout)
        self._until(m, "kube-proxy", "healthy", lambda: _http_ok(f"http://{NODE_IP}:10256/healthz"), timeout,
                    self._kube_proxy)
        self._until(m, "coredns", "ready", lambda: _http_ok(f"http://{NODE_IP}:8181/ready"), timeout,
                    self._coredns)
        self._until(
            m,
            "kube-controller-manager",
            "done with the default ServiceAccount",
            lambda: self.api("/api/v1/namespaces/default/serviceaccounts/default")
            and self.api("/api/v1/namespaces/default/configmaps/kube-root-ca.crt"),
            timeout,
        )

    def _attach(self) -> None:
        """For a cluster started by another process: the API server's address and the admin token
        (from DIR/cp/kubeconfig and tokens.csv), and the binaries' directory."""
        if self.plane.server:
            return
        try:
            kubeconfig = self.plane.kubeconfig.read_text()
            self.plane.token = (self.plane.dir / "tokens.csv").read_text().split(",", 1)[0]
            launch = json.loads((self.plane.dir / "kube-apiserver.launch.json").read_text())
        except (OSError, ValueError) as exc:
            raise NodeError(f"no control plane runs from {self.plane.dir} ({exc})") from None
        self.plane.server = next(line.split("server:", 1)[1].strip() for line in kubeconfig.splitlines()
                                 if "server:" in line)
        self.plane.bin_dir = self.plane.bin_dir or Path(launch["argv"][0]).parent

    def api(self, path: str) -> dict:
        """GET ``path`` from the API server as admin; {} when it answers 404."""
        self._attach()
        req = urllib.request.Request(self.plane.server + path, headers={"Authorization": f"Bearer {self.plane.token}"})
        ctx = ssl.create_default_context(cafile=str(self.plane.ca_file))
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {}
            raise

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        """One request to the API server as admin: (HTTP status, decoded answer), errors included."""
        self._attach()
        headers = {"Authorization": f"Bearer {self.plane.token}", "Accept": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.plane.server + path, data=data, method=method, headers=headers)
        ctx = ssl.create_default_context(cafile=str(self.plane.ca_file))
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.load(exc)
            except ValueError:
                return exc.code, {"message": exc.reason}

    # -- Kueue --------------------------------------------------------------------------------------
    def install_kueue(self, manifests: str | os.PathLike, timeout: float = KUEUE_TIMEOUT) -> float:
        """Install Kueue from its rendered manifests (``tools/kueue/manifests.sh --no-visibility``;
        the image ``localhost/kueue`` imported already) and wait until it answers: its Deployment is
        Available, its admission webhooks answer (a server-side dry-run create of a ResourceFlavor)
        and its CRD conversion webhook converts (a dry-run create of a ``v1beta1`` ClusterQueue:
        the API server converts it to ``v1beta2``, the storage version, and the answer back).
        Applied server-side: the workloads CRD is over the 256 KB that client-side apply's
        annotation may hold. Returns the seconds it took (also in ``kueue_seconds``); NodeError,
        naming what did not answer, after ``timeout`` seconds."""
        started = time.monotonic()
        end = started + timeout
        run(*self.kubectl, f"--cache-dir={self.dir / 'kubectl-cache'}", "apply", "--server-side",
            "--force-conflicts", "-f", str(manifests), timeout=timeout)
        deployment = f"/apis/apps/v1/namespaces/{KUEUE_NAMESPACE}/deployments/{KUEUE_DEPLOYMENT}"

        remounted: list[str] = []

        def available() -> str:
            _, dep = self.call("GET", deployment)
            conditions = dep.get("status", {}).get("conditions", [])
            if any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
                return ""
            if not remounted and time.monotonic() - started > KUEUE_REMOUNT_AFTER:
                remounted.extend(self._kueue_remount())
            return self._kueue_pods() + (f" (replaced {', '.join(remounted)}: its certificate was not "
                                         "projected into its volume yet)" if remounted else "")

        def dry_run(version: str, plural: str, kind: str, spec: dict) -> str:
            obj = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": kind,
                   "metadata": {"generateName": "t9k-node-probe-"}, "spec": spec}
            status, answer = self.call("POST", f"{KUEUE_API}/{version}/{plural}?dryRun=All", obj)
            if status == 201 and answer.get("apiVersion") == obj["apiVersion"]:
                return ""
            return f"HTTP {status}: {answer.get('message') or answer}"

        steps = (
            (f"its Deployment {KUEUE_NAMESPACE}/{KUEUE_DEPLOYMENT} is not Available", available),
            ("its admission webhooks do not answer (a dry-run create of a v1beta2 ResourceFlavor)",
             lambda: dry_run("v1beta2", "resourceflavors", "ResourceFlavor", {})),
            ("its conversion webhook does not answer (a dry-run create of a v1beta1 ClusterQueue)",
             lambda: dry_run("v1beta1", "clusterqueues", "ClusterQueue", {"namespaceSelector": {}})),
        )
        for what, check in steps:
            last = "no answer yet"
            while True:
                try:
                    last = check()
                except (OSError, ValueError) as exc:  # the API server itself: retry until the deadline
                    last = repr(exc)
                if not last:
                    break
                if time.monotonic() > end:
                    raise NodeError(
                        f"Kueue did not answer in {timeout:.0f} s: {what} (last: {last})\n"
                        f"--- tail of Kueue's log ---\n{self._kueue_log_tail()}"
                    )
                time.sleep(0.5)
        self.kueue_seconds = time.monotonic() - started
        return self.kueue_seconds

    def _kueue_remount(self) -> list[str]:
        """Delete the manager's pods once the Secret holds the webhook certificate
        (KUEUE_REMOUNT_AFTER says why); returns the names deleted, none while the Secret is empty."""
        status, secret = self.call("GET", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{KUEUE_CERT_SECRET}")
        if status != 200 or not (secret.get("data") or {}).get("tls.crt"):
            return []
        _, dep = self.call("GET", f"/apis/apps/v1/namespaces/{KUEUE_NAMESPACE}/deployments/{KUEUE_DEPLOYMENT}")
        labels = (dep.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
        selector = urllib.parse.quote(",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        _, pods = self.call("GET", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/pods?labelSelector={selector}")
        names = [p["metadata"]["name"] for p in pods.get("items", [])]
        for name in names:
            self.call("DELETE", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/pods/{name}")
        if names:
            print(f"node: Kueue's manager not Ready {KUEUE_REMOUNT_AFTER:.0f} s after its install, its "
                  f"certificate in the Secret: replaced {', '.join(names)} to mount it", file=sys.stderr)
        return names

    def _kueue_pods(self) -> str:
        """Kueue's pods in a few words: name, phase, readiness, why a container waits."""
        _, pods = self.call("GET", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/pods")
        out = []
        for pod in pods.get("items", []):
            status = pod.get("status", {})
            words = [pod["metadata"]["name"], status.get("phase", "?")]
            for c in status.get("containerStatuses", []):
                waiting = c.get("state", {}).get("waiting")
                words.append(f"{c['name']} ready={c.get('ready')} restarts={c.get('restartCount', 0)}"
                             + (f" waiting={waiting.get('reason')}" if waiting else ""))
            out.append(" ".join(words))
        return "; ".join(out) or "no pod yet"

    def _kueue_log_tail(self, lines: int = 20) -> str:
        logs = sorted((self.dir / "pod-logs").glob(f"{KUEUE_NAMESPACE}_*/*/*.log"), key=lambda f: f.stat().st_mtime)
        if not logs:
            return "(no log: the container never started)"
        text = logs[-1].read_text(errors="replace").splitlines()[-lines:]
        return f"{logs[-1]}\n" + "\n".join(text)

    # -- down -------------------------------------------------------------------------------------
    def _live(self) -> bool:
        state = self._load()
        parts = [state, *state.get("nodes", {}).values()]
        return any(
            any(alive(p) for p in [st.get("anchor", 0), *st.get("pids", {}).values()] if p)
            or bool(st.get("cgroup") and cgroup_pids(st["cgroup"]))
            for st in parts
        )

    def _stop_daemons(self, sts: list[dict]) -> None:
        """SIGTERM the daemons of these nodes' states (thawed first: a frozen process cannot die),
        and give them five seconds to end (containerd closes its store)."""
        for st in sts:
            if st.get("cgroup"):
                thaw_tree(f"{st['cgroup']}/system")
        daemons = [st["pids"][n] for st in sts for n in ("kubelet", "kube-proxy", "coredns", "containerd")
                   if st.get("pids", {}).get(n)]
        for pid in daemons:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5
        while any(alive(p) for p in daemons) and time.monotonic() < end:
            time.sleep(0.05)

    def _clear(self, st: dict) -> None:
        """After its processes are gone: node ``st``'s cgroups, zombies, host link, made dirs."""
        cgroup = st.get("cgroup")
        if cgroup:
            kill_cgroup(cgroup)
            remove_cgroup(cgroup)
        for pid in [st.get("anchor"), *st.get("pids", {}).values()]:
            if pid:
                _reap(pid)  # our own children: reap them
        # A container whose shim was killed first is re-parented to PID 1 and stays a zombie (still
        # in the node's cgroup) until PID 1 reaps it, which some init systems do only now and then.
        end = time.monotonic() + 10
        while cgroup and _zombies(cgroup) and time.monotonic() < end:
            time.sleep(0.05)
        veth = st.get("veth")
        if veth and Path(f"/sys/class/net/{veth}").exists():
            run("ip", "link", "del", veth, check=False)
        for path in reversed(st.get("made_dirs", [])):
            try:
                os.rmdir(path)
            except OSError:
                pass

    def down(self) -> None:
        """Stop every node and the control plane and undo what ``up`` and ``add_node`` changed on
        the host: no process, mount, cgroup, network namespace, veth, bridge, route, iptables rule
        or sysctl of any node is left. Frozen nodes (``fault lose``) are thawed first. Safe to call
        on a cluster that is half up, already down, or was started by another process."""
        state = self._load() or self.state
        if not state:
            self.plane.stop()
            return
        sts = [*state.get("nodes", {}).values(), state]
        # The daemons end first, with a moment for containerd to close its store; then everything
        # left in each node's cgroup (containers, shims) but the anchors is killed. The control plane
        # stops while the network is still up (without the API server's address, its shutdown hangs
        # on its own connections); then the anchors go and the namespaces with them.
        self._stop_daemons(sts)
        for st in sts:
            if st.get("cgroup"):
                kill_cgroup(st["cgroup"], spare=st.get("anchor"))
        self.plane.stop()
        for st in sts:
            self._clear(st)
        bridge = state.get("bridge")
        if bridge and Path(f"/sys/class/net/{bridge}").exists():
            run("ip", "link", "del", bridge, check=False)  # its address and routes go with it
        for rule in state.get("iptables", []):
            while run("iptables", "-w", "-D", *rule, check=False).returncode == 0:
                pass
        for key, value in state.get("sysctls", {}).items():
            _write(Path("/proc/sys", key), value)
        for k in state.get("nodes", {}):
            self.member(int(k)).socket.unlink(missing_ok=True)
        self.containerd_socket.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        if _registered() == str(self.dir):
            REGISTRY.unlink(missing_ok=True)
        self.state = {}

    def remove_node(self, k: int, timeout: float = 60.0) -> None:
        """Take node ``k`` (2 to MAX_NODES) out of the cluster: stop its daemons, pods and anchor
        (thawed first if lost), remove its cgroups, veth, routes (on the host and in the other
        nodes) and Node object (its Lease goes with it; its pods' objects are collected by the
        pod garbage collector), so that nothing of it is left on the host. Safe on a node that is
        half up. NodeInputError for node 1 or a node the cluster does not have; NodeError when the
        API server does not delete the Node within ``timeout`` seconds."""
        self.state = self._load()
        m = self.member(k)
        if k == 1:
            raise NodeInputError("node 1 leaves with the cluster: tools/node/down.sh")
        st = self.state.get("nodes", {}).get(str(k))
        if st is None:
            raise NodeInputError(f"{m.name} is not a node of the cluster of {self.dir}")
        self._stop_daemons([st])
        self._clear(st)
        run("ip", "route", "del", m.cidr, "via", m.ip, check=False)
        for j in self.members():
            if j != k and alive(self._st(j).get("anchor", 0)):
                run(*self.nsenter("ip", "route", "del", m.cidr, k=j), check=False)
        m.socket.unlink(missing_ok=True)
        self.state.get("frozen", {}).pop(m.name, None)
        del self.state["nodes"][str(k)]
        self._save()
        if self.state.get("anchor") and alive(self.state["anchor"]):
            end = time.monotonic() + timeout
            while True:
                try:
                    status, answer = self.call("DELETE", f"/api/v1/nodes/{m.name}")
                    if status in (200, 404):
                        break
                    why = f"HTTP {status}: {answer.get('message')}"
                except OSError as exc:
                    why = repr(exc)
                if time.monotonic() > end:
                    raise NodeError(f"the API server did not delete Node {m.name} in {timeout:.0f} s ({why})")
                time.sleep(0.5)

    # -- faults: a whole node lost and restored (tools/node/fault.sh) ------------------------------
    def lose(self, name: str, timeout: float = 30.0) -> float:
        """Freeze every process of node ``name`` at once, as a power loss or a partition looks to
        the control plane: its ``system`` cgroup (kubelet, containerd, the shims, kube-proxy) and
        its ``kubepods`` cgroup (every container). The parent is left alone, so that
        :meth:`restore` can thaw the two one after the other (in cgroup v1 a child cannot thaw
        while its parent is frozen). Recorded in node.json (``frozen``): restore and down work
        from another process. Returns the seconds until both report FROZEN. NodeInputError for an
        unknown node, one already lost, or node 1 (``LOSE_REFUSED``); NodeError when no freezer is
        mounted or the freeze does not complete within ``timeout`` seconds."""
        self.state = self._load()
        k = self.index(name)
        if k == 1:
            raise NodeInputError(LOSE_REFUSED)
        if name in self.state.get("frozen", {}):
            raise NodeInputError(f"{name} is lost already (since {self.state['frozen'][name]['since']}); "
                                 f"restore it first")
        m = self.member(k)
        parts = [freezer_dir(f"{m.cgroup}/{sub}") for sub in ("system", "kubepods")]
        if None in parts:
            raise NodeError(f"no freezer for the cgroups of {name} ({m.cgroup}/system, {m.cgroup}/kubepods)")
        started = time.monotonic()
        self.state.setdefault("frozen", {})[name] = {"since": _now(), "stage": "lost"}
        self._save()
        for path in parts:
            set_frozen(path, True)
        end = started + timeout
        while (states := [frozen_state(p) for p in parts]) != ["FROZEN", "FROZEN"]:
            if time.monotonic() > end:
                raise NodeError(f"{name}: the freezer did not complete in {timeout:.0f} s (states {states})")
            time.sleep(0.02)
        return time.monotonic() - started

    def restore(self, name: str, timeout: float = RESTORE_TIMEOUT, say=None) -> dict[str, float]:
        """Thaw node ``name`` after :meth:`lose`, in two steps, so that no container of a pod the
        control plane deleted meanwhile runs user code again:

        1. thaw ``system`` (the daemons); wait until the kubelet heartbeats again (its Node Ready=True
           and its Lease renewed, or its Ready heartbeat newer, after the thaw) and until every
           process under ``kubepods`` of a pod that no longer exists in the API (cgroup component
           ``pod<uid>``) has SIGKILL pending, or belongs to a container whose init has it
           (:func:`uncovered`): the kubelet's kill of a frozen process stays pending, and a task
           leaving the freezer with SIGKILL pending dies without running user code; runc kills
           a container's init only, and the kernel the rest of its pid namespace as the init
           dies (a moment in which those others may still be scheduled). The
           sandboxes' ``pause`` processes are not waited for (the kubelet stops a sandbox only after
           its containers have exited, which they cannot while frozen; pause runs no user code);
        2. thaw ``kubepods``.

        The two waits share ``timeout`` seconds; past it the pods are thawed anyway and ``say``
        tells so. ``say(line)`` (default: print to stderr) gets one line per step with timings.
        Returns ``{"heartbeat_s", "sigkill_s", "thawed_s"}``, seconds after the daemons' thaw
        (``heartbeat_s``/``sigkill_s`` None when that wait timed out). NodeInputError for an
        unknown node or one not lost."""
        say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.state = self._load()
        k = self.index(name)
        if name not in self.state.get("frozen", {}):
            raise NodeInputError(f"{name} is not lost; nothing to restore")
        m = self.member(k)
        system, pods = freezer_dir(f"{m.cgroup}/system"), freezer_dir(f"{m.cgroup}/kubepods")
        thawed_at = time.time()
        started = time.monotonic()
        end = started + timeout
        set_frozen(system, False)
        self.state["frozen"][name]["stage"] = "daemons thawed"
        self._save()
        say(f"restore {name}: daemons thawed ({m.cgroup}/system), pods still frozen")
        out: dict[str, float | None] = {"heartbeat_s": None, "sigkill_s": None}

        def heartbeat() -> str:
            node = self.api(f"/api/v1/nodes/{name}")
            conditions = node.get("status", {}).get("conditions", [])
            ready = next((c for c in conditions if c["type"] == "Ready"), {})
            lease = self.api(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
            renewed = _epoch(lease.get("spec", {}).get("renewTime"))
            if ready.get("status") != "True":
                return f"Ready={ready.get('status', '?')}"
            if max(renewed, _epoch(ready.get("lastHeartbeatTime"))) <= thawed_at:
                return "no heartbeat since the thaw"
            return ""

        def stale() -> list[int]:
            _, listing = self.call("GET", "/api/v1/pods")
            if "items" not in listing:
                raise OSError(f"no pod list: {listing.get('message')}")
            known = {p["metadata"]["uid"] for p in listing["items"]}
            gone = {uid: [p for p in pids if _comm(p) not in ("pause", "")]
                    for uid, pids in pod_processes(f"{m.cgroup}/kubepods").items() if uid not in known}
            counts[:] = [sum(map(len, gone.values())), len(gone)]
            return uncovered([pid for pids in gone.values() for pid in pids])

        last, counts = "", [0, 0]  # processes, pods
        while out["heartbeat_s"] is None and time.monotonic() < end:
            try:
                last = heartbeat()
            except (OSError, ValueError) as exc:
                last = repr(exc)
            if not last:
                out["heartbeat_s"] = time.monotonic() - started
                say(f"restore {name}: kubelet heartbeating again, Ready=True, "
                    f"{out['heartbeat_s']:.1f} s after the thaw")
            else:
                time.sleep(0.2)
        if out["heartbeat_s"] is None:
            say(f"restore {name}: WARNING no kubelet heartbeat in {timeout:.0f} s ({last}); "
                "thawing the pods anyway")
        else:
            waiting: list[int] = []
            while time.monotonic() < end:
                try:
                    waiting = stale()
                except (OSError, ValueError):
                    waiting = [-1]
                if not waiting:
                    out["sigkill_s"] = time.monotonic() - started
                    say(f"restore {name}: every process of a deleted pod ({counts[0]} processes of {counts[1]} "
                        f"pods, pause left out) has SIGKILL pending, or its container's init has, "
                        f"{out['sigkill_s']:.1f} s after the thaw")
                    break
                time.sleep(0.2)
            else:
                say(f"restore {name}: WARNING processes {waiting} of deleted pods have no SIGKILL pending "
                    f"after "
                    f"{timeout:.0f} s; thawing the pods anyway")
        set_frozen(pods, False)
        out["thawed_s"] = time.monotonic() - started
        del self.state["frozen"][name]
        self._save()
        say(f"restore {name}: pods thawed ({m.cgroup}/kubepods), {out['thawed_s']:.1f} s after the daemons")
        return out  # type: ignore[return-value]

    def lost(self) -> list[str]:
        """The names of the nodes lost now (frozen by :meth:`lose`, not restored)."""
        return sorted((self._load() or self.state).get("frozen", {}))

    # -- faults: one daemon stopped and started again (tests/node/test_faults.py) ------------------
    def stop_component(self, name: str, grace: float = 15.0) -> float:
        """Stop one daemon of the node (containerd, kubelet, kube-proxy, coredns) with SIGTERM, SIGKILL
        after ``grace`` seconds, or one of the control plane's components; the containers, the data
        and the namespaces stay. Returns the seconds it took; NodeError when ``name`` does not run."""
        if name not in NODE_DAEMONS:
            try:
                return self.plane.stop_component(name, grace)
            except ControlPlaneError as exc:
                raise NodeError(str(exc)) from None
        self.state = self._load()
        pid = self.state.get("pids", {}).get(name)
        if not pid or not alive(pid):
            raise NodeError(f"{name} does not run on the node of {self.dir}")
        started = time.monotonic()
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while alive(pid) and time.monotonic() < end:
                time.sleep(0.05)
            if not alive(pid):
                break
        _reap(pid)
        if alive(pid):
            raise NodeError(f"{name} (pid {pid}) did not stop")
        return time.monotonic() - started

    def start_component(self, name: str, timeout: float = 120.0) -> float:
        """Start a stopped daemon again inside the node's namespaces and cgroup with the command line
        ``up`` gave it, and wait until it serves (containerd: its API; the others: their health
        endpoints); for a control-plane component see :meth:`ControlPlane.start_component`. Returns
        the seconds that took; NodeError when it does not serve within ``timeout`` seconds."""
        if name not in NODE_DAEMONS:
            try:
                return self.plane.start_component(name, timeout)
            except ControlPlaneError as exc:
                raise NodeError(str(exc)) from None
        self.state = self._load()
        argv = self.state.get("argv", {}).get(name)
        if not argv:
            raise NodeError(f"{name} was never started on the node of {self.dir}")
        if alive(self.state["pids"].get(name, 0)):
            raise NodeError(f"{name} already runs on the node of {self.dir}")
        started = time.monotonic()
        proc = self._spawn(name, *argv)
        serving = {
            "containerd": lambda: run(
                "ctr", "-a", str(self.containerd_socket), "version", check=False, timeout=5
            ).returncode == 0,
            "kubelet": lambda: _http_ok(f"http://{NODE_IP}:10248/healthz"),
            "kube-proxy": lambda: _http_ok(f"http://{NODE_IP}:10256/healthz"),
            "coredns": lambda: _http_ok(f"http://{NODE_IP}:8181/ready"),
        }[name]
        self._until(self.member(1), name, "serving again", serving, timeout, proc)
        return time.monotonic() - started

    def restart_component(self, name: str, timeout: float = 120.0) -> dict[str, float]:
        """Stop then start one component (a real process restart); returns ``{"stop_s", "start_s"}``."""
        return {"stop_s": self.stop_component(name), "start_s": self.start_component(name, timeout)}

    def status(self) -> dict[str, bool]:
        """name -> running, for the control plane's components and every node's daemons (those of
        node K >= 2 as ``DAEMON@t9k-node-K``)."""
        state = self._load()
        out = {n: n in self.plane.running() for n in self.plane.pids()}
        out.update({n: alive(p) for n, p in state.get("pids", {}).items()})
        for k, st in sorted(state.get("nodes", {}).items(), key=lambda kv: int(kv[0])):
            out.update({f"{n}@{node_name(int(k))}": alive(p) for n, p in st.get("pids", {}).items()})
        return out


def _zombies(cgroup: str) -> list[int]:
    """Dead processes not reaped yet whose cgroup is (or was) ``cgroup`` or below it."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"/{cgroup}" in Path(f"/proc/{pid}/cgroup").read_text() and not alive(int(pid)):
                out.append(int(pid))
        except OSError:
            pass
    return out


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status when it is our own child (no zombie left); else nothing."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _registered() -> str | None:
    try:
        return json.loads(REGISTRY.read_text())["dir"]
    except (OSError, ValueError, KeyError):
        return None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False




def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def _epoch(stamp: str | None) -> float:
    """Seconds since the epoch of an API timestamp (RFC 3339, with or without micros); 0 for none."""
    if not stamp:
        return 0.0
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "down", "status", "restart", "fault"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True, help="state directory (logs, configs, the control plane)")
        if name == "restart":
            p.add_argument("component", choices=[*NODE_DAEMONS, "kube-apiserver", "etcd",
                                                 "kube-controller-manager", "kube-scheduler"])
        if name == "fault":
            p.add_argument("action", choices=["lose", "restore"])
            p.add_argument("node", help="the node's name (t9k-node-2...)")
        if name == "up":
            p.add_argument("--cp-bin", help="control-plane binaries (default: tools/controlplane/build.sh)")
            p.add_argument("--node-bin", help="kubelet, kube-proxy, coredns (default: tools/node/build.sh)")
            p.add_argument("--crds", action="append", default=[], help="CRD file or dir to install (repeatable)")
            p.add_argument("--image", action="append", default=[], help="OCI archive to import (repeatable)")
            p.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
            p.add_argument("--kueue", metavar="MANIFESTS",
                           help="also install Kueue from these (tools/kueue/manifests.sh --no-visibility)")
            p.add_argument("--nodes", type=int, default=1,
                           help=f"how many real nodes, 1 to {MAX_NODES} (default 1)")
    args = parser.parse_args(argv)
    node = Node(args.dir, getattr(args, "cp_bin", None), getattr(args, "node_bin", None), getattr(args, "crds", []))
    try:
        if args.command == "up":
            started = time.monotonic()
            node.up(args.image, args.timeout, kueue=args.kueue, nodes=args.nodes)
            took = time.monotonic() - started
            if node.kueue_seconds is not None:
                print(f"node: Kueue installed, Available, its webhooks answering in "
                      f"{node.kueue_seconds:.1f} s", file=sys.stderr)
            print(f"node: {', '.join(node.node_names())} Ready in {took:.1f} s", file=sys.stderr)
            print(f"export KUBECONFIG={node.kubeconfig}")
        elif args.command == "down":
            node.down()
        elif args.command == "restart":
            took = node.restart_component(args.component)
            print(f"node: {args.component} stopped in {took['stop_s']:.1f} s, serving again "
                  f"{took['start_s']:.1f} s after its start", file=sys.stderr)
        elif args.command == "fault" and args.action == "lose":
            took = node.lose(args.node)
            print(f"fault: {args.node} lost: system and kubepods FROZEN in {took:.2f} s", file=sys.stderr)
        elif args.command == "fault":
            node.restore(args.node, say=lambda line: print(f"fault: {line}", file=sys.stderr, flush=True))
        else:
            status = node.status()
            for name, up in status.items():
                print(f"{name:40} {'running' if up else 'stopped'}")
            for name in node.lost():
                print(f"{name:40} lost (frozen)")
            return 0 if status and all(status.values()) else 3
    except NodeInputError as exc:
        print(f"node: {exc}", file=sys.stderr)
        return 2
    except (NodeError, ControlPlaneError) as exc:
        print(f"node: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
