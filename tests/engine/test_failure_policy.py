"""Failure rules (issue 43, part 2; :mod:`t9k_jobs.engine.failure_policy`): the first rule of
``t9k-jobs.io/failure-policy`` that matches an ended replica decides, before the kind's restart
policy; no rule matching leaves T9k's behaviour, but for a disruption (a lost node, an eviction),
which restarts without counting against ``backoffLimit``."""

from __future__ import annotations

import json

import pytest

from t9k_jobs.api import ManifestError
from t9k_jobs.frameworks import parse_job

from .jobs import pytorch
from .sim import Sim

POLICY = "t9k-jobs.io/failure-policy"


def with_rules(rules: list[dict] | str, policy: str = "OnFailure", backoff: int | None = 3) -> dict:
    manifest = pytorch([("master", 1), ("worker", 1)], name="j", policy=policy, backoff=backoff)
    manifest["metadata"]["annotations"] = {POLICY: rules if isinstance(rules, str) else json.dumps(rules)}
    return manifest


def running(manifest: dict) -> Sim:
    sim = Sim(manifest)
    sim.settle(start="Running")
    sim.step()
    assert sim.status.phase == "Running"
    return sim


FAIL_42 = [{"onExitCodes": {"operator": "In", "values": [42]}, "action": "Fail"}]


def test_a_fail_rule_fails_the_job_at_once_naming_the_replica_and_the_rule() -> None:
    sim = running(with_rules(FAIL_42))
    sim.fail("j-worker-0", 42)
    sim.step()
    assert sim.status.phase == "Failed" and sim.status.backoff_count == 0
    failed = sim.condition("Failed")
    assert failed.reason == "FailurePolicy", failed
    assert "j-worker-0 ended (exit code 42)" in failed.message and "rule 0 (onExitCodes In [42], action Fail)" in failed.message


def test_an_exit_code_no_rule_matches_follows_the_restart_policy_counted() -> None:
    sim = running(with_rules(FAIL_42))
    sim.fail("j-worker-0", 137)
    sim.step(start="Running")
    assert sim.status.phase == "Running" and sim.status.backoff_count == 1
    assert sim.replica("j-worker-0").restart_count == 1


def test_restart_retries_even_under_never_and_counts_against_the_backoff_limit() -> None:
    rules = [{"onExitCodes": {"operator": "NotIn", "values": [1]}, "action": "Restart"}]
    sim = running(with_rules(rules, policy="Never", backoff=1))
    sim.fail("j-master-0", 3)
    sim.step(start="Running")
    assert sim.status.phase == "Running" and sim.status.backoff_count == 1
    sim.settle(start="Running")
    sim.fail("j-master-0", 3)  # the backoff limit is reached: the kind's outcome (the master failed)
    sim.step()
    assert sim.status.phase == "Failed"


def test_restart_ignoring_backoff_goes_past_the_limit_and_counts_nothing() -> None:
    rules = [{"onExitCodes": {"operator": "In", "values": [75]}, "action": "RestartIgnoringBackoff"}]
    sim = running(with_rules(rules, backoff=1))
    for attempt in range(1, 4):
        sim.fail("j-worker-0", 75)
        sim.step(start="Running")
        sim.settle(start="Running")
        assert sim.status.phase == "Running" and sim.status.backoff_count == 0
        assert sim.replica("j-worker-0").restart_count == attempt


def test_ignore_takes_the_replica_as_completed() -> None:
    rules = [{"onExitCodes": {"operator": "In", "values": [3]}, "replicaTypes": ["worker"], "action": "Ignore"}]
    sim = running(with_rules(rules, policy="Never"))
    sim.fail("j-worker-0", 3)
    sim.step()
    assert sim.status.phase == "Running"  # the worker is done; the master decides
    sim.succeed("j-master-0")
    sim.step()
    assert sim.status.phase == "Succeeded"


def test_replica_types_limit_a_rule_and_not_in_never_matches_zero() -> None:
    rules = [{"onExitCodes": {"operator": "In", "values": [42]}, "replicaTypes": ["master"], "action": "Fail"},
             {"onExitCodes": {"operator": "NotIn", "values": [5]}, "action": "Fail"}]  # fmt: skip
    sim = running(with_rules(rules, policy="Always"))
    sim.succeed("j-worker-0")  # 0 is not "not in [5]": Always restarts it
    sim.step(start="Running")
    assert sim.status.phase == "Running" and sim.replica("j-worker-0").restart_count == 1
    sim.settle(start="Running")
    sim.fail("j-worker-0", 5)  # the worker's 42 rule does not apply to it; 5 is excluded: the policy restarts
    sim.step(start="Running")
    assert sim.status.phase == "Running" and sim.replica("j-worker-0").restart_count == 2


def test_a_disruption_rule_makes_a_lost_node_count() -> None:
    rules = [{"onPodConditions": ["DisruptionTarget"], "action": "Restart"}]
    counted = running(with_rules(rules))
    counted.disrupt("j-worker-0", "EvictionByEvictionAPI", end=137)
    counted.step(start="Running")
    assert counted.status.backoff_count == 1
    plain = running(with_rules(FAIL_42))
    plain.disrupt("j-worker-0", "EvictionByEvictionAPI", end=137)
    plain.step(start="Running")
    assert plain.status.backoff_count == 0 and plain.replica("j-worker-0").restart_count == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("not: [a list", "is not a YAML or JSON list of rules"),
        ("[]", "expected a non-empty list of rules"),
        (json.dumps([{"action": "Fail", "onExitCodes": {"operator": "In", "values": [1]}}] * 21), "21 rules; at most 20"),
        ('[{"action": "Explode", "onExitCodes": {"operator": "In", "values": [1]}}]', "[0].action: 'Explode' is not accepted"),
        ('[{"action": "Fail"}]', "[0]: expected exactly one of onExitCodes and onPodConditions"),
        ('[{"action": "Fail", "onExitCodes": {"operator": "Has", "values": [1]}}]', "[0].onExitCodes.operator"),
        ('[{"action": "Fail", "onExitCodes": {"operator": "In", "values": [0]}}]', "0 is a success"),
        ('[{"action": "Fail", "onExitCodes": {"operator": "In", "values": [256]}}]', "integers 0 to 255"),
        ('[{"action": "Fail", "onPodConditions": ["Ready"]}]', "[0].onPodConditions"),
        ('[{"action": "Fail", "onPodConditions": ["DisruptionTarget"], "when": 1}]', "[0].when: unknown field"),
        ('[{"action": "Fail", "onPodConditions": ["DisruptionTarget"], "replicaTypes": ["chief"]}]',
         "[0].replicaTypes[0]: 'chief' is not a replica type of this job"),
    ],
)
def test_a_bad_rule_list_is_refused_naming_the_annotation_and_the_rule(value: str, expected: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_job(with_rules(value))
    text = str(err.value)
    assert POLICY in text and expected in text, text


def test_yaml_is_accepted_as_json_is() -> None:
    value = "- onExitCodes: {operator: In, values: [42]}\n  action: Fail\n"
    assert parse_job(with_rules(value)).metadata.annotations[POLICY] == value
