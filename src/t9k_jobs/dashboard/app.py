"""The dashboard's ASGI app (Starlette): two server-rendered pages, a small JSON API, and
server-sent event streams for what changes (the job list, a job, its logs, its metrics).

Pages are Jinja2 templates with autoescape on; the data a page starts with goes in as JSON through
``tojson`` (which escapes ``<``, ``>`` and ``&``), and the page's own script writes every string with
``textContent``, so a job name or a log line with ``<script>`` shows as text. Static files (the
page scripts, the style sheet, uPlot vendored from npm) are served from the package itself: a
page fetches nothing from the internet.

Safe by default: a request whose ``Host`` is not the address bound is refused (DNS rebinding),
and an action needs ``--allow-actions``, a POST with the ``X-T9k-Dashboard`` header (which a
cross-site form cannot send) and, when the browser says where it comes from, the same origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from .. import __version__
from ..errors import ClusterError, JobsError, NotFound, UsageError
from .metrics import Series, as_json
from .source import JobKey, JobSource

HERE = Path(__file__).parent
#: Seconds between two looks at the job list or a job for its event stream.
POLL = 1.0
#: Seconds of silence after which an event stream sends a comment (a gone reader is noticed).
KEEPALIVE = 15.0
#: Lines a followed log starts with (the last ones written), and the most a log page holds.
FOLLOW_TAIL = 1000
PAGE_SIZE = 1000
MAX_PAGE_SIZE = 5000
#: Most matches one search returns, and the longest query.
MAX_MATCHES = 1000
MAX_QUERY = 200
#: Characters of one log line sent to a page (the download has whole lines).
MAX_LINE = 10_000
#: Lines a log reader may have read ahead of a slow page before it waits.
READ_AHEAD = 5000
#: The header an action must carry.
ACTION_HEADER = "x-t9k-dashboard"
ACTIONS = ("pause", "resume", "scale", "delete")


def create_app(source: JobSource, allowed_hosts: list[str] | None = None, poll: float = POLL) -> Starlette:
    """The app over ``source``. ``allowed_hosts``: the ``Host`` headers accepted (``["*"]``: any;
    default: loopback names only); ``poll``: seconds between two looks for the event streams."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    templates = Jinja2Templates(env=env)

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.update(
            target=source.describe_target(),
            allow_actions=source.allow_actions,
            version=__version__,
        )
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def key_of(request: Request) -> JobKey:
        p = request.path_params
        return JobKey.parse(p["kind"], p["name"], request.query_params.get("namespace") or None)

    async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    # -- pages

    async def jobs_page(request: Request) -> Response:
        try:
            rows = await in_thread(source.jobs)
            problem = None
        except JobsError as exc:
            rows, problem = [], str(exc)
        return page(request, "jobs.html", jobs=rows, problem=problem, poll=poll)

    async def job_page(request: Request) -> Response:
        try:
            key = key_of(request)
            data = await in_thread(source.job, key)
        except JobsError as exc:
            return page(request, "error.html", _status(exc), problem=str(exc))
        return page(request, "job.html", job=data, key={"kind": key.kind, "name": key.name, "namespace": key.namespace})

    # -- JSON

    async def jobs_json(request: Request) -> Response:
        try:
            return JSONResponse({"jobs": await in_thread(source.jobs)})
        except JobsError as exc:
            return _error(exc)

    async def job_json(request: Request) -> Response:
        try:
            return JSONResponse(await in_thread(source.job, key_of(request)))
        except JobsError as exc:
            return _error(exc)

    # -- event streams of the list and of a job

    async def polled(event: str, look: Callable[[], Any], gone: str = "problem") -> AsyncIterator[tuple[str, Any]]:
        """``(event, look())`` every ``poll`` seconds, for ever: NotFound (the job went) is the event
        ``gone``, any other failure of one look a ``problem`` (one bad look never ends the stream)."""
        while True:
            try:
                yield event, await in_thread(look)
            except NotFound as exc:
                yield gone, {"problem": str(exc)}
            except JobsError as exc:
                yield "problem", {"problem": str(exc)}
            except Exception as exc:  # noqa: BLE001 - one bad look never ends the stream
                yield "problem", {"problem": f"{type(exc).__name__}: {exc}"}
            await asyncio.sleep(poll)

    async def jobs_events(request: Request) -> Response:
        return _sse(request, _changes(polled("jobs", lambda: {"jobs": source.jobs()})))

    async def job_events(request: Request) -> Response:
        try:
            key = key_of(request)
        except JobsError as exc:
            return _error(exc)
        return _sse(request, _changes(polled("job", lambda: source.job(key), gone="gone")))

    # -- logs

    def log_args(request: Request) -> tuple[str | None, int | None, str | None]:
        q = request.query_params
        replica_type = q.get("type") or None
        container = q.get("container") or None
        index = _int(q.get("index"), "index", 0) if q.get("index") not in (None, "") else None
        return replica_type, index, container

    async def open_lines(request: Request, follow: bool, tail: int | None) -> Iterator[str]:
        key = key_of(request)
        replica_type, index, container = log_args(request)
        return await in_thread(source.log_lines, key, replica_type, index, container, follow, tail)

    async def logs_follow(request: Request) -> Response:
        try:
            tail = _int(request.query_params.get("tail"), "tail", 0, FOLLOW_TAIL) if "tail" in request.query_params else FOLLOW_TAIL
            lines = await open_lines(request, True, tail)
        except JobsError as exc:
            return _error(exc)

        async def batches() -> AsyncIterator[tuple[str, Any]]:
            async for batch in _pumped(lines):
                yield "lines", {"lines": [_cut(line) for line in batch]}
            yield "end", {}

        return _sse(request, batches())

    async def logs_page(request: Request) -> Response:
        q = request.query_params
        try:
            size = _int(q.get("size"), "size", 1, MAX_PAGE_SIZE) if q.get("size") else PAGE_SIZE
            number = _int(q.get("page"), "page", -1) if q.get("page") else -1
            lines = await open_lines(request, False, None)
        except JobsError as exc:
            return _error(exc)
        return JSONResponse(await in_thread(_page, lines, number, size))

    async def logs_search(request: Request) -> Response:
        text = request.query_params.get("q", "")
        if not text or len(text) > MAX_QUERY:
            return _error(UsageError(f"q: a search needs 1 to {MAX_QUERY} characters"))
        try:
            lines = await open_lines(request, False, None)
        except JobsError as exc:
            return _error(exc)
        return JSONResponse(await in_thread(_search, lines, text))

    async def logs_download(request: Request) -> Response:
        try:
            key = key_of(request)
            lines = await open_lines(request, False, None)
        except JobsError as exc:
            return _error(exc)
        replica_type, index, container = log_args(request)
        parts = [key.name] + [str(p) for p in (replica_type, index, container) if p is not None]
        filename = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts))[:200] + ".log"
        body = (line.encode("utf-8", "replace") + b"\n" for line in lines)
        return StreamingResponse(
            body,
            media_type="text/plain; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    async def metrics_follow(request: Request) -> Response:
        """The metric points of the merged log, from its start, as it grows."""
        try:
            lines = await open_lines(request, True, None)
        except JobsError as exc:
            return _error(exc)
        series = Series()

        async def batches() -> AsyncIterator[tuple[str, Any]]:
            async for batch in _pumped(lines):
                points = [p for line in batch for p in series.add_line(line)]
                if points:
                    yield "points", {"points": as_json(points), "dropped": series.dropped}
            yield "end", {"dropped": series.dropped}

        return _sse(request, batches())

    # -- actions

    async def action(request: Request) -> Response:
        verb = request.path_params["verb"]
        if not source.allow_actions:
            return JSONResponse({"error": "actions are off: start the dashboard with --allow-actions"}, 403)
        if request.headers.get(ACTION_HEADER) != "1":
            return JSONResponse({"error": f"an action needs the {ACTION_HEADER} header"}, 403)
        origin = request.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host"):
            return JSONResponse({"error": "an action from another origin is refused"}, 403)
        if verb not in ACTIONS:
            return _error(UsageError(f"unknown action {verb!r}: use pause, resume, scale or delete"))
        try:
            key = key_of(request)
            replicas = None
            if verb == "scale":
                body = await request.json() if await request.body() else {}
                replicas = _int(str(body.get("replicas", "")) if isinstance(body, dict) else "", "replicas", 0)
            message = await in_thread(source.act, key, verb, replicas)
        except JobsError as exc:
            return _error(exc)
        except ValueError:
            return _error(UsageError("the body is not JSON"))
        return JSONResponse({"message": message})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "target": source.target})

    # {name:path}: a name read from a run dir may hold a '/' (a valid one never does); the routes
    # with a suffix come before the one without, which would match them too.
    job_path = "/job/{kind}/{name:path}"
    api_path = "/api/job/{kind}/{name:path}"
    routes = [
        Route("/", jobs_page),
        Route(job_path, job_page),
        Route("/api/jobs", jobs_json),
        Route("/api/jobs/events", jobs_events),
        Route(api_path + "/events", job_events),
        Route(api_path + "/logs/follow", logs_follow),
        Route(api_path + "/logs/page", logs_page),
        Route(api_path + "/logs/search", logs_search),
        Route(api_path + "/logs/download", logs_download),
        Route(api_path + "/metrics/follow", metrics_follow),
        Route(api_path + "/actions/{verb}", action, methods=["POST"]),
        Route(api_path, job_json),
        Route("/healthz", health),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    hosts = allowed_hosts if allowed_hosts is not None else ["127.0.0.1", "localhost", "::1", "[::1]"]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts), Middleware(SecurityHeaders)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await in_thread(source.close)

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


# ----------------------------------------------------------------------------- helpers

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



def _int(text: str | None, name: str, low: int | None = None, high: int | None = None) -> int:
    """``text`` as an int within ``[low, high]``; UsageError naming ``name`` otherwise."""
    try:
        value = int(text or "")
    except ValueError:
        raise UsageError(f"{name}: {str(text)[:40]!r} is not a whole number") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise UsageError(f"{name}: {value} is outside [{low}, {high if high is not None else ''}]")
    return value


def _status(exc: JobsError) -> int:
    """The HTTP status of a verb's error: 404 not found, 400 a bad request, 502 the cluster did not
    answer as it should, 409 anything else (a finished job cannot be paused...)."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, UsageError):
        return 400
    return 502 if isinstance(exc, ClusterError) else 409


def _error(exc: JobsError) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, _status(exc))


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[:MAX_LINE] + f" ... ({len(line) - MAX_LINE} more characters)"


def _page(lines: Iterator[str], number: int, size: int) -> dict[str, Any]:
    """Page ``number`` (from 0; -1: the last) of ``size`` lines, read through once: only that page
    is held, whatever the log's size."""
    held: list[str] = []
    total = 0
    try:
        for line in lines:
            if number < 0:
                if total % size == 0:
                    held = []
                held.append(_cut(line))
            elif number * size <= total < (number + 1) * size:
                held.append(_cut(line))
            total += 1
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    pages = max(1, -(-total // size))
    if number < 0:
        number = pages - 1
    return {"page": number, "pages": pages, "size": size, "total": total, "first": number * size + 1, "lines": held}


def _search(lines: Iterator[str], text: str) -> dict[str, Any]:
    """Lines holding ``text`` (any case), with their numbers (from 1): at most :data:`MAX_MATCHES`."""
    needle = text.lower()
    found: list[dict[str, Any]] = []
    more = False
    count = 0
    try:
        for count, line in enumerate(lines, 1):
            if needle in line.lower():
                if len(found) >= MAX_MATCHES:
                    more = True
                    break
                found.append({"number": count, "line": _cut(line)})
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return {"query": text, "matches": found, "more": more, "read": count}


async def _pumped(lines: Iterator[str], window: float = 0.1) -> AsyncIterator[list[str]]:
    """The lines of a blocking iterator, read in a thread of its own and handed to the event loop,
    in batches (what came within ``window`` seconds); ``[]`` after a second without any. The reader
    waits when :data:`READ_AHEAD` lines are not taken yet; when the consumer goes away, it is
    interrupted (:meth:`~t9k_jobs.dashboard.source.Lines.interrupt`), stops at its next line at the
    latest and closes the iterator in its own thread. No thread of the event loop's pool waits."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()
    room = threading.Semaphore(READ_AHEAD)
    stop = threading.Event()
    done = object()

    def hand(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(items.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody reads
            stop.set()

    def read() -> None:
        try:
            for line in lines:
                while not room.acquire(timeout=0.5):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                hand(line)
        except Exception as exc:  # noqa: BLE001 - a source gone while following: said once, in the log
            if not stop.is_set():
                hand(f"(the log stopped: {exc})")
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
            hand(done)

    threading.Thread(target=read, name="t9k-dashboard-log", daemon=True).start()
    try:
        finished = False
        while not finished:
            try:
                first = await asyncio.wait_for(items.get(), 1.0)
            except asyncio.TimeoutError:
                yield []
                continue
            got = [first]
            if first is not done:
                await asyncio.sleep(window)
            while len(got) < 2000 and not items.empty():
                got.append(items.get_nowait())
            batch: list[str] = []
            for item in got:
                if item is done:
                    finished = True
                    break
                room.release()
                batch.append(item)
            if batch:
                yield batch
    finally:
        stop.set()
        interrupt = getattr(lines, "interrupt", None)
        if interrupt is not None:
            interrupt()


async def _changes(snapshots: AsyncIterator[tuple[str, Any]]) -> AsyncIterator[tuple[str, Any]]:
    """The snapshots that differ from the one before."""
    last = None
    async for event, data in snapshots:
        text = json.dumps(data, sort_keys=True, default=str)
        if text != last:
            last = text
            yield event, data


def _sse(request: Request, events: AsyncIterator[tuple[str, Any]]) -> StreamingResponse:
    """A ``text/event-stream`` of ``(event, data)`` pairs, data as JSON; a comment after
    :data:`KEEPALIVE` seconds of silence; it ends when the reader goes away."""

    async def body() -> AsyncIterator[bytes]:
        iterator = events.__aiter__()
        pending: asyncio.Task[Any] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(iterator.__anext__())
                done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE)
                if not done:
                    yield b": keepalive\n\n"
                    continue
                try:
                    event, data = pending.result()
                except StopAsyncIteration:
                    return
                finally:
                    pending = None
                if event == "lines" and not data.get("lines"):
                    continue
                text = json.dumps(data, default=str)
                yield f"event: {event}\ndata: {text}\n\n".encode()
        finally:
            if pending is not None:
                pending.cancel()
            close = getattr(iterator, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # noqa: BLE001 - the reader is gone
                    pass

    return StreamingResponse(
        body(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )


__all__ = ["create_app"]
