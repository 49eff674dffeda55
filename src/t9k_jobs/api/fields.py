"""What every validator of the API shares and needs nothing of ours: the integer bounds of
Kubernetes' fields and the error that names a field below the one validated (``common``'s models
and ``pod_schema``'s Pod checks both raise it, so it sits under both)."""

from __future__ import annotations

#: Bounds of Kubernetes' int32 and int64 fields (counts are int32, durations in seconds int64).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class FieldError(ValueError):
    """A validation error about a field below the one being validated.

    ``path`` (``torchArgs[1]``, ``successRules[0].worker``) is relative to the model or field
    whose validator raises it; the manifest loader joins it to that field's own path, so the
    message names the exact field (``spec.worker.torchArgs[1]: ...``).
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")
