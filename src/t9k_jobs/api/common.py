"""Types shared by the four T9k job kinds (``batch.tensorstack.dev/v1beta1``).

Field names, defaults and accepted values follow the T9k API references and guides;
see ``docs/decisions.md`` for the places where the documents are silent or disagree.
Every model rejects unknown fields, so a misspelt field is reported with its path
instead of being silently ignored. The pod template stays a plain mapping (the API
server and the kubelet are the authority on pod fields), checked only for the parts
the controller reads.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from .extensions import extensions
from .fields import INT32_MAX, INT64_MAX, FieldError
from .pod_schema import check_pod_template

GROUP = "batch.tensorstack.dev"
#: Annotation on a child whose content is made when it is created (an ssh Secret's key pair).
ANNOTATION_GENERATE = f"{GROUP}/generate"
#: On every child: a hash of the content the engine wants it to have (its spec, data, labels);
#: a child whose hash differs from the desired one is brought up to date (see engine.desired).
ANNOTATION_DESIRED_HASH = f"{GROUP}/desired-hash"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

RestartPolicyName = Literal["Never", "OnFailure", "Always", "ExitCode"]
CleanUpPolicyName = Literal["All", "Unfinished", "None"]

#: Exit codes that the ``ExitCode`` restart policy retries (T9k docs: 130 SIGINT, 137 SIGKILL,
#: 143 SIGTERM, 138 user-defined "please restart").
RETRYABLE_EXIT_CODES: frozenset[int] = frozenset({130, 137, 143, 138})



def _within_int64(value: int) -> int:
    if value > INT64_MAX:
        raise ValueError(f"must be at most {INT64_MAX} (an int64)")
    return value


#: A positive int64 field: bounded when validated, ``format: int64`` in the CRD (a ``maximum`` of
#: 2**63-1 would not survive the API server, which reads schema numbers as float64).
PositiveInt64 = Annotated[int, Field(gt=0, json_schema_extra={"format": "int64"}), AfterValidator(_within_int64)]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Model(BaseModel):
    """Base of every API model: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=False,
        strict=True,
        defer_build=True,
    )

    def dump(self) -> dict[str, Any]:
        """The model as the JSON the API server would store (camelCase, unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def check_dns_label(value: str, what: str = "name") -> str:
    """Raise ``ValueError`` unless ``value`` is an RFC 1123 label (lower case, digits, '-', at most 63)."""
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{what} {value!r} must be a DNS label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return value


ReplicaType = Annotated[str, Field(min_length=1, max_length=63)]


class EnabledFlag(Model):
    """A block switched on by ``enabled`` or by the older spelling ``enable`` (reference §1.10).

    ``enabled`` wins when both are given.
    """

    enabled: bool | None = None
    enable: bool | None = None

    @property
    def is_enabled(self) -> bool:
        if self.enabled is not None:
            return self.enabled
        return bool(self.enable)


class DebugReplicaSpec(Model):
    type: ReplicaType
    skip_init_container: bool = False
    command: list[str] | None = None


def _one_entry_per_type(entries: list[Any] | None) -> None:
    """Refuse a second entry for one replica type: only the first would apply."""
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries or []):
        if entry.type in seen:
            raise FieldError(
                f"[{i}].type", f"{entry.type!r} is also entry [{seen[entry.type]}]; one entry per replica type"
            )
        seen[entry.type] = i


class DebugMode(EnabledFlag):
    """``spec.runMode.debug``: pods are created but run a null command (default ``sleep inf``).
    One ``replicaSpecs`` entry per replica type."""

    replica_specs: list[DebugReplicaSpec] | None = None

    @field_validator("replica_specs")
    @classmethod
    def _one_per_type(cls, value: list[DebugReplicaSpec] | None) -> list[DebugReplicaSpec] | None:
        _one_entry_per_type(value)
        return value

    def for_type(self, replica_type: str) -> DebugReplicaSpec | None:
        for spec in self.replica_specs or []:
            if spec.type == replica_type:
                return spec
        return None


class ResumeSpec(Model):
    type: ReplicaType
    skip_init_container: bool = False
    command: list[str] | None = None
    args: list[str] | None = None


class PauseMode(EnabledFlag):
    """``spec.runMode.pause``: replica pods are deleted and not created while enabled. One
    ``resumeSpecs`` entry per replica type."""

    resume_specs: list[ResumeSpec] | None = None

    @field_validator("resume_specs")
    @classmethod
    def _one_per_type(cls, value: list[ResumeSpec] | None) -> list[ResumeSpec] | None:
        _one_entry_per_type(value)
        return value

    def for_type(self, replica_type: str) -> ResumeSpec | None:
        for spec in self.resume_specs or []:
            if spec.type == replica_type:
                return spec
        return None


class RunMode(Model):
    debug: DebugMode | None = None
    pause: PauseMode | None = None

    @property
    def debug_enabled(self) -> bool:
        return self.debug is not None and self.debug.is_enabled

    @property
    def pause_enabled(self) -> bool:
        return self.pause is not None and self.pause.is_enabled


#: The queue a job's pods use when ``t9kScheduler.queue`` is absent, null or empty (T9k's
#: examples leave it empty; its docs call the queue ``default``). ``validate`` says so.
DEFAULT_QUEUE = "default"
_QUEUE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class T9kScheduler(Model):
    """``spec.scheduler.t9kScheduler``. ``queue`` is required by the docs but real examples leave
    it empty: absent, null or empty means the queue ``default``. A queue names a cluster object
    and is written as a label value, so it must be both: a lower-case DNS-1123 subdomain of at
    most 63 characters. ``priority`` is in [0, 100] (T9k API reference)."""

    queue: str | None = None
    priority: Annotated[int, Field(ge=0, le=100)] = 0

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        if value and (len(value) > 63 or not _QUEUE_NAME.match(value)):
            raise ValueError(
                f"{value!r} is not a queue name: lower-case letters, digits, '-' and '.', starting and "
                "ending with a letter or digit, at most 63 characters (it names the Queue and is a pod label)"
            )
        return value

    @property
    def queue_name(self) -> str:
        """The queue the pods use: ``queue``, or :data:`DEFAULT_QUEUE` when it is not set."""
        return self.queue or DEFAULT_QUEUE


class SchedulerPolicy(Model):
    t9k_scheduler: T9kScheduler | None = Field(default=None, alias="t9kScheduler")


class RunPolicy(Model):
    """``spec.runPolicy`` of PyTorchTrainingJob and DeepSpeedJob.

    ``activeDeadlineSeconds`` counts from ``status.startTime``; ``backoffLimit`` (default 3)
    is shared by all replicas (T9k docs).
    """

    active_deadline_seconds: PositiveInt64 | None = None
    backoff_limit: Annotated[int, Field(ge=0, le=INT32_MAX)] = 3
    clean_up_policy: CleanUpPolicyName = "None"


class ElasticConfig(EnabledFlag):
    """``spec.elastic``: replica count between ``minReplicas`` and ``maxReplicas``."""

    min_replicas: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    max_replicas: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    expected_replicas: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None

    @model_validator(mode="after")
    def _check_range(self) -> ElasticConfig:
        if self.is_enabled:
            if self.min_replicas is None or self.max_replicas is None:
                raise ValueError("minReplicas and maxReplicas are required when elastic is enabled")
            if self.min_replicas > self.max_replicas:
                raise ValueError(
                    f"minReplicas ({self.min_replicas}) must not be greater than maxReplicas "
                    f"({self.max_replicas})"
                )
        return self

    def effective_replicas(self, default: int) -> int:
        """``expectedReplicas`` (or ``default`` when unset) clamped to [minReplicas, maxReplicas]."""
        wanted = self.expected_replicas if self.expected_replicas is not None else default
        low = self.min_replicas or 1
        high = self.max_replicas or max(wanted, low)
        return max(low, min(high, wanted))


def validate_pod_template(template: Any, *, required_container: str | None = None) -> dict[str, Any]:
    """Check a PodTemplateSpec as the API server checks a Pod made from it; return it without its
    ``null`` values (a field left out, as the API server reads it).

    Raises ``ValueError`` naming the sub-path (``spec.containers[1].command``) when the template
    is not a mapping, has no containers, or a container lacks a name or has a command, args or
    env of the wrong shape, and :class:`FieldError` (a ``ValueError``) for any other field of the
    wrong type or value (:func:`t9k_jobs.api.pod_schema.check_pod_template`: ``volumes``,
    ``volumeMounts``, ``resources``, ``ports``...). ``required_container`` names a container that
    must exist (T9k docs: ColossalAIJob workers need a container named ``worker``).
    """
    if not isinstance(template, dict):
        raise ValueError("must be a PodTemplateSpec mapping with spec.containers")
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise ValueError("spec: required, a PodSpec mapping with containers")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ValueError("spec.containers: required, a non-empty list of containers")
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= INT64_MAX):
        raise ValueError("spec.terminationGracePeriodSeconds: must be a non-negative integer (seconds)")
    seen: set[str] = set()
    for key in ("containers", "initContainers"):
        items = spec.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise ValueError(f"spec.{key}: must be a list of containers")
        for i, container in enumerate(items):
            where = f"spec.{key}[{i}]"
            if not isinstance(container, dict):
                raise ValueError(f"{where}: must be a container mapping")
            name = container.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where}.name: required, a DNS label")
            check_dns_label(name, f"{where}.name")
            if name in seen:
                raise ValueError(f"{where}.name: {name!r} is used by another container of the pod")
            seen.add(name)
            for list_field in ("command", "args"):
                value = container.get(list_field)
                if value is not None and (
                    not isinstance(value, list) or not all(isinstance(v, str) for v in value)
                ):
                    raise ValueError(f"{where}.{list_field}: must be a list of strings")
                for j, item in enumerate(value or []):
                    if "\0" in item:
                        raise ValueError(f"{where}.{list_field}[{j}]: must not contain a NUL character")
            working_dir = container.get("workingDir")
            if working_dir is not None and (not isinstance(working_dir, str) or "\0" in working_dir):
                raise ValueError(f"{where}.workingDir: must be a path (a string)")
            env = container.get("env")
            if env is not None:
                if not isinstance(env, list):
                    raise ValueError(f"{where}.env: must be a list of {{name, value}} entries")
                for j, entry in enumerate(env):
                    check_env_entry(entry, f"{where}.env[{j}]")
    if required_container is not None and not any(
        c.get("name") == required_container for c in containers
    ):
        names = ", ".join(str(c.get("name")) for c in containers)
        raise ValueError(
            f"spec.containers: a container named {required_container!r} is required (found: {names})"
        )
    return check_pod_template(template)


def training_container(template: dict[str, Any], preferred: tuple[str, ...]) -> str:
    """Name of the training container of a validated pod template: the first of ``preferred``
    names present, else container 0 (T9k: ``pytorch`` for PyTorchTrainingJob, ``worker``...)."""
    names = [c.get("name") for c in template["spec"]["containers"]]
    for name in preferred:
        if name in names:
            return name
    return str(names[0])


_ENV_NAME = re.compile(r"^[\x21-\x3c\x3e-\x7e]+$")  # printable ASCII but '=' and space (Kubernetes 1.30+)


def check_env_entry(entry: Any, where: str) -> None:
    """One ``env`` entry as the API server validates it: a name of printable ASCII without ``=``,
    and either a string ``value`` or a ``valueFrom`` mapping."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ValueError(f"{where}.name: required, a string")
    if not _ENV_NAME.match(entry["name"]):
        raise ValueError(f"{where}.name: {entry['name']!r} must be printable ASCII without '=' or spaces")
    if "value" in entry and entry["value"] is not None and not isinstance(entry["value"], str):
        raise ValueError(f"{where}.value: must be a string (quote numbers and booleans)")
    if isinstance(entry.get("value"), str) and "\0" in entry["value"]:
        raise ValueError(f"{where}.value: must not contain a NUL character")
    if "valueFrom" in entry and not isinstance(entry["valueFrom"], dict):
        raise ValueError(f"{where}.valueFrom: must be a mapping (fieldRef, secretKeyRef, configMapKeyRef...)")


PodTemplate = Annotated[dict[str, Any], Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})]


class ReplicaSpecBase(Model):
    """Fields every ``replicaSpecs[]`` entry has."""

    type: ReplicaType
    replicas: Annotated[int, Field(ge=0, le=INT32_MAX)] = 1
    template: PodTemplate

    @field_validator("type")
    @classmethod
    def _type_is_label(cls, value: str) -> str:
        return check_dns_label(value, "replica type")

    @field_validator("template", mode="before")
    @classmethod
    def _template_shape(cls, value: Any) -> Any:
        return validate_pod_template(value)


class Condition(Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = "-"
    message: str = ""
    last_transition_time: str | None = None


class ContainerStatus(Model):
    """One container of a replica's pod (T9k dumps: ``{exitCode: 0, name: pytorch, state: Terminated}``).

    ``exitCode`` only when Terminated. ``reason`` and ``message`` are our additions, copied from
    the pod's container status: the waiting reason and message (``ErrImageNeverPull``,
    ``CreateContainerConfigError: configmap "x" not found``) or the terminated reason
    (``OOMKilled``, ``Completed``, ``Error``...); a terminated container's message only when its
    reason is not ``Completed``/``Error`` (``StartError``: why it could not start), since those
    carry the program's termination message or log tail. Messages are cut at 512 characters.
    """

    name: str
    state: Literal["Waiting", "Running", "Terminated", "Unknown"]
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None


class ReplicaStatus(Model):
    """One replica of ``status.tasks[].replicas``; ``restartCount`` is our per-replica addition.

    ``reason``/``message`` (our addition) say why the pod is where it is, from the pod: its own
    reason and message (``Evicted``: "The node was low on resource: memory..."), the
    ``PodScheduled=False`` condition while it is not scheduled (``Unschedulable``), or an init
    container that waits (``ErrImagePull``, message prefixed ``init container <name>:``).
    """

    name: str
    uid: str = ""
    phase: Literal["Creating", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted"]
    reason: str | None = None
    message: str | None = None
    restart_count: int = 0
    containers: list[ContainerStatus] = Field(default_factory=list)


class TaskStatus(Model):
    type: str
    restart_count: int = 0
    replicas: list[ReplicaStatus] = Field(default_factory=list)


class Aggregate(Model):
    creating: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    deleted: int = 0


JobPhase = Literal["Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"]
TERMINAL_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})


class DependentStatus(Model):
    """``status.tensorboard`` (T9k DependentStatus)."""

    action: str = "NOP"
    dependent: dict[str, str] = Field(default_factory=dict)
    note: str = ""
    ready: bool = False
    reason: str = ""
    type: Literal["Normal", "Warning"] = "Normal"


class JobStatus(Model):
    """Status shared by the four kinds, shaped like the real T9k status dumps (reference §1.8).

    ``startTime``/``completionTime`` are RFC 3339 timestamps; ``startTime`` is set on the first
    pass that acts on the job (as Kubernetes' Job controller does), cleared while it is paused and
    set again on resume; ``activeDeadlineSeconds`` counts from it.
    """

    phase: JobPhase = "Pending"
    conditions: list[Condition] = Field(default_factory=list)
    tasks: list[TaskStatus] = Field(default_factory=list)
    aggregate: Aggregate = Field(default_factory=Aggregate)
    backoff_count: int = 0
    start_time: str | None = None
    completion_time: str | None = None
    observed_generation: int | None = None
    tensorboard: DependentStatus | None = None

    def task(self, replica_type: str) -> TaskStatus | None:
        for task in self.tasks:
            if task.type == replica_type:
                return task
        return None

    def condition(self, type_: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None


class ObjectMeta(Model):
    """The part of ``metadata`` the controller reads; other keys are kept as they are."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", defer_build=True)

    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: str | None = None

    @field_validator("name")
    @classmethod
    def _name_is_label(cls, value: str) -> str:
        return check_dns_label(value, "metadata.name")

    @field_validator("annotations")
    @classmethod
    def _extensions_are_valid(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        """Our ``t9k-jobs.io/`` annotations are validated like fields (:mod:`.extensions`)."""
        extensions(value)
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace_is_label(cls, value: str) -> str:
        """A namespace is a DNS-1123 label, as Kubernetes validates Namespace names; an empty one
        means unset, as for kubectl."""
        return check_dns_label(value, "metadata.namespace") if value else "default"
