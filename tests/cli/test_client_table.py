"""The Client's rules in tables, over a fake Backend (issue 34): argument errors, wait outcomes,
edit refusals and results, log checks, the replica prefix and the event list, each case a row, as
JobSet's ``failure_policy_test.go`` tables its policy. The rules are the Client's (and the view's),
not a backend's, so a backend that holds views in memory is all a row needs: milliseconds each,
no process, no API server. What each real backend adds (files, requests) is tested beside it
(tests/local, tests/cluster)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from t9k_jobs import Client
from t9k_jobs.addressing import replica_prefix
from t9k_jobs.api import JobStatus
from t9k_jobs.api.common import Condition
from t9k_jobs.errors import InvalidJob, JobEndedOtherwise, JobsError, NotFound, NotSupported, UsageError, WaitTimeout
from t9k_jobs.frameworks import parse_job
from t9k_jobs.sdk.backend import Backend
from t9k_jobs.sdk.view import Edited, Event, JobView, LogOptions, LogStream
from t9k_jobs.words import STOPPED, UNKNOWN

SERVER = "https://example.invalid"


def container(name: str) -> dict[str, Any]:
    return {"name": name, "image": "i"}


def generic(name: str = "g", containers: tuple[str, ...] = ("c",), paused: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicaSpecs": [
            {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [container(c) for c in containers]}}}
        ]
    }
    if paused:
        spec["runMode"] = {"pause": {"enabled": True}}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name}, "spec": spec}


def pytorch(name: str = "e", elastic: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "torchrunConfig": {"enabled": True, "procPerNode": "1"},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "i", "command": ["python", "train.py"]}]}}}],
    }
    if elastic:
        spec["elastic"] = {"enabled": True, "minReplicas": 2, "maxReplicas": 6, "expectedReplicas": 4}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_view(
    manifest: dict[str, Any],
    phase: str = "Running",
    target: str = "cluster",
    status: JobStatus | None = None,
    valid: bool = True,
    **extra: Any,
) -> JobView:
    """A view of ``manifest`` as a backend would return it (``valid=False``: its spec does not validate)."""
    manifest = copy.deepcopy(manifest)
    if target == "cluster":
        manifest["metadata"].setdefault("namespace", "default")
    status = status if status is not None else JobStatus(phase=phase if phase not in (STOPPED, UNKNOWN) else "Running")

    def load_object() -> dict[str, Any]:
        return {**manifest, "status": status.dump()}

    return JobView(
        target=target,
        kind=manifest["kind"],
        name=manifest["metadata"]["name"],
        namespace=manifest["metadata"].get("namespace") if target == "cluster" else None,
        phase=phase,
        status=status,
        created=None,
        replicas=2,
        running=0,
        load_job=(lambda: parse_job(manifest, "<view>")) if valid else (lambda: None),
        load_spec=lambda: manifest["spec"],
        load_object=load_object,
        **extra,
    )


@dataclass
class FakeBackend:
    """A :class:`Backend` over views in memory. ``views``: what ``get`` finds, by name; ``script``:
    what ``watch`` sees, one view after another (None: the job was deleted); ``lines``: what
    ``logs`` gives once :meth:`LogOptions.check` passes, as both real backends check; ``calls``:
    every method called, with its arguments (a refused verb calls none)."""

    target: str = "cluster"
    views: dict[str, JobView] = field(default_factory=dict)
    script: list[JobView | None] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def namespace(self) -> str | None:
        return "default" if self.target == "cluster" else None

    @property
    def server(self) -> str | None:
        return SERVER if self.target == "cluster" else None

    def _view(self, kind: str, name: str) -> JobView:
        view = self.views.get(name)
        if view is None or view.kind != kind:
            raise NotFound(f"{kind} {name!r} not found")
        return view

    def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        self.calls.append(("get", kind, name))
        return self._view(kind, name)

    def list(self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
             all_namespaces: bool = False, detail: bool = False) -> list[JobView]:
        self.calls.append(("list", kind, name))
        return [v for v in self.views.values() if kind is None or v.kind == kind]

    def create(self, job: Any, manifest: dict[str, Any], path: Any, namespace: str | None = None) -> JobView:
        self.calls.append(("create", job.name))
        return make_view(manifest, "Pending", self.target)

    def delete(self, kind: str, name: str, namespace: str | None = None, purge: bool = False,
               timeout: float | None = None) -> list[str]:
        self.calls.append(("delete", kind, name))
        return [f"{kind} {name} deleted"]

    def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        self.calls.append(("set_field", ".".join(path), value))
        manifest = copy.deepcopy(view.object)
        manifest.pop("status", None)
        node = manifest
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        return make_view(manifest, view.phase, self.target)

    def logs(self, kind: str, name: str, options: LogOptions, namespace: str | None = None) -> LogStream:
        self.calls.append(("logs", kind, name))
        options.check(self._view(kind, name).job)
        return LogStream(iter(self.lines))

    def watch(self, kind: str, name: str, namespace: str | None, done: Callable[[JobView | None], bool],
              timeout: float | None) -> tuple[JobView | None, bool]:
        self.calls.append(("watch", kind, name, timeout))
        last: JobView | None = None
        for view in self.script:
            last = view
            if done(view):
                return view, True
        return last, False

    def close(self) -> None:
        return None


def client(target: str = "cluster", *views: JobView, **kwargs: Any) -> tuple[Client, FakeBackend]:
    backend = FakeBackend(target, {v.name: v for v in views}, **kwargs)
    return Client(backend), backend


def test_the_fake_is_a_backend() -> None:
    assert isinstance(FakeBackend(), Backend)


# --------------------------------------------------------------------------- argument errors

#: ``(what is called, the error, its message)``: refused before the backend is asked anything.
ARGUMENT_ERRORS: list[tuple[str, Callable[[Client], Any], type[Exception], str]] = [
    ("get without a name", lambda c: c.get("gj", ""), UsageError, "a job name is required"),
    ("an unknown kind", lambda c: c.get("batchjob", "g"), UsageError, "unknown kind 'batchjob'"),
    ("a name with a slash", lambda c: c.delete("gj", "a/b"), UsageError, "name"),
    ("a namespace that is no label", lambda c: c.get("gj", "g", namespace="Team_A"), UsageError, "namespace"),
    ("wait for a phase it cannot wait for", lambda c: c.wait("gj", "g", phase="Pending"), UsageError,
     "--for='Pending' is not accepted: use Succeeded, Failed or Running"),
    ("wait with a bad duration", lambda c: c.wait("gj", "g", timeout="soon"), UsageError, "soon"),
    ("wait with a negative timeout", lambda c: c.wait("gj", "g", timeout=-1), UsageError,
     "timeout: expected a finite number of seconds, zero or more, got -1"),
    ("wait for NaN seconds", lambda c: c.wait("gj", "g", timeout=float("nan")), UsageError,
     "timeout: expected a finite number of seconds, zero or more, got nan"),
    ("a NAME without a KIND", lambda c: c.summaries(None, "g"), UsageError, "a NAME needs a KIND: get KIND NAME"),
    ("a NAME with -A", lambda c: c.summaries("gj", "g", all_namespaces=True), UsageError,
     "-A/--all-namespaces lists jobs; it cannot be combined with a NAME"),
    ("tail of a fraction", lambda c: c.logs("gj", "g", tail=1.5), UsageError, "tail"),
    ("follow that is a word", lambda c: c.logs("gj", "g", follow="no"), UsageError, "follow"),
    ("scale to a string", lambda c: c.scale("pj", "e", "3"), UsageError, "replicas"),
    ("scale without replicas", lambda c: c.scale("pj", "e", None), UsageError, "replicas"),
    ("an edit that is none", lambda c: c.edit("gj", "g", "stop"), UsageError,
     "unknown edit 'stop': use pause, resume or scale"),
    ("replicas for a pause", lambda c: c.edit("gj", "g", "pause", 2), UsageError,
     "replicas: only scale sets a number of replicas, not pause"),
    ("an unknown argument", lambda c: c.get("gj", "g", colour="red"), UsageError, "get: "),
    ("run on a cluster", lambda c: c.run(generic()), NotSupported, "run starts a job on this machine; on a cluster use create"),
    ("create of a job that does not validate", lambda c: c.create({"kind": "GenericJob"}), InvalidJob, ""),
]


@pytest.mark.parametrize(("call", "error", "message"), [row[1:] for row in ARGUMENT_ERRORS],
                         ids=[row[0] for row in ARGUMENT_ERRORS])
def test_argument_errors_are_refused_before_the_backend(call: Callable[[Client], Any], error: type[Exception],
                                                        message: str) -> None:
    c, backend = client("cluster", make_view(generic()), make_view(pytorch()))
    with pytest.raises(error) as raised:
        call(c)
    assert message in str(raised.value)
    assert backend.calls == []


# --------------------------------------------------------------------------- wait

SPEC_INVALID = JobStatus(
    phase="Pending", conditions=[Condition(type="SpecValid", status="False", reason="InvalidSpec", message="bad")]
)

#: ``(the views watch sees, the phase waited for, the job's phase returned, or the error and the
#: start of its message)``.
WAIT_OUTCOMES: list[tuple[str, list[Any], str, Any]] = [
    ("reaches Succeeded", ["Pending", "Running", "Succeeded"], "Succeeded", "Succeeded"),
    ("reaches Running", ["Pending", "Running"], "running", "Running"),
    ("waits for Failed and fails", ["Running", "Failed"], "Failed", "Failed"),
    ("fails instead", ["Running", "Failed"], "Succeeded",
     (JobEndedOtherwise, "GenericJob g ended Failed, not Succeeded")),
    ("succeeds instead", ["Succeeded"], "Failed", (JobEndedOtherwise, "GenericJob g ended Succeeded, not Failed")),
    ("stopped locally", [STOPPED], "Succeeded", (JobEndedOtherwise, "GenericJob g ended Stopped, not Succeeded")),
    ("deleted", ["Running", None], "Succeeded",
     (JobEndedOtherwise, "GenericJob g was deleted while waiting for it to be Succeeded")),
    ("time runs out", ["Pending", "Running"], "Succeeded",
     (WaitTimeout, "timed out after 5s waiting for GenericJob g to be Succeeded; it is Running")),
    ("the server never answers", [], "Succeeded",
     (WaitTimeout, f"timed out after 5s waiting for GenericJob g to be Succeeded; the API server at {SERVER} has not answered")),
    ("a state that cannot be told", ["unknown"], "Succeeded", (JobsError, "cannot wait for GenericJob g to be Succeeded: ")),
    ("a spec the operator leaves alone", ["invalid"], "Running", (JobsError, "cannot wait for GenericJob g to be Running")),
]


def _script(step: Any) -> JobView | None:
    if step is None:
        return None
    if step == "unknown":
        return make_view(generic(), UNKNOWN, "local", unknown_reason="its runtime's pid file cannot be read")
    if step == "invalid":
        return make_view(generic(), "Pending", status=SPEC_INVALID)
    return make_view(generic(), step, "local" if step == STOPPED else "cluster")


@pytest.mark.parametrize(("script", "phase", "outcome"), [row[1:] for row in WAIT_OUTCOMES],
                         ids=[row[0] for row in WAIT_OUTCOMES])
def test_wait_outcomes(script: list[Any], phase: str, outcome: Any) -> None:
    c, backend = client("cluster", script=[_script(s) for s in script])
    if isinstance(outcome, str):
        assert c.wait("gj", "g", phase=phase, timeout="5s").status.phase == outcome
    else:
        error, message = outcome
        with pytest.raises(error) as raised:
            c.wait("gj", "g", phase=phase, timeout="5s")
        assert str(raised.value).startswith(message), str(raised.value)
    assert backend.calls == [("watch", "GenericJob", "g", 5.0)]


def test_a_wait_that_ends_otherwise_says_where_it_ended() -> None:
    c, _ = client("cluster", script=[_script("Failed")])
    with pytest.raises(JobEndedOtherwise) as raised:
        c.wait("gj", "g")
    assert raised.value.phase == "Failed"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- edits

LINE = "genericjob.batch.tensorstack.dev/g"
PTJ = "pytorchtrainingjob.batch.tensorstack.dev/e"

#: ``(target, the job's view, the verb, replicas, what is set or None, the lines printed)``.
EDITS: list[tuple[str, str, JobView, str, int | None, Any, list[str]]] = [
    ("pause on a cluster", "cluster", make_view(generic()), "pause", None, ("spec.runMode.pause.enabled", True),
     [f"{LINE} in namespace default paused: spec.runMode.pause.enabled is true"]),
    ("pause locally", "local", make_view(generic(), target="local"), "pause", None, ("spec.runMode.pause.enabled", True),
     [f"{LINE} paused: spec.runMode.pause.enabled is true"]),
    ("pause of a paused job", "local", make_view(generic(paused=True), target="local"), "pause", None, None,
     [f"{LINE} paused: spec.runMode.pause.enabled is true"]),
    ("resume of a paused job", "cluster", make_view(generic(paused=True)), "resume", None,
     ("spec.runMode.pause.enabled", False),
     [f"{LINE} in namespace default resumed: spec.runMode.pause.enabled is false"]),
    ("resume of a running job", "cluster", make_view(generic()), "resume", None, None,
     [f"{LINE} in namespace default resumed: spec.runMode.pause.enabled is false"]),
    ("scale in range", "cluster", make_view(pytorch()), "scale", 6, ("spec.elastic.expectedReplicas", 6),
     [f"{PTJ} in namespace default scaled: spec.elastic.expectedReplicas is 6"]),
    ("scale to what it is", "local", make_view(pytorch(), target="local"), "scale", 4, None,
     [f"{PTJ} scaled: spec.elastic.expectedReplicas is 4"]),
]


@pytest.mark.parametrize(("target", "view", "verb", "replicas", "setting", "lines"), [row[1:] for row in EDITS],
                         ids=[row[0] for row in EDITS])
def test_edits_and_what_they_print(target: str, view: JobView, verb: str, replicas: int | None, setting: Any,
                                   lines: list[str]) -> None:
    c, backend = client(target, view)
    done = c.edit(view.kind, view.name, verb, replicas)
    assert isinstance(done, Edited) and done.lines == lines and str(done) == "\n".join(lines)
    sets = [call[1:] for call in backend.calls if call[0] == "set_field"]
    assert sets == ([setting] if setting is not None else [])
    # pause, resume and scale are the same edit, returning the job afterwards.
    c2, _ = client(target, view)
    job = c2.scale(view.kind, view.name, replicas) if verb == "scale" else getattr(c2, verb)(view.kind, view.name)
    assert job.name == view.name and job.kind == view.kind
    if setting is not None and verb != "scale":
        assert job.run_mode.pause_enabled is setting[1]
    if verb == "scale":
        assert job.spec.elastic.expected_replicas == replicas


#: ``(the job's view, the verb, replicas, the error and its message)``: nothing is set.
EDIT_REFUSALS: list[tuple[str, JobView, str, int | None, type[Exception], str]] = [
    ("pause of a finished job", make_view(generic(), "Succeeded"), "pause", None, JobsError,
     "GenericJob g has finished (Succeeded): there is nothing to pause"),
    ("resume of a failed job", make_view(generic(paused=True), "Failed"), "resume", None, JobsError,
     "GenericJob g has finished (Failed): there is nothing to resume"),
    ("pause of a spec that does not validate", make_view(generic(), valid=False), "pause", None, JobsError,
     "GenericJob g: its spec does not validate; cannot pause it"),
    ("scale of a kind without elastic mode", make_view(generic()), "scale", 3, UsageError,
     "scale: GenericJob has no elastic mode; only PyTorchTrainingJob and DeepSpeedJob scale (spec.elastic)"),
    ("scale of a job that is not elastic", make_view(pytorch(elastic=False)), "scale", 3, UsageError,
     "scale: PyTorchTrainingJob e is not elastic (spec.elastic.enabled is not true)"),
    ("scale above the range", make_view(pytorch()), "scale", 7, UsageError,
     "--replicas: 7 is outside PyTorchTrainingJob e's elastic range [2, 6] (spec.elastic.minReplicas, maxReplicas)"),
    ("scale below the range", make_view(pytorch()), "scale", 1, UsageError,
     "--replicas: 1 is outside PyTorchTrainingJob e's elastic range [2, 6]"),
    ("a job that is not there", make_view(generic("other")), "pause", None, NotFound, "GenericJob 'g' not found"),
]


@pytest.mark.parametrize(("view", "verb", "replicas", "error", "message"), [row[1:] for row in EDIT_REFUSALS],
                         ids=[row[0] for row in EDIT_REFUSALS])
def test_edit_refusals(view: JobView, verb: str, replicas: int | None, error: type[Exception], message: str) -> None:
    c, backend = client("cluster", view)
    kind = "pj" if view.kind == "PyTorchTrainingJob" else "gj"
    name = "g" if view.kind == "GenericJob" else view.name
    with pytest.raises(error) as raised:
        c.edit(kind, name, verb, replicas)
    assert str(raised.value).startswith(message), str(raised.value)
    assert [call for call in backend.calls if call[0] == "set_field"] == []


# --------------------------------------------------------------------------- logs

#: ``(the options, the job's containers, whether its spec validates, the error and its message or None)``.
LOG_CHECKS: list[tuple[str, dict[str, Any], tuple[str, ...], bool, Any]] = [
    ("every replica", {}, ("c",), True, None),
    ("one type", {"replica_type": "worker"}, ("c",), True, None),
    ("one replica", {"replica_type": "worker", "index": 1}, ("c",), True, None),
    ("one replica's container", {"replica_type": "worker", "index": 0, "container": "side"}, ("c", "side"), True, None),
    ("a replica beyond the job's (a local run keeps one scaled away)", {"replica_type": "worker", "index": 9},
     ("c",), True, None),
    ("an index without a type", {"index": 0}, ("c",), True, (UsageError, "--index needs --type")),
    ("an index without a type, and a container", {"index": 0, "container": "c"}, ("c",), True,
     (UsageError, "--index needs --type")),
    ("a container alone", {"container": "c"}, ("c",), True, (UsageError, "--container needs --type and --index")),
    ("a container without an index", {"replica_type": "worker", "container": "c"}, ("c",), True,
     (UsageError, "--container needs --type and --index")),
    ("a type the job does not have", {"replica_type": "master"}, ("c",), True,
     (NotFound, "GenericJob g has no replica type 'master'; it has worker")),
    ("a replica of a type the job does not have", {"replica_type": "master", "index": 0}, ("c",), True,
     (NotFound, "GenericJob g has no replica type 'master'; it has worker")),
    ("a container the pods do not have", {"replica_type": "worker", "index": 0, "container": "side"}, ("c", "d"), True,
     (NotFound, "g-worker-0 has no container 'side'; it has c, d")),
    ("a spec that does not validate: only the files or pods can say", {"replica_type": "master", "index": 0},
     ("c",), False, None),
    ("a spec that does not validate, the options still checked", {"index": 0}, ("c",), False,
     (UsageError, "--index needs --type")),
]


@pytest.mark.parametrize(("options", "containers", "valid", "outcome"), [row[1:] for row in LOG_CHECKS],
                         ids=[row[0] for row in LOG_CHECKS])
def test_log_checks(options: dict[str, Any], containers: tuple[str, ...], valid: bool, outcome: Any) -> None:
    view = make_view(generic(containers=containers), valid=valid)
    # The one check, as both backends call it...
    if outcome is None:
        LogOptions(**options).check(view.job)
    else:
        with pytest.raises(outcome[0], match=f"^{outcome[1]}$"):
            LogOptions(**options).check(view.job)
    # ...and through the Client.
    c, _ = client("cluster", view, lines=["[worker-0] hello"])
    if outcome is None:
        with c.logs("gj", "g", **options) as lines:
            assert list(lines) == ["[worker-0] hello"]
    else:
        with pytest.raises(outcome[0], match=f"^{outcome[1]}$"):
            c.logs("gj", "g", **options)


def test_the_options_alone_need_no_job() -> None:
    LogOptions(replica_type="master", index=0, container="x").check()
    with pytest.raises(UsageError, match="--index needs --type"):
        LogOptions(index=0).check()


#: ``(the job, the pod, the container named, the prefix)``: job.log's and the cluster's tag.
PREFIXES = [
    ("g", "g-worker-1", None, "worker-1"),
    ("g", "g-worker-1", "sidecar", "worker-1/sidecar"),
    ("g", "g-master-0", "pytorch", "master-0/pytorch"),
    ("my-job", "my-job-launcher", None, "launcher"),
    ("g", "other-worker-0", None, "other-worker-0"),  # not the job's own name: said whole
    ("g", "gg-worker-0", None, "gg-worker-0"),
]


@pytest.mark.parametrize(("job", "pod", "container", "prefix"), PREFIXES)
def test_replica_prefix(job: str, pod: str, container: str | None, prefix: str) -> None:
    assert replica_prefix(job, pod, container) == prefix


# --------------------------------------------------------------------------- events

#: ``(a line of events.log, the event it is)``: the event list of a local run.
EVENT_LINES = [
    ("12:00:01 Normal Created: created pod g-worker-0",
     Event(None, "Normal", "Created", "", "created pod g-worker-0", "12:00:01")),
    ("12:00:02 Warning RestartingReplica: g-worker-1 failed: exit code 1",
     Event(None, "Warning", "RestartingReplica", "", "g-worker-1 failed: exit code 1", "12:00:02")),
    ("12:00:03 Normal Odd:  spaced  ", Event(None, "Normal", "Odd", "", "spaced", "12:00:03")),
    ("a message's second line", Event(None, "", "", "", "a message's second line")),
    ("12:00 Normal Created: no seconds", Event(None, "", "", "", "12:00 Normal Created: no seconds")),
    ("12:00:03 Normal NoColon", Event(None, "", "", "", "12:00:03 Normal NoColon")),
]


@pytest.mark.parametrize(("line", "event"), EVENT_LINES)
def test_a_local_event_is_its_line(line: str, event: Event) -> None:
    event.line = line
    assert Event.local(line) == event


def test_describe_shows_a_local_runs_events_as_written_and_a_clusters_as_a_table() -> None:
    local_events = [Event.local(line) for line, _ in EVENT_LINES[:3]]
    c, _ = client("local", make_view(generic(), target="local", events=local_events))
    text = c.describe("gj", "g")
    assert text.split("Events:\n", 1)[1].splitlines() == [f"  {line}" for line, _ in EVENT_LINES[:3]]
    cluster_events = [Event(None, "Normal", "Created", "pod/g-worker-0", "created")]
    c, _ = client("cluster", make_view(generic(), events=cluster_events))
    shown = c.describe("gj", "g").split("Events:\n", 1)[1].splitlines()
    assert shown[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert shown[1].split() == ["-", "Normal", "Created", "pod/g-worker-0", "created"]
    c, _ = client("local", make_view(generic(), target="local"))
    assert c.describe("gj", "g").endswith("Events:\n  <none>")
