"""The two pages: the job list (``/``) and a job (``/job/KIND/NAME``), server-rendered with the
data they start with; their scripts then follow the event streams of :mod:`.jobs`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...errors import JobsError
from ..web import board, key_of, page


async def jobs_page(request: Request) -> Response:
    try:
        data = await board(request).source.jobs()
        rows, problem = data["jobs"], data["problem"]
    except JobsError as exc:  # the page still comes, saying why the list is empty
        rows, problem = [], str(exc)
    return page(request, "jobs.html", jobs=rows, problem=problem)


async def job_page(request: Request) -> Response:
    key = key_of(request)
    data = await board(request).source.job(key)
    return page(request, "job.html", job=data, key={"kind": key.kind, "name": key.name, "namespace": key.namespace})


async def health(request: Request) -> Response:
    """Open to anyone (no token): says only that the dashboard answers."""
    return JSONResponse({"ok": True})


ROUTES = [Route("/", jobs_page), Route("/job/{kind}/{name:path}", job_page), Route("/healthz", health)]
