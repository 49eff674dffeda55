"""Pause, resume, scale and delete: ``POST /api/job/KIND/NAME/actions/VERB`` starts the action as
a task of its own and answers with its outcome when it came within :data:`ANSWER_WITHIN` seconds
(200, or the error's status), else 202 with the action's id, whose outcome
``GET /api/actions/ID`` tells (the page asks once a second). Nothing waits on an action but the
page that asked for it (issue 30: a delete of a job that ignores SIGTERM froze every page for 38 s).

An action needs ``--allow-actions``, the token's cookie (as every request), the ``X-T9k-Dashboard``
header (a form of another site cannot send it) and, when the browser says where it comes from,
this origin.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...errors import UsageError
from ..web import board, key_of, number

#: The header an action must carry.
ACTION_HEADER = "x-t9k-dashboard"
#: Seconds a POST waits for its action before answering 202.
ANSWER_WITHIN = 1.5


def _refused(message: str) -> Response:
    return JSONResponse({"error": message}, 403)


async def act(request: Request) -> Response:
    b = board(request)
    verb = request.path_params["verb"]
    if not b.source.allow_actions:
        return _refused("actions are off: start the dashboard with --allow-actions")
    if request.headers.get(ACTION_HEADER) != "1":
        return _refused(f"an action needs the {ACTION_HEADER} header")
    origin = request.headers.get("origin")
    if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host"):
        return _refused("an action from another origin is refused")
    key = key_of(request)
    replicas = None
    if verb == "scale":
        try:
            body = await request.json() if await request.body() else {}
        except ValueError:
            raise UsageError("the body is not JSON") from None
        replicas = number(str(body.get("replicas", "")) if isinstance(body, dict) else "", "replicas", 0)
    action = b.source.actions.start(key, verb, replicas)
    try:
        await asyncio.wait_for(asyncio.shield(action.done.wait()), ANSWER_WITHIN)
    except asyncio.TimeoutError:
        return JSONResponse(action.as_json(), 202)
    return JSONResponse(action.as_json(), action.status if action.state == "failed" else 200)


async def action_state(request: Request) -> Response:
    action = board(request).source.actions.get(request.path_params["action"])
    return JSONResponse(action.as_json())


ROUTES = [
    Route("/api/job/{kind}/{name:path}/actions/{verb}", act, methods=["POST"]),
    Route("/api/actions/{action}", action_state),
]
