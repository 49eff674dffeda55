"""The two operators the benchmarks compare, run as processes out of the cluster, and what they share.

Used by ``cluster_scale.py`` (kwok) and ``real_node.py`` (a real node): build the peers, start
t9k-jobs' operator or Kubeflow's training operator v1 against a kubeconfig, wait until it is
ready, sample its RSS and CPU, read its API requests from its metrics, stop it. The training
operator needs a little help out of the cluster (its webhook certificate, see
:func:`start_training_operator`).
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

import yaml
from prometheus_client.parser import text_string_to_metric_families

from t9k_jobs.cluster.client import NAMESPACES, SECRETS, ApiError, KubeClient, Resource

ROOT = Path(__file__).resolve().parents[1]
T9K_JOBS = Resource("batch.tensorstack.dev", "v1beta1", "pytorchtrainingjobs", "PyTorchTrainingJob")
KF_JOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")


def build(script: str) -> Path:
    """Run ``tools/controlplane/<script>`` (build.sh, build-peers.sh); the directory it prints."""
    out = subprocess.run(
        ["bash", str(ROOT / "tools" / "controlplane" / script)], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def training_operator_version() -> str:
    """The training operator version build-peers.sh builds (``TO_VERSION``, else its default)."""
    if os.environ.get("TO_VERSION"):
        return os.environ["TO_VERSION"]
    for line in (ROOT / "tools" / "controlplane" / "build-peers.sh").read_text().splitlines():
        if line.startswith("TO_VERSION="):
            return line.split(":-", 1)[1].split("}", 1)[0]
    return "?"


def pytorchjob_crd(peers: Path, dest_dir: Path) -> Path:
    """The training operator's PyTorchJob CRD, written to ``dest_dir`` in a form the control plane
    installs: the published file carries an empty top-level status that server-side apply refuses."""
    crd = yaml.safe_load((peers / "crds" / "kubeflow.org_pytorchjobs.yaml").read_text())
    crd.pop("status", None)
    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / "pytorchjobs-crd.yaml"
    out.write_text(yaml.safe_dump(crd))
    return out


async def until(pred, timeout: float, what: str, interval: float = 0.2) -> None:
    end = time.monotonic() + timeout
    while True:
        result = pred()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > end:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def num(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals; a dash for what a run does not measure (NaN)."""
    return "–" if math.isnan(x) else f"{x:.{digits}f}"


# --------------------------------------------------------------------------- job phases


def t9k_phase(obj: dict) -> str:
    return (obj.get("status") or {}).get("phase") or ""


def kf_phase(obj: dict) -> str:
    """Kubeflow reports conditions; the newest true one among Running/Succeeded/Failed is the phase."""
    phase = ""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in (
            "Created",
            "Running",
            "Succeeded",
            "Failed",
            "Restarting",
        ):
            phase = c["type"]
    return phase


# --------------------------------------------------------------------------- operator processes


class OperatorRun:
    """One operator process; samples its RSS and reads its metrics."""

    def __init__(self, name: str, argv: list[str], metrics_url: str, ready_url: str, log: Path):
        self.name = name
        self.argv = argv
        self.metrics_url = metrics_url
        self.ready_url = ready_url
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.peak_rss = 0
        self._sampler: asyncio.Task[None] | None = None

    def start(self) -> None:
        out = open(self.log, "wb")  # noqa: SIM115 - the child keeps it open
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._sampler = asyncio.get_running_loop().create_task(self._sample())

    async def _sample(self) -> None:
        assert self.proc is not None
        while self.proc.poll() is None:
            try:
                for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_rss = max(self.peak_rss, int(line.split()[1]) * 1024)
            except OSError:
                return
            await asyncio.sleep(0.25)

    def rss(self) -> int:
        """Resident set size now, in bytes (0 once the process is gone)."""
        assert self.proc is not None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def requests_by_method(self) -> dict[str, float]:
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        verb_to_method = {
            "get": "GET", "list": "GET", "watch": "GET", "create": "POST",
            "update": "PUT", "patch": "PATCH", "delete": "DELETE",
        }  # fmt: skip
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name != "rest_client_requests_total":
                    continue
                method = s.labels.get("method") or verb_to_method.get(s.labels.get("verb", ""), "?")
                out[method] = out.get(method, 0.0) + s.value
        return out

    async def wait_ready(self, url: str, timeout: float = 120) -> None:
        def ok() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}; see {self.log}")
            try:
                return urllib.request.urlopen(url, timeout=2).status == 200
            except OSError:
                return False

        await until(ok, timeout, f"{self.name} ready")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._sampler is not None:
            self._sampler.cancel()


def t9k_operator(
    kubeconfig: Path, log_dir: Path, qps: float | None, burst: int | None, workers: int | None
) -> OperatorRun:
    """t9k-jobs' operator (this interpreter, ``python -m t9k_jobs.cli operator``), not started."""
    port = free_port()
    argv = [sys.executable, "-m", "t9k_jobs.cli", "operator", "--kubeconfig", str(kubeconfig),
            "--no-leader-elect", "--metrics-bind-address", f"127.0.0.1:{port}", "--log-level", "WARNING"]  # fmt: skip
    if qps is not None:
        argv += ["--kube-api-qps", str(qps), "--kube-api-burst", str(burst)]
    if workers is not None:
        argv += ["--workers", str(workers)]
    base = f"http://127.0.0.1:{port}"
    return OperatorRun("t9k-jobs", argv, f"{base}/metrics", f"{base}/readyz", log_dir / "t9k-jobs.log")


def kubeflow_operator(
    kubeconfig: Path, log_dir: Path, peers: Path, qps: float | None, burst: int | None, workers: int | None
) -> OperatorRun:
    """Kubeflow's training operator v1 (PyTorchJob only, no leader election, no gang scheduler),
    not started; :func:`start_training_operator` starts it with its webhook certificate."""
    port, probe, webhook = free_port(), free_port(), free_port()
    argv = [str(peers / "bin" / "training-operator.v1"), f"--kubeconfig={kubeconfig}",
            "--enable-scheme=pytorchjob", f"--metrics-bind-address=127.0.0.1:{port}",
            f"--health-probe-bind-address=127.0.0.1:{probe}", f"--webhook-server-port={webhook}",
            "--leader-elect=false", "--gang-scheduler-name="]  # fmt: skip
    if qps is not None:
        argv += [f"--kube-api-qps={int(qps)}", f"--kube-api-burst={burst}"]
    if workers is not None:
        argv += [f"--controller-threads={workers}"]
    return OperatorRun(
        "training-operator",
        argv,
        f"http://127.0.0.1:{port}/metrics",
        f"http://127.0.0.1:{probe}/readyz",
        log_dir / "training-operator.log",
    )


# The training operator's certificate rotator waits for its files in this fixed directory
# (pkg/cert of v1.9.3) before it serves the webhook; out of cluster nothing mounts them there,
# so the benchmark copies them from the Secret the rotator fills. One fixed directory per host:
# CERT_LOCK keeps two benchmark processes from running the training operator at the same time.
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
CERT_LOCK = Path("/tmp/k8s-webhook-server.lock")


async def training_operator_prerequisites(client: KubeClient) -> None:
    """Namespace ``kubeflow`` and the (empty) webhook Secret its certificate rotator fills
    (either may exist already)."""
    for res, ns, obj in (
        (NAMESPACES, None, {"metadata": {"name": "kubeflow"}}),
        (
            SECRETS,
            "kubeflow",
            {"metadata": {"name": "training-operator-webhook-cert", "namespace": "kubeflow"}},
        ),
    ):
        try:
            await client.create(res, ns, obj)
        except ApiError as exc:
            if exc.status != 409:
                raise


async def copy_webhook_certs(client: KubeClient, dest: Path) -> None:
    """The rotator writes the serving cert into the Secret; the operator reads it from ``dest``."""
    while True:
        data = (await client.get(SECRETS, "kubeflow", "training-operator-webhook-cert")).get("data") or {}
        if "tls.crt" in data and "tls.key" in data:
            dest.mkdir(parents=True, exist_ok=True)
            for k in ("tls.crt", "tls.key"):
                (dest / k).write_bytes(base64.b64decode(data[k]))
            return
        await asyncio.sleep(0.2)


async def start_training_operator(client: KubeClient, op: OperatorRun) -> IO[str]:
    """Start ``op`` (from :func:`kubeflow_operator`) with its prerequisites and webhook certificate
    in place. Returns the held CERT_LOCK file: close it (after ``op.stop()``) to release it. On
    failure ``op`` is stopped and the lock released."""
    await training_operator_prerequisites(client)
    lock = open(CERT_LOCK, "w")  # noqa: SIM115, ASYNC230 - held until the caller closes it
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(CERT_DIR, ignore_errors=True)  # stale files would let it start too early
        op.start()
        await asyncio.wait_for(copy_webhook_certs(client, CERT_DIR), 120)
    except BaseException:
        op.stop()
        lock.close()
        raise
    return lock
