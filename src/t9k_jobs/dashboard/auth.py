"""Who may use the dashboard: whoever holds its token (Jupyter's way).

Listening on loopback does not make a dashboard one user's: every account of the machine reaches
127.0.0.1 (issue 30: ``nobody`` read root's job list and logs and deleted its job through a
root-owned dashboard). So the dashboard has a token, a random one (:func:`new_token`) unless
``--token`` or ``$T9K_JOBS_DASHBOARD_TOKEN`` gives it, and prints its URL with it
(``http://127.0.0.1:8700/?token=...``). The first visit of that URL trades the token for a cookie
(HttpOnly: no script reads it; SameSite=Strict: no other site's page sends it; its name carries the
port, so two dashboards on one machine keep theirs apart) and is sent on to the same page without
the token in its address. A request that holds neither the cookie nor the token (in an
``Authorization: Bearer TOKEN`` header, for scripts) gets 401 and nothing else; static files (the
page's scripts, style sheet and uPlot) are served to anyone, as they say nothing about any job.

The token is compared in constant time; the cookie holds an HMAC of it, not the token.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from typing import Any
from urllib.parse import parse_qsl, urlencode

#: The environment variable a token may come from (not visible to other users, unlike ``--token``
#: in the process list).
TOKEN_ENV = "T9K_JOBS_DASHBOARD_TOKEN"
#: What a given token may be: 16 to 256 characters an URL carries as they are.
TOKEN_FORM = re.compile(r"[A-Za-z0-9._~-]{16,256}")
#: Paths served without the token: they hold nothing of any job.
OPEN_PREFIXES = ("/static/",)
OPEN_PATHS = frozenset({"/healthz"})


def new_token() -> str:
    """A random token: 32 bytes from the system's CSPRNG, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def check_token(token: str, where: str) -> str:
    """``token`` when it has :data:`TOKEN_FORM`; ``ValueError`` naming ``where`` (``--token``)
    and what is accepted otherwise."""
    if not TOKEN_FORM.fullmatch(token):
        raise ValueError(
            f"{where}: a token has 16 to 256 characters, letters, digits and . _ ~ - only "
            f"(got {len(token)} character(s))"
        )
    return token


class TokenAuth:
    """Pure ASGI middleware: lets through only requests that hold the token or its cookie (see
    the module docstring). ``token``: the token; ``port``: the port bound (the cookie's name)."""

    def __init__(self, app: Any, token: str, port: int) -> None:
        self.app = app
        self.token = token.encode()
        self.cookie_name = f"t9k-dashboard-{port}"
        self.cookie_value = hmac.new(self.token, b"t9k-jobs dashboard cookie", hashlib.sha256).hexdigest()

    def _is_token(self, value: str) -> bool:
        return hmac.compare_digest(value.encode(), self.token)

    def _holds(self, headers: dict[bytes, bytes]) -> bool:
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() in ("bearer", "token") and value and self._is_token(value.strip()):
            return True
        for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie_name and hmac.compare_digest(value.encode(), self.cookie_value.encode()):
                return True
        return False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        if len(given) == 1 and scope.get("method") in ("GET", "HEAD") and self._is_token(given[0]):
            # Trade the token for the cookie, and drop it from the address (history, a shared screen).
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            cookie = f"{self.cookie_name}={self.cookie_value}; HttpOnly; SameSite=Strict; Path=/"
            raw_path = scope.get("raw_path") or path.encode()  # still percent-encoded, as sent
            location = b"/" + raw_path.lstrip(b"/") + (b"?" + rest.encode() if rest else b"")  # never //host
            await _answer(send, 303, b"", "text/plain", [(b"location", location), (b"set-cookie", cookie.encode())])
            return
        if not given and self._holds(headers):
            await self.app(scope, receive, send)
            return
        await _refuse(scope, send, headers)


async def _refuse(scope: Any, send: Any, headers: dict[bytes, bytes]) -> None:
    """401 and nothing of any job: a short page for a browser, JSON otherwise."""
    message = (
        "this dashboard needs its token: open the URL it printed when it started "
        "(http://HOST:PORT/?token=...), or send Authorization: Bearer TOKEN"
    )
    extra = [(b"www-authenticate", b'Bearer realm="t9k-jobs dashboard"')]
    if b"text/html" in headers.get(b"accept", b"") and scope.get("method") == "GET":
        body = (
            "<!doctype html><meta charset=utf-8><title>t9k-jobs dashboard</title>"
            f"<p>{message}</p>"
        ).encode()
        await _answer(send, 401, body, "text/html; charset=utf-8", extra)
    else:
        await _answer(send, 401, json.dumps({"error": message}).encode(), "application/json", extra)


async def _answer(send: Any, status: int, body: bytes, media: str, extra: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode()),
                        (b"cache-control", b"no-store"), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["TOKEN_ENV", "TokenAuth", "check_token", "new_token"]
