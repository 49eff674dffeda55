"""The job list and a job, as JSON (``/api/jobs``, ``/api/job/KIND/NAME``) and as event streams
(``/api/jobs/events``, ``/api/job/KIND/NAME/events``): a stream sends a snapshot when it changed,
at most once per ``poll`` seconds, and waits on the client's changes in between (no polling of the
target). Snapshots are computed once per change and shared by every stream
(:meth:`~t9k_jobs.dashboard.source.JobSource.jobs`, :meth:`~t9k_jobs.dashboard.source.JobSource.job`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...errors import JobsError, NotFound
from ..sse import event_stream
from ..web import LOOK_AGAIN, Board, board, key_of


async def jobs_json(request: Request) -> Response:
    return JSONResponse(await board(request).source.jobs())


async def job_json(request: Request) -> Response:
    b = board(request)
    return JSONResponse(await b.source.job(key_of(request)))


async def snapshots(
    b: Board, event: str, look: Callable[[], Awaitable[Any]], gone: str = "problem"
) -> AsyncIterator[tuple[str, Any]]:
    """``(event, look())`` whenever it is a new snapshot (``look`` returns the same object while
    nothing changed), at most once per ``b.poll`` seconds; waits on the source's changes between
    looks. NotFound is the event ``gone``, another failure of one look the event ``problem`` (one
    bad look never ends the stream)."""
    loop = asyncio.get_running_loop()
    last: Any = None
    sent_at = 0.0
    version = await b.source.version()
    while True:
        try:
            value = await look()
            if value is not last:
                wait = sent_at + b.poll - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue  # look again: a newer snapshot may have come meanwhile
                last = value
                yield event, b.encoded(event, value)
                sent_at = loop.time()
        except NotFound as exc:
            last = None
            yield gone, {"problem": str(exc)}
        except JobsError as exc:
            last = None
            yield "problem", {"problem": str(exc)}
        except Exception as exc:  # noqa: BLE001 - one bad look never ends the stream
            last = None
            yield "problem", {"problem": f"{type(exc).__name__}: {exc}"}
        version = await b.source.wait(version, LOOK_AGAIN)


async def jobs_events(request: Request) -> Response:
    b = board(request)
    return event_stream(request, snapshots(b, "jobs", b.source.jobs), b.stopping)


async def job_events(request: Request) -> Response:
    b = board(request)
    key = key_of(request)
    return event_stream(request, snapshots(b, "job", lambda: b.source.job(key), gone="gone"), b.stopping)


API = "/api/job/{kind}/{name:path}"
ROUTES = [
    Route("/api/jobs", jobs_json),
    Route("/api/jobs/events", jobs_events),
    Route(API + "/events", job_events),
    Route(API, job_json),
]
