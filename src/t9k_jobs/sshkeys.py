"""SSH key material for the launcher/worker kinds (DeepSpeedJob, ColossalAIJob)."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

#: ssh client settings for replicas that reach each other by Service name: no host-key prompt.
SSH_CONFIG = "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"


def generate_ssh_keypair() -> dict[str, str]:
    """A fresh Ed25519 key pair as the files of an ``~/.ssh`` directory.

    Returns ``{"id_ed25519", "id_ed25519.pub", "authorized_keys", "config"}`` with OpenSSH
    encodings, ready for a Secret's ``stringData``.
    """
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    pub = public.decode() + " t9k-jobs\n"
    return {"id_ed25519": private, "id_ed25519.pub": pub, "authorized_keys": pub, "config": SSH_CONFIG}
