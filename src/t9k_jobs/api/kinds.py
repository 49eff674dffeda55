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

from pydantic import (
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from .common import (
    API_VERSION,
    INT32_MAX,
    CleanUpPolicyName,
    ElasticConfig,
    EnabledFlag,
    FieldError,
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
    check_env_entry,
    training_container,
    validate_pod_template,
)
from .pod_schema import check_env_vars, check_resources
from .tokens import check_generic_tokens
from .torchrun import PYTORCH_CONTAINERS, TorchrunError, TorchrunScript, torchrun_script

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
    """One port of the per-replica Services (Kubernetes ServicePort). ``name`` is optional when
    it is the only port, as Kubernetes allows; ``$(service.port[<name>])`` needs a name."""

    name: str | None = None
    port: Annotated[int, Field(ge=1, le=65535)]
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    target_port: IntOrString | None = None
    app_protocol: str | None = None

    @field_validator("name")
    @classmethod
    def _name_is_label(cls, value: str | None) -> str | None:
        return None if value is None else check_dns_label(value, "port name")


class ServiceSpec(Model):
    """``spec.service``: the ports of every replica's Service. As the API server checks a
    Service: with more than one port each needs a name, names are unique, and a port number is
    used once per protocol."""

    ports: list[ServicePort] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ports_apart(self) -> ServiceSpec:
        names: dict[str, int] = {}
        numbers: dict[tuple[int, str], int] = {}
        for i, port in enumerate(self.ports):
            if port.name is None and len(self.ports) > 1:
                raise FieldError(f"ports[{i}].name", "required when the Service has more than one port (a DNS label)")
            if port.name is not None:
                if port.name in names:
                    raise FieldError(f"ports[{i}].name", f"{port.name!r} is also the name of ports[{names[port.name]}]")
                names[port.name] = i
            key = (port.port, port.protocol or "TCP")
            if key in numbers:
                raise FieldError(
                    f"ports[{i}].port", f"{port.port}/{key[1]} is also ports[{numbers[key]}]; each port once per protocol"
                )
            numbers[key] = i
        return self


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
        """Ranks are non-negative integers (or digit strings); a rule with no replica, or a type
        with no rank, could never be met, so both are refused (an empty list of rules is no rules)."""
        for i, rule in enumerate(rules or []):
            if not rule:
                raise FieldError(
                    f"[{i}]", "an empty rule is never met; name the replicas it needs, e.g. {worker: [0, 1]}"
                )
            for replica_type, ranks in rule.items():
                if not ranks:
                    raise FieldError(
                        f"[{i}].{replica_type}", f"no rank given; list the ranks of {replica_type!r} the rule needs, e.g. [0]"
                    )
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
        counts = {r.type: r.replicas for r in self.replica_specs}
        for field, rules in (("successRules", self.success_rules), ("failureRules", self.failure_rules)):
            _check_rule_members(field, rules or [], counts)
        ports = None if self.service is None else [p.name for p in self.service.ports if p.name]
        for i, r in enumerate(self.replica_specs):
            check_generic_tokens(f"replicaSpecs[{i}].template", r.template, counts, ports)
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
        if self.torchrun_enabled:
            for i in range(len(self.replica_specs)):
                try:
                    self.torchrun_script(i)
                except TorchrunError as exc:
                    k, _ = self.training_container(i)
                    raise FieldError(f"replicaSpecs[{i}].template.spec.containers[{k}].{exc.path}", exc.message) from None
        return self

    def training_container(self, i: int) -> tuple[int, dict[str, Any]]:
        """``(index, container)`` of replica spec ``i``'s training container: ``pytorch``, then
        ``python``, then the first (T9k docs)."""
        containers = self.replica_specs[i].template["spec"]["containers"]
        name = training_container(self.replica_specs[i].template, PYTORCH_CONTAINERS)
        return next((k, c) for k, c in enumerate(containers) if c.get("name") == name)

    def torchrun_script(self, i: int) -> TorchrunScript:
        """What torchrun runs in replica spec ``i``'s training container (:func:`.torchrun.torchrun_script`);
        raises :class:`~.torchrun.TorchrunError`."""
        _, c = self.training_container(i)
        extra = self.torchrun_config.extra_options if self.torchrun_config is not None else []
        return torchrun_script([str(a) for a in c.get("command") or []], [str(a) for a in c.get("args") or []], extra)

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
    def _as_list(cls, value: list[str] | str | None, info: ValidationInfo) -> list[str] | None:
        """A scalar split into words; nothing to run (``[]``, ``""``, a first word that is blank)
        refused in plain words: deepspeed would start with no script (issue 41)."""
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"cannot split {value!r} into arguments: {exc}") from None
        if value is not None and (not value or not value[0].strip()):
            what = {"python": "the training script", "module": "the module", "exec": "the program"}[str(info.field_name)]
            example = {"python": '["train.py", "--epochs", "3"]', "module": '["mypackage.train", "--epochs", "3"]',
                       "exec": '["./train.sh", "--epochs", "3"]'}[str(info.field_name)]  # fmt: skip
            raise ValueError(f"nothing to run: give {what} and its arguments, e.g. {example}")
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
    def slots(self) -> int | None:
        """Slots per worker as given: ``slotsPerWorker``, else the older ``slotPerWorker``, else
        ``None``: the framework then takes the training container's GPUs (T9k: slots are normally
        the GPUs of a worker)."""
        return self.slots_per_worker or self.slot_per_worker


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
    """``spec.launcher``: the launcher container's image (default: the worker's), working
    directory, env (Kubernetes EnvVars, checked as the API server would) and resources."""

    image: str | None = None
    working_dir: str | None = None
    env: list[dict[str, Any]] = Field(default_factory=list)
    resources: dict[str, Any] | None = None

    @field_validator("env", mode="before")
    @classmethod
    def _env_vars(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value  # the type check reports it
        for j, entry in enumerate(value):
            try:
                check_env_entry(entry, f"[{j}]")
            except ValueError as exc:
                where, _, what = str(exc).partition(": ")
                raise FieldError(where, what) from None
        return check_env_vars(value)

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> Any:
        """Checked as a container's resources in a pod (quantities, whole GPUs, requests <= limits)."""
        return None if value is None else check_resources(value)


def launch_items(torch_args: list[str]) -> list[tuple[str, str | None, int]]:
    """torchrun options as ``colossalai run --extra_launch_args`` takes them: ``(name, value,
    index)`` per option, ``index`` the item of ``torch_args`` that holds the value (or the name).

    ``["--max_restarts", "3", "--standalone", "--rdzv_backend=c10d"]`` gives ``[("max_restarts",
    "3", 1), ("standalone", None, 2), ("rdzv_backend", "c10d", 3)]``: a flag takes the next item
    as its value unless that starts with ``-``.
    """
    out: list[tuple[str, str | None, int]] = []
    i = 0
    while i < len(torch_args):
        item = torch_args[i].strip()
        name, sep, value = item.lstrip("-").partition("=")
        if sep:
            out.append((name, value, i))
        elif i + 1 < len(torch_args) and not torch_args[i + 1].startswith("-"):
            out.append((name, torch_args[i + 1].strip(), i + 1))
            i += 1
        else:
            out.append((name, None, i))
        i += 1
    return out


def extra_launch_args(torch_args: list[str]) -> str:
    """The value of ``colossalai run --extra_launch_args``: ``name=value`` (or ``name``) items
    joined with ``,`` (``["--max_restarts", "3"]`` gives ``max_restarts=3``)."""
    return ",".join(name if value is None else f"{name}={value}" for name, value, _ in launch_items(torch_args))


def check_launch_args(torch_args: list[str]) -> list[str]:
    """Refuse torchrun options that ``colossalai run`` (0.5, ``cli/launcher/run.py``) cannot pass:
    it splits ``--extra_launch_args`` at every ``,`` and each item at ``=`` into exactly two parts,
    so a ``,`` or ``=`` inside a value (``--rdzv_conf=timeout=30``), or an empty name, makes the
    launcher fail. Raises :class:`FieldError` at the item's index; returns ``torch_args``."""
    for name, value, index in launch_items(torch_args):
        if not name or "," in name or "=" in name or (value is not None and ("," in value or "=" in value)):
            held = torch_args[index]
            bad = "," if "," in f"{name}{value or ''}" else "=" if name else "an empty option name"
            what = f"holds {bad!r}" if bad in (",", "=") else f"is {bad}"
            raise FieldError(
                f"[{index}]",
                f"{held!r} {what}: colossalai run passes torchrun options as one "
                "--extra_launch_args=name=value,name=value list, so a name or value cannot contain ',' or '='",
            )
    return torch_args


def check_colossalai_not_empty(value: Any) -> Any:
    """An empty command (``[]``, or a blank first word) in plain words, before the list's own
    checks would say it in pydantic's. Raises ``ValueError``."""
    if isinstance(value, list) and (not value or (isinstance(value[0], str) and not value[0].strip())):
        raise ValueError(
            'nothing to run: give the training script (a .py file) or -m and a module, and their arguments '
            '(e.g. ["train.py", "--epochs", "3"])'
        )
    return value


def check_colossalai_command(value: list[str]) -> list[str]:
    """``colossalai run`` (0.5) takes a ``.py`` script or ``-m module`` and starts it with torchrun
    itself; anything else (``python train.py``, ``run.sh``) is a usage error after which it exits
    0, and the job would end Succeeded with nothing trained. Raises ``ValueError``."""
    first = value[0].strip()
    if first.endswith(".py") or (first == "-m" and len(value) > 1):
        return value
    raise ValueError(
        f"command[0] is {value[0]!r}: give the training script (a .py file) or -m and a module "
        '(e.g. ["train.py", "--epochs", "3"]); colossalai run starts it with python itself'
    )


class ColossalAIWorker(Model):
    replicas: Annotated[int, Field(ge=0, le=INT32_MAX)] = 1
    proc_per_worker: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    command: Annotated[list[str], Field(min_length=1)]
    torch_args: list[str] = Field(default_factory=list)
    template: PodTemplate

    @field_validator("command", mode="before")
    @classmethod
    def _something_to_run(cls, value: Any) -> Any:
        return check_colossalai_not_empty(value)

    @field_validator("command")
    @classmethod
    def _script_first(cls, value: list[str]) -> list[str]:
        return check_colossalai_command(value)

    @field_validator("torch_args")
    @classmethod
    def _launch_args(cls, value: list[str]) -> list[str]:
        return check_launch_args(value)

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
    ``command``, not both) every worker runs, and ``torchArgs``/``extraArgs``: torchrun options
    that ``colossalai run`` passes on (``--extra_launch_args``), the two lists joined."""

    proc_per_worker: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1
    script: Annotated[list[str], Field(min_length=1)] | None = None
    command: Annotated[list[str], Field(min_length=1)] | None = None
    torch_args: list[str] = Field(default_factory=list)
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("script", "command", mode="before")
    @classmethod
    def _something_to_run(cls, value: Any) -> Any:
        return check_colossalai_not_empty(value)

    @field_validator("script", "command")
    @classmethod
    def _script_first(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_colossalai_command(value)

    @field_validator("torch_args", "extra_args")
    @classmethod
    def _launch_args(cls, value: list[str]) -> list[str]:
        return check_launch_args(value)

    @model_validator(mode="after")
    def _one_script(self) -> ColossalAITorchConfig:
        if self.script is not None and self.command is not None:
            raise FieldError("command", "give the training script in script or in command, not both")
        if self.script is None and self.command is None:
            raise FieldError("script", "required: the training script (a .py file) and its arguments")
        return self


class ColossalAIReplicaSpec(ReplicaSpecBase):
    """The older ColossalAIJob form's ``spec.replicaSpecs[]``, type launcher or worker.

    The launcher is one pod: its ``replicas`` is 1 (or left out). The worker's template needs a
    container named ``worker``, as the newer form's. ``restartPolicy`` is accepted as a policy
    name or as ``{policy, limit}`` (that form's API reference); ColossalAIJob never restarts a
    replica, since a restarted pod would not rejoin the training (T9k docs, reference §5.4), so a
    policy that would restart draws a warning (:meth:`t9k_jobs.frameworks.base.Framework.warnings`)."""

    type: Literal["launcher", "worker"]  # type: ignore[assignment]
    restart_policy: Annotated[
        Union[RestartPolicyName, GenericRestartPolicy, None],
        Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}),
    ] = None

    @model_validator(mode="after")
    def _per_type(self) -> ColossalAIReplicaSpec:
        if self.type == "launcher" and self.replicas != 1:
            raise FieldError(
                "replicas", f"{self.replicas} launchers asked for: a ColossalAIJob has exactly one launcher (1, or leave it out)"
            )
        if self.type == "worker":
            try:
                validate_pod_template(self.template, required_container="worker")
            except ValueError as exc:
                where, _, what = str(exc).partition(": ")
                raise FieldError(f"template.{where}", what) from None
        return self

    @property
    def would_restart(self) -> bool:
        """Whether ``restartPolicy`` asks for restarts (a name other than Never, or a ``limit`` > 0
        with a policy other than Never), which a ColossalAIJob never makes."""
        policy = self.restart_policy
        if policy is None:
            return False
        if isinstance(policy, str):
            return policy != "Never"
        return policy.policy != "Never" and policy.limit > 0


#: The two forms of a ColossalAIJob spec: fields of one may not be mixed with the other's.
_NEWER_FORM = ("launcher", "worker")
_OLDER_FORM = ("torchConfig", "replicaSpecs")


class ColossalAIJobSpec(Model):
    """A ColossalAIJob spec in the current form (``launcher`` + ``worker``) or the older one
    (``torchConfig`` + ``replicaSpecs`` of types launcher and worker), never the two mixed: a
    field of the other form would be ignored, so it is refused."""

    # The older form is read into ``worker`` (the launcher's template is kept), so the frameworks
    # see one shape (reference §5.5). ``worker``/``launcher`` made that way, and the default
    # ``launcher``, are left out when the spec is written back (``dump``): the manifest round-trips.

    ssh: ColossalAISSH = Field(default_factory=ColossalAISSH)
    launcher: ColossalAILauncher | None = None
    worker: ColossalAIWorker | None = None
    torch_config: ColossalAITorchConfig | None = None
    replica_specs: list[ColossalAIReplicaSpec] | None = None
    run_policy: ColossalAIRunPolicy = Field(default_factory=ColossalAIRunPolicy)
    run_mode: RunMode | None = None
    scheduler: SchedulerPolicy | None = None

    #: Fields this model filled in itself (not given in the manifest): left out of its dump.
    _derived: set[str] = PrivateAttr(default_factory=set)

    @model_validator(mode="after")
    def _checks(self) -> ColossalAIJobSpec:
        newer = [f for f in _NEWER_FORM if getattr(self, _snake(f)) is not None]
        older = [f for f in _OLDER_FORM if getattr(self, _snake(f)) is not None]
        if newer and older:
            raise FieldError(
                older[0],
                f"belongs to the older form (torchConfig with replicaSpecs), and this spec has {newer[0]} of "
                "the current form; use one form: launcher with worker (worker.procPerWorker, worker.command, "
                "worker.torchArgs), or torchConfig with replicaSpecs of types launcher and worker",
            )
        if older:
            self._read_older_form()
        if self.worker is None:
            raise FieldError("worker", "required (or the older form: torchConfig with replicaSpecs of type worker)")
        if self.worker.replicas < 1:
            where = f"replicaSpecs[{self._worker_index()}].replicas" if self.older_form else "worker.replicas"
            raise FieldError(where, "at least 1 (colossalai run with no worker exits 0 having run nothing)")
        if self.launcher is None and self.legacy_launcher_template is None:
            self.launcher = ColossalAILauncher()
            self._derived.add("launcher")
        return self

    def _worker_index(self) -> int:
        return next(i for i, s in enumerate(self.replica_specs or []) if s.type == "worker")

    def _read_older_form(self) -> None:
        """``torchConfig`` + ``replicaSpecs`` into ``worker``; raises :class:`FieldError`."""
        if self.replica_specs is None:
            raise FieldError("replicaSpecs", "required with torchConfig: entries of types launcher and worker")
        _check_unique_types([r.type for r in self.replica_specs])
        spec = next((s for s in self.replica_specs if s.type == "worker"), None)
        if spec is None:
            raise FieldError("replicaSpecs", "an entry of type worker is required (the workers that run the training)")
        torch = self.torch_config
        if torch is None:
            raise FieldError("torchConfig", "required with replicaSpecs: procPerWorker and the script the workers run")
        command = torch.script or torch.command
        assert command is not None  # ColossalAITorchConfig requires one
        self.worker = ColossalAIWorker.model_construct(
            replicas=spec.replicas,
            proc_per_worker=torch.proc_per_worker,
            command=list(command),
            torch_args=[*torch.torch_args, *torch.extra_args],
            template=spec.template,
        )
        self._derived.add("worker")

    @model_serializer(mode="wrap")
    def _without_derived(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for name in self._derived:
            data.pop(name, None)
        return data  # type: ignore[no-any-return]

    @property
    def older_form(self) -> bool:
        """Whether the spec was given in the older form (``worker`` is read from it)."""
        return "worker" in self._derived

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


def _snake(field: str) -> str:
    """``torchConfig`` -> ``torch_config``: a wire name as the model's attribute."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in field)


def _check_rule_members(field: str, rules: list[FinishRule], counts: dict[str, int]) -> None:
    """Every replica a GenericJob rule names exists: a rule naming a type the job lacks, or a
    rank at or past its type's ``replicas``, could never be met (reference §2.3), so it is
    refused at ``<field>[i].<type>`` or ``<field>[i].<type>[j]``. Raises :class:`FieldError`."""
    for i, rule in enumerate(rules):
        for replica_type, ranks in rule.items():
            if replica_type not in counts:
                known = ", ".join(counts)
                raise FieldError(
                    f"{field}[{i}].{replica_type}", f"no replica type {replica_type!r} in replicaSpecs (types: {known})"
                )
            for j, rank in enumerate(ranks):
                if int(rank) >= counts[replica_type]:
                    n = counts[replica_type]
                    have = f"ranks 0 to {n - 1}" if n > 1 else ("rank 0" if n == 1 else "no replica")
                    raise FieldError(
                        f"{field}[{i}].{replica_type}[{j}]",
                        f"rank {int(rank)} does not exist: type {replica_type!r} has {n} replicas ({have})",
                    )


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
