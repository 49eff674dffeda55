"""Run modes (:mod:`t9k_jobs.engine.run_mode`) [§1.5]: pause, resume and debug.
"""

from __future__ import annotations

from .jobs import deepspeed, generic, pytorch
from .sim import Sim, created_pods, deleted_pods, pause, started


def test_pause_deletes_pods_and_sets_paused():
    sim = started(pytorch(name="j"))
    pause(sim, True)
    plan = sim.step()
    assert sorted(deleted_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.status.phase == "Paused"
    assert sim.condition("Paused").status == "True"
    assert sim.pods == {}
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Paused"


def test_job_created_paused_makes_no_pods():
    sim = Sim(pytorch(name="j", runMode={"pause": {"enabled": True}}))
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Paused"


def test_resume_goes_through_resuming_and_applies_resume_specs():
    sim = started(pytorch(name="j"))
    specs = [{"type": "worker", "command": ["python", "-u"], "args": ["resume.py"]}]
    pause(sim, True, specs)
    sim.step()
    pause(sim, False, specs)
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.status.phase == "Resuming"
    assert sim.container("j-worker-1")["command"] == ["python", "-u"]
    assert sim.container("j-worker-1")["args"] == ["resume.py"]
    assert sim.container("j-master-0")["command"] == ["python"]
    assert sim.container("j-master-0")["args"] == ["train.py", "--epochs=1"]
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("Paused").status == "False"


def test_pause_does_not_reset_backoff():
    sim = started(pytorch(name="j"))
    sim.fail("j-worker-0")
    sim.settle()
    pause(sim, True)
    sim.step()
    pause(sim, False)
    sim.settle()
    assert sim.status.backoff_count == 1


def test_pausing_a_finished_job_is_a_no_op():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    pause(sim, True)
    plan = sim.step()
    assert deleted_pods(plan) == []
    assert sim.status.phase == "Succeeded"


def test_debug_replaces_training_command_keeps_env():
    sim = Sim(pytorch(name="j", torchrunConfig={"enabled": True}, runMode={"debug": {"enabled": True}}))
    sim.step()
    c = sim.container("j-worker-0")
    assert c["command"] == ["sleep", "inf"]
    assert c["args"] == []
    assert sim.env("j-worker-0")["MASTER_ADDR"] == "j-master-0"


def test_debug_without_torchrun_still_injects_rank():
    sim = Sim(pytorch(name="j", runMode={"debug": {"enabled": True}}))
    sim.step()
    assert sim.container("j-worker-1")["command"] == ["sleep", "inf"]
    assert sim.env("j-worker-1")["RANK"] == "2"


def test_debug_command_per_type():
    debug = {"enabled": True, "replicaSpecs": [{"type": "worker", "command": ["bash", "-c", "sleep 1d"]}]}
    sim = Sim(pytorch(name="j", runMode={"debug": debug}))
    sim.step()
    assert sim.container("j-worker-0")["command"] == ["bash", "-c", "sleep 1d"]
    assert sim.container("j-master-0")["command"] == ["sleep", "inf"]


def test_debug_deepspeed_default_is_sshd():
    sim = Sim(deepspeed(2, name="ds", runMode={"debug": {"enabled": True}}))
    sim.step()
    for n in ("ds-worker-0", "ds-worker-1"):
        # Debug mode: sshd is the main process, with no watch that would end the worker.
        assert sim.container(n, "worker")["command"][-1].endswith(
            "exec /usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys"
        )
        assert sim.container(n, "worker")["args"] == []


def test_debug_genericjob_default_is_sleep_inf():
    sim = Sim(generic(name="g", runMode={"debug": {"enabled": True}}))
    sim.step()
    assert sim.container("g-worker-0")["command"] == ["sleep", "inf"]


def test_debug_mode_never_decides_or_restarts():
    sim = started(pytorch(name="j", policy="OnFailure", runMode={"debug": {"enabled": True}}))
    sim.fail("j-master-0", 1)
    sim.succeed("j-worker-0")
    plan = sim.step()
    assert deleted_pods(plan) == [] and created_pods(plan) == []
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 0
    sim.step()
    assert sim.status.phase == "Running"


def test_resume_waits_for_paused_pods_to_terminate():
    sim = started(pytorch(name="j", policy="Never"), graceful=True)
    pause(sim, True)
    sim.step()
    assert sim.status.phase == "Paused" and all(p.deleting for p in sim.pods.values())
    sim.fail("j-master-0", 143)  # exits on SIGTERM while terminating: not a failure to act on
    pause(sim, False)
    plan = sim.step()  # the old pods are still terminating
    assert created_pods(plan) == []
    assert sim.status.phase == "Resuming"
    sim.gc()
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.status.phase == "Resuming"
    assert sim.status.backoff_count == 0
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running"
