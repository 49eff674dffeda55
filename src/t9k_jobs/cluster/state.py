"""The operator's bookkeeping: one state record per job (its keys, :class:`~.projection.JobKey`
and :class:`~.projection.ChildRef`, are the projection's).

* :class:`JobState` is everything the controller remembers about one job between passes, in
  one record, so that forgetting a job is one statement and nothing can be left behind in a
  dictionary kept in step by hand. The controller drops a job's record when it holds nothing
  (:attr:`JobState.empty`): the soak test showed the growth when empty entries of deleted jobs
  were kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .projection import Child, ChildRef

if TYPE_CHECKING:
    from ..api import Job


@dataclass(frozen=True)
class Written:
    """The job as our last status write left it (``obj``), and the resourceVersion the write was
    made over (``base``): until the cache shows another version, the cache is behind our write."""

    obj: dict[str, Any]
    base: str


@dataclass
class JobState:
    """What the controller remembers about one job between passes.

    * ``children``: the cached children whose labels name this job (any owner uid);
    * ``conflicts``: children this job cannot create, and who holds each name;
    * ``secrets``: names of its Secrets known to exist (created, or refused as existing): the
      operator may not read Secrets, so this stands in for a Secret informer;
    * ``written``: our last status write, while the cache has not caught up with it;
    * ``parsed``: (resourceVersion, the parsed job), so an unchanged job is not parsed again;
    * ``invalid``: the version of the spec reported invalid (one Warning per version; see
      ``Controller._invalid``), and ``invalid_message``: why;
    * ``phase``: the phase counted in the jobs gauge.
    """

    children: dict[ChildRef, Child] = field(default_factory=dict)
    conflicts: dict[ChildRef, str] = field(default_factory=dict)
    secrets: set[str] = field(default_factory=set)
    written: Written | None = None
    parsed: tuple[str, Job] | None = None
    invalid: str | None = None
    invalid_message: str | None = None
    phase: str | None = None

    @property
    def empty(self) -> bool:
        """Whether the record holds nothing (it can be dropped)."""
        return not (
            self.children or self.conflicts or self.secrets or self.written or self.parsed
        ) and self.invalid is None and self.phase is None

    def forget_job(self) -> None:
        """The job object is gone: drop what was about it (children stay until their own events)."""
        self.conflicts.clear()
        self.secrets.clear()
        self.written = self.parsed = self.invalid = self.invalid_message = None
