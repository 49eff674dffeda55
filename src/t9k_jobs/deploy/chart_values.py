"""Every value of the Helm chart ``charts/t9k-jobs``: its path, default, JSON schema and help.

One table, :data:`VALUES`, gives ``values.yaml`` (:func:`values_yaml`, each value's help as a
comment), ``values.schema.json`` (:func:`values_schema`, which Helm checks) and the README's
table; :mod:`t9k_jobs.deploy.chart` writes the templates that read them. The defaults are those
of the objects ``deploy/`` is written from (:mod:`t9k_jobs.deploy.rbac`), so the chart with its
default values renders them.
"""

from __future__ import annotations

import copy
import textwrap
from dataclasses import dataclass
from typing import Any

from ..render import to_yaml
from . import rbac

CHART_NAME = "t9k-jobs"


@dataclass(frozen=True)
class Value:
    """One leaf of ``values.yaml``: its dotted ``path``, ``default``, JSON ``schema`` and ``help``."""

    path: str
    default: Any
    schema: dict[str, Any]
    help: str


_ANY_MAP: dict[str, Any] = {"type": "object"}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_NAME = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}

_container = rbac.deployment()["spec"]["template"]["spec"]["containers"][0]
_image_repository, _, _ = rbac.DEFAULT_IMAGE.rpartition(":")

VALUES: tuple[Value, ...] = (
    Value("image.repository", _image_repository, {"type": "string", "minLength": 1},
          "Operator image repository (the image is built from the repository's Dockerfile)."),
    Value("image.tag", "", {"type": "string"}, "Image tag; empty: the chart's appVersion."),
    Value("image.pullPolicy", _container["imagePullPolicy"],
          {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]}, "Image pull policy."),
    Value("imagePullSecrets", [], {"type": "array", "items": {"type": "object"}},
          "Secrets for pulling the image, e.g. `[{name: regcred}]`."),
    Value("replicaCount", rbac.REPLICAS, {"type": "integer", "minimum": 1},
          "Operator pods: one leads (Lease leader election), the others stand by with warm caches."),
    Value("fullnameOverride", "", {"anyOf": [{"const": ""}, _NAME]},
          "Name of the operator's objects; default `<release>-operator` when the release name "
          "contains t9k-jobs, else `<release>-t9k-jobs-operator`."),
    Value("serviceAccount.create", True, {"type": "boolean"}, "Create the operator's ServiceAccount."),
    Value("serviceAccount.name", "", {"anyOf": [{"const": ""}, _NAME]},
          "ServiceAccount name; default the objects' name. Required when create is false."),
    Value("serviceAccount.annotations", {}, _STRING_MAP, "Annotations of the ServiceAccount."),
    Value("crds.install", True, {"type": "boolean"},
          "Install (and on upgrade update) the four CRDs with the release."),
    Value("crds.keep", True, {"type": "boolean"},
          "Keep the CRDs, and with them every job, on helm uninstall (helm.sh/resource-policy: keep)."),
    Value("watchNamespaces", [],
          {"type": "array", "uniqueItems": True, "items": _NAME},
          "Namespaces whose jobs the operator reconciles; empty: all. When set, the operator's "
          "rights are a Role and RoleBinding in each of them instead of a ClusterRole."),
    Value("workers", rbac.WORKERS, {"type": "integer", "minimum": 1, "maximum": 256},
          "Jobs reconciled at once (--workers)."),
    # `--set` keeps a fraction as a string (it only types integers and booleans): both are taken.
    Value("kubeApi.qps", rbac.KUBE_API_QPS,
          {"anyOf": [
              {"type": "number", "minimum": 0},
              {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?$"},
          ]},
          "Client requests per second to the API server, 0 for no limit (--kube-api-qps)."),
    Value("kubeApi.burst", rbac.KUBE_API_BURST, {"type": "integer", "minimum": 1},
          "Client request burst (--kube-api-burst)."),
    Value("nodeLostAfter", rbac.NODE_LOST_AFTER, {"type": "integer", "minimum": 1},
          "Seconds a node may be NotReady/Unknown before the replicas on it fail with reason "
          "NodeLost and their pods are deleted, then force-deleted (--node-lost-after)."),
    Value("ttlAfterFinished", None, {"type": ["integer", "null"], "minimum": 0},
          "Seconds a finished job is kept before it is deleted with its children, unless its "
          "annotation t9k-jobs.io/ttl-seconds-after-finished says otherwise; null: kept (--ttl-after-finished)."),
    Value("disruptionBudgets", True, {"type": "boolean"},
          "Keep a PodDisruptionBudget per running gang job (t9kScheduler), so a drain waits for the job "
          "instead of evicting one of its ranks; false: none (--no-disruption-budgets)."),
    Value("logLevel", rbac.LOG_LEVEL, {"type": "string", "enum": ["DEBUG", "INFO", "WARNING", "ERROR"]},
          "Operator log level (--log-level)."),
    Value("metrics.port", rbac.METRICS_PORT, {"type": "integer", "minimum": 1, "maximum": 65535},
          "Container port serving /healthz, /readyz and /metrics (--metrics-bind-address)."),
    Value("metrics.service.enabled", False, {"type": "boolean"},
          "A Service `<name>-metrics` in front of the operator pods' metrics port."),
    Value("metrics.service.type", "ClusterIP",
          {"type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
          "Type of the metrics Service."),
    Value("metrics.service.port", rbac.METRICS_PORT, {"type": "integer", "minimum": 1, "maximum": 65535},
          "Port of the metrics Service."),
    Value("metrics.service.annotations", {}, _STRING_MAP, "Annotations of the metrics Service."),
    Value("metrics.serviceMonitor.enabled", False, {"type": "boolean"},
          "A Prometheus Operator ServiceMonitor (monitoring.coreos.com/v1; needs its CRD) "
          "scraping every operator pod; implies the metrics Service."),
    Value("metrics.serviceMonitor.interval", "30s", {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
          "Scrape interval."),
    Value("metrics.serviceMonitor.scrapeTimeout", "", {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))?$"},
          "Scrape timeout; empty: Prometheus' default."),
    Value("metrics.serviceMonitor.labels", {}, _STRING_MAP,
          "Extra labels of the ServiceMonitor (for the Prometheus' serviceMonitorSelector)."),
    Value("resources", copy.deepcopy(_container["resources"]), _ANY_MAP,
          "The operator container's resources."),
    Value("podAnnotations", {}, _STRING_MAP,
          "Extra annotations of the operator pods (the prometheus.io/* ones are always set)."),
    Value("priorityClassName", "", {"type": "string"}, "PriorityClass of the operator pods."),
    Value("jobPriorities.allowed", [],
          {"type": "array", "uniqueItems": True, "items": {"type": "integer", "minimum": 0, "maximum": 100}},
          "The spec.scheduler.t9kScheduler.priority values jobs may run at where jobs are gang-scheduled "
          "with scheduling.k8s.io PodGroups: the chart makes PriorityClass t9k-priority-N (value N) for "
          "each. A job whose priority is not listed runs at the default priority, with a Warning and a "
          "Priority condition. Empty: none; the operator never makes a PriorityClass (docs/scheduling.md)."),
    Value("jobPriorities.preemptionPolicy", rbac.PRIORITY_PREEMPTION,
          {"type": "string", "enum": list(rbac.PREEMPTION_POLICIES)},
          "preemptionPolicy of those classes: PreemptLowerPriority (a job preempts pods of lower "
          "priority, of any namespace, to fit) or Never (priority only orders the scheduling queue)."),
    Value("nodeSelector", {}, _STRING_MAP, "Node selector of the operator pods."),
    Value("tolerations", [], {"type": "array", "items": {"type": "object"}},
          "Tolerations of the operator pods."),
    Value("affinity", copy.deepcopy(rbac.deployment()["spec"]["template"]["spec"]["affinity"]), _ANY_MAP,
          "Affinity of the operator pods; by default the leader and the standby prefer different "
          "nodes. Set to null (--set affinity=null) to drop it."),
)
"""Every value of the chart: ``values.yaml``, ``values.schema.json`` and the README's table."""


def default_values() -> dict[str, Any]:
    """``values.yaml`` as a nested mapping (:data:`VALUES`' defaults)."""
    out: dict[str, Any] = {}
    for v in VALUES:
        *parents, leaf = v.path.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = copy.deepcopy(v.default)
    return out


def values_schema() -> dict[str, Any]:
    """``values.schema.json``: JSON Schema (draft 7) of the values; unknown keys are refused.

    Helm checks it on install, upgrade, template and lint, so a misspelt key or a bad value is
    one error naming the field. ``global`` (set by a parent chart) is allowed.
    """
    root: dict[str, Any] = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": f"Values of the {CHART_NAME} chart",
        "type": "object",
        "properties": {"global": {"type": "object"}},
        "additionalProperties": False,
    }
    for v in VALUES:
        *parents, leaf = v.path.split(".")
        node = root
        for p in parents:
            node = node["properties"].setdefault(
                p, {"type": "object", "properties": {}, "additionalProperties": False}
            )
        node["properties"][leaf] = {**v.schema, "description": v.help}
    if any(v.path == "affinity" for v in VALUES):  # null drops the default anti-affinity
        root["properties"]["affinity"]["type"] = ["object", "null"]
    return root


def values_yaml(header: str) -> str:
    """``values.yaml`` with each value's help as a comment above it, under ``header`` (a comment
    line: the file is generated)."""
    helps = {v.path: v.help for v in VALUES}
    lines = [header.rstrip("\n"), f"# Values of the {CHART_NAME} chart; the README lists them in a table."]

    def emit(node: dict[str, Any], prefix: str, indent: int) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            pad = " " * indent
            if path in helps:
                lines.extend(f"{pad}# {line}" for line in textwrap.wrap(helps[path], 98 - indent))
                text = to_yaml([{key: value}]).rstrip("\n")
                lines.extend(pad + line for line in text.splitlines())
            else:
                lines.append(f"{pad}{key}:")
                emit(value, f"{path}.", indent + 2)

    emit(default_values(), "", 0)
    return "\n".join(lines) + "\n"
