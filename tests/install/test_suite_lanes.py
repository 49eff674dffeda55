"""The suite's two lanes (scripts/test.sh runs pytest with ``-n 2``; tests/conftest.py): under
pytest-xdist every test of tests/node runs in one worker, in collection order, while the other
tests are shared out by module. Checked on a small tree of its own with the real conftest, the real
pytest-xdist and pytest-randomly: the grouping is what keeps two real nodes from starting at once
(xdist's own ``loadgroup`` lost it silently on pytest 9.2)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NODE_TEST = "import time\n\ndef test_{n}_a():\n    time.sleep(0.2)\n\ndef test_{n}_b():\n    time.sleep(0.2)\n"
OTHER_TEST = "import time\n\ndef test_{n}_c():\n    time.sleep(0.1)\n\ndef test_{n}_d():\n    time.sleep(0.1)\n"


def test_node_tests_share_one_worker_and_the_rest_run_beside_them(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "node").mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (tests / "node" / "__init__.py").write_text("")
    shutil.copy(REPO / "tests" / "conftest.py", tests / "conftest.py")
    for n in range(4):
        (tests / "node" / f"test_n{n}.py").write_text(NODE_TEST.format(n=f"n{n}"))
        (tests / f"test_o{n}.py").write_text(OTHER_TEST.format(n=f"o{n}"))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-v", "--randomly-seed=7",
         "-o", "addopts=", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    order: list[str] = []
    for worker, nodeid in re.findall(r"^\[(gw\d)\] \[[ \d]+%\] PASSED (\S+)", out.stdout, re.M):
        workers["node" if nodeid.startswith("tests/node/") else "other"].add(worker)
        order.append(nodeid)
    assert len(order) == 16, out.stdout
    assert len(workers["node"]) == 1, f"node tests ran in {sorted(workers['node'])}:\n{out.stdout}"
    # The other worker was not idle while the node lane ran.
    assert workers["other"] - workers["node"], out.stdout
