"""What every route of the dashboard shares: the app's state (:class:`Board`: the source, the page
templates, the stopping event), reading a request's job and numbers, and the error mapping.

A verb's error (:class:`~t9k_jobs.errors.JobsError`) raised by any route is mapped once, by
:func:`on_error`, to its HTTP status (:func:`~t9k_jobs.dashboard.source.http_status`): JSON
``{"error": line}`` for the API, the error page for a page.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.templating import Jinja2Templates

from .. import __version__
from ..errors import JobsError, UsageError
from .source import JobKey, JobSource, http_status
from .sse import encode

#: Seconds between two looks for a stream when nothing says a change came (the informers' and
#: inotify's problems, which change without a new version).
LOOK_AGAIN = 5.0
#: The least seconds between two snapshots one stream sends (a busy cluster changes often).
MIN_INTERVAL = 1.0


@dataclass
class Board:
    """The dashboard's state, on ``app.state.board``: the ``source`` of jobs, the ``templates``,
    ``stopping`` (set on Ctrl-C: every stream ends), and ``poll`` (the least seconds between two
    snapshots a stream sends)."""

    source: JobSource
    templates: Jinja2Templates
    stopping: asyncio.Event
    poll: float = MIN_INTERVAL
    _encoded: OrderedDict[tuple[str, int], tuple[Any, bytes]] = field(default_factory=OrderedDict, repr=False)

    def encoded(self, event: str, value: Any) -> bytes:
        """``value`` as the event ``event`` of a stream, encoded once for every stream sending it
        (the source hands the same object to all while nothing changed)."""
        key = (event, id(value))
        hit = self._encoded.get(key)
        if hit is not None and hit[0] is value:
            self._encoded.move_to_end(key)
            return hit[1]
        data = encode(event, value)
        self._encoded[key] = (value, data)
        while len(self._encoded) > 64:
            self._encoded.popitem(last=False)
        return data


def board(request: Request) -> Board:
    return request.app.state.board  # type: ignore[no-any-return]


def key_of(request: Request) -> JobKey:
    """The job a request names (path ``kind``, ``name``; query ``namespace``), in the dashboard's
    scope: NotFound outside it."""
    p = request.path_params
    return board(request).source.key(p["kind"], p["name"], request.query_params.get("namespace") or None)


def number(text: str | None, name: str, low: int | None = None, high: int | None = None) -> int:
    """``text`` as an int within ``[low, high]``; UsageError naming ``name`` otherwise."""
    try:
        value = int(text or "")
    except ValueError:
        raise UsageError(f"{name}: {str(text)[:40]!r} is not a whole number") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise UsageError(f"{name}: {value} is outside [{low}, {high if high is not None else ''}]")
    return value


def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page from its template, with what every page shows (target, mode, version)."""
    b = board(request)
    context.update(target=b.source.describe_target(), allow_actions=b.source.allow_actions, version=__version__)
    return b.templates.TemplateResponse(request, name, context, status_code=status_code)


async def on_error(request: Request, exc: Exception) -> Response:
    """The one mapping of a verb's error: its status, its one line."""
    assert isinstance(exc, JobsError)
    status = http_status(exc)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": str(exc)}, status)
    return page(request, "error.html", status, problem=str(exc))


__all__ = ["Board", "LOOK_AGAIN", "board", "key_of", "number", "on_error", "page"]
