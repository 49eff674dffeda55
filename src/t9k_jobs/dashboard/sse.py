"""Server-sent event streams that end when their page goes, on time, whatever the source does.

:func:`event_stream` writes ``(event, data)`` pairs as ``text/event-stream`` and ends as soon as
any of these happens: the page goes away (the ASGI server says ``http.disconnect``, which it does
when the connection closes; a comment written every :data:`KEEPALIVE` seconds of silence makes a
half-open connection fail within that time at the latest), the dashboard stops (Ctrl-C: the
``stopping`` event), or the source ends. On the way out the source is closed, so a followed log's
file or API stream is released at once (issue 30: closed pages left their followed logs behind,
because quiet logs wrote nothing and empty batches reset the keepalive timer).

:func:`batched` reads a source of lines in a task of the event loop (no thread) and hands them on
in batches, reading at most :data:`READ_AHEAD` lines ahead of a slow page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

#: Seconds of silence after which a stream writes a comment (a gone reader is then noticed).
KEEPALIVE = 15.0
#: Lines a source may be read ahead of the page that shows them.
READ_AHEAD = 5000
#: The most lines one batch carries.
BATCH = 2000


async def _disconnected(request: Request) -> None:
    """Returns when the server says the client is gone."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def encode(event: str, data: Any) -> bytes:
    """One event as the stream carries it: ``event: NAME`` and ``data: JSON``."""
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


def event_stream(
    request: Request,
    events: AsyncIterator[tuple[str, Any]],
    stopping: asyncio.Event,
    keepalive: float = KEEPALIVE,
    on_close: Callable[[], None] | None = None,
) -> StreamingResponse:
    """A ``text/event-stream`` response of ``events`` (``(event, data)``, data JSON-ready; a
    pair whose data is ``bytes`` is sent as is, already encoded by :func:`encode`), ending as the
    module docstring says. ``on_close`` runs once it has ended, however."""

    async def body() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        gone = asyncio.ensure_future(_disconnected(request))
        stop = asyncio.ensure_future(stopping.wait())
        source = events.__aiter__()
        pending: asyncio.Future[Any] | None = None
        written = loop.time()
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(source.__anext__())
                left = max(0.0, written + keepalive - loop.time())
                done, _ = await asyncio.wait({pending, gone, stop}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if gone in done or stop in done:
                    return
                if pending in done:
                    try:
                        event, data = pending.result()
                    except StopAsyncIteration:
                        return
                    finally:
                        pending = None
                    yield data if isinstance(data, bytes) else encode(event, data)
                    written = loop.time()
                elif loop.time() - written >= keepalive:
                    yield b": keepalive\n\n"
                    written = loop.time()
        finally:
            for task in (pending, gone, stop):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*(t for t in (pending, gone, stop) if t is not None), return_exceptions=True)
            close = getattr(source, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
            if on_close is not None:
                on_close()

    return StreamingResponse(
        body(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )


async def batched(lines: AsyncIterator[str], window: float = 0.1) -> AsyncIterator[list[str]]:
    """The lines of ``lines`` in batches (what came within ``window`` seconds of the first, at most
    :data:`BATCH`; no wait while a full batch is there already, as when a log is read from its
    start), read by a task of the event loop at most :data:`READ_AHEAD` lines ahead. When
    the consumer stops (it closes this generator), the task is cancelled and ``lines`` closed."""
    queue: asyncio.Queue[Any] = asyncio.Queue(READ_AHEAD)
    done = object()

    async def read() -> None:
        try:
            async for line in lines:
                await queue.put(line)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - said once in the log, as the page shows it
            await queue.put(f"(the log stopped: {exc})")
        finally:
            close = getattr(lines, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        await queue.put(done)

    reader = asyncio.get_running_loop().create_task(read())
    try:
        finished = False
        while not finished:
            first = await queue.get()
            if first is done:
                return
            batch = [first]
            if queue.empty():  # caught up: gather what comes within the window
                await asyncio.sleep(window)
            while len(batch) < BATCH and not queue.empty():
                item = queue.get_nowait()
                if item is done:
                    finished = True
                    break
                batch.append(item)
            yield batch
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def changes(look: Callable[[], Any], wait: Callable[[], Any]) -> AsyncIterator[Any]:
    """``await look()`` now, then again after each ``await wait()``, yielding only what differs
    from the last one yielded (compared as JSON)."""
    last = None
    while True:
        value = await look()
        text = json.dumps(value, sort_keys=True, default=str)
        if text != last:
            last = text
            yield value
        await wait()


__all__ = ["KEEPALIVE", "READ_AHEAD", "batched", "changes", "encode", "event_stream"]
