"""The synchronous SDK's client of a plain kubeconfig: one request at a time over the standard
library's ``http.client`` (issue 35: a cluster ``get`` without aiohttp and kubernetes_asyncio).

:class:`t9k_jobs.Client` (the CLI's day-two verbs) sends a few requests and exits; importing
aiohttp, urllib3 (through kubernetes_asyncio's ``Configuration``) and the library's kubeconfig
loader cost such a command more than its work. For a kubeconfig that needs none of the library's
machinery, :func:`plain_connection` reads the server, its certificate authority and the user's
bearer token or client certificate itself, and :class:`OneShotClient` sends each request on a
fresh TLS connection in a worker thread. A kubeconfig with anything else (a credential plugin,
an auth provider, a proxy, a TLS server name, basic auth, a field it does not know) goes the
full way, as before; so does a watch or a followed log (:class:`OneShotClient` hands those to a
:class:`~t9k_jobs.cluster.client.KubeClient` it makes on first use). The asynchronous SDK (the
dashboard) always uses the full client.

Requests behave as :meth:`KubeClient.request`'s: the same answers and errors (:class:`ApiError`,
:class:`BadAnswer`, bounded reads), ``429`` retried after ``Retry-After``, the request timeout
over the whole request (``asyncio.TimeoutError``); a failed connection is an ``OSError``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from .client import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    MAX_ERROR_ANSWER,
    BadAnswer,
    KubeClient,
    _error,
    _param,
    _retry_after,
    decode_answer,
    retried,
)
from .kubeconfig import KubeConfig

#: The fields of a kubeconfig cluster and user that :func:`plain_connection` reads; any other
#: field present sends the kubeconfig the full way.
CLUSTER_FIELDS = frozenset({"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"})
USER_FIELDS = frozenset(
    {"token", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
)


@dataclass(frozen=True)
class PlainConnection:
    """What a plain kubeconfig says: ``server`` (``https://host:port``, no trailing ``/``), the
    TLS context (its certificate authority, or none verified, and the client certificate), the
    bearer ``token`` and the context's ``namespace`` (None: none)."""

    server: str
    context: ssl.SSLContext
    token: str | None
    namespace: str | None = None


def plain_connection(config: KubeConfig, context: str | None = None) -> PlainConnection | None:
    """The connection of ``context`` (else ``current-context``) in the kubeconfig ``config`` (its
    files merged as kubectl merges ``$KUBECONFIG``: :mod:`.kubeconfig`), when its cluster and user
    hold only :data:`CLUSTER_FIELDS` and :data:`USER_FIELDS`, an ``https`` server, and files and
    data that load; None otherwise (the full client then reads it, and says what is wrong). Paths
    are taken relative to the file that names them, as kubectl takes them."""
    try:
        chosen = config.context(context)
        named = config.clusters.get(chosen.get("cluster")) if chosen is not None else None  # type: ignore[arg-type]
        if chosen is None or named is None or not isinstance(named.entry.get("cluster"), dict):
            return None
        cluster, cluster_dir = named.entry["cluster"], Path(named.path).parent
        by_user = config.users.get(chosen.get("user"))  # type: ignore[arg-type]
        user, user_dir = ({}, cluster_dir) if by_user is None else (by_user.entry.get("user"), Path(by_user.path).parent)
        if not isinstance(user, dict) or set(cluster) - CLUSTER_FIELDS or set(user) - USER_FIELDS:
            return None
        server = cluster.get("server")
        if not isinstance(server, str) or urlsplit(server).scheme != "https" or urlsplit(server).path.strip("/"):
            return None
        namespace = chosen.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            return None
        return PlainConnection(
            server.rstrip("/"), _tls(cluster, cluster_dir, user, user_dir), _token(user), namespace or None
        )
    except (OSError, ValueError, TypeError, ssl.SSLError):
        return None


def _token(user: dict[str, Any]) -> str | None:
    token = user.get("token")
    if token is not None and not isinstance(token, str):
        raise TypeError("token")
    return token or None


def _data(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError("data")
    return base64.b64decode(value, validate=True)


def _file(value: Any, base: Path) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError("path")
    return str(base / os.path.expanduser(value))


def _tls(cluster: dict[str, Any], cluster_dir: Path, user: dict[str, Any], user_dir: Path) -> ssl.SSLContext:
    """The TLS context of a plain kubeconfig's cluster and user (raises what loading raises)."""
    insecure = cluster.get("insecure-skip-tls-verify") is True
    if "certificate-authority-data" in cluster:
        ctx = ssl.create_default_context(cadata=_data(cluster["certificate-authority-data"]).decode("ascii"))
    elif "certificate-authority" in cluster:
        ctx = ssl.create_default_context(cafile=_file(cluster["certificate-authority"], cluster_dir))
    else:
        ctx = ssl.create_default_context()
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert = user.get("client-certificate-data"), user.get("client-certificate")
    key = user.get("client-key-data"), user.get("client-key")
    if any(cert) or any(key):
        with tempfile.TemporaryDirectory(prefix="t9k-jobs-tls-") as tmp:  # 0700: ours alone
            paths = []
            for data, file, name in ((cert[0], cert[1], "cert.pem"), (key[0], key[1], "key.pem")):
                if data is not None:
                    out = Path(tmp) / name
                    out.write_bytes(_data(data))
                    paths.append(str(out))
                else:
                    paths.append(_file(file, user_dir))
            ctx.load_cert_chain(paths[0], paths[1])
    return ctx


class OneShotClient(KubeClient):
    """A :class:`KubeClient` of a :class:`PlainConnection` whose requests go one at a time over
    ``http.client`` (see the module doc); ``full`` makes the client a watch or a followed log
    goes through (awaited on first use: the client the full way would have made)."""

    def __init__(
        self,
        plain: PlainConnection,
        full: Callable[[], Awaitable[KubeClient]],
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> None:
        async def never() -> Any:  # the base class's loader: this client has none of its own
            raise AssertionError("a OneShotClient makes no ApiClient")

        super().__init__(None, qps=qps, burst=burst, host=plain.server, loader=never)
        self._plain = plain
        self._make_full = full
        self._full: KubeClient | None = None
        target = urlsplit(plain.server)
        self._address = (target.hostname or "", target.port or 443)

    async def ready(self) -> None:
        """Nothing to load: the connection was read when the client was made."""

    async def close(self) -> None:
        if self._full is not None:
            await self._full.close()

    def sibling(self) -> KubeClient:
        return OneShotClient(self._plain, self._make_full, self._bucket.qps, self._bucket.burst)

    async def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
        content_type: str = "application/json", timeout: float | None = None, verb: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """As :meth:`KubeClient.request`, over ``http.client`` (the module doc)."""
        import orjson

        target = path
        if params:
            target += "?" + urlencode({k: _param(v) for k, v in params.items() if v is not None})
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        limit = timeout if timeout is not None else self.request_timeout
        what = f"{method} {path}"
        for attempt in range(6):
            await self._bucket.take()
            exchange = self._in_thread(method, target, data, content_type, limit)
            status, retry_after, answer_type, raw = await asyncio.wait_for(exchange, limit)
            if retried(status, retry_after) and attempt < 5:
                await asyncio.sleep(_retry_after(retry_after))
                continue
            if status >= 300:
                raise _error(status, raw[:MAX_ERROR_ANSWER], retry_after)
            return decode_answer(raw, status, what, answer_type)
        raise AssertionError("unreachable")

    async def _in_thread(self, *args: Any) -> tuple[int, str | None, str | None, bytes]:
        """:meth:`_exchange` in a daemon thread of its own: a caller that stops waiting (its
        timeout, Ctrl-C) closes the connection, and a command exits at once even if a server
        never answers (a worker of the default executor would hold the exit until its socket's
        timeout)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        held: dict[str, http.client.HTTPSConnection] = {}

        def settle(result: Any, exc: BaseException | None) -> None:
            if not done.done():
                done.set_exception(exc) if exc is not None else done.set_result(result)

        def run() -> None:
            try:
                result, exc = self._exchange(*args, held=held), None
            except BaseException as error:  # noqa: BLE001 - handed to the waiting coroutine
                result, exc = None, error
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
                loop.call_soon_threadsafe(settle, result, exc)

        threading.Thread(target=run, name="t9k-jobs-request", daemon=True).start()
        try:
            return await done
        finally:
            conn = held.get("conn")
            if not done.done() and conn is not None and conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)  # the thread's read ends now

    def _exchange(
        self,
        method: str,
        target: str,
        data: bytes | None,
        content_type: str,
        limit: float | None,
        held: dict[str, http.client.HTTPSConnection],
    ) -> tuple[int, str | None, str | None, bytes]:
        """One request on a connection of its own (put in ``held``): ``(status, Retry-After,
        Content-Type, body)``. A body longer than :attr:`max_answer` is :class:`BadAnswer` (an
        error answer is cut)."""
        headers = {"Accept": "application/json", "User-Agent": "t9k-jobs"}
        if self._plain.token:
            headers["Authorization"] = f"Bearer {self._plain.token}"
        if data is not None:
            headers["Content-Type"] = content_type
        conn = http.client.HTTPSConnection(*self._address, timeout=limit, context=self._plain.context)
        held["conn"] = conn
        try:
            conn.request(method, target, body=data, headers=headers)
            resp = conn.getresponse()
            status = resp.status
            limit_bytes = MAX_ERROR_ANSWER if status >= 300 else self.max_answer
            length = resp.getheader("Content-Length")
            if status < 300 and length is not None and length.isdigit() and int(length) > limit_bytes:
                raise BadAnswer(status, f"the answer to {method} {target.split('?')[0]} is {length} bytes, more than the {limit_bytes} read")
            raw = resp.read(limit_bytes + 1)
            if len(raw) > limit_bytes:
                if status < 300:
                    raise BadAnswer(status, f"the answer to {method} {target.split('?')[0]} is more than the {limit_bytes} bytes read")
                raw = raw[:limit_bytes]
            return status, resp.getheader("Retry-After"), resp.getheader("Content-Type"), raw
        except http.client.HTTPException as exc:  # a broken answer: the connection failed
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from None
        finally:
            conn.close()

    async def _full_client(self) -> KubeClient:
        if self._full is None:
            full = await self._make_full()
            if self._full is None:
                self._full = full
                self._full.request_timeout = self.request_timeout
            else:
                await full.close()
        return self._full

    async def _stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        """Watches and logs (``watch``, ``stream_lines``) go through the full client."""
        full = await self._full_client()
        async with contextlib.aclosing(full._stream(*args, **kwargs)) as lines:
            async for line in lines:
                yield line


