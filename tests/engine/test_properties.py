"""Stateful property tests: random pod events against the engine, invariants after each step.

A hypothesis state machine plays a cluster around one job: it reconciles and applies the
plan (through :class:`Sim`), and in between pods start, succeed, fail with an exit code,
get deleted by someone else, finish a graceful deletion, and the clock moves. After every
step the invariants a correct engine keeps must hold.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from t9k_jobs.api.common import TERMINAL_PHASES
from t9k_jobs.engine import reconcile
from t9k_jobs.frameworks import framework_for

from .jobs import deepspeed, generic, pytorch
from .sim import Sim

EXIT_CODES = st.sampled_from([1, 137, 143, 2])
SETTINGS = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class JobMachine(RuleBasedStateMachine):
    """Rules and invariants shared by every kind; subclasses build the job in ``setup``."""

    sim: Sim
    final_phase: str | None = None

    # ------------------------------------------------------------------ setup helpers

    def start(self, manifest: dict, graceful: bool) -> None:
        self.sim = Sim(manifest, graceful=graceful)
        self.final_phase = None
        self.passes = 0

    def desired(self) -> dict[str, int]:
        groups = framework_for(self.sim.job).groups(self.sim.job)
        return {g.pod_name(self.sim.job.name, i): 0 for g in groups for i in range(g.replicas)}

    def backoff_limit(self) -> int | None:
        return None

    def pick(self, data, want) -> str | None:  # noqa: ANN001
        names = sorted(n for n, p in self.sim.pods.items() if want(p))
        return data.draw(st.sampled_from(names)) if names else None

    # ------------------------------------------------------------------ the runtime

    @rule()
    def reconcile_and_apply(self) -> None:
        sim = self.sim
        before = sim.status.phase if sim.status else None
        first = sim.plan()
        second = sim.plan()
        # Pure: the same input gives the same plan.
        assert first.create == second.create
        assert first.delete == second.delete
        assert first.status == second.status
        assert first.events == second.events
        assert first.requeue_after == second.requeue_after
        if before in TERMINAL_PHASES:
            assert not [o for o in first.create if o["kind"] == "Pod"], "a finished job created a pod"
        sim.apply(first)  # raises Conflict if a pod name is taken
        self.passes += 1

    # ------------------------------------------------------------------ the world

    @rule(data=st.data())
    def pod_is_scheduled(self, data) -> None:  # noqa: ANN001
        name = self.pick(data, lambda p: p.phase == "Pending" and not p.scheduled)
        if name:
            self.sim.schedule(name)

    @rule(data=st.data())
    def pod_runs(self, data) -> None:  # noqa: ANN001
        name = self.pick(data, lambda p: p.phase == "Pending" and not p.deleting)
        if name:
            self.sim.run(name)

    @rule(data=st.data())
    def pod_succeeds(self, data) -> None:  # noqa: ANN001
        name = self.pick(data, lambda p: p.phase == "Running")
        if name:
            self.sim.succeed(name)

    @rule(data=st.data(), code=EXIT_CODES)
    def pod_fails(self, data, code: int) -> None:  # noqa: ANN001
        name = self.pick(data, lambda p: p.scheduled and not p.terminal)
        if name:
            self.sim.fail(name, code)

    @rule(data=st.data())
    def pod_deleted_externally(self, data) -> None:  # noqa: ANN001
        name = self.pick(data, lambda p: not p.deleting)
        if name:
            self.sim.vanish(name)

    @precondition(lambda self: any(p.deleting for p in self.sim.pods.values()))
    @rule(data=st.data())
    def deleting_pod_exits_on_sigterm(self, data) -> None:  # noqa: ANN001
        name = self.pick(data, lambda p: p.deleting and not p.terminal and p.scheduled)
        if name:
            self.sim.fail(name, 143)

    @precondition(lambda self: any(p.deleting for p in self.sim.pods.values()))
    @rule()
    def graceful_deletions_finish(self) -> None:
        self.sim.gc()

    @rule(seconds=st.integers(min_value=1, max_value=120))
    def clock_advances(self, seconds: int) -> None:
        self.sim.tick(seconds)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def live_pods_are_desired_and_not_too_many(self) -> None:
        desired = self.desired()
        live = self.sim.live()
        assert len(live) <= len(desired), (live, sorted(desired))
        assert set(live) <= set(desired), (live, sorted(desired))

    @invariant()
    def backoff_within_limit(self) -> None:
        status = self.sim.status
        if status is None:
            return
        limit = self.backoff_limit()
        if limit is not None:
            assert status.backoff_count <= limit

    @invariant()
    def terminal_phase_is_final(self) -> None:
        status = self.sim.status
        if status is None:
            return
        if self.final_phase is not None:
            assert status.phase == self.final_phase
        elif status.phase in TERMINAL_PHASES:
            self.final_phase = status.phase

    @invariant()
    def aggregate_and_tasks_cover_the_desired_replicas(self) -> None:
        status = self.sim.status
        if status is None:
            return
        desired = self.desired()
        assert sum(status.aggregate.dump().values()) == len(desired)
        names = [r.name for t in status.tasks for r in t.replicas]
        assert sorted(names) == sorted(desired)

    @invariant()
    def reconcile_converges_on_an_unchanged_world(self) -> None:
        """Without new pod events, a few passes reach a pass that changes nothing at all.

        Restarts take two passes (delete, then create) and graceful deletions wait for the
        kubelet, so the first pass need not be a no-op; but once a pass creates and deletes
        nothing, the next one must also write the same status.
        """
        if self.sim.status is None:
            return
        sim = self.sim.fork()
        for _ in range(5):
            plan = sim.step()
            if not plan.create and not plan.delete:
                break
        else:
            raise AssertionError("no fixed point after 5 passes")
        again = reconcile(sim.job, sim.observed(), sim.now)
        assert again.create == [] and again.delete == []
        assert again.status == sim.status


class PyTorchMachine(JobMachine):
    @initialize(
        policy=st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"]),
        backoff=st.integers(min_value=0, max_value=3),
        workers=st.integers(min_value=1, max_value=3),
        deadline=st.none() | st.integers(min_value=30, max_value=300),
        graceful=st.booleans(),
    )
    def setup(self, policy: str, backoff: int, workers: int, deadline: int | None, graceful: bool) -> None:
        run_policy = {"backoffLimit": backoff}
        if deadline is not None:
            run_policy["activeDeadlineSeconds"] = deadline
        self.limit = backoff
        self.policy = policy
        self.start(pytorch([("master", 1), ("worker", workers)], policy=policy, runPolicy=run_policy), graceful)

    def backoff_limit(self) -> int | None:
        return self.limit

    @invariant()
    def restarts_are_counted_once(self) -> None:
        status = self.sim.status
        if status is None:
            return
        assert status.backoff_count == sum(t.restart_count for t in status.tasks)
        assert status.backoff_count == sum(r.restart_count for t in status.tasks for r in t.replicas)
        if self.policy == "Never":
            assert status.backoff_count == 0


class GenericJobMachine(JobMachine):
    @initialize(
        policy=st.sampled_from(["Never", "OnFailure", "Always"]),
        limit=st.integers(min_value=0, max_value=3),
        workers=st.integers(min_value=1, max_value=3),
        rules=st.sampled_from(["default", "master", "span"]),
        graceful=st.booleans(),
    )
    def setup(self, policy: str, limit: int, workers: int, rules: str, graceful: bool) -> None:
        spec: dict = {}
        if rules == "master":
            spec = {"successRules": [{"master": [0]}], "failureRules": [{"master": [0]}]}
        elif rules == "span":
            spec = {"successRules": [{"master": [0], "worker": ["0"]}], "failureRules": [{"worker": [0]}]}
        self.limit = limit
        self.start(generic([("master", 1), ("worker", workers)], policy=policy, limit=limit, **spec), graceful)

    @invariant()
    def per_replica_limit(self) -> None:
        status = self.sim.status
        if status is None:
            return
        for task in status.tasks:
            assert task.restart_count == sum(r.restart_count for r in task.replicas)
            for r in task.replicas:
                assert r.restart_count <= self.limit, r


class DeepSpeedMachine(JobMachine):
    @initialize(
        policy=st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"]),
        backoff=st.integers(min_value=0, max_value=3),
        workers=st.integers(min_value=1, max_value=3),
        graceful=st.booleans(),
    )
    def setup(self, policy: str, backoff: int, workers: int, graceful: bool) -> None:
        self.limit = backoff
        self.start(deepspeed(workers, policy=policy, backoff=backoff), graceful)

    def backoff_limit(self) -> int | None:
        return self.limit

    @invariant()
    def all_workers_restart_together(self) -> None:
        status = self.sim.status
        if status is None:
            return
        counts = {r.restart_count for t in status.tasks for r in t.replicas}
        assert len(counts) <= 1, counts
        assert counts <= {status.backoff_count}


TestPyTorchMachine = PyTorchMachine.TestCase
TestPyTorchMachine.settings = SETTINGS
TestGenericJobMachine = GenericJobMachine.TestCase
TestGenericJobMachine.settings = SETTINGS
TestDeepSpeedMachine = DeepSpeedMachine.TestCase
TestDeepSpeedMachine.settings = SETTINGS
