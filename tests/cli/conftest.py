"""The CLI tests' environment, explicit: no cluster configured.

The day-two verbs act on a cluster when ``$KUBECONFIG`` is set (docs/decisions.md, "Day-two verbs:
which target"); these tests are about local runs, whatever the shell that starts them exported.
Every CLI process they start inherits ``os.environ`` as patched here.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
