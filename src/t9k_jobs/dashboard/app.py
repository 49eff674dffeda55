"""The dashboard's ASGI app (Starlette): two server-rendered pages, a small JSON API, and
server-sent event streams for what changes (the job list, a job, its logs, its metrics).

Pages are Jinja2 templates with autoescape on; the data a page starts with goes in as JSON through
``tojson`` (which escapes ``<``, ``>`` and ``&``), and the page's own script writes every string with
``textContent``, so a job name or a log line with ``<script>`` shows as text. Static files (the
page scripts, the style sheet, uPlot vendored from npm) are served from the package itself: a
page fetches nothing from the internet.

Safe by default, outermost first: a request whose ``Host`` is not one the dashboard answers for is
refused (DNS rebinding); every answer carries :data:`SECURITY_HEADERS`; a request without the
token or its cookie gets 401 (:mod:`.auth`); the scope is a boundary (a job outside it is not
found); an action needs ``--allow-actions`` and more (:mod:`.routes.actions`). The routes are in
:mod:`.routes`, one module per group; a verb's error is mapped to its HTTP status once
(:func:`.web.on_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..errors import JobsError
from .auth import TokenAuth
from .routes import ROUTES
from .source import JobSource
from .web import MIN_INTERVAL, Board, on_error

HERE = Path(__file__).parent
#: The ``Host`` names accepted by default: loopback ones.
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def create_app(
    source: JobSource,
    token: str,
    port: int,
    allowed_hosts: list[str] | None = None,
    poll: float = MIN_INTERVAL,
    stopping: asyncio.Event | None = None,
) -> Starlette:
    """The app over ``source``. ``token``: what a request must hold (or its cookie, named after
    ``port``); ``allowed_hosts``: the ``Host`` names accepted (default: loopback names only);
    ``poll``: the least seconds between two snapshots of one stream; ``stopping``: set it to end
    every stream (Ctrl-C). The source is closed when the app shuts down."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    stop = stopping if stopping is not None else asyncio.Event()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            stop.set()
            await source.close()

    app = Starlette(
        routes=[*ROUTES, Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK_HOSTS),
            Middleware(SecurityHeaders),
            Middleware(TokenAuth, token=token, port=port),
        ],
        exception_handlers={JobsError: on_error},
        lifespan=lifespan,
    )
    app.state.board = Board(source, Jinja2Templates(env=env), stop, poll)
    return app


#: Sent with every answer: scripts only from the dashboard itself (a markup string that slipped
#: through would still not run), no framing, no sniffing of a downloaded log as HTML.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Pure ASGI middleware adding :data:`SECURITY_HEADERS` (streams pass through untouched)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)





__all__ = ["SECURITY_HEADERS", "SecurityHeaders", "create_app"]
