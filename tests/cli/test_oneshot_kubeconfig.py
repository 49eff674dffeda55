"""Which kubeconfigs the synchronous SDK reads itself (cluster/oneshot.py, issue 35), and what it
takes from them. The requests themselves are tested against the real API server by every cluster
verb test (tests/cluster/test_verbs.py and the CLI's tests/cli/test_cluster_input.py,
test_api_faults.py), which go this way with the test control plane's kubeconfig."""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from t9k_jobs.cluster.kubeconfig import read
from t9k_jobs.cluster.oneshot import plain_connection


def _pem_pair(tmp: Path) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (PEM)."""
    import datetime as dt

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "t9k-jobs test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), pem_key


def kubeconfig(path: Path, cluster: dict, user: dict, context: dict | None = None, name: str = "c") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": cluster}],
                "users": [{"name": name, "user": user}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name, **(context or {})}}],
                "current-context": name,
            }
        )
    )
    return path


@pytest.fixture()
def pems(tmp_path: Path) -> tuple[bytes, bytes]:
    return _pem_pair(tmp_path)


def test_a_token_and_a_certificate_authority_file(tmp_path: Path, pems: tuple[bytes, bytes]) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(pems[0])
    conf = kubeconfig(
        tmp_path / "config",
        {"server": "https://127.0.0.1:6443/", "certificate-authority": "pki/ca.crt"},  # relative to the file
        {"token": "abc"},
        {"namespace": "team-a"},
    )
    plain = plain_connection(read([str(conf)]))
    assert plain is not None
    assert (plain.server, plain.token, plain.namespace) == ("https://127.0.0.1:6443", "abc", "team-a")
    assert plain.context.verify_mode == ssl.CERT_REQUIRED and plain.context.check_hostname
    assert len(plain.context.get_ca_certs()) == 1


def test_inline_data_and_a_client_certificate(tmp_path: Path, pems: tuple[bytes, bytes]) -> None:
    cert, key = pems
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    conf = kubeconfig(
        tmp_path / "config",
        {"server": "https://k8s.example:443", "certificate-authority-data": b64(cert)},
        {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
    )
    plain = plain_connection(read([str(conf)]))
    assert plain is not None and plain.token is None
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("t9k-jobs-tls-*")), "the key is not left on disk"


def test_skip_tls_verify(tmp_path: Path) -> None:
    conf = kubeconfig(tmp_path / "config", {"server": "https://1.2.3.4:6443", "insecure-skip-tls-verify": True}, {})
    plain = plain_connection(read([str(conf)]))
    assert plain is not None and plain.context.verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://h:1"}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}),
        ({"server": "https://h:1"}, {"auth-provider": {"name": "oidc"}}),
        ({"server": "https://h:1"}, {"username": "u", "password": "p"}),
        ({"server": "https://h:1"}, {"tokenFile": "/t"}),
        ({"server": "https://h:1", "proxy-url": "http://proxy:3128"}, {"token": "t"}),
        ({"server": "https://h:1", "tls-server-name": "kubernetes"}, {"token": "t"}),
        ({"server": "http://h:1"}, {"token": "t"}),
        ({"server": "https://h:1/prefix"}, {"token": "t"}),
        ({"server": "https://h:1", "certificate-authority-data": "not base64!"}, {"token": "t"}),
        ({"server": "https://h:1", "certificate-authority": "/nonexistent/ca.crt"}, {"token": "t"}),
        ({"server": "https://h:1"}, {"client-certificate": "/nonexistent/c.crt", "client-key": "/nonexistent/c.key"}),
    ],
)
def test_anything_else_goes_the_full_way(tmp_path: Path, cluster: dict, user: dict) -> None:
    assert plain_connection(read([str(kubeconfig(tmp_path / "config", cluster, user))])) is None


def test_merged_files_and_a_chosen_context(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a", {"server": "https://first:1", "insecure-skip-tls-verify": True}, {"token": "1"})
    second = kubeconfig(tmp_path / "b", {"server": "https://second:1", "insecure-skip-tls-verify": True}, {"token": "2"})
    assert plain_connection(read([str(first), str(second)])).server == "https://first:1"  # first to name "c" wins
    doc = yaml.safe_load(second.read_text())
    doc["contexts"].append({"name": "other", "context": {"cluster": "c", "user": "c"}})
    second.write_text(yaml.safe_dump(doc))
    assert plain_connection(read([str(tmp_path / "missing"), str(second)]), "other").server == "https://second:1"
    assert plain_connection(read([str(second)]), "nope") is None


def test_a_cluster_verb_of_a_plain_kubeconfig_loads_neither_aiohttp_nor_kubernetes_asyncio_config(tmp_path: Path) -> None:
    """Against a port where nothing listens: the verb fails (one line, exit 1) without the full client."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = kubeconfig(tmp_path / "config", {"server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}, {"token": "t"})
    code = (
        "import sys; sys.argv = ['t9k-jobs', 'get', '--kubeconfig', sys.argv[1]]\n"
        "from t9k_jobs.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "heavy = [m for m in ('aiohttp', 'urllib3', 'prometheus_client', 'kubernetes_asyncio.config') if m in sys.modules]\n"
        "print(code, heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(conf)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "1 []", done.stdout + done.stderr
    assert done.stderr.startswith(f"error: cannot reach the API server at https://127.0.0.1:{port}:"), done.stderr
    assert "Traceback" not in done.stderr
