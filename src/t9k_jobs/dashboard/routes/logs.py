"""A job's logs and metric points: ``/api/job/KIND/NAME/logs/{follow,page,search,download}`` and
``/metrics/follow``, over the async client's log readers.

Every reader holds a bounded amount whatever the log's size and its longest line (lines come at
most 64 KiB long, a carriage return's last state: :mod:`t9k_jobs.loglines`): a followed log reads
at most :data:`~t9k_jobs.dashboard.sse.READ_AHEAD` lines ahead of its page, a page or a search
reads the log through once holding one page or :data:`MAX_MATCHES` matches, and a download hands
the file's bytes on a MiB at a time. Lines shown on a page are cut at :data:`MAX_LINE` characters
(the download has them whole).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ...errors import UsageError
from ..sse import batched, event_stream
from ..web import board, key_of, number

#: Lines a followed log starts with (the last ones written), and the most a log page holds.
FOLLOW_TAIL = 1000
PAGE_SIZE = 1000
MAX_PAGE_SIZE = 5000
#: Most matches one search returns, and the longest query.
MAX_MATCHES = 1000
MAX_QUERY = 200
#: Characters of one log line sent to a page (the download has whole lines).
MAX_LINE = 10_000


def shown(line: str) -> str:
    """``line`` as a page shows it: at most :data:`MAX_LINE` characters, and how many were cut."""
    return line if len(line) <= MAX_LINE else line[:MAX_LINE] + f" ... ({len(line) - MAX_LINE} more characters)"


def log_args(request: Request) -> dict[str, Any]:
    """The replica type, index and container a request asks for."""
    q = request.query_params
    index = q.get("index")
    return {
        "replica_type": q.get("type") or None,
        "index": number(index, "index", 0) if index not in (None, "") else None,
        "container": q.get("container") or None,
    }


async def _open(request: Request, follow: bool, tail: int | None) -> AsyncIterator[str]:
    key = key_of(request)
    client = board(request).source.client
    return await client.logs(key.kind, key.name, follow=follow, tail=tail, namespace=key.namespace, **log_args(request))


async def logs_follow(request: Request) -> Response:
    q = request.query_params
    tail = number(q.get("tail"), "tail", 0, FOLLOW_TAIL) if "tail" in q else FOLLOW_TAIL
    lines = await _open(request, True, tail)

    async def events() -> AsyncIterator[tuple[str, Any]]:
        async for batch in batched(lines):
            yield "lines", {"lines": [shown(line) for line in batch]}
        yield "end", {}

    return event_stream(request, events(), board(request).stopping)


async def read_page(lines: AsyncIterator[str], number: int, size: int) -> dict[str, Any]:
    """Page ``number`` (from 0; -1, or past the end: the last) of ``size`` lines, read through
    once: only that page and the last are held, whatever the log's size."""
    held: list[str] = []
    last: list[str] = []
    total = 0
    async with contextlib.aclosing(lines):  # type: ignore[type-var]
        async for line in lines:
            if total % size == 0:
                last = []
            last.append(shown(line))
            if number >= 0 and number * size <= total < (number + 1) * size:
                held.append(shown(line))
            total += 1
    pages = max(1, -(-total // size))
    if number < 0 or number >= pages:
        number, held = pages - 1, last
    return {"page": number, "pages": pages, "size": size, "total": total, "first": number * size + 1, "lines": held}


async def logs_page(request: Request) -> Response:
    q = request.query_params
    size = number(q.get("size"), "size", 1, MAX_PAGE_SIZE) if q.get("size") else PAGE_SIZE
    wanted = number(q.get("page"), "page", -1) if q.get("page") else -1
    return JSONResponse(await read_page(await _open(request, False, None), wanted, size))


async def logs_search(request: Request) -> Response:
    text = request.query_params.get("q", "")
    if not text or len(text) > MAX_QUERY:
        raise UsageError(f"q: a search needs 1 to {MAX_QUERY} characters")
    lines = await _open(request, False, None)
    needle = text.lower()
    found: list[dict[str, Any]] = []
    more = False
    count = 0
    async with contextlib.aclosing(lines):  # type: ignore[type-var]
        async for line in lines:
            count += 1
            if needle in line.lower():
                if len(found) >= MAX_MATCHES:
                    more = True
                    break
                found.append({"number": count, "line": shown(line)})
    return JSONResponse({"query": text, "matches": found, "more": more, "read": count})


async def logs_download(request: Request) -> Response:
    key = key_of(request)
    args = log_args(request)
    client = board(request).source.client
    body = await client.open_raw_log(key.kind, key.name, namespace=key.namespace, **args)
    parts = [key.name] + [str(p) for p in (args["replica_type"], args["index"], args["container"]) if p is not None]
    filename = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts))[:200] + ".log"
    return StreamingResponse(
        body, media_type="text/plain; charset=utf-8", headers={"Content-Disposition": f'attachment; filename="{filename}"'}
    )


async def metrics_follow(request: Request) -> Response:
    """The metric points of the merged log, from its start, as it grows (one reader per job)."""
    b = board(request)
    return event_stream(request, b.source.metrics.follow(key_of(request)), b.stopping)


API = "/api/job/{kind}/{name:path}"
ROUTES = [
    Route(API + "/logs/follow", logs_follow),
    Route(API + "/logs/page", logs_page),
    Route(API + "/logs/search", logs_search),
    Route(API + "/logs/download", logs_download),
    Route(API + "/metrics/follow", metrics_follow),
]
