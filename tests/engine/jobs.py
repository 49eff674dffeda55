"""Small job manifests (plain dicts) for the engine tests."""

from __future__ import annotations

import copy
from typing import Any

API = "batch.tensorstack.dev/v1beta1"


def ctr(
    name: str = "pytorch",
    *,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox:1.36"}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    if env is not None:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    c.update(extra)
    return c


def tmpl(*containers: dict[str, Any], restart_policy: str | None = "OnFailure") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [ctr()]}
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy  # the engine must override this with Never
    return {"spec": spec}


def _job(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": "demo"}, "spec": spec}


def pytorch(
    specs: list[tuple[str, int]] | None = None,
    *,
    name: str = "job",
    policy: str = "OnFailure",
    backoff: int | None = None,
    template: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A PyTorchTrainingJob; ``specs`` is ``[(type, replicas)]`` (default master×1, worker×2)."""
    specs = specs or [("master", 1), ("worker", 2)]
    body: dict[str, Any] = {
        "replicaSpecs": [
            {
                "type": t,
                "replicas": n,
                "restartPolicy": policy,
                "template": copy.deepcopy(template)
                or tmpl(ctr(command=["python"], args=["train.py", "--epochs=1"])),
            }
            for t, n in specs
        ],
    }
    if backoff is not None:
        body["runPolicy"] = {"backoffLimit": backoff}
    body.update(spec)
    return _job("PyTorchTrainingJob", name, body)


def generic(
    specs: list[tuple[str, int]] | None = None,
    *,
    name: str = "gj",
    policy: str = "OnFailure",
    limit: int = 0,
    template: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A GenericJob; ``specs`` is ``[(type, replicas)]`` (default worker×2)."""
    specs = specs or [("worker", 2)]
    body: dict[str, Any] = {
        "replicaSpecs": [
            {
                "type": t,
                "replicas": n,
                "restartPolicy": {"policy": policy, "limit": limit},
                "template": copy.deepcopy(template) or tmpl(ctr("main", command=["sh", "-c", "true"])),
            }
            for t, n in specs
        ],
    }
    body.update(spec)
    return _job("GenericJob", name, body)


def deepspeed(
    replicas: int = 2, *, name: str = "ds", policy: str = "OnFailure", backoff: int | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "worker": {
            "replicas": replicas,
            "restartPolicy": policy,
            "template": tmpl(ctr("worker", command=["python"], args=["x.py"], env={"A": "1"})),
        },
        "config": {"slotsPerWorker": 1, "run": {"python": ["train.py", "--lr=1"]}},
    }
    if backoff is not None:
        body["runPolicy"] = {"backoffLimit": backoff}
    body.update(spec)
    return _job("DeepSpeedJob", name, body)


def colossalai(replicas: int = 2, *, name: str = "cai", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "launcher": {"image": "launcher:1"},
        "worker": {
            "replicas": replicas,
            "command": ["train.py", "--x=1"],
            "template": tmpl(ctr("worker", command=["should-be-replaced"])),
        },
    }
    body.update(spec)
    return _job("ColossalAIJob", name, body)
