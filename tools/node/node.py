#!/usr/bin/env python3
"""One real Kubernetes node on this machine: the test control plane plus a kubelet, containerd,
runc, bridge CNI, kube-proxy and CoreDNS, for tests and trials (``tools/node/up.sh``, ``down.sh``).

    node.py up --dir DIR [--cp-bin BINDIR] [--node-bin BINDIR] [--crds PATH]... [--image ARCHIVE]...
               [--kueue MANIFESTS]   # also install Kueue (tools/kueue/manifests.sh) and wait for it
    node.py down --dir DIR
    node.py status --dir DIR
    node.py restart --dir DIR COMPONENT   # stop and start one daemon (containerd, kubelet, etcd...)

The shape (docs/cluster.md has the walk-through):

* **A namespace of its own.** Everything of the node runs in one network namespace and one private
  mount namespace, held open by an anchor process: the pod bridge ``cni0``, kube-proxy's iptables
  rules, ``ip_forward``, the pods' network namespaces and every mount the kubelet and containerd make
  live there, and vanish with the node's last process. The host gets one veth pair into it: the host
  side is ``HOST_IP`` (the API server binds it), the node side ``NODE_IP`` (the kubelet, CoreDNS).
  The node has no default route, so nothing leaves this machine (an image pull fails at once).
  The host routes the pod network ``POD_CIDR`` to ``NODE_IP`` over the veth (the route goes with
  the veth), and the API server runs with ``--enable-aggregator-routing``, so that it reaches
  webhooks and aggregated APIs served by pods (Kueue's) at their pod IPs.
* **A cgroup of its own.** The daemons run in ``<cgroup>/system`` and the kubelet puts pods under
  ``<cgroup>/kubepods`` (its ``cgroupRoot``), so ``down`` finds every process of the node,
  containers and the shims that containerd double-forks included, freezes, kills and removes them.
* **State in DIR**: logs in DIR/logs, the control plane in DIR/cp, the kubelet's root in
  DIR/kubelet, CNI and containerd configuration, ``node.json`` (what ``down`` undoes). containerd's
  image store is kept in the cache (``~/.cache/t9k-jobs/node/containerd``) so that images survive a
  restart of the node; one node runs at a time on a machine (a lock on that store).
* **Host settings restored**: the kubelet sets a few kernel sysctls (``vm.overcommit_memory``...);
  ``up`` records them and ``down`` puts them back.

Needs root, cgroups and the Debian packages containerd, runc, containernetworking-plugins, iptables
and conntrack (up.sh installs them), and the binaries of tools/controlplane/build.sh and
tools/node/build.sh.
"""

from __future__ import annotations

import argparse
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
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "controlplane"))
from controlplane import ControlPlane, ControlPlaneError  # noqa: E402

NODE_NAME = "t9k-node"
HOST_IP, NODE_IP, PREFIX = "198.18.0.1", "198.18.0.2", 30  # RFC 2544 benchmarking range: never routed
POD_CIDR = "10.244.0.0/24"
# The API server calls webhooks, CRD conversion webhooks and aggregated APIs at an endpoint pod IP
# of their Service (not its ClusterIP, which only kube-proxy's rules inside the node know); the
# host reaches POD_CIDR through the route up() adds.
APISERVER_ARGS = ("--enable-aggregator-routing=true",)
KUEUE_NAMESPACE, KUEUE_DEPLOYMENT = "kueue-system", "kueue-controller-manager"
KUEUE_API = "/apis/kueue.x-k8s.io"
KUEUE_TIMEOUT = 180.0  # seconds for Kueue to be Available and answer once its manifests are applied
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


class NodeError(RuntimeError):
    """The node cannot start here, or a component failed; the message is one line (plus a log tail)."""


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
    so nothing forks away) until none is left. Raises NodeError on a timeout."""
    freezer = next((h / name for h in cgroup_hierarchies() if (h / name / "freezer.state").exists()), None)
    end = time.monotonic() + timeout
    while pids := cgroup_pids(name) - {spare}:
        if freezer is not None:
            _write(freezer / "freezer.state", "FROZEN")
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


class Node:
    """The node whose state lives in ``dir``. ``up()`` starts the control plane and the node and
    waits until the node is Ready and DNS answers; ``down()`` (also from another process) undoes
    everything. After ``up()``: ``plane`` (the ControlPlane: ``kubeconfig``, ``server``, ``token``,
    ``bin_dir``), ``containerd_socket``, ``kubectl`` (argv prefix)."""

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
        self.cgroup = "t9k-node-" + hashlib.sha256(str(self.dir).encode()).hexdigest()[:8]
        self.veth = "t9kn-" + hashlib.sha256(str(self.dir).encode()).hexdigest()[:6]
        self.plane = ControlPlane(
            self.dir / "cp", cp_bin, scheduler=True, crds=self.crds, address=HOST_IP, serve_pods=True,
            apiserver_args=APISERVER_ARGS,
        )
        self.state: dict = {}
        self.kueue_seconds: float | None = None  # how long install_kueue() took

    # -- state ------------------------------------------------------------------------------------
    def _save(self) -> None:
        self.state_file.write_text(json.dumps(self.state, indent=1))

    def _load(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def kubectl(self) -> list[str]:
        return [str(self.plane.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}"]

    def ctr(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        """``ctr`` against this node's containerd, namespace k8s.io."""
        return run("ctr", "-a", str(self.containerd_socket), "-n", "k8s.io", *args, check=check, timeout=timeout)

    def nsenter(self, *cmd: str) -> list[str]:
        """argv that runs ``cmd`` inside the node's network and mount namespaces."""
        return ["nsenter", "-t", str(self.state["anchor"]), "--mount", "--net", "--", *cmd]

    # -- up ---------------------------------------------------------------------------------------
    def up(
        self,
        images: list[str | os.PathLike] = (),
        timeout: float = 120.0,
        kueue: str | os.PathLike | None = None,
    ) -> Node:
        """Start everything and wait (``timeout`` seconds per step) until the node is Ready, untainted,
        serves DNS and the ``default`` ServiceAccount exists. ``images``: OCI archives to import into
        containerd (the sandbox image must be among them or already there). ``kueue``: Kueue's
        install manifests (``tools/kueue/manifests.sh --no-visibility``; its image among ``images``):
        installed once the node is Ready, see :meth:`install_kueue`. On failure everything started
        is stopped and NodeError (or ControlPlaneError) is raised."""
        preflight()
        self.node_bin = self.node_bin or Path(
            subprocess.run(["bash", str(HERE / "build.sh")], stdout=subprocess.PIPE, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        other = _registered()
        if other and Node(other)._live():
            raise NodeError(f"a node already runs from {other}; stop it with: tools/node/down.sh {other}")
        if self._load():
            self.down()  # a stale node of this DIR (crashed, never taken down)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        lock = os.open(CACHE / "containerd.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise NodeError(
                f"another node holds containerd's store {CACHE / 'containerd'} (see {REGISTRY}); stop it first"
            ) from None
        self.state = {"dir": str(self.dir), "cgroup": self.cgroup, "veth": self.veth, "pids": {}, "made_dirs": []}
        self.state["sysctls"] = {k: Path("/proc/sys", k).read_text().strip() for k in KUBELET_SYSCTLS}
        self._save()
        REGISTRY.write_text(json.dumps({"dir": str(self.dir)}))
        try:
            self._namespaces(lock)
            self.plane.start()
            self._start_containerd()
            self.import_images(list(images))
            self._start_kubelet()
            self._start_kube_proxy()
            self._start_coredns()
            self._wait_ready(timeout)
            if kueue is not None:
                self.install_kueue(kueue)
        except BaseException:
            self.down()
            raise
        finally:
            os.close(lock)  # the anchor holds it from here on, as long as the node lives
        return self

    def _namespaces(self, lock: int) -> None:
        make_cgroup(self.cgroup)
        # The anchor also holds the lock on containerd's store: containerd would hand its copy on to
        # the shims it starts (Go leaves inherited descriptors open), which outlive a containerd
        # restart, so that a restarted containerd could not lock the store again.
        anchor = subprocess.Popen(
            ["unshare", "--mount", "--net", "--propagation", "private", "--", "sleep", "infinity"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=join_cgroup(self.cgroup),
            pass_fds=(lock,),
        )
        self.state["anchor"] = anchor.pid
        self._save()
        end = time.monotonic() + 10
        while os.readlink(f"/proc/{anchor.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            if anchor.poll() is not None or time.monotonic() > end:
                raise NodeError(f"unshare of the node's namespaces failed (exit {anchor.poll()})")
            time.sleep(0.02)
        peer = self.veth + "p"
        run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", peer)
        run("ip", "link", "set", peer, "netns", str(anchor.pid))
        run("ip", "addr", "add", f"{HOST_IP}/{PREFIX}", "dev", self.veth)
        run("ip", "link", "set", self.veth, "up")
        ns = self.nsenter
        run(*ns("ip", "link", "set", "lo", "up"))
        run(*ns("ip", "link", "set", peer, "name", "eth0"))
        run(*ns("ip", "addr", "add", f"{NODE_IP}/{PREFIX}", "dev", "eth0"))
        run(*ns("ip", "link", "set", "eth0", "up"))
        # The API server (on the host) reaches pods, webhook servers among them, through the node;
        # the route is the veth's and goes with it.
        run("ip", "route", "add", POD_CIDR, "via", NODE_IP, "dev", self.veth)
        for path in PRIVATE_PATHS:
            real = os.path.realpath(path)
            if not os.path.isdir(real):
                os.makedirs(real)
                self.state["made_dirs"].append(real)
            run(*ns("mount", "-t", "tmpfs", "-o", "mode=0755", "t9k-node", real))
        self._save()

    def _spawn(self, name: str, *argv: str, **kw) -> subprocess.Popen:
        self.state.setdefault("argv", {})[name] = list(argv)  # for start_component()
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                self.nsenter(*argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=join_cgroup(self.cgroup),
                **kw,
            )
        self.state["pids"][name] = proc.pid
        self._save()
        return proc

    def _fail(self, name: str, why: str) -> NodeError:
        try:
            tail = "\n".join((self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-25:])
        except OSError:
            tail = "(no log)"
        return NodeError(f"{name} {why}\n--- tail of {self.logs / (name + '.log')} ---\n{tail}")

    def _until(self, name: str, what: str, check, timeout: float, proc: subprocess.Popen | None = None) -> None:
        end = time.monotonic() + timeout
        while True:
            if proc is not None and proc.poll() is not None:
                raise self._fail(name, f"exited with status {proc.returncode} before {what}")
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - readiness polling: retry until the deadline
                pass
            if time.monotonic() > end:
                raise self._fail(name, f"not {what} after {timeout:.0f} s")
            time.sleep(0.2)

    def _start_containerd(self) -> None:
        root = CACHE / "containerd"
        conf = self.dir / "containerd.toml"
        cni = self.dir / "cni"
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
                            "ipMasq": True,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_CIDR}]],
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
  address = "{self.containerd_socket}"
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
        self.containerd_socket.unlink(missing_ok=True)
        proc = self._spawn("containerd", "containerd", "--config", str(conf))
        self._until(
            "containerd",
            "serving",
            lambda: run("ctr", "-a", str(self.containerd_socket), "version", check=False, timeout=5).returncode == 0,
            60,
            proc,
        )
        self._remove_stale_containers()

    def _remove_stale_containers(self) -> None:
        """Containers a node left in the store when it died without ``down`` (their processes are
        gone with its cgroup; the records would make the kubelet chase dead sandboxes)."""
        for c in self.ctr("containers", "ls", "-q", timeout=60).stdout.split():
            self.ctr("tasks", "rm", "-f", c, check=False, timeout=30)
            self.ctr("containers", "rm", c, check=False, timeout=30)

    def import_images(self, archives: list[str | os.PathLike]) -> None:
        """Import OCI archives into the node's containerd (namespace k8s.io), skipping those whose
        image is already there with the same manifest digest (tools/images/images.py import)."""
        if archives:
            run(sys.executable, str(ROOT / "tools" / "images" / "images.py"), "import",
                str(self.containerd_socket), *map(str, archives), timeout=1800)

    def _start_kubelet(self) -> None:
        kdir = self.dir / "kubelet"
        kdir.mkdir(exist_ok=True)
        (self.dir / "resolv.conf").write_text(f"nameserver {CLUSTER_DNS}\n")
        conf = self.dir / "kubelet.yaml"
        conf.write_text(
            f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{self.containerd_socket}
cgroupDriver: cgroupfs
cgroupRoot: /{self.cgroup}
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
failCgroupV1: false
authentication: {{anonymous: {{enabled: true}}, webhook: {{enabled: false}}, x509: {{}}}}
authorization: {{mode: AlwaysAllow}}
clusterDomain: cluster.local
clusterDNS: ["{CLUSTER_DNS}"]
resolvConf: {self.dir / 'resolv.conf'}
address: {NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: {NODE_IP}
healthzPort: 10248
podLogsDir: {self.dir / 'pod-logs'}
volumePluginDir: {self.dir / 'volume-plugins'}
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
            f"--node-ip={NODE_IP}",
            f"--hostname-override={NODE_NAME}",
            "--v=2",
        )
        self._until("kubelet", "serving", lambda: _http_ok(f"http://{NODE_IP}:10248/healthz"), 90, proc)

    def _start_kube_proxy(self) -> None:
        conf = self.dir / "kube-proxy.yaml"
        conf.write_text(
            f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {POD_CIDR}
hostnameOverride: {NODE_NAME}
clientConnection: {{kubeconfig: {self.kubeconfig}}}
conntrack: {{maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: {NODE_IP}:10256
"""
        )
        self._kube_proxy = self._spawn("kube-proxy", str(self.node_bin / "kube-proxy"), f"--config={conf}")

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

    def _wait_ready(self, timeout: float) -> None:
        def node_ready() -> bool:
            node = self.api(f"/api/v1/nodes/{NODE_NAME}")
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])
            )
            return ready and not node.get("spec", {}).get("taints")

        self._until("kubelet", "Ready and untainted", node_ready, timeout)
        self._until("kube-proxy", "healthy", lambda: _http_ok(f"http://{NODE_IP}:10256/healthz"), timeout, self._kube_proxy)
        self._until("coredns", "ready", lambda: _http_ok(f"http://{NODE_IP}:8181/ready"), timeout, self._coredns)
        self._until(
            "kube-controller-manager",
            "done with the default ServiceAccount",
            lambda: self.api("/api/v1/namespaces/default/serviceaccounts/default")
            and self.api("/api/v1/namespaces/default/configmaps/kube-root-ca.crt"),
            timeout,
        )

    def api(self, path: str) -> dict:
        """GET ``path`` from the API server as admin; {} when it answers 404."""
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

        def available() -> str:
            _, dep = self.call("GET", deployment)
            conditions = dep.get("status", {}).get("conditions", [])
            if any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
                return ""
            return self._kueue_pods()

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
        return any(alive(p) for p in [state.get("anchor", 0), *state.get("pids", {}).values()] if p) or bool(
            state.get("cgroup") and cgroup_pids(state["cgroup"])
        )

    def down(self) -> None:
        """Stop the node and its control plane and undo what ``up`` changed on the host: no process,
        mount, cgroup, network namespace, veth, iptables rule or sysctl of the node is left. Safe to
        call on a node that is half up, already down, or was started by another process."""
        state = self._load() or self.state
        if not state:
            self.plane.stop()
            return
        pids = state.get("pids", {})
        # The daemons end first, with a moment for containerd to close its store; then everything
        # left in the node's cgroup (containers, shims, the anchor) is killed.
        daemons = [pids[n] for n in ("kubelet", "kube-proxy", "coredns", "containerd") if pids.get(n)]
        for pid in daemons:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5
        while any(alive(p) for p in daemons) and time.monotonic() < end:
            time.sleep(0.05)
        # Everything else but the anchor, whose namespaces keep the node's network (and the API
        # server's address, the host end of the veth) up; the control plane stops while that
        # address still exists (without it, the API server's shutdown hangs on its own
        # connections), then the anchor goes and the namespaces with it.
        cgroup = state.get("cgroup", self.cgroup)
        kill_cgroup(cgroup, spare=state.get("anchor"))
        self.plane.stop()
        kill_cgroup(cgroup)
        remove_cgroup(cgroup)
        for pid in [state.get("anchor"), *pids.values()]:
            if pid:
                try:
                    os.waitpid(pid, os.WNOHANG)  # our own children: reap them
                except ChildProcessError:
                    pass
        # A container whose shim was killed first is re-parented to PID 1 and stays a zombie (still
        # in the node's cgroup) until PID 1 reaps it, which some init systems do only now and then.
        end = time.monotonic() + 10
        while _zombies(cgroup) and time.monotonic() < end:
            time.sleep(0.05)
        veth = state.get("veth", self.veth)
        if Path(f"/sys/class/net/{veth}").exists():
            run("ip", "link", "del", veth, check=False)
        for path in reversed(state.get("made_dirs", [])):
            try:
                os.rmdir(path)
            except OSError:
                pass
        for key, value in state.get("sysctls", {}).items():
            _write(Path("/proc/sys", key), value)
        self.containerd_socket.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        if _registered() == str(self.dir):
            REGISTRY.unlink(missing_ok=True)
        self.state = {}

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
        self._until(name, "serving again", serving, timeout, proc)
        return time.monotonic() - started

    def restart_component(self, name: str, timeout: float = 120.0) -> dict[str, float]:
        """Stop then start one component (a real process restart); returns ``{"stop_s", "start_s"}``."""
        return {"stop_s": self.stop_component(name), "start_s": self.start_component(name, timeout)}

    def status(self) -> dict[str, bool]:
        """name -> running, for the control plane's components and the node's daemons."""
        state = self._load()
        out = {n: n in self.plane.running() for n in self.plane.pids()}
        out.update({n: alive(p) for n, p in state.get("pids", {}).items()})
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "down", "status", "restart"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True, help="state directory (logs, configs, the control plane)")
        if name == "restart":
            p.add_argument("component", choices=[*NODE_DAEMONS, "kube-apiserver", "etcd",
                                                 "kube-controller-manager", "kube-scheduler"])
        if name == "up":
            p.add_argument("--cp-bin", help="control-plane binaries (default: tools/controlplane/build.sh)")
            p.add_argument("--node-bin", help="kubelet, kube-proxy, coredns (default: tools/node/build.sh)")
            p.add_argument("--crds", action="append", default=[], help="CRD file or dir to install (repeatable)")
            p.add_argument("--image", action="append", default=[], help="OCI archive to import (repeatable)")
            p.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
            p.add_argument("--kueue", metavar="MANIFESTS",
                           help="also install Kueue from these (tools/kueue/manifests.sh --no-visibility)")
    args = parser.parse_args(argv)
    node = Node(args.dir, getattr(args, "cp_bin", None), getattr(args, "node_bin", None), getattr(args, "crds", []))
    try:
        if args.command == "up":
            started = time.monotonic()
            node.up(args.image, args.timeout, kueue=args.kueue)
            took = time.monotonic() - started
            if node.kueue_seconds is not None:
                print(f"node: Kueue installed, Available, its webhooks answering in "
                      f"{node.kueue_seconds:.1f} s", file=sys.stderr)
            print(f"node: {NODE_NAME} Ready in {took:.1f} s", file=sys.stderr)
            print(f"export KUBECONFIG={node.kubeconfig}")
        elif args.command == "down":
            node.down()
        elif args.command == "restart":
            took = node.restart_component(args.component)
            print(f"node: {args.component} stopped in {took['stop_s']:.1f} s, serving again "
                  f"{took['start_s']:.1f} s after its start", file=sys.stderr)
        else:
            status = node.status()
            for name, up in status.items():
                print(f"{name:24} {'running' if up else 'stopped'}")
            return 0 if status and all(status.values()) else 3
    except (NodeError, ControlPlaneError) as exc:
        print(f"node: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
