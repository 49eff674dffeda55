"""A manifest as the API server reads a create: what the server sets itself is dropped.

A job saved from a cluster (``kubectl get pj NAME -o yaml``, ``t9k-jobs get pj NAME -o yaml``)
carries its ``status`` and the metadata the server set (``uid``, ``resourceVersion``,
``generation``, ``creationTimestamp``, ``managedFields``...). Created again, the server ignores the
status (the status subresource is written only through its own endpoint) and sets those fields
anew; a local run and ``render`` do the same, so a saved job starts over instead of being taken
for one that has already run. Source: Kubernetes API conventions ("Metadata", "Spec and Status":
fields set by the system; status is ignored on create when the status subresource is enabled).
"""

from __future__ import annotations

import copy
from typing import Any

#: ``metadata`` fields that only the API server sets.
SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def as_created(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(doc without status and server-set metadata, the field paths dropped)``; ``doc`` itself is
    not changed. A document without any of them is returned as it is, with ``[]``."""
    meta = doc.get("metadata")
    dropped = ["status"] if "status" in doc else []
    if isinstance(meta, dict):
        dropped += [f"metadata.{k}" for k in SERVER_SET_METADATA if k in meta]
    if not dropped:
        return doc, []
    out = copy.deepcopy(doc)
    out.pop("status", None)
    if isinstance(out.get("metadata"), dict):
        for key in SERVER_SET_METADATA:
            out["metadata"].pop(key, None)
    return out, dropped


def dropped_note(dropped: list[str]) -> str:
    """The one note said when :func:`as_created` dropped fields."""
    return (
        f"{', '.join(dropped)} dropped: set by the API server, not by you; the job is read as a create "
        "reads it and starts anew"
    )


__all__ = ["SERVER_SET_METADATA", "as_created", "dropped_note"]
