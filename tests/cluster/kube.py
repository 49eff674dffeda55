"""A small synchronous Kubernetes client for the cluster tests (stdlib urllib + json).

The tests use it to inspect what the operator wrote and to play the kubelet (``set_pod_phase``).
It reads server, bearer token and CA file from a kubeconfig as written by
``tools/controlplane/controlplane.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.helpers import API_VERSION, wait_until

GROUP_VERSION = API_VERSION
PLURALS = {
    "GenericJob": "genericjobs",
    "PyTorchTrainingJob": "pytorchtrainingjobs",
    "DeepSpeedJob": "deepspeedjobs",
    "ColossalAIJob": "colossalaijobs",
}
POD_REASONS = ("Evicted", "DeadlineExceeded")  # reasons the kubelet writes on the pod, not a container
T = TypeVar("T")


def job_path(ns: str, kind: str, name: str | None = None) -> str:
    """``/apis/batch.tensorstack.dev/v1beta1/namespaces/{ns}/{plural}[/{name}]`` for one of our kinds."""
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/{PLURALS[kind]}"
    return f"{path}/{name}" if name else path


def pod_path(ns: str, name: str | None = None) -> str:
    """``/api/v1/namespaces/{ns}/pods[/{name}]``."""
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "")


def core_path(ns: str, resource: str, name: str | None = None) -> str:
    """``/api/v1/namespaces/{ns}/{resource}[/{name}]`` (services, configmaps, events, ...)."""
    return f"/api/v1/namespaces/{ns}/{resource}" + (f"/{name}" if name else "")


def now_rfc3339() -> str:
    """The current UTC time as Kubernetes writes timestamps (second precision)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeError(Exception):
    """A non-2xx answer: HTTP ``status``, the Status ``reason`` (e.g. NotFound, Invalid) and ``message``."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status, self.reason, self.message, self.body = status, reason, message, body or {}


class Kube:
    """Synchronous JSON client: every method returns the decoded answer or raises ``KubeError``."""

    def __init__(self, kubeconfig_path: str | Path, timeout: float = 30.0) -> None:
        cfg = yaml.safe_load(Path(kubeconfig_path).read_text())
        ctx_name = cfg["current-context"]
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server: str = cluster["server"].rstrip("/")
        self.token: str = user["token"]
        self.ca_file: str = cluster["certificate-authority"]
        self.timeout = timeout  # seconds per request
        self._ssl = ssl.create_default_context(cafile=self.ca_file)

    # -- raw requests -----------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request; ``body`` is JSON-encoded; returns the decoded JSON answer ({} when empty)."""
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                status = json.loads(raw)
            except ValueError:
                status = {"message": raw.decode(errors="replace")}
            raise KubeError(exc.code, status.get("reason", ""), status.get("message", ""), status) from None
        return json.loads(raw) if raw else {}

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def list(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        """The ``items`` of a collection, optionally filtered by a label selector (``a=b,c``)."""
        query = {"labelSelector": label_selector} if label_selector else None
        return self.request("GET", path, query=query).get("items", [])

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """POST ``obj`` to the collection ``path``."""
        return self.request("POST", path, obj)

    def patch(
        self, path: str, body: Any, content_type: str = "application/merge-patch+json"
    ) -> dict[str, Any]:
        return self.request("PATCH", path, body, content_type)

    def replace(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` (with its resourceVersion for optimistic concurrency)."""
        return self.request("PUT", path, obj)

    def replace_status(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` to the ``status`` subresource of the object at ``path``."""
        return self.request("PUT", f"{path}/status", obj)

    def delete(self, path: str, uid: str | None = None, propagation: str | None = None) -> dict[str, Any]:
        """DELETE, with an optional UID precondition and propagationPolicy (Foreground/Background/Orphan)."""
        opts: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            opts["preconditions"] = {"uid": uid}
        if propagation:
            opts["propagationPolicy"] = propagation
        return self.request("DELETE", path, opts)

    def exists(self, path: str) -> bool:
        """Whether GET ``path`` succeeds (False on 404)."""
        try:
            self.get(path)
            return True
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise

    # -- playing the kubelet ----------------------------------------------------------------------
    def set_pod_phase(
        self, ns: str, name: str, phase: str, exit_code: int | None = None, reason: str | None = None
    ) -> dict[str, Any]:
        """Write the pod's status as a kubelet would, through ``pods/{name}/status``.

        ``phase`` is Pending, Running, Succeeded or Failed. Every container of the spec gets a
        containerStatus: waiting (Pending), running (Running) or terminated with ``exit_code``
        (default 0 for Succeeded, 1 for Failed) and ``reason`` (default Completed / Error); with
        Pending, ``reason`` is the waiting reason (default ContainerCreating). A Failed pod also gets
        ``status.reason`` when ``reason`` is a pod-level one (Evicted, DeadlineExceeded).
        Returns the updated pod.
        """
        pod = self.get(pod_path(ns, name))
        old = {c["name"]: c for c in pod.get("status", {}).get("containerStatuses", [])}
        now = now_rfc3339()
        started = pod.get("status", {}).get("startTime", now)
        if phase in ("Succeeded", "Failed"):
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            state: dict[str, Any] = {
                "terminated": {
                    "exitCode": code,
                    "reason": reason or ("Completed" if code == 0 else "Error"),
                    "startedAt": started,
                    "finishedAt": now,
                }
            }
        elif phase == "Running":
            state = {"running": {"startedAt": now}}
        else:
            state = {"waiting": {"reason": reason or "ContainerCreating"}}
        running = phase == "Running"
        statuses = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": running,
                "started": running,
                "state": state,
                "restartCount": old.get(c["name"], {}).get("restartCount", 0),
            }
            for c in pod["spec"].get("containers", [])
        ]
        cond = lambda t, ok: {"type": t, "status": "True" if ok else "False", "lastTransitionTime": now}
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": [
                cond("PodScheduled", True),
                cond("Initialized", True),
                cond("ContainersReady", running),
                cond("Ready", running),
            ],
            "containerStatuses": statuses,
            "startTime": started,
        }
        if reason in POD_REASONS and phase == "Failed":
            status["reason"] = reason  # the kubelet also marks the pod itself, e.g. when it evicts it
        return self.patch(f"{pod_path(ns, name)}/status", {"status": status})

    # -- polling ----------------------------------------------------------------------------------
    @staticmethod
    def wait_for(
        fn: Callable[[], T], timeout: float = 30, interval: float = 0.1, what: str = "condition"
    ) -> T:
        """``wait_until`` where a ``KubeError`` or ``AssertionError`` raised by ``fn`` counts as "not yet"."""
        return wait_until(fn, what, timeout, interval=interval, ignore=(KubeError, AssertionError))

    def wait_for_events(
        self, ns: str, match: Callable[[dict[str, Any]], bool], timeout: float = 30, what: str = "events"
    ) -> list[dict[str, Any]]:
        """The namespace's Events that ``match``, once there is at least one. Recorders (ours, the
        scheduler's, Kueue's) write Events in the background after the status they explain, so a
        test that saw a condition waits for its Event rather than listing once."""
        return self.wait_for(
            lambda: [e for e in self.list(core_path(ns, "events")) if match(e)], timeout=timeout, interval=0.3, what=what
        )
