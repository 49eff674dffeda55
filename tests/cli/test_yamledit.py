"""yamledit.set_field: one field of a manifest set in its text, everything else kept as written."""

from __future__ import annotations

import json

import pytest
import yaml

from t9k_jobs.yamledit import EditError, set_field

PAUSE = ["spec", "runMode", "pause", "enabled"]
EXPECTED = ["spec", "elastic", "expectedReplicas"]

BLOCK = """\
# comment at the top
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: x   # the name
spec:
  replicaSpecs:
    - type: worker
      replicas: 2
"""


def test_missing_keys_are_added_in_block_style_before_their_siblings() -> None:
    out = set_field(BLOCK, PAUSE, True)
    assert out == BLOCK.replace("spec:\n", "spec:\n  runMode:\n    pause:\n      enabled: true\n")
    again = set_field(out, PAUSE, False)
    assert again == out.replace("enabled: true", "enabled: false"), "an existing value is replaced in place"


def test_values_keep_their_comments_and_a_deeper_mapping_is_extended() -> None:
    text = "spec:\n  elastic:\n    enabled: true\n    expectedReplicas: 2   # two for now\n  x: 1\n"
    assert set_field(text, EXPECTED, 3) == text.replace("expectedReplicas: 2", "expectedReplicas: 3")
    text = "spec:\n  runMode:\n    debug:\n      enabled: false\n"
    out = set_field(text, PAUSE, True)
    assert yaml.safe_load(out)["spec"]["runMode"] == {"pause": {"enabled": True}, "debug": {"enabled": False}}
    assert out.endswith("    debug:\n      enabled: false\n")


@pytest.mark.parametrize(
    "text",
    [
        '{"apiVersion": "v", "spec": {"a": 1}}',
        '{"spec": {}}',
        '{"spec": {"runMode": {"pause": {"enabled": true}}}}',
    ],
)
def test_json_stays_json(text: str) -> None:
    out = set_field(text, PAUSE, False)
    assert json.loads(out)["spec"]["runMode"]["pause"]["enabled"] is False


@pytest.mark.parametrize(
    "text", ["spec:\n  runMode:\n  x: 1\n", "spec:\n  runMode: null\n  x: 1\n", "spec:\n  runMode: {pause: {enable: true}}\n"]
)
def test_empty_and_flow_values_on_the_way(text: str) -> None:
    data = yaml.safe_load(set_field(text, PAUSE, False))
    assert data["spec"]["runMode"]["pause"]["enabled"] is False


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {enabled: true}\nspec:\n  runMode:\n    pause: *b\n",  # an alias: one edit, two places
        "spec:\n  runMode: [1, 2]\n",  # not a mapping on the way
        "- a\n- b\n",  # not a mapping at the root
        "spec: {\n",  # not YAML
    ],
)
def test_what_cannot_be_edited_in_place_is_refused(text: str) -> None:
    with pytest.raises(EditError):
        set_field(text, PAUSE, True)
