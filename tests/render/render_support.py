"""Shared helpers of the render tests: the manifests directory and a deterministic render.

Imported by the test modules of this package (``from .render_support import ...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t9k_jobs.api import load_manifest
from t9k_jobs.render import render

HERE = Path(__file__).parent
MANIFESTS = HERE / "manifests"
GOLDEN = HERE / "golden"

#: The ssh key material every render test uses instead of a freshly generated key pair, so the
#: output is byte-for-byte stable.
FAKE_KEYS = {
    "id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-PRIVATE-KEY\n-----END OPENSSH PRIVATE KEY-----\n",
    "id_ed25519.pub": "ssh-ed25519 AAAAFAKEPUBLICKEY t9k-jobs\n",
    "authorized_keys": "ssh-ed25519 AAAAFAKEPUBLICKEY t9k-jobs\n",
    "config": "Host *\n  StrictHostKeyChecking no\n",
}


def fixed_keygen() -> dict[str, str]:
    return dict(FAKE_KEYS)


def manifest_names() -> list[str]:
    return sorted(p.stem for p in MANIFESTS.glob("*.yaml"))


def render_manifest(name: str) -> list[dict[str, Any]]:
    """Every object the operator would create for ``manifests/<name>.yaml``, with fixed keys."""
    return render(load_manifest(MANIFESTS / f"{name}.yaml"), keygen=fixed_keygen)

