"""Every manifest ``validate`` calls valid renders (issue 32): a property test over mutated manifests.

Valid manifests of the four kinds (``tests/render/manifests``) are mutated, one to three times
each: a value under the spec or the pod template replaced by one of another type or an odd value
(a number where a list goes, an empty string, a huge or negative number, ``.inf``), a key
deleted, a Kubernetes or T9k field name added with such a value, or a list entry repeated. For
each mutant, :func:`t9k_jobs.frameworks.parse_job` either refuses it with a
:class:`~t9k_jobs.api.ManifestError` or the job renders in every gang mode, and its warnings and
notes are computed without raising. Anything else (a ``TypeError`` from a plug-in reading a
``volumes: 5`` it was handed) is a manifest that ``validate`` calls valid and that then fails.

Before issue 32 this found the four places where the ssh-based kinds read a pod template they
had not checked (``volumes``, ``volumeMounts`` and ``resources`` of the wrong type).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from t9k_jobs.api import ManifestError
from t9k_jobs.frameworks import framework_for, parse_job, spec_warnings
from t9k_jobs.render import render

MANIFESTS = Path(__file__).resolve().parents[1] / "render" / "manifests"
SEEDS: dict[str, dict[str, Any]] = {
    p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(MANIFESTS.glob("*.yaml"))
}
GANG_MODES = ("t9k", "native", "none")
#: Field names a mutation may add: the pod's and a container's that plug-ins or runtimes read,
#: and the T9k spec's, besides every key the seeds hold.
POD_FIELDS = [
    "volumes", "volumeMounts", "resources", "limits", "requests", "env", "envFrom", "ports", "command",
    "args", "workingDir", "securityContext", "initContainers", "containers", "name", "image",
    "nodeSelector", "tolerations", "priorityClassName", "priority", "schedulerName", "labels",
    "annotations", "metadata", "hostNetwork", "terminationGracePeriodSeconds", "nvidia.com/gpu", "cpu",
    "memory", "emptyDir", "configMap", "secret", "mountPath", "subPath", "readOnly", "containerPort",
    "valueFrom", "value", "restartPolicy", "spec",
]  # fmt: skip
SPEC_FIELDS = [
    "replicas", "type", "template", "restartPolicy", "limit", "policy", "successRules", "failureRules",
    "service", "ports", "runMode", "debug", "pause", "replicaSpecs", "resumeSpecs", "scheduler",
    "t9kScheduler", "queue", "elastic", "expectedReplicas", "minReplicas", "maxReplicas", "scalingWeight",
    "torchrunConfig", "enabled", "extraOptions", "procPerNode", "config", "run", "python", "module",
    "exec", "slotsPerWorker", "otherArgs", "customCommand", "worker", "launcher", "ssh", "torchArgs",
    "procPerWorker", "runPolicy", "backoffLimit", "cleanUpPolicy", "cleanUpWorkers", "tensorboardSpec",
]  # fmt: skip


def _keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return {str(k) for k in node} | {k for v in node.values() for k in _keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in _keys(v)}
    return set()


VOCABULARY = sorted(set(POD_FIELDS) | set(SPEC_FIELDS) | {k for s in SEEDS.values() for k in _keys(s["spec"])})

ODD_SCALARS = [
    None, True, False, 0, 1, -1, 3, 2**31, 2**63, 1.5, math.inf, "", "big", "0.5", "1Gi", "-1", "x/y",
    "python", "-u", "train.py", "Never", "worker", "/data", "data", "$(rank)", {}, [],
]  # fmt: skip
scalars = st.one_of(st.sampled_from(ODD_SCALARS).map(copy.deepcopy), st.integers(-5, 70000), st.text(max_size=6))
odd_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(VOCABULARY), inner, max_size=3),
    ),
    max_leaves=6,
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*path, i))
    return out


def _at(root: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        root = root[part]
    return root


@st.composite
def mutants(draw: st.DrawFn) -> dict[str, Any]:
    """A seed with one to three mutations under ``spec``."""
    data = copy.deepcopy(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data["spec"], ("spec",))
        in_template = [p for p in paths if "template" in p or "launcher" in p]
        # Half the mutations go to a pod template (or the ColossalAI launcher), which plug-ins read.
        path = draw(st.sampled_from(in_template if in_template and draw(st.booleans()) else paths))
        node = _at(data, path)
        how = draw(st.sampled_from(["replace", "delete", "add", "repeat"]))
        if how == "add" and isinstance(node, dict):
            names = POD_FIELDS if path in in_template and draw(st.booleans()) else VOCABULARY
            node[draw(st.sampled_from(names))] = draw(odd_values)
        elif how == "repeat" and isinstance(node, list) and node:
            node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
        elif how == "delete" and len(path) > 1:
            parent = _at(data, path[:-1])
            del parent[path[-1]]
        elif len(path) > 1:
            _at(data, path[:-1])[path[-1]] = draw(odd_values)
    return data


def _keygen() -> dict[str, str]:
    """A fixed key pair's files (the Secret's content plays no part here; a real one is slow)."""
    return {"id_ed25519": "k", "id_ed25519.pub": "p", "authorized_keys": "p", "config": "c"}


@settings(
    max_examples=2000,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutants())
def test_a_manifest_is_refused_or_renders_in_every_gang_mode(data: dict[str, Any]) -> None:
    try:
        job = parse_job(data)
    except ManifestError:
        return
    spec_warnings(job)
    framework_for(job).local_notes(job)
    for gang in GANG_MODES:
        render(job, keygen=_keygen, gang=gang)


def test_every_seed_is_valid_and_renders() -> None:
    """The mutations start from valid manifests (else every mutant would be refused)."""
    for name, data in SEEDS.items():
        job = parse_job(copy.deepcopy(data), name)
        for gang in GANG_MODES:
            assert render(job, keygen=_keygen, gang=gang), name
