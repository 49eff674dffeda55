"""``t9k-jobs dashboard``: where it binds, and serving the app with uvicorn.

It binds to ``127.0.0.1`` by default. A non-loopback address is taken only from ``--address``
spelled out (``--port 0.0.0.0:8080`` is refused), and then a warning says that anyone with the URL
reaches it unencrypted. The socket is bound before the URL is printed, so the URL printed is the
one that answers (``--port 0`` picks a free port); it carries the token (:mod:`.auth`). Ctrl-C and
SIGTERM stop it within a few seconds whatever its pages and the API server do.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import JobsError, UsageError
from ..threads import thread_pool
from .app import create_app
from .auth import check_token, new_token
from .source import JobSource, check_tensorboard_url
from .web import MIN_INTERVAL

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 8700
#: The dashboard's pool for blocking reads (asyncio's default executor): its name and its most
#: threads (asyncio's own default on a machine of 4 cores).
READ_POOL = "t9k-read"
READ_THREADS = 8


@dataclass(frozen=True)
class Bind:
    """Where to listen: ``host`` (an address or a name), ``port`` (0: any free one),
    ``loopback`` (whether every address it names is a loopback one)."""

    host: str
    port: int
    loopback: bool


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback one (``127.0.0.0/8``, ``::1``); a name
    is resolved (``localhost``); a name that does not resolve is not loopback."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addresses)


def parse_bind(port: str, address: str | None) -> Bind:
    """The bind of ``--port`` (``N``, or ``HOST:N`` with a loopback HOST) and ``--address``.
    Raises :class:`UsageError` with one line: a port that is not 0..65535, a non-loopback host in
    ``--port``, a host in both, an empty or unknown address."""
    text = port.strip()
    host = None
    if ":" in text and not text.startswith("["):
        host, _, text = text.rpartition(":")
    elif text.startswith("[") and "]:" in text:
        host, _, text = text.rpartition(":")
    try:
        number = int(text)
    except ValueError:
        raise UsageError(f"--port: {port!r} is not a port number (0 to 65535, 0: any free port)") from None
    if not 0 <= number <= 65535:
        raise UsageError(f"--port: {number} is outside 0 to 65535 (0: any free port)")
    if host is not None and address is not None:
        raise UsageError("--port HOST:PORT and --address cannot be combined: give the host with --address only")
    if host is not None:
        host = host.strip("[]")
        if not host or not is_loopback(host):
            raise UsageError(
                f"--port {port}: {host or 'an empty host'} is not a loopback address; the dashboard binds to "
                f"another address only when it is spelled out with --address"
            )
        return Bind(host, number, True)
    if address is None:
        return Bind(DEFAULT_ADDRESS, number, True)
    chosen = address.strip().strip("[]")
    if not chosen:
        raise UsageError("--address: empty; use an address such as 127.0.0.1, ::1 or 0.0.0.0")
    try:
        ipaddress.ip_address(chosen)
    except ValueError:
        try:
            socket.getaddrinfo(chosen, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise UsageError(f"--address: {address!r} is neither an IP address nor a name this machine resolves") from None
    return Bind(chosen, number, is_loopback(chosen))


def open_socket(bind: Bind) -> socket.socket:
    """A listening socket on ``bind``. Raises :class:`JobsError` (exit 1) with one line when the
    port is taken or the address is not this machine's."""
    try:
        infos = socket.getaddrinfo(bind.host, bind.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise JobsError(f"cannot bind {bind.host}:{bind.port}: {exc.strerror or exc}") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise JobsError(f"cannot listen on {bind.host}:{bind.port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, bind: Bind) -> str:
    """The URL to open: the socket's own address (``0.0.0.0`` and ``::`` shown as this
    machine's loopback), its port."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def allowed_hosts(bind: Bind, extra: tuple[str, ...] = ()) -> list[str]:
    """The ``Host`` names the dashboard answers for (a page of another site reaching it through DNS
    rebinding names its own): loopback names and the address bound; beyond loopback, also this
    machine's host name, its fully qualified name and the addresses they resolve to; and
    ``extra`` (``--allow-host``)."""
    names = {"127.0.0.1", "localhost", "::1", "[::1]", bind.host, f"[{bind.host}]", *extra}
    if not bind.loopback:
        for name in {socket.gethostname(), socket.getfqdn()}:
            if not name:
                continue
            names.add(name)
            try:
                names.update(info[4][0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM))
            except (OSError, UnicodeError):
                pass
    names.discard("0.0.0.0")
    names.discard("::")
    names.discard("[::]")
    return sorted(names)


def check_host_name(name: str) -> str:
    """``--allow-host``: a host name or an address, as a ``Host`` header carries it (no port, no
    wildcard). Raises :class:`UsageError`."""
    text = name.strip().lower()
    if not text or len(text) > 253 or not all(c.isalnum() or c in "-.:[]_" for c in text) or text in ("*", "0.0.0.0", "::"):
        raise UsageError(f"--allow-host: {name!r} is not a host name or address (no port, no wildcard)")
    return text


def make_server(config: Any, stopping: asyncio.Event, loop: asyncio.AbstractEventLoop) -> Any:
    """uvicorn's server, stopped by Ctrl-C or SIGTERM at once: the signal also sets ``stopping``,
    which ends every event stream (an open page's connection would otherwise keep the server
    waiting for its graceful-shutdown limit), and it is not raised again once the server stopped."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            loop.call_soon_threadsafe(stopping.set)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

    return Server(config)


def serve(
    make_client: Callable[[], Awaitable[Any]],
    port: str,
    address: str | None,
    allow_actions: bool,
    all_namespaces: bool = False,
    echo: Callable[[str], None] = print,
    warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    tensorboard_url: str | None = None,
    token: str | None = None,
    token_option: bool = False,
    allow_hosts: tuple[str, ...] = (),
    poll: float | None = None,
) -> int:
    """Check the options, make the client (``make_client()``, an async
    :class:`~t9k_jobs.AsyncClient` factory; its errors go up: one line, their exit code), bind,
    print the URL with the token, serve until Ctrl-C or SIGTERM (within a few seconds, exit 0).

    ``token``: the token (default: a new random one; ``token_option``: it came from ``--token``,
    which other users can read in the process list: a note says so); ``allow_hosts``: more
    ``Host`` names to answer for; ``tensorboard_url``: where a job's TensorBoard link points
    (``{namespace}``, ``{name}``). Raises :class:`UsageError` (exit 2) for bad options."""
    bind = parse_bind(port, address)
    extra = tuple(check_host_name(h) for h in allow_hosts)
    if tensorboard_url is not None:
        try:
            check_tensorboard_url(tensorboard_url)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        token = check_token(token, "--token" if token_option else "T9K_JOBS_DASHBOARD_TOKEN") if token else new_token()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if token_option:
        warn("note: --token is visible to other users of this machine in the process list; "
             "T9K_JOBS_DASHBOARD_TOKEN is not")
    logging.getLogger("t9k_jobs.informer").setLevel(logging.ERROR)  # the page says what the informers meet
    try:
        asyncio.run(_main(make_client, bind, extra, allow_actions, all_namespaces, echo, warn, tensorboard_url, token, poll))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        pass
    return 0


async def _main(
    make_client: Callable[[], Awaitable[Any]],
    bind: Bind,
    extra: tuple[str, ...],
    allow_actions: bool,
    all_namespaces: bool,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
    tensorboard_url: str | None,
    token: str,
    poll: float | None,
) -> None:
    import uvicorn

    # The reads that block (files, to_thread) run in a bounded pool named for what it is: a
    # process that runs for days shows which of its threads are this pool's.
    asyncio.get_running_loop().set_default_executor(thread_pool(READ_POOL, READ_THREADS))
    client = await make_client()
    try:
        sock = open_socket(bind)
    except JobsError:
        await client.close()
        raise
    source = JobSource(client, all_namespaces=all_namespaces, allow_actions=allow_actions, tensorboard_url=tensorboard_url)
    url = url_of(sock, bind)
    if not bind.loopback:
        warn(
            f"warning: the dashboard listens on {bind.host}, beyond this machine: anyone who has its URL (with "
            "its token) can read every job it shows" + ("; and pause, resume, scale and delete them" if allow_actions else "")
            + "; the connection is not encrypted"
        )
    mode = "actions allowed (pause, resume, scale, delete)" if allow_actions else "read-only"
    echo(f"t9k-jobs dashboard: {url}?token={token} ({source.describe_target()}; {mode}; Ctrl-C stops it)")
    stopping = asyncio.Event()
    app = create_app(
        source, token, sock.getsockname()[1], allowed_hosts(bind, extra), poll if poll is not None else MIN_INTERVAL,
        stopping,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="on")
    server = make_server(config, stopping, asyncio.get_running_loop())
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()


__all__ = [
    "Bind", "DEFAULT_ADDRESS", "DEFAULT_PORT", "READ_POOL", "READ_THREADS", "allowed_hosts", "check_host_name",
    "is_loopback", "open_socket", "parse_bind", "serve", "url_of",
]
