"""The web dashboard: ``t9k-jobs dashboard`` (docs/dashboard.md).

A page per job and a live job list, over the SDK's client (:class:`t9k_jobs.Client`), the same one
the CLI's verbs use, with every word about a job from :mod:`t9k_jobs.sdk.present`:

- :mod:`.source`: the jobs of one target as JSON-ready mappings, their logs, the actions;
- :mod:`.metrics`: the loss and accuracy lines the examples print, as points to plot;
- :mod:`.app`: the ASGI app (Starlette, Jinja2 templates, server-sent events);
- :mod:`.server`: where it binds (loopback unless ``--address``), uvicorn.

It needs the ``dashboard`` extra (starlette, uvicorn, jinja2): ``bash scripts/bootstrap.sh
examples,dashboard``.
"""

from __future__ import annotations

#: The packages the dashboard imports, all from the ``dashboard`` extra.
NEEDS = ("starlette", "uvicorn", "jinja2")


def missing() -> list[str]:
    """The packages of :data:`NEEDS` that cannot be imported here."""
    import importlib.util

    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


__all__ = ["NEEDS", "missing"]
