"""Stateful property tests: random pod events against the engine, invariants after each step.

A hypothesis state machine plays a cluster around one job: it reconciles and applies the
plan (through :class:`Sim`), and in between pods start, succeed, fail with an exit code,
get deleted by someone else or preempted by the scheduler, finish a graceful deletion, and the
clock moves. After every
step the invariants a correct engine keeps must hold. Each pass the machine makes is also
checked for purity (the same input gives the same plan) and convergence (left alone, the
world reaches a pass that changes nothing, and that pass is a fixed point).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from t9k_jobs.api.common import TERMINAL_PHASES
from t9k_jobs.engine import reconcile
from t9k_jobs.frameworks import framework_for

from .jobs import deepspeed, generic, pytorch
from .sim import Sim

EXIT_CODES = st.sampled_from([1, 137, 143, 2])
# Shrinking a failure can take minutes; let hypothesis finish and print the minimal example.
pytestmark = pytest.mark.timeout(900)

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

    def start(self, manifest: dict, graceful: bool, warm: bool) -> None:
        """``graceful``: the engine's deletions take a grace period; ``warm``: begin with all pods running."""
        self.sim = Sim(manifest, graceful=graceful)
        if warm:
            self.sim.step(start="Running")
            self.sim.step()
        self.final_phase = None
        self.failures = 0  # pod failures and deletions the world caused (or SIGTERM exits)
        self.paused = False
        self.pause_applied = False  # a pass ran since pause was switched on

    def desired(self) -> list[str]:
        groups = framework_for(self.sim.job).groups(self.sim.job)
        return [g.pod_name(self.sim.job.name, i) for g in groups for i in range(g.replicas)]

    def backoff_limit(self) -> int | None:
        return None

    def pick(self, data, want) -> str | None:
        names = sorted(n for n, p in self.sim.pods.items() if want(p))
        return data.draw(st.sampled_from(names)) if names else None

    # ------------------------------------------------------------------ the runtime

    @rule()
    def reconcile_and_apply(self) -> None:
        sim = self.sim
        before = sim.status.phase if sim.status else None
        self.check_convergence()
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
        if before in ("Pending", "Paused", "Resuming") and first.status.phase == "Running":
            # Running once every desired pod exists (not one on its way out) and one has started.
            pods = [sim.pods.get(n) for n in self.desired()]
            assert all(p is not None and not p.deleting for p in pods), (before, pods)
            assert any(p.phase == "Running" or p.terminal for p in pods)  # type: ignore[union-attr]
        sim.apply(first)  # raises Conflict if a pod name is taken: never two pods of one name
        self.pause_applied = self.paused

    # ------------------------------------------------------------------ the world

    @rule(data=st.data())
    def pod_is_scheduled(self, data) -> None:
        name = self.pick(data, lambda p: p.phase == "Pending" and not p.scheduled)
        if name:
            self.sim.schedule(name)

    @rule(data=st.data())
    def pod_runs(self, data) -> None:
        name = self.pick(data, lambda p: p.phase == "Pending" and not p.deleting)
        if name:
            self.sim.run(name)

    @rule(data=st.data())
    def pod_succeeds(self, data) -> None:
        name = self.pick(data, lambda p: p.phase == "Running")
        if name:
            self.sim.succeed(name)

    @rule(data=st.data(), code=EXIT_CODES)
    def pod_fails(self, data, code: int) -> None:
        """A started pod fails (a pod being deleted may exit too, e.g. 143 on SIGTERM)."""
        name = self.pick(data, lambda p: p.scheduled and not p.terminal)
        if name:
            self.sim.fail(name, code)
            self.failures += 1

    @rule(data=st.data(), graceful=st.booleans())
    def pod_deleted_externally(self, data, graceful: bool) -> None:
        """A user, a queue's maxDuration or preemption deletes a pod: at once, or with a grace period."""
        name = self.pick(data, lambda p: not p.deleting)
        if name is None:
            return
        self.failures += 1
        if graceful:
            self.sim.pods[name] = replace(self.sim.pods[name], deleting=True)
        else:
            self.sim.vanish(name)

    @rule(data=st.data(), how=st.sampled_from(["notice", "deleting", "ended"]))
    def pod_preempted(self, data, how: str) -> None:
        """The scheduler preempts a started pod: its ``DisruptionTarget`` notice (reason
        ``PreemptionByScheduler``), then its graceful deletion, during which it may end (143).
        Not a failure: ``self.failures`` is not raised, so a counted restart breaks an invariant.
        A pass sees the change (the watch brings it); a preempted pod gone before any pass saw
        its notice counts as an external deletion (the documented limit), which
        :meth:`pod_deleted_externally` plays."""
        name = self.pick(data, lambda p: p.scheduled and not p.deleting and not p.terminal)
        if name:
            self.sim.disrupt(name, deleting=how != "notice", end=143 if how == "ended" else None)
            self.reconcile_and_apply()

    @precondition(lambda self: any(p.deleting for p in self.sim.pods.values()))
    @rule()
    def graceful_deletions_finish(self) -> None:
        self.sim.gc()

    @rule()
    def toggle_pause_and_reconcile(self) -> None:
        """A user flips ``runMode.pause.enabled``; the edit triggers a pass at once."""
        self.paused = not self.paused
        self.pause_applied = False
        self.sim.edit(runMode={"pause": {"enabled": self.paused}})
        self.reconcile_and_apply()

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
    def restarts_and_failures_need_a_cause(self) -> None:
        """The engine never counts a restart, or fails the job, for pods it deleted itself."""
        status = self.sim.status
        if status is None:
            return
        if self.restarts_need_failures():
            assert status.backoff_count <= self.failures
        if status.phase == "Failed":
            reason = status.condition("Failed").reason
            assert self.failures > 0 or reason in ("DeadlineExceeded", "NoRuleMatched"), reason

    def restarts_need_failures(self) -> bool:
        return self.policy != "Always"  # Always restarts succeeded pods too

    def restarts_left(self, replica) -> bool:
        """Whether ``replica`` may still be restarted: the shared backoff is not used up."""
        return self.sim.status.backoff_count < self.limit

    @invariant()
    def no_replica_is_given_up_while_restarts_remain(self) -> None:
        """OnFailure and Always restart every failure (Always: every end) until restarts run out."""
        status = self.sim.status
        if status is None or self.policy not in ("OnFailure", "Always"):
            return
        if status.phase not in ("Pending", "Running"):
            return
        given_up = {"Failed", "Deleted"} | ({"Succeeded"} if self.policy == "Always" else set())
        for task in status.tasks:
            for r in task.replicas:
                assert not (r.phase in given_up and self.restarts_left(r)), r

    @invariant()
    def paused_job_has_no_live_pods(self) -> None:
        if self.pause_applied and self.sim.status.phase not in TERMINAL_PHASES:
            assert self.sim.status.phase == "Paused"
            assert self.sim.live() == []

    @invariant()
    def aggregate_and_tasks_cover_the_desired_replicas(self) -> None:
        status = self.sim.status
        if status is None:
            return
        desired = self.desired()
        assert sum(status.aggregate.dump().values()) == len(desired)
        names = [r.name for t in status.tasks for r in t.replicas]
        assert sorted(names) == sorted(desired)

    def check_convergence(self) -> None:
        """Without new pod events, a few passes reach a pass that changes nothing at all.

        Restarts take two passes (delete, then create) and graceful deletions wait for the
        kubelet, so the first pass need not be a no-op; but once a pass creates and deletes
        nothing, the next one must also write the same status. Checked on a fork of the world
        before every pass the machine makes (cheaper than after every step, and it sees every
        world state that a pass sees).
        """
        sim = self.sim.fork()
        for _ in range(5):
            plan = sim.step()
            if not plan.create and not plan.delete:
                break
        else:
            raise AssertionError("no fixed point after 5 passes")
        again = reconcile(sim.job, sim.observed(), sim.now, sim.runtime())
        assert again.create == [] and again.delete == []
        assert again.status == sim.status


class PyTorchMachine(JobMachine):
    @initialize(
        policy=st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"]),
        backoff=st.integers(min_value=0, max_value=3),
        workers=st.integers(min_value=1, max_value=3),
        deadline=st.none() | st.integers(min_value=30, max_value=300),
        graceful=st.booleans(),
        warm=st.booleans(),
    )
    def setup(
        self, policy: str, backoff: int, workers: int, deadline: int | None, graceful: bool, warm: bool
    ) -> None:
        run_policy = {"backoffLimit": backoff}
        if deadline is not None:
            run_policy["activeDeadlineSeconds"] = deadline
        self.limit = backoff
        self.policy = policy
        self.start(
            pytorch([("master", 1), ("worker", workers)], policy=policy, runPolicy=run_policy), graceful, warm
        )

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
        warm=st.booleans(),
    )
    def setup(self, policy: str, limit: int, workers: int, rules: str, graceful: bool, warm: bool) -> None:
        spec: dict = {}
        if rules == "master":
            spec = {"successRules": [{"master": [0]}], "failureRules": [{"master": [0]}]}
        elif rules == "span":
            spec = {"successRules": [{"master": [0], "worker": ["0"]}], "failureRules": [{"worker": [0]}]}
        self.limit = limit
        self.policy = policy
        self.start(
            generic([("master", 1), ("worker", workers)], policy=policy, limit=limit, **spec), graceful, warm
        )

    def restarts_left(self, replica) -> bool:
        return replica.restart_count < self.limit  # GenericJob: a limit per replica

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
        warm=st.booleans(),
    )
    def setup(self, policy: str, backoff: int, workers: int, graceful: bool, warm: bool) -> None:
        self.limit = backoff
        self.policy = policy
        self.start(deepspeed(workers, policy=policy, backoff=backoff), graceful, warm)

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


class ElasticPyTorchMachine(PyTorchMachine):
    """PyTorch with torchrun and elastic scaling: users change expectedReplicas on the fly."""

    @initialize(
        policy=st.sampled_from(["Never", "OnFailure", "ExitCode"]),
        backoff=st.integers(min_value=0, max_value=3),
        expected=st.integers(min_value=1, max_value=4),
        graceful=st.booleans(),
        warm=st.booleans(),
    )
    def setup(self, policy: str, backoff: int, expected: int, graceful: bool, warm: bool) -> None:  # type: ignore[override]
        self.limit = backoff
        self.policy = policy
        m = pytorch(
            [("master", 1), ("worker", 1)],
            policy=policy,
            runPolicy={"backoffLimit": backoff},
            torchrunConfig={"enabled": True},
            elastic=self.elastic(expected),
        )
        self.start(m, graceful, warm)

    @staticmethod
    def elastic(expected: int) -> dict:
        return {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected}

    @precondition(lambda self: self.sim.status is None or self.sim.status.phase not in TERMINAL_PHASES)
    @rule(expected=st.integers(min_value=0, max_value=6))
    def rescale_and_reconcile(self, expected: int) -> None:
        self.sim.edit(elastic=self.elastic(expected))
        self.reconcile_and_apply()

    @invariant()
    def restarts_are_counted_once(self) -> None:
        status = self.sim.status
        if status is None:
            return
        # Replicas scaled away leave the tasks, so only the per-type counts add up.
        assert status.backoff_count == sum(t.restart_count for t in status.tasks)
        if self.policy == "Never":
            assert status.backoff_count == 0

    @invariant()
    def master_is_never_scaled_away(self) -> None:
        assert "job-master-0" in self.desired()


TestElasticPyTorchMachine = ElasticPyTorchMachine.TestCase
TestElasticPyTorchMachine.settings = SETTINGS
