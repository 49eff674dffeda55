"""The four job kinds: GenericJob, PyTorchTrainingJob, DeepSpeedJob, ColossalAIJob.

Each kind is ``{apiVersion, kind, metadata, spec, status}`` with the spec fields and defaults
of the T9k API references (reference §2.1, §3.1, §4.1, §5.1). Older spellings that real
manifests use are accepted next to the current ones (``enable``/``enabled``,
``slotPerWorker``, ``sshAuthMountPath``, a scalar ``run.python``, ``cleanUpWorkers`` as a
string) and the older ColossalAIJob form (``torchConfig`` + ``replicaSpecs``) is normalised
into the current one.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Field, field_validator, model_validator

from .common import (
    API_VERSION,
    INT32_MAX,
    CleanUpPolicyName,
    ElasticConfig,
    EnabledFlag,
    JobStatus,
    Model,
    ObjectMeta,
    PodTemplate,
    ReplicaSpecBase,
    RestartPolicyName,
    RunMode,
    RunPolicy,
    SchedulerPolicy,
    check_dns_label,
    validate_pod_template,
)

IntOrString = Annotated[int | str, Field(json_schema_extra={"x-kubernetes-int-or-string": True})]
FinishRule = dict[str, list[IntOrString]]


class JobBase(Model):
    """What every kind has; subclasses fix ``kind`` and the spec type."""

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    SHORT_NAME: ClassVar[str] = ""

    api_version: Literal["batch.tensorstack.dev/v1beta1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    status: JobStatus | None = None

    @field_validator("kind")
    @classmethod
    def _kind_matches(cls, value: str) -> str:
        if value != cls.KIND:
            raise ValueError(f"kind must be {cls.KIND!r}")
        return value

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def run_mode(self) -> RunMode:
        return getattr(self.spec, "run_mode", None) or RunMode()  # type: ignore[attr-defined]

    @property
    def scheduler(self) -> SchedulerPolicy | None:
        return getattr(self.spec, "scheduler", None)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- GenericJob


class GenericRestartPolicy(Model):
    """GenericJob ``restartPolicy``: ``policy`` (default OnFailure) and a per-replica ``limit`` (default 0)."""

    policy: Literal["Always", "OnFailure", "Never"] = "OnFailure"
    limit: Annotated[int, Field(ge=0, le=INT32_MAX)] = 0


class GenericReplicaSpec(ReplicaSpecBase):
    restart_policy: GenericRestartPolicy = Field(default_factory=GenericRestartPolicy)


class ServicePort(Model):
    name: str
    port: Annotated[int, Field(ge=1, le=65535)]
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    target_port: IntOrString | None = None
    app_protocol: str | None = None

    @field_validator("name")
    @classmethod
    def _name_is_label(cls, value: str) -> str:
        return check_dns_label(value, "port name")


class ServiceSpec(Model):
    ports: list[ServicePort] = Field(default_factory=list)


class GenericJobSpec(Model):
    success_rules: list[FinishRule] | None = None
    failure_rules: list[FinishRule] | None = None
    service: ServiceSpec | None = None
    run_mode: RunMode | None = None
    clean_up_policy: CleanUpPolicyName = "None"
    scheduler: SchedulerPolicy | None = None
    replica_specs: Annotated[list[GenericReplicaSpec], Field(min_length=1)]

    @field_validator("success_rules", "failure_rules")
    @classmethod
    def _rule_ranks(cls, rules: list[FinishRule] | None) -> list[FinishRule] | None:
        for rule in rules or []:
            for replica_type, ranks in rule.items():
                for rank in ranks:
                    if isinstance(rank, str) and not rank.strip().isdigit():
                        raise ValueError(
                            f"rank {rank!r} of type {replica_type!r} must be a non-negative integer"
                        )
                    if isinstance(rank, int) and rank < 0:
                        raise ValueError(f"rank {rank} of type {replica_type!r} must not be negative")
        return rules

    @model_validator(mode="after")
    def _unique_types(self) -> GenericJobSpec:
        _check_unique_types([r.type for r in self.replica_specs])
        _check_some_replicas([r.replicas for r in self.replica_specs])
        return self


class GenericJob(JobBase):
    KIND: ClassVar[str] = "GenericJob"
    PLURAL: ClassVar[str] = "genericjobs"
    SHORT_NAME: ClassVar[str] = "gj"
    kind: Literal["GenericJob"] = "GenericJob"
    spec: GenericJobSpec


# --------------------------------------------------------------------------- PyTorchTrainingJob


class PyTorchReplicaSpec(ReplicaSpecBase):
    restart_policy: RestartPolicyName = "Never"
    scaling_weight: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None


class TorchrunConfig(EnabledFlag):
    """``spec.torchrunConfig`` (reference §3.4). ``procPerNode``: a count, ``gpu``, ``cpu`` or ``auto``."""

    max_restarts: Annotated[int, Field(ge=0, le=INT32_MAX)] = 0
    proc_per_node: IntOrString = "1"
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2"] = "c10d"
    extra_options: list[str] = Field(default_factory=list)
    min_nodes: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None

    @field_validator("proc_per_node")
    @classmethod
    def _proc_per_node(cls, value: int | str) -> int | str:
        """What torchrun's ``--nproc_per_node`` accepts: a count, ``gpu``, ``cpu`` or ``auto``."""
        text = str(value).strip()
        if text in ("gpu", "cpu", "auto") or (text.isdigit() and 1 <= int(text) <= INT32_MAX):
            return value
        raise ValueError(f"procPerNode {value!r} must be a positive integer, 'gpu', 'cpu' or 'auto' (as torchrun's --nproc_per_node)")


class PyTorchTrainingJobSpec(Model):
    replica_specs: Annotated[list[PyTorchReplicaSpec], Field(min_length=1)]
    torchrun_config: TorchrunConfig | None = None
    elastic: ElasticConfig | None = None
    run_mode: RunMode | None = None
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    tensorboard_spec: Annotated[dict[str, Any], Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})] | None = None
    scheduler: SchedulerPolicy | None = None

    @model_validator(mode="after")
    def _checks(self) -> PyTorchTrainingJobSpec:
        _check_unique_types([r.type for r in self.replica_specs])
        if not self.elastic_enabled:
            _check_some_replicas([r.replicas for r in self.replica_specs])
        if self.elastic is not None and self.elastic.is_enabled and not self.torchrun_enabled:
            raise ValueError("elastic: elastic training needs torchrunConfig.enabled: true")
        return self

    @property
    def torchrun_enabled(self) -> bool:
        return self.torchrun_config is not None and self.torchrun_config.is_enabled

    @property
    def elastic_enabled(self) -> bool:
        return self.elastic is not None and self.elastic.is_enabled


class PyTorchTrainingJob(JobBase):
    KIND: ClassVar[str] = "PyTorchTrainingJob"
    PLURAL: ClassVar[str] = "pytorchtrainingjobs"
    SHORT_NAME: ClassVar[str] = "pj"
    kind: Literal["PyTorchTrainingJob"] = "PyTorchTrainingJob"
    spec: PyTorchTrainingJobSpec


# --------------------------------------------------------------------------- DeepSpeedJob

StringOrList = Annotated[
    Union[list[str], str], Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})
]


class DeepSpeedRun(Model):
    """``spec.config.run``: exactly one of ``python``, ``module``, ``exec`` (T9k docs).

    A scalar (``python: train.py --epochs 3``), as in the DeepSpeedJob guide, is split like a shell
    command line.
    """

    python: StringOrList | None = None
    module: StringOrList | None = None
    exec: StringOrList | None = None

    @field_validator("python", "module", "exec", mode="after")
    @classmethod
    def _as_list(cls, value: list[str] | str | None) -> list[str] | None:
        if isinstance(value, str):
            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"cannot split {value!r} into arguments: {exc}") from None
            return words or [value]
        return value

    @property
    def which(self) -> list[str]:
        return [k for k in ("python", "module", "exec") if getattr(self, k) is not None]


class DeepSpeedConfig(Model):
    run: DeepSpeedRun | None = None
    slots_per_worker: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    slot_per_worker: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    local_rank: bool = True
    autotune: Literal["none", "tune", "run"] = "none"
    other_args: list[str] = Field(default_factory=list)
    custom_command: str | None = None

    @model_validator(mode="after")
    def _one_run(self) -> DeepSpeedConfig:
        if self.custom_command:
            return self
        chosen = self.run.which if self.run else []
        if len(chosen) != 1:
            found = ", ".join(chosen) if chosen else "none"
            raise ValueError(
                "run: exactly one of run.python, run.module, run.exec is required "
                f"unless customCommand is set (found: {found})"
            )
        return self

    @property
    def slots(self) -> int:
        """Slots per worker: ``slotsPerWorker``, else the older ``slotPerWorker``, else 1."""
        return self.slots_per_worker or self.slot_per_worker or 1


class DeepSpeedWorker(Model):
    replicas: Annotated[int, Field(ge=0, le=INT32_MAX)] = 1
    restart_policy: RestartPolicyName = "OnFailure"
    template: PodTemplate

    @field_validator("template", mode="before")
    @classmethod
    def _template_shape(cls, value: Any) -> Any:
        return validate_pod_template(value)


class DeepSpeedJobSpec(Model):
    worker: DeepSpeedWorker
    config: DeepSpeedConfig
    disable_custom_env: bool = False
    elastic: ElasticConfig | None = None
    run_mode: RunMode | None = None
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    scheduler: SchedulerPolicy | None = None

    @property
    def elastic_enabled(self) -> bool:
        return self.elastic is not None and self.elastic.is_enabled

    @model_validator(mode="after")
    def _some_workers(self) -> DeepSpeedJobSpec:
        if self.worker.replicas < 1 and not self.elastic_enabled:
            raise ValueError("worker.replicas: at least 1 (worker-0 runs the deepspeed launcher)")
        return self


class DeepSpeedJob(JobBase):
    KIND: ClassVar[str] = "DeepSpeedJob"
    PLURAL: ClassVar[str] = "deepspeedjobs"
    SHORT_NAME: ClassVar[str] = "dj"
    kind: Literal["DeepSpeedJob"] = "DeepSpeedJob"
    spec: DeepSpeedJobSpec


# --------------------------------------------------------------------------- ColossalAIJob


class ColossalAISSH(Model):
    """``spec.ssh``: key mount path (``authMountPath``, older ``sshAuthMountPath``) and sshd path."""

    auth_mount_path: str | None = None
    ssh_auth_mount_path: str | None = None
    sshd_path: str = "/usr/sbin/sshd"

    @field_validator("sshd_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"sshdPath {value!r} must be an absolute path")
        return value

    @property
    def mount_path(self) -> str:
        return self.auth_mount_path or self.ssh_auth_mount_path or "/root/.ssh"


class ColossalAILauncher(Model):
    image: str | None = None
    working_dir: str | None = None
    env: list[dict[str, Any]] = Field(default_factory=list)
    resources: dict[str, Any] | None = None


class ColossalAIWorker(Model):
    replicas: Annotated[int, Field(ge=0, le=INT32_MAX)] = 1
    proc_per_worker: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    command: Annotated[list[str], Field(min_length=1)]
    torch_args: list[str] = Field(default_factory=list)
    template: PodTemplate

    @field_validator("command")
    @classmethod
    def _script_first(cls, value: list[str]) -> list[str]:
        """``colossalai run`` (0.5) takes a ``.py`` script or ``-m module`` and starts it with torchrun
        itself; anything else (``python train.py``, ``run.sh``) is a usage error after which it
        exits 0, and the job would end Succeeded with nothing trained."""
        first = value[0].strip()
        if first.endswith(".py") or (first == "-m" and len(value) > 1):
            return value
        raise ValueError(
            f"command[0] is {value[0]!r}: give the training script (a .py file) or -m and a module "
            '(e.g. ["train.py", "--epochs", "3"]); colossalai run starts it with python itself'
        )

    @field_validator("template", mode="before")
    @classmethod
    def _template_shape(cls, value: Any) -> Any:
        return validate_pod_template(value, required_container="worker")


CleanUpWorkers = Annotated[
    Union[bool, str], Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})
]


class ColossalAIRunPolicy(Model):
    """``spec.runPolicy.cleanUpWorkers``: a bool, or the older strings all/unfinished/none."""

    clean_up_workers: CleanUpWorkers = False

    @field_validator("clean_up_workers")
    @classmethod
    def _bool_or_word(cls, value: bool | str) -> bool | str:
        if isinstance(value, bool):
            return value
        if value.strip().lower() in {"all", "unfinished", "none", "true", "false"}:
            return value
        raise ValueError(f"cleanUpWorkers {value!r} must be true, false, all, unfinished or none")

    @property
    def clean_up(self) -> bool:
        value = self.clean_up_workers
        if isinstance(value, bool):
            return value
        return value.strip().lower() in {"all", "unfinished", "true"}


class ColossalAITorchConfig(Model):
    """The older ColossalAIJob form's ``spec.torchConfig``: ``procPerWorker``, the ``script`` (or
    ``command``) every worker runs, and ``torchArgs``/``extraArgs``: torchrun options that
    ``colossalai run`` passes on (``--extra_launch_args``), the two lists joined."""

    proc_per_worker: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    script: list[str] | None = None
    command: list[str] | None = None
    torch_args: list[str] = Field(default_factory=list)
    extra_args: list[str] = Field(default_factory=list)


class ColossalAIReplicaSpec(ReplicaSpecBase):
    """The older ColossalAIJob form's ``spec.replicaSpecs[]``, type launcher or worker.

    ``restartPolicy`` is accepted as a policy name or as ``{policy, limit}`` (that form's API
    reference) and has no effect: ColossalAIJob never restarts a replica, since a restarted pod
    would not rejoin the training (T9k docs, reference §5.4)."""

    type: Literal["launcher", "worker"]  # type: ignore[assignment]
    restart_policy: Annotated[
        Union[RestartPolicyName, GenericRestartPolicy, None],
        Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}),
    ] = None


class ColossalAIJobSpec(Model):
    ssh: ColossalAISSH = Field(default_factory=ColossalAISSH)
    launcher: ColossalAILauncher | None = None
    worker: ColossalAIWorker | None = None
    torch_config: ColossalAITorchConfig | None = None
    replica_specs: list[ColossalAIReplicaSpec] | None = None
    run_policy: ColossalAIRunPolicy = Field(default_factory=ColossalAIRunPolicy)
    run_mode: RunMode | None = None
    scheduler: SchedulerPolicy | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalise_legacy(cls, data: Any) -> Any:
        """Map the older ``torchConfig``/``replicaSpecs`` form onto ``launcher``/``worker``."""
        if not isinstance(data, dict) or "replicaSpecs" not in data or "worker" in data:
            return data
        specs = data.get("replicaSpecs")
        torch = data.get("torchConfig") or {}
        if not isinstance(specs, list) or not isinstance(torch, dict):
            return data
        worker = next((s for s in specs if isinstance(s, dict) and s.get("type") == "worker"), None)
        if worker is None:
            return data
        out = dict(data)
        out["worker"] = {
            "replicas": worker.get("replicas", 1),
            "procPerWorker": torch.get("procPerWorker", 1),
            "command": torch.get("script") or torch.get("command") or [],
            "torchArgs": [*(torch.get("torchArgs") or []), *(torch.get("extraArgs") or [])],
            "template": worker.get("template"),
        }
        return out

    @model_validator(mode="after")
    def _checks(self) -> ColossalAIJobSpec:
        if self.worker is None:
            raise ValueError(
                "worker: required (or the older form: torchConfig with replicaSpecs of type worker)"
            )
        if self.worker.replicas < 1:
            raise ValueError("worker.replicas: at least 1 (colossalai run with no worker exits 0 having run nothing)")
        if self.replica_specs:
            types = [r.type for r in self.replica_specs]
            _check_unique_types(types)
        if self.launcher is None and self.legacy_launcher_template is None:
            self.launcher = ColossalAILauncher()
        return self

    @property
    def legacy_launcher_template(self) -> dict[str, Any] | None:
        for spec in self.replica_specs or []:
            if spec.type == "launcher":
                return spec.template
        return None


class ColossalAIJob(JobBase):
    KIND: ClassVar[str] = "ColossalAIJob"
    PLURAL: ClassVar[str] = "colossalaijobs"
    SHORT_NAME: ClassVar[str] = "caij"
    kind: Literal["ColossalAIJob"] = "ColossalAIJob"
    spec: ColossalAIJobSpec


def _check_some_replicas(counts: list[int]) -> None:
    """A job of no replica at all would wait for ever: refuse it."""
    if not any(counts):
        raise ValueError("replicaSpecs: every replicas is 0; a job needs at least one replica")


def _check_unique_types(types: list[str]) -> None:
    seen: set[str] = set()
    for t in types:
        if t in seen:
            raise ValueError(f"replicaSpecs: replica type {t!r} appears more than once")
        seen.add(t)


Job = GenericJob | PyTorchTrainingJob | DeepSpeedJob | ColossalAIJob
KINDS: dict[str, type[JobBase]] = {
    cls.KIND: cls for cls in (GenericJob, PyTorchTrainingJob, DeepSpeedJob, ColossalAIJob)
}
