"""The dashboard's routes, one module per group: :mod:`.pages` (the two pages), :mod:`.jobs` (the
job list and a job as JSON and as event streams), :mod:`.logs` (a job's logs and metric points),
:mod:`.actions` (pause, resume, scale, delete). Each module's ``ROUTES`` lists its routes; the
handlers read the app's state through :func:`t9k_jobs.dashboard.web.board`."""

from __future__ import annotations

from . import actions, jobs, logs, pages

#: Every route, those with a suffix before the job's own (``{name:path}`` would match them too).
ROUTES = [*logs.ROUTES, *actions.ROUTES, *jobs.ROUTES, *pages.ROUTES]

__all__ = ["ROUTES"]
