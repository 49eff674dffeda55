"""The Kubernetes runtime: client, informers, work queue, expectations, controller, leader election."""

from .lazy_client import install as _lazy_kubernetes_asyncio

# kubernetes_asyncio's names are imported when first used, not all 1,250 modules at once (issue 35).
_lazy_kubernetes_asyncio()
