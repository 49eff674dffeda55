#!/usr/bin/env python3
"""Run a throw-away Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager and
optionally kube-scheduler) on loopback, from the binaries that ``tools/controlplane/build.sh`` builds.

    controlplane.py start --dir DIR [--bin BINDIR] [--with-scheduler] [--no-controller-manager] [--crds PATH]...
    controlplane.py stop --dir DIR
    controlplane.py status --dir DIR

Each process runs detached in its own session; its log is DIR/<name>.log and its pid DIR/<name>.pid,
so ``stop`` and ``status`` work from any process. ``start`` always begins with an empty etcd and a
fresh CA, serving certificate, service-account key and admin token, and writes DIR/kubeconfig
(admin = a bearer token in the group system:masters). CRDs given with ``--crds`` are installed (and
served) before the controllers start, so that the garbage collector watches them at once; CRDs created
later are only picked up by its discovery resync, every 30 s. Needs Python 3.11+ and ``cryptography``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")  # start order
START_TIMEOUT = 90.0  # seconds per component
STOP_GRACE = 15.0  # seconds between SIGTERM and SIGKILL
# kube-controller-manager's controllers: the tests' plane collects garbage, deletes namespaces and
# keeps PodDisruptionBudgets' status (the Eviction API reads it: a gang job's budget); a plane with a real node also needs service accounts and the CA ConfigMap for pods' tokens, node
# lifecycle (it lifts the not-ready taint), endpoints for Services (CoreDNS, kube-proxy) and the
# Deployment controllers (the operator runs as a Deployment).
BASE_CONTROLLERS = ("garbage-collector-controller", "namespace-controller", "disruption-controller")
# With the Workload API on, every scheduling.k8s.io PodGroup is created with the
# scheduling.k8s.io/podgroup-protection finalizer (admission plugin PodGroupProtection); this
# controller removes it once no pod refers to the group, or no PodGroup (nor its namespace) could
# ever be deleted.
WORKLOAD_CONTROLLERS = ("podgroup-protection-controller",)
# Kubernetes 1.37's gang scheduling (KEP-4671): beta, off by default. The gate on kube-apiserver,
# kube-controller-manager and kube-scheduler; the API group version on kube-apiserver. With the gate
# off the API server drops a pod's spec.schedulingGroup without a word (docs/cluster.md).
WORKLOAD_GATE = "--feature-gates=GenericWorkload=true"
WORKLOAD_RUNTIME_CONFIG = "--runtime-config=scheduling.k8s.io/v1beta1=true"
NODE_CONTROLLERS = (
    *BASE_CONTROLLERS,
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "node-lifecycle-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "deployment-controller",
    "replicaset-controller",
    "pod-garbage-collector-controller",
)


class ControlPlaneError(RuntimeError):
    """A component failed to start; the message names it and ends with the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_bin_dir() -> Path:
    """The bin directory printed by build.sh (which builds the binaries first when missing)."""
    out = subprocess.run(["bash", str(HERE / "build.sh")], stdout=subprocess.PIPE, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_pki(pki: Path, address: str = "127.0.0.1") -> None:
    """Write ca.crt, apiserver.{crt,key} (signed by the CA, valid 7 days, for 127.0.0.1, ``address``,
    the ``kubernetes`` Service's names and its ClusterIP 10.0.0.1) and sa.key (RSA 2048) into pki."""
    pki.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "t9k-jobs test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sans = [
        x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    ]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(("127.0.0.1", "10.0.0.1", address))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (pki / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (pki / "apiserver.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (pki / "apiserver.key").write_bytes(_pem_key(key))
    (pki / "sa.key").write_bytes(_pem_key(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    _write_front_proxy(pki, now)


def _write_front_proxy(pki: Path, now: dt.datetime) -> None:
    """front-proxy-ca.crt and front-proxy-client.{crt,key}: how kube-apiserver's aggregation layer
    proves itself to an aggregated API server (Kueue's visibility API), which trusts the user and
    groups it forwards in headers from a client certificate this CA signed (kubeadm's layout)."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "t9k-jobs test front-proxy CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, FRONT_PROXY_CLIENT)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    (pki / "front-proxy-ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (pki / "front-proxy-client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (pki / "front-proxy-client.key").write_bytes(_pem_key(key))


#: The aggregation layer's client certificate name, the one aggregated API servers accept.
FRONT_PROXY_CLIENT = "front-proxy-client"


def _alive(pid: int, name: str) -> bool:
    """Whether pid is a live (non-zombie) process whose command line mentions name."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z" and name in Path(f"/proc/{pid}/cmdline").read_text()
    except (OSError, IndexError):
        return False


class ControlPlane:
    """The control plane in ``dir``; ``start()`` brings it up, ``stop()`` (also usable on a plane started
    by another process) tears it down. After ``start()``: ``kubeconfig`` (path), ``server`` (URL),
    ``token`` (admin bearer token), ``ca_file`` (CA of the serving certificate), ``bin_dir``,
    ``etcd_url`` (etcd's plain-HTTP client URL, for tests that compact or inspect the store).

    ``address`` is the IPv4 address the API server binds and advertises (loopback by default).
    ``serve_pods`` makes the plane fit for a real node (tools/node): the ServiceAccount admission
    plugin on, the ``kubernetes`` Service's endpoints kept by the API server (lease reconciler, so
    pods reach it through 10.0.0.1), InternalIP first for kubelet connections, and the
    controllers a node's pods need in kube-controller-manager (:data:`NODE_CONTROLLERS`).
    ``workload_api`` (the default) serves ``scheduling.k8s.io/v1beta1`` Workloads and PodGroups and
    turns gang scheduling on (gate ``GenericWorkload`` on all three components); ``False`` makes
    the plane of a cluster without it (Kubernetes <= 1.36, or 1.37 as shipped)."""

    def __init__(
        self,
        dir: str | os.PathLike,
        bin_dir: str | os.PathLike | None = None,
        scheduler: bool = False,
        controller_manager: bool = True,
        crds: list[str | os.PathLike] | tuple = (),
        apiserver_args: list[str] | tuple = (),
        scheduler_args: list[str] | tuple = (),
        controller_manager_args: list[str] | tuple = (),
        address: str = "127.0.0.1",
        serve_pods: bool = False,
        workload_api: bool = True,
    ) -> None:
        self.dir = Path(dir).resolve()
        self.apiserver_args = list(apiserver_args)  # extra kube-apiserver flags (benchmarks)
        self.scheduler_args = list(scheduler_args)  # extra kube-scheduler flags (benchmarks)
        self.controller_manager_args = list(controller_manager_args)  # extra kube-controller-manager flags
        self.bin_dir = Path(bin_dir).resolve() if bin_dir else None
        self.scheduler, self.controller_manager = scheduler, controller_manager
        self.address, self.serve_pods = address, serve_pods
        self.workload_api = workload_api
        self.crds = [Path(c).resolve() for c in crds]
        self.kubeconfig = self.dir / "kubeconfig"
        self.ca_file = self.dir / "pki" / "ca.crt"
        self.server = self.token = self.etcd_url = ""
        self._procs: dict[str, subprocess.Popen] = {}

    # -- starting ---------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> ControlPlane:
        """Start every component and wait until each is ready (``timeout`` seconds each)."""
        if running := self.running():
            raise ControlPlaneError(f"{self.dir} already runs {', '.join(running)}; stop it first")
        self.bin_dir = self.bin_dir or default_bin_dir()
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in ("etcd", "pki"):
            shutil.rmtree(self.dir / stale, ignore_errors=True)
        write_pki(self.dir / "pki", self.address)
        pki, d = self.dir / "pki", self.dir
        self.token = secrets.token_hex(24)
        (d / "tokens.csv").write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        ec_port, peer_port, api_port = free_port(), free_port(), free_port()
        self.server = f"https://{self.address}:{api_port}"
        self._write_kubeconfig()
        try:
            etcd = self.etcd_url = f"http://127.0.0.1:{ec_port}"
            peer = f"http://127.0.0.1:{peer_port}"
            self._spawn(
                "etcd",
                "--name=default",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls={etcd}",
                f"--advertise-client-urls={etcd}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            )
            self._wait("etcd", f"{etcd}/health", timeout, tls=False)
            self._spawn(
                "kube-apiserver",
                f"--etcd-servers={etcd}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--secure-port={api_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.key'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                *(
                    ["--endpoint-reconciler-type=lease", "--kubelet-preferred-address-types=InternalIP,Hostname"]
                    if self.serve_pods
                    else ["--disable-admission-plugins=ServiceAccount", "--endpoint-reconciler-type=none"]
                ),
                "--allow-privileged=true",
                # The aggregation layer (kubeadm's flags): aggregated APIs (Kueue's visibility API)
                # trust the user it forwards from its client certificate.
                f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                *([WORKLOAD_GATE, WORKLOAD_RUNTIME_CONFIG] if self.workload_api else []),
                *self.apiserver_args,
            )
            self._wait("kube-apiserver", f"{self.server}/readyz", timeout)
            if self.crds:  # before the controllers, so the garbage collector watches them from the start
                self.apply_crds(self.crds, timeout)
            if self.controller_manager:
                port = free_port()
                self._spawn(
                    "kube-controller-manager",
                    f"--kubeconfig={self.kubeconfig}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    "--controllers="
                    + ",".join(
                        (NODE_CONTROLLERS if self.serve_pods else BASE_CONTROLLERS)
                        + (WORKLOAD_CONTROLLERS if self.workload_api else ())
                    ),
                    *([WORKLOAD_GATE] if self.workload_api else []),
                    f"--service-account-private-key-file={pki / 'sa.key'}",
                    f"--root-ca-file={self.ca_file}",
                    *self.controller_manager_args,
                )
                self._wait("kube-controller-manager", f"https://127.0.0.1:{port}/healthz", timeout, tls=None)
            if self.scheduler:
                port = free_port()
                self._spawn(
                    "kube-scheduler",
                    f"--kubeconfig={self.kubeconfig}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    *([WORKLOAD_GATE] if self.workload_api else []),
                    *self.scheduler_args,
                )
                self._wait("kube-scheduler", f"https://127.0.0.1:{port}/healthz", timeout, tls=None)
        except BaseException:
            self.stop()
            raise
        return self

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: t9k-jobs-test\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {self.ca_file}\n"
            f"users:\n- name: admin\n  user:\n    token: {self.token}\n"
            "contexts:\n- name: t9k-jobs-test\n  context:\n    cluster: t9k-jobs-test\n    user: admin\n"
            "current-context: t9k-jobs-test\n"
        )

    def _spawn(self, name: str, *args: str, append: bool = False) -> None:
        if not os.access(self.bin_dir / name, os.X_OK):
            raise ControlPlaneError(
                f"{name}: no executable {self.bin_dir / name} (see tools/controlplane/build.sh)"
            )
        argv = [str(self.bin_dir / name), *args]
        self._save_launch(name, argv=argv)  # for restart_component(), also from another process
        with open(self.dir / f"{name}.log", "ab" if append else "wb") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        self._procs[name] = proc
        (self.dir / f"{name}.pid").write_text(f"{proc.pid}\n")

    def _wait(self, name: str, url: str, timeout: float, tls: bool | None = True) -> None:
        """Poll url until it answers 200 (tls: True = verify with our CA + token, None = unverified)."""
        self._save_launch(name, ready=[url, tls])
        ctx = None
        if tls:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
        elif tls is None:
            ctx = ssl._create_unverified_context()  # component's own self-signed health endpoint
        headers = {"Authorization": f"Bearer {self.token}"} if tls else {}
        end, last = time.monotonic() + timeout, "no answer"
        while time.monotonic() < end:
            if self._procs[name].poll() is not None:
                last = f"exited with status {self._procs[name].returncode}"
                break
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, headers=headers), context=ctx, timeout=2
                ) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except Exception as exc:  # noqa: BLE001 - readiness polling: remember and retry
                last = repr(exc)
            time.sleep(0.2)
        else:
            last = f"not ready after {timeout:.0f} s ({last})"
        tail = self.log_tail(name)
        raise ControlPlaneError(
            f"{name} failed to start: {last}\n--- tail of {self.dir / (name + '.log')} ---\n{tail}"
        )

    def apply_crds(self, paths: list[Path], timeout: float = START_TIMEOUT) -> None:
        """``kubectl apply --server-side`` the CRD files/dirs in ``paths``; wait (``timeout`` seconds)
        until each is Established and listed by discovery."""
        kubectl = [
            str(self.bin_dir / "kubectl"),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.dir / 'kubectl-cache'}",
        ]
        files = [arg for path in paths for arg in ("-f", str(path))]
        out = subprocess.run(
            [*kubectl, "apply", "--server-side", "-o", "name", *files],
            capture_output=True,
            text=True,
            check=False,
        )
        names = out.stdout.split()
        for _ in range(40 if out.returncode == 0 else 0):
            out = subprocess.run(
                [*kubectl, "wait", "--for=condition=Established", f"--timeout={timeout:.0f}s", *names],
                capture_output=True,
                text=True,
                check=False,
            )
            # kubectl wait gives up, instead of waiting, on a CRD whose status has no conditions yet.
            if "accessor error" not in out.stderr:
                break
            time.sleep(0.25)
        if out.returncode != 0:
            raise ControlPlaneError(f"applying the CRDs {' '.join(map(str, paths))} failed:\n{out.stderr}")
        end = time.monotonic() + timeout
        for name in names:
            plural, group = name.split("/", 1)[1].split(".", 1)
            while not any(
                r["name"] == plural
                for v in self._get(f"/apis/{group}").get("versions", [])
                for r in self._get(f"/apis/{v['groupVersion']}").get("resources", [])
            ):
                if time.monotonic() > end:
                    raise ControlPlaneError(f"{plural}.{group} is not served after {timeout:.0f} s")
                time.sleep(0.1)

    def _get(self, path: str) -> dict:
        """GET a JSON document from the apiserver as admin; {} when it is not there (yet)."""
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=self.ca_file)) as resp:
                return json.load(resp)
        except urllib.error.HTTPError:
            return {}

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last ``lines`` lines of DIR/<name>.log."""
        try:
            return "\n".join((self.dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- inspecting and stopping ------------------------------------------------------------------
    def pids(self) -> dict[str, int]:
        """name -> pid from the pid files in DIR."""
        out = {}
        for name in COMPONENTS:
            try:
                out[name] = int((self.dir / f"{name}.pid").read_text())
            except (OSError, ValueError):
                pass
        return out

    def running(self) -> list[str]:
        """The components whose process is alive."""
        return [n for n, pid in self.pids().items() if _alive(pid, n)]

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM each component (last started first), SIGKILL after ``grace`` seconds; remove pid files."""
        for name, pid in reversed(list(self.pids().items())):
            self._terminate(name, pid, grace)
            (self.dir / f"{name}.pid").unlink(missing_ok=True)

    def _terminate(self, name: str, pid: int, grace: float) -> None:
        """SIGTERM the process group of ``pid``, SIGKILL after ``grace`` seconds; reap our own child."""
        if _alive(pid, name):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            end = time.monotonic() + grace
            while _alive(pid, name) and time.monotonic() < end:
                if name in self._procs:
                    self._procs[name].poll()  # reap our own child so it does not linger as a zombie
                time.sleep(0.1)
            if _alive(pid, name):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if name in self._procs:
            self._procs.pop(name).wait()

    # -- faults: one component stopped and started again (tests/node/test_faults.py) ---------------
    def _save_launch(self, name: str, **fields) -> None:
        path = self.dir / f"{name}.launch.json"
        try:
            launch = json.loads(path.read_text())
        except (OSError, ValueError):
            launch = {}
        launch.update(fields)
        path.write_text(json.dumps(launch))

    def stop_component(self, name: str, grace: float = STOP_GRACE) -> float:
        """Stop one running component as :meth:`stop` does (SIGTERM, SIGKILL after ``grace`` s),
        keeping its data (etcd's store) and its launch record; returns the seconds it took.
        Raises ControlPlaneError when ``name`` does not run."""
        pid = self.pids().get(name)
        if pid is None or not _alive(pid, name):
            raise ControlPlaneError(f"{name} does not run in {self.dir}")
        started = time.monotonic()
        self._terminate(name, pid, grace)
        return time.monotonic() - started

    def start_component(self, name: str, timeout: float = START_TIMEOUT) -> float:
        """Start a stopped component again with the same command line (same ports, data, keys),
        its log appended to, and wait until it answers its health check; returns the seconds that
        took. Raises ControlPlaneError when it does not come back within ``timeout`` seconds."""
        try:
            launch = json.loads((self.dir / f"{name}.launch.json").read_text())
        except (OSError, ValueError):
            raise ControlPlaneError(f"{name} was never started from {self.dir}") from None
        if not self.token:  # a plane started by another process: its admin token and API address
            self.token = (self.dir / "tokens.csv").read_text().split(",", 1)[0]
        started = time.monotonic()
        argv = launch["argv"]
        self.bin_dir = self.bin_dir or Path(argv[0]).parent
        self._spawn(name, *argv[1:], append=True)
        url, tls = launch["ready"]
        self._wait(name, url, timeout, tls=tls)
        return time.monotonic() - started

    def restart_component(self, name: str, timeout: float = START_TIMEOUT) -> dict[str, float]:
        """Stop then start one component (a real process restart); returns ``{"stop_s", "start_s"}``."""
        return {"stop_s": self.stop_component(name), "start_s": self.start_component(name, timeout)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "stop", "status"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True, help="state directory (logs, pid files, pki, kubeconfig)")
        if name == "start":
            p.add_argument("--bin", help="directory with the binaries (default: the output of build.sh)")
            p.add_argument("--with-scheduler", action="store_true", help="also run kube-scheduler")
            p.add_argument(
                "--no-controller-manager", action="store_true", help="skip kube-controller-manager"
            )
            p.add_argument(
                "--crds", action="append", default=[], help="CRD file or dir to install (repeatable)"
            )
            p.add_argument("--timeout", type=float, default=START_TIMEOUT, help="seconds per component")
            p.add_argument(
                "--without-workload-api",
                action="store_true",
                help="a plane without scheduling.k8s.io/v1beta1 (gate GenericWorkload off, as 1.37 ships)",
            )
    args = parser.parse_args(argv)
    plane = ControlPlane(
        args.dir,
        getattr(args, "bin", None),
        scheduler=getattr(args, "with_scheduler", False),
        controller_manager=not getattr(args, "no_controller_manager", False),
        crds=getattr(args, "crds", []),
        workload_api=not getattr(args, "without_workload_api", False),
    )
    if args.command == "start":
        started = time.monotonic()
        try:
            plane.start(args.timeout)
        except ControlPlaneError as exc:
            print(f"controlplane: {exc}", file=sys.stderr)
            return 1
        print(f"controlplane: ready in {time.monotonic() - started:.1f} s at {plane.server}", file=sys.stderr)
        print(f"export KUBECONFIG={plane.kubeconfig}")
    elif args.command == "stop":
        plane.stop()
    else:
        pids = plane.pids()
        for name in COMPONENTS:
            state = "running" if name in pids and _alive(pids[name], name) else "stopped"
            print(f"{name:24} {state:8} {pids.get(name, '-')}")
        return 0 if plane.running() else 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
