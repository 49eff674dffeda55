"""SSH key material for the launcher/worker kinds (DeepSpeedJob, ColossalAIJob)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from .api.common import ANNOTATION_GENERATE

#: ssh client settings for replicas that reach each other by Service name: no host-key prompt.
SSH_CONFIG = "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"


def generate_ssh_keypair() -> dict[str, str]:
    """A fresh Ed25519 key pair as the files of an ``~/.ssh`` directory.

    Returns ``{"id_ed25519", "id_ed25519.pub", "authorized_keys", "config"}`` with OpenSSH
    encodings, ready for a Secret's ``stringData``.
    """
    # Imported here: most jobs need no key, and cryptography costs an idle operator 6 MiB (issue 35).
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    pub = public.decode() + " t9k-jobs\n"
    return {"id_ed25519": private, "id_ed25519.pub": pub, "authorized_keys": pub, "config": SSH_CONFIG}


def materialize(obj: dict[str, Any], keygen: Callable[[], dict[str, str]] = generate_ssh_keypair) -> dict[str, Any]:
    """Fill in what the engine leaves to creation time: an ssh Secret's key pair.

    Returns a copy of ``obj``; a Secret annotated ``batch.tensorstack.dev/generate:
    ssh-keypair`` gets ``stringData`` from ``keygen()``. Other objects are returned as copies.
    Called by the runtimes when they create a child, so the engine stays free of randomness.
    """
    out = copy.deepcopy(obj)
    annotations = out.get("metadata", {}).get("annotations") or {}
    if out.get("kind") == "Secret" and annotations.get(ANNOTATION_GENERATE) == "ssh-keypair":
        out.pop("data", None)
        out["stringData"] = keygen()
    return out
