"""One plug-in per job kind; :func:`framework_for` picks it."""

from __future__ import annotations

from ..api.kinds import JobBase
from .base import BuildContext, Final, Framework, Outcome, ReplicaGroup
from .colossalai import ColossalAIFramework
from .deepspeed import DeepSpeedFramework
from .genericjob import GenericJobFramework
from .notes import spec_warnings
from .pytorch import PyTorchFramework

_FRAMEWORKS: dict[str, Framework] = {
    f.kind: f for f in (GenericJobFramework(), PyTorchFramework(), DeepSpeedFramework(), ColossalAIFramework())
}


def framework_for(job: JobBase) -> Framework:
    """The plug-in of ``job.kind``; raises ``KeyError`` for a kind t9k-jobs does not implement."""
    return _FRAMEWORKS[job.kind]


__all__ = ["BuildContext", "Final", "Framework", "Outcome", "ReplicaGroup", "framework_for", "spec_warnings"]
