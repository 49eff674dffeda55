"""How pytest-xdist shares the suite out (scripts/test.sh runs it with ``-n 2``).

The node tests (tests/node) share one real node per session: its own containerd store, bridge and
addresses, which a second node on the same machine cannot have. So under xdist they are one work
unit, sent to one worker in their collection order (the node's teardown test last), while the
other worker takes the rest a module at a time (a module's control plane or runs are set up once),
in pytest-randomly's order. The node tests come first in that order (tests/node/conftest.py), so
their lane starts at once.

xdist's own ``--dist loadgroup`` would do this with an ``xdist_group`` mark, but its grouping is
lost on pytest 9.2 (pytest-dev/pytest-xdist#1386: the group travels in a rewritten node id that
pytest no longer keeps), so the split is by path here, through xdist's scheduler hook.
"""

from __future__ import annotations

from typing import Any

import pytest

NODE_TESTS = "tests/node/"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") not in ("load", "loadscope"):
        return None  # another --dist asked for by name: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the random order, not the largest module first

    class NodeLane(LoadScopeScheduling):
        """A work unit per test module, and one for every node test together."""

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(NODE_TESTS):
                return NODE_TESTS
            return nodeid.split("::", 1)[0]

    return NodeLane(config, log)
