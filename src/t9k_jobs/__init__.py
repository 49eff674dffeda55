"""t9k-jobs: the T9k batch job API (``batch.tensorstack.dev/v1beta1``) on Kubernetes or on one machine.

The Python SDK is :class:`t9k_jobs.Client` (``from t9k_jobs import Client``; see
:mod:`t9k_jobs.sdk.client`), and :class:`t9k_jobs.AsyncClient` for an event loop; its errors are in
:mod:`t9k_jobs.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .sdk.async_client import AsyncClient
    from .sdk.client import Client

__all__ = ["AsyncClient", "Client", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `import t9k_jobs` (the operator, the CLI) stays light.
    if name == "Client":
        from .sdk.client import Client  # lazy: keeps the SDK and pydantic out of `import t9k_jobs`

        return Client
    if name == "AsyncClient":
        from .sdk.async_client import AsyncClient  # lazy: keeps the SDK and pydantic out of `import t9k_jobs`

        return AsyncClient
    raise AttributeError(f"module 't9k_jobs' has no attribute {name!r}")
