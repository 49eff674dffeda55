"""Failure rules in real local runs (issue 43, part 2; :mod:`t9k_jobs.engine.failure_policy`): a
``Fail`` rule for exit 42 fails the job at once, while 137 still restarts by the restart policy;
``describe`` says what counted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .test_progress import condition, events, generic

pytestmark = pytest.mark.e2e

POLICY = "t9k-jobs.io/failure-policy"
RULES = json.dumps([{"onExitCodes": {"operator": "In", "values": [42]}, "action": "Fail"}])
#: Exits 137 on its first attempt, 42 on its second.
EXITS = """import os, sys
attempt = int(os.environ["T9K_JOBS_RESTART_ATTEMPT"])
print("attempt", attempt, flush=True)
sys.exit(137 if attempt == 0 else 42)
"""


def test_a_fail_rule_for_42_fails_at_once_while_137_restarts(start) -> None:
    run = start(generic("rules", EXITS, annotations={POLICY: RULES}, limit=5))
    assert run.finish(120) == 1, run.output
    status = run.status()
    assert status["phase"] == "Failed" and status["backoffCount"] == 1, status
    failed = condition(status, "Failed")
    assert failed["reason"] == "FailurePolicy", failed
    assert "rules-worker-0 ended (exit code 42" in failed["message"] and "rule 0" in failed["message"], failed
    assert [r["restartCount"] for t in status["tasks"] for r in t["replicas"]] == [1], status["tasks"]
    assert any("restarting rules-worker-0 (exit code 137" in line for line in events(run.run_dir)), events(run.run_dir)
    described = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "describe", "genericjob", "rules", "--run-dir",
                                str(run.run_dir)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "Backoff:     1 (restarts: 1)" in described.stdout, described.stdout
