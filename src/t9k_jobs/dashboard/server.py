"""``t9k-jobs dashboard``: where it binds, and serving the app with uvicorn.

It binds to ``127.0.0.1`` by default. A non-loopback address is taken only from ``--address``
spelled out (``--port 0.0.0.0:8080`` is refused), and then a warning says that the dashboard has
no login of its own. The socket is bound before the URL is printed, so the URL printed is the
one that answers (``--port 0`` picks a free port).
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import JobsError, UsageError

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 8700


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


def allowed_hosts(bind: Bind) -> list[str]:
    """The ``Host`` headers accepted: loopback names, plus any when bound beyond loopback."""
    if not bind.loopback:
        return ["*"]
    names = {"127.0.0.1", "localhost", "::1", "[::1]", bind.host, f"[{bind.host}]"}
    return sorted(names)


def serve(
    new_client: Callable[[], object],
    port: str,
    address: str | None,
    allow_actions: bool,
    all_namespaces: bool = False,
    echo: Callable[[str], None] = print,
    warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    tensorboard_url: str | None = None,
) -> int:
    """Check the options, make the client (its errors go up: one line, their exit code), bind,
    print the URL, serve until interrupted. ``tensorboard_url``: where a job's TensorBoard link
    points (``{namespace}``, ``{name}``). The exit status; UsageError (exit 2) for bad options."""
    import uvicorn

    from .app import create_app
    from .source import JobSource, check_tensorboard_url

    bind = parse_bind(port, address)
    if tensorboard_url is not None:
        try:
            check_tensorboard_url(tensorboard_url)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    source = JobSource(
        new_client, all_namespaces=all_namespaces, allow_actions=allow_actions, tensorboard_url=tensorboard_url,  # type: ignore[arg-type]
    )
    try:
        sock = open_socket(bind)
    except JobsError:
        source.close()
        raise
    url = url_of(sock, bind)
    if not bind.loopback:
        warn(
            f"warning: the dashboard listens on {bind.host}, beyond this machine, with no login of its own"
            + ("; anyone who reaches it can pause, resume, scale and delete jobs" if allow_actions else "")
        )
    mode = "actions allowed (pause, resume, scale, delete)" if allow_actions else "read-only"
    echo(f"t9k-jobs dashboard: {url} ({source.describe_target()}; {mode}; Ctrl-C stops it)")
    app = create_app(source, allowed_hosts(bind))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises the signal again once it has shut down: Ctrl-C is the way to stop
        pass
    finally:
        sock.close()
    return 0


__all__ = ["Bind", "DEFAULT_ADDRESS", "DEFAULT_PORT", "allowed_hosts", "is_loopback", "open_socket", "parse_bind", "serve", "url_of"]
