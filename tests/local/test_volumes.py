"""Real T9k manifests run here as written (issue 31): volumes at their mount paths, a replica
contained like a pod, a saved job starting anew.

The manifests have the shape of T9k's tutorials (reference/t9k-examples-sample.md: G1, P1, P3,
D2, C1): the code lives on a claim mounted at ``/t9k/mnt``, the working directory is under it,
and ``t9k-jobs run --volume tutorial=DIR`` gives the claim a folder. The programs are the
examples' training scripts behind a small entry script that records where it finds itself (its
working directory and ``__file__``) and writes through the mount. Real processes, real torchrun,
deepspeed and colossalai; a test that must see the user-namespace path runs the CLI as ``nobody``
(:func:`unprivileged`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs.local import sandbox
from tests.helpers import job, template, wait_until

from .conftest import REPO, alive

pytestmark = pytest.mark.e2e

#: The entry script every tutorial-shaped job runs first: it records where it is and runs the
#: training script beside it (``TARGET``) with the rest of its arguments.
ENTRY = """import json, os, pathlib, runpy, socket, sys
rank = os.environ.get("RANK") or os.environ.get("T9K_TEST_RANK") or socket.gethostname()
where = pathlib.Path("where")
where.mkdir(exist_ok=True)
(where / f"{rank}-{os.getpid()}.json").write_text(json.dumps(
    {"cwd": os.getcwd(), "file": os.path.abspath(__file__), "host": socket.gethostname(), "uid": os.getuid()}))
args = sys.argv[1:]
script = args.pop(next(i for i, a in enumerate(args) if not a.startswith("-")))  # after a launcher's --local_rank
target = pathlib.Path(__file__).parent / script
sys.argv = [str(target), *args]
runpy.run_path(str(target), run_name="__main__")
"""

NOBODY = 65534


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (scripts/test.sh installs it)")
    return found


@pytest.fixture(scope="module", autouse=True)
def needs_bubblewrap() -> None:
    """These tests are of the mount namespaces: bubblewrap must be here (scripts/test.sh installs
    Debian's) and the machine must let it make them."""
    _bin("bwrap")
    found = sandbox.detect("auto")
    assert found.kind == sandbox.BWRAP, found.why_not_bwrap


def claim(base: Path, *scripts: tuple[Path, str]) -> Path:
    """A claim's folder, ``tutorial-examples/<dir>`` holding ``entry.py`` and each script (copied
    from ``(source, dir)``); everything under it writable by its owner."""
    root = base / "claim"
    for source, folder in scripts:
        dest = root / "tutorial-examples" / folder
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, dest / source.name)
        (dest / "entry.py").write_text(ENTRY)
    root.mkdir(exist_ok=True)
    return root


def mounted(spec: dict[str, Any], claim_name: str = "tutorial") -> dict[str, Any]:
    """A pod template's spec with the claim mounted at /t9k/mnt in its first container (P1's shape)."""
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/t9k/mnt"}]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return spec


def whereabouts(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "where").glob("*.json"))]


def host_has_no(path: str) -> None:
    assert not os.path.lexists(path), f"{path} was made on this machine"


# --------------------------------------------------------------------------- running as nobody


def unprivileged(argv: list[str], cwd: Path, login: bool = False) -> list[str]:
    """``argv`` as ``nobody`` when this is root (CI), so that the user-namespace path is what runs;
    as it is otherwise. Root's home is mode 0700, so the command runs in a mount namespace of its
    own where a tmpfs covers /root and the folders the interpreter needs under it (the venv, the
    Python it was made from) are bound back in; nothing on the machine changes. ``login``: in that
    namespace only, ``nobody`` may log in over ssh (a shell, no locked password: copies of
    /etc/passwd and /etc/shadow bound over them), as a real user may; sshd refuses the account as
    it is, with or without namespaces."""
    if os.geteuid() != 0:
        return argv
    needed = sorted({p for p in (sys.prefix, sys.base_prefix, str(REPO)) if p.startswith("/root/")})
    lines = ["set -e", 'stash="$(mktemp -d)"']
    if login:
        accounts = cwd / ".accounts"
        accounts.mkdir(exist_ok=True)
        for name, field in (("passwd", 1), ("shadow", 1)):
            rows = [r.split(":") for r in Path(f"/etc/{name}").read_text().splitlines()]
            for r in rows:
                if r[0] == "nobody":
                    r[field] = ""
                    if name == "passwd":
                        r[5], r[6] = str(cwd), "/bin/sh"
            (accounts / name).write_text("\n".join(":".join(r) for r in rows) + "\n")
            (accounts / name).chmod(0o644)
            lines.append(f"mount --bind {str(accounts / name)!r} /etc/{name}")
    for i, path in enumerate(needed):
        lines.append(f'mkdir "$stash/{i}" && mount --bind {path!r} "$stash/{i}"')
    lines.append("mount -t tmpfs -o mode=0755 tmpfs /root")
    for i, path in enumerate(needed):
        lines.append(f'mkdir -p {path!r} && mount --move "$stash/{i}" {path!r}')
    lines.append('exec "$@"')
    setpriv = [_bin("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return [_bin("unshare"), "-m", "--propagation", "private", "sh", "-c", "\n".join(lines), "sh", *setpriv, *argv]


def run_cli(args: list[str], cwd: Path, *, as_nobody: bool = False, login: bool = False,
            env: dict[str, str] | None = None, input: str | None = None, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    """``t9k-jobs ARGS`` to its end (``as_nobody``, ``login``: :func:`unprivileged`)."""
    argv = [sys.executable, "-m", "t9k_jobs.cli", *args]
    environ = {**os.environ, **(env or {})}
    if as_nobody:
        argv = unprivileged(argv, cwd, login)
        environ["HOME"] = str(cwd)
    try:
        return subprocess.run(argv, cwd=cwd, env=environ, input=input, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        run_dir = cwd / args[args.index("--run-dir") + 1] if "--run-dir" in args else None
        said = {name: _tail(run_dir / name) for name in ("events.log", "job.log", "runtime.log")} if run_dir else {}
        printed = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"t9k-jobs {' '.join(args)} still ran after {timeout:.0f} s; it printed:\n{printed}"
                    + "".join(f"\n--- {name} ---\n{text}" for name, text in said.items()), pytrace=False)


def _tail(path: Path, size: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError as exc:
        return f"({exc.strerror})"


def _status(run_dir: Path) -> dict[str, Any]:
    return yaml.safe_load((run_dir / "status.yaml").read_text())


def _tree_for(owner: int, *paths: Path) -> None:
    for path in paths:
        for folder, _dirs, files in os.walk(path):
            os.chown(folder, owner, owner)
            for f in files:
                os.chown(os.path.join(folder, f), owner, owner)


# --------------------------------------------------------------------------- tutorial-shaped jobs


@pytest.mark.parametrize("as_nobody", [False, True], ids=["root-or-user", "nobody"])
def test_genericjob_with_its_code_on_a_claim_runs_unchanged(shared_tmp: Path, as_nobody: bool) -> None:
    """G1's shape: a GenericJob of 2 workers whose code is on the claim ``tutorial``, mounted at
    /t9k/mnt, working directory under it, T9k's $(service...) substitution in env. Both workers
    find themselves at the mount path and write through it into the folder; /t9k never exists
    here. As nobody, bubblewrap makes a user namespace to do it."""
    script = shared_tmp / "keras_like.py"
    script.write_text(
        "import json, os, pathlib, sys\n"
        "cfg = json.loads(os.environ['TF_CONFIG'])\n"
        "log = pathlib.Path(sys.argv[sys.argv.index('--log_dir') + 1])\n"
        "log.mkdir(parents=True, exist_ok=True)\n"
        "(log / f\"{cfg['task']['type']}-{cfg['task']['index']}.txt\").write_text(str(len(cfg['cluster']['worker'])))\n"
    )
    folder = claim(shared_tmp, (script, "job/genericjob/multiworker"))
    spec = mounted({"containers": [{
        "name": "tensorflow",
        "image": "registry.tensorstack.cn/t9k/tensorflow-2.11.0:cpu-sdk-0.5.1",
        "command": ["python3", "job/genericjob/multiworker/entry.py", "keras_like.py", "--log_dir", "job/genericjob/multiworker/log"],
        "workingDir": "/t9k/mnt/tutorial-examples",
        "env": [{"name": "T9K_TEST_RANK", "value": "$(rank)"}, {"name": "TF_CONFIG", "value": (
            '{"cluster":{"worker":["$(service.worker[0].host):$(service.port[http])",'
            '"$(service.worker[1].host):$(service.port[http])"]},"task":{"type":"$(type)","index":$(rank)}}')}],
    }]})  # fmt: skip
    manifest = job("GenericJob", "keras-mnist-genericjob", {
        "successRules": [{"worker": [0]}],
        "service": {"ports": [{"name": "http", "port": 2222}]},
        "cleanUpPolicy": "Unfinished",
        "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "OnFailure", "limit": 100}, "template": {"spec": spec}}],
    })  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    if as_nobody and os.geteuid() == 0:
        _tree_for(NOBODY, shared_tmp)
    done = run_cli(["run", "job.yaml", "--volume", f"tutorial={folder}", "--run-dir", "runs/r", "--quiet"], shared_tmp,
                   as_nobody=as_nobody)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert _status(shared_tmp / "runs" / "r")["phase"] == "Succeeded"
    code = folder / "tutorial-examples"
    seen = whereabouts(code)
    assert [(s["cwd"], s["file"]) for s in seen] == [
        ("/t9k/mnt/tutorial-examples", "/t9k/mnt/tutorial-examples/job/genericjob/multiworker/entry.py")
    ] * 2, seen
    assert {s["host"] for s in seen} == {"keras-mnist-genericjob-worker-0", "keras-mnist-genericjob-worker-1"}
    if as_nobody and os.geteuid() == 0:
        assert {s["uid"] for s in seen} == {NOBODY}
    log = code / "job/genericjob/multiworker/log"
    assert sorted(p.name for p in log.iterdir()) == ["worker-0.txt", "worker-1.txt"]
    host_has_no("/t9k")


def test_pytorchtrainingjob_p1_shape_trains_from_the_claim(shared_tmp: Path) -> None:
    """P1's shape: plain ``python`` on 4 workers... here 2, worker-0 the master, ExitCode, the
    script and its log under the claim; the examples' DDP script trains through it."""
    folder = claim(shared_tmp, (REPO / "examples/pytorch-ddp/train.py", "job/pytorchtrainingjob/ddp"))
    spec = mounted({"securityContext": {"runAsUser": 1000}, "containers": [{
        "name": "pytorch", "image": "t9kpublic/pytorch-1.13.0:sdk-0.5.2",
        "command": ["python", "job/pytorchtrainingjob/ddp/entry.py", "train.py", "--epochs", "2",
                    "--output", "job/pytorchtrainingjob/ddp/log/metrics.json"],
        "workingDir": "/t9k/mnt/tutorial-examples",
        "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
    }]})  # fmt: skip
    manifest = job("PyTorchTrainingJob", "torch-mnist-trainingjob", {
        "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "ExitCode", "template": {"spec": spec}}],
    })  # fmt: skip
    (folder / "tutorial-examples/job/pytorchtrainingjob/ddp/log").mkdir()
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--volume", f"tutorial={folder}", "--run-dir", "r", "--quiet"], shared_tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    code = folder / "tutorial-examples"
    assert {(s["cwd"], s["file"]) for s in whereabouts(code)} == {
        ("/t9k/mnt/tutorial-examples", "/t9k/mnt/tutorial-examples/job/pytorchtrainingjob/ddp/entry.py")
    }
    assert len(whereabouts(code)) == 2
    metrics = json.loads((code / "job/pytorchtrainingjob/ddp/log/metrics.json").read_text())
    assert metrics, metrics


@pytest.mark.parametrize("as_nobody", [False, True], ids=["root-or-user", "nobody"])
def test_user_written_torchrun_p3_shape_rendezvous_across_replicas(shared_tmp: Path, as_nobody: bool) -> None:
    """P3's shape: type ``node``, the user's own torchrun with ``$(MASTER_ADDR):$(MASTER_PORT)``
    and c10d, the working directory deep in the claim. torchrun tells nodes apart by host name
    and pid; each replica is its pod's name in a PID namespace of its own, so the two agents
    rendezvous (they would wait for ever as two "pid 2"s of one host)."""
    folder = claim(shared_tmp, (REPO / "examples/pytorch-ddp/train.py", "job/pytorchtrainingjob/ddp"))
    spec = mounted({"containers": [{
        "name": "pytorch", "image": "t9kpublic/pytorch-1.13.0:sdk-0.5.2",
        "command": ["torchrun", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                    "--rdzv_endpoint", "$(MASTER_ADDR):$(MASTER_PORT)", "--max_restarts", "0", "--role", "node",
                    "entry.py", "train.py", "--epochs", "2", "--output", "metrics.json"],
        "workingDir": "/t9k/mnt/tutorial-examples/job/pytorchtrainingjob/ddp",
        "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
    }]})  # fmt: skip
    manifest = job("PyTorchTrainingJob", "torchrun-mnist", {
        "replicaSpecs": [{"type": "node", "replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": spec}}],
    })  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    if as_nobody and os.geteuid() == 0:
        _tree_for(NOBODY, shared_tmp)
    done = run_cli(["run", "job.yaml", "--volume", f"tutorial={folder}", "--run-dir", "r", "--quiet"], shared_tmp,
                   as_nobody=as_nobody)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + _logs(shared_tmp / "r")
    code = folder / "tutorial-examples/job/pytorchtrainingjob/ddp"
    seen = whereabouts(code)
    assert len(seen) == 2 and {(s["cwd"], s["file"]) for s in seen} == {
        ("/t9k/mnt/tutorial-examples/job/pytorchtrainingjob/ddp", "/t9k/mnt/tutorial-examples/job/pytorchtrainingjob/ddp/entry.py")
    }, seen
    assert {s["host"] for s in seen} == {"torchrun-mnist-node-0", "torchrun-mnist-node-1"}
    assert json.loads((code / "metrics.json").read_text())


def _logs(run_dir: Path) -> str:
    try:
        return (run_dir / "job.log").read_text()[-4000:]
    except OSError:
        return ""


def test_deepspeedjob_d2_shape_with_its_code_on_the_claim_and_shm_in_memory(shared_tmp: Path) -> None:
    """D2's shape: workingDir /t9k/mnt/ (the claim ``megatron``), ``/dev/shm`` an emptyDir of medium
    Memory, ``run.python`` a script on the claim; deepspeed's launcher runs it on 2 workers."""
    folder = claim(shared_tmp, (REPO / "examples/deepspeed-digits/train_deepspeed.py", "ds"))
    shutil.copy(REPO / "examples/deepspeed-digits/ds_config.json", folder / "tutorial-examples/ds")
    spec = {"containers": [{
        "name": "worker", "image": "t9kpublic/megatron-deepspeed:23.06-py3", "workingDir": "/t9k/mnt/",
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "env": [{"name": "DS_ACCELERATOR", "value": "cpu"}, {"name": "OMP_NUM_THREADS", "value": "1"}],
        "volumeMounts": [{"mountPath": "/t9k/mnt", "name": "data"}, {"mountPath": "/dev/shm", "name": "dshm"}],
    }], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "megatron"}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory"}}]}  # fmt: skip
    manifest = job("DeepSpeedJob", "gpt-125m", {
        "config": {"localRank": True, "slotsPerWorker": 1, "run": {"python": [
            "tutorial-examples/ds/entry.py", "train_deepspeed.py", "--epochs", "2", "--output", "tutorial-examples/ds/metrics.json"]}},
        "worker": {"replicas": 2, "template": {"spec": spec}},
    })  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--volume", f"megatron={folder}", "--run-dir", "r", "--quiet"], shared_tmp)
    assert done.returncode == 0, done.stdout + done.stderr + _logs(shared_tmp / "r")
    code = folder / "tutorial-examples/ds"
    seen = whereabouts(folder)
    assert seen and {(s["cwd"], s["file"]) for s in seen} == {("/t9k/mnt", "/t9k/mnt/tutorial-examples/ds/entry.py")}
    assert json.loads((code / "metrics.json").read_text())
    # The Memory emptyDirs went with their pods, and the run's own folder under /dev/shm with them.
    shm = Path((shared_tmp / "r" / "shm.path").read_text().strip())
    assert shm.parent == Path("/dev/shm") and shm.name.startswith("t9k-jobs-") and not shm.exists(), shm


@pytest.mark.parametrize("as_nobody", [False, True], ids=["root-or-user", "nobody"])
def test_colossalaijob_launcher_cwd_under_the_claim_reaches_the_workers(shared_tmp: Path, as_nobody: bool) -> None:
    """C1's shape with the code on a claim: the workers mount it, the launcher (only image and
    workingDir, as T9k's ``spec.launcher``) has no volume, and its working directory, under the
    claim's mount path, is made on a tmpfs of its own as a container runtime makes it;
    ``colossalai run`` cds there on each worker over ssh, where the claim is. Each worker's sshd
    runs inside the worker's namespaces (the ranks it starts too), a user namespace as nobody."""
    if not os.access("/usr/sbin/sshd", os.X_OK):
        pytest.fail("OpenSSH's server is not installed (scripts/test.sh installs it)")
    folder = claim(shared_tmp, (REPO / "examples/colossalai-digits/train_colossalai.py", "colossalai"))
    spec = mounted({"containers": [{"name": "worker", "image": "t9kpublic/colossalai:0.2.5-palm"}]})
    manifest = job("ColossalAIJob", "colossal-palm", {
        "launcher": {"image": "t9kpublic/colossalai:0.2.5-palm", "workingDir": "/t9k/mnt/tutorial-examples/colossalai",
                     "env": [{"name": "OMP_NUM_THREADS", "value": "1"}]},
        "worker": {"replicas": 2, "procPerWorker": 1, "torchArgs": [],
                   "command": ["entry.py", "train_colossalai.py", "--epochs", "2", "--output", "metrics.json"],
                   "template": {"spec": spec}},
        "runPolicy": {"cleanUpWorkers": True},
    })  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    if as_nobody and os.geteuid() == 0:
        _tree_for(NOBODY, shared_tmp)
    done = run_cli(["run", "job.yaml", "--volume", f"tutorial={folder}", "--run-dir", "r", "--quiet"], shared_tmp,
                   as_nobody=as_nobody, login=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + _logs(shared_tmp / "r")
    code = folder / "tutorial-examples/colossalai"
    seen = whereabouts(code)
    assert len(seen) == 2 and {(s["cwd"], s["file"]) for s in seen} == {
        ("/t9k/mnt/tutorial-examples/colossalai", "/t9k/mnt/tutorial-examples/colossalai/entry.py")
    }, seen
    assert {s["host"] for s in seen} == {"colossal-palm-worker-0", "colossal-palm-worker-1"}
    assert json.loads((code / "metrics.json").read_text())
    host_has_no("/t9k")


# --------------------------------------------------------------------------- what a replica leaves


LEAVER = (
    "import subprocess, sys\n"
    "subprocess.Popen(['sleep', sys.argv[1]], env={}, start_new_session=True,\n"
    "                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print('left a daemon behind', flush=True)\n"
)


def _sleeping(token: str) -> list[int]:
    """Live processes whose command line is ``sleep TOKEN`` (read from /proc, whatever their
    environment: the daemon cleared it)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{token}\0".encode() and alive(int(pid)):
                    out.append(int(pid))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_a_daemon_with_a_clean_environment_ends_with_its_replica(shared_tmp: Path, mode: str) -> None:
    """A replica's child that leaves its session and clears its environment (a daemon) has neither
    the run's marker nor the replica as parent: the replica's PID namespace ends it with the
    replica (bubblewrap; util-linux unshare, which a run as root uses without bubblewrap)."""
    if mode == "unshare" and os.geteuid() != 0:
        pytest.skip("the unshare sandbox is root's (a user other than root without bubblewrap gets none)")
    token = f"{4000 + os.getpid() % 1000}.{int(time.time() * 1000) % 100000}"
    manifest = job("GenericJob", "leaver", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(
        ["python", "-c", LEAVER, token], name="main")}]})  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet"], shared_tmp, env={sandbox.MODE_ENV: mode})
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "left a daemon behind" in (shared_tmp / "r" / "leaver-worker-0.main.log").read_text()
        assert _sleeping(token) == []
    finally:
        for pid in _sleeping(token):
            os.kill(pid, signal.SIGKILL)


#: A daemon as a daemon makes itself: fork, setsid, fork again, a cleared environment; the first
#: child exits at once, so the daemon's parent is never the replica's command.
DOUBLE_FORKER = (
    "import os, sys\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        os.execve('/bin/sleep', ['sleep', sys.argv[1]], {})\n"
    "    os._exit(0)\n"
    "os.wait()\n"
    "print('left a daemon behind', flush=True)\n"
)


def test_without_namespaces_a_double_forked_daemon_is_found_and_ended(shared_tmp: Path) -> None:
    """``T9K_JOBS_SANDBOX=none`` (what a user without bubblewrap gets): the replica's command is the
    subreaper of what it starts, as a container's PID 1, and the run the subreaper of what is left
    when it ends; the daemon is ended with the replica and named in a Warning event."""
    token = f"{6000 + os.getpid() % 1000}.{int(time.time() * 1000) % 100000}"
    manifest = job("GenericJob", "forker", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(
        ["python", "-c", DOUBLE_FORKER, token], name="main")}]})  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet"], shared_tmp, env={sandbox.MODE_ENV: "none"})
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "left a daemon behind" in (shared_tmp / "r" / "forker-worker-0.main.log").read_text()
        assert _sleeping(token) == []
        events = (shared_tmp / "r" / "events.log").read_text()
        assert "Warning LeftoverProcesses: forker-worker-0/main left 1 process(es) running" in events, events
        assert "(sleep)" in events, events
    finally:
        for pid in _sleeping(token):
            os.kill(pid, signal.SIGKILL)


def test_a_deleted_replica_takes_its_daemon_and_gets_its_grace_period(start, shared_tmp: Path) -> None:
    """Ctrl-C: the replica's command gets SIGTERM (not its namespace's end, which would kill it
    before its handler runs); its daemon ends with it."""
    token = f"{5000 + os.getpid() % 1000}.{int(time.time() * 1000) % 100000}"
    code = LEAVER + (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('graceful', flush=True), sys.exit(42)))\n"
        "while True: time.sleep(0.1)\n"
    )
    manifest = job("GenericJob", "graceful", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(
        ["python", "-c", code, token], name="main")}]})  # fmt: skip
    run = start(manifest)
    try:
        run.wait_output("left a daemon behind")
        wait_until(lambda: _sleeping(token), "the daemon", 30)
        run.signal(signal.SIGINT)
        assert run.finish(60) == 130, run.output
        assert "graceful" in (run.run_dir / "graceful-worker-0.main.log").read_text()
        assert _sleeping(token) == []
    finally:
        for pid in _sleeping(token):
            os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- refusals


def test_a_claim_without_a_folder_is_refused_before_anything_starts(shared_tmp: Path) -> None:
    spec = mounted({"containers": [{"name": "main", "image": "x", "command": ["touch", "/tmp/should-not-run"]}]})
    manifest = job("PyTorchTrainingJob", "p", {"replicaSpecs": [
        {"type": "master", "replicas": 1, "template": {"spec": spec}},
        {"type": "worker", "replicas": 2, "template": {"spec": spec}},
    ]})  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    began = time.monotonic()
    done = run_cli(["run", "job.yaml", "--run-dir", "r"], shared_tmp)
    assert time.monotonic() - began < 30
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "claim 'tutorial'" in lines[0] and "/t9k/mnt" in lines[0] and "master, worker" in lines[0]
    assert "--volume tutorial=DIR" in lines[0]
    assert not (shared_tmp / "r").exists()


@pytest.mark.parametrize(
    ("volume", "words"),
    [
        ({"name": "data", "nfs": {"server": "x", "path": "/"}}, ["volumes[0]", "nfs", "persistentVolumeClaim"]),
        ({"name": "data", "hostPath": {"path": "/nonexistent/t9k-test", "type": "Directory"}},
         ["volumes[0].hostPath", "Directory", "/nonexistent/t9k-test is not a directory"]),
        ({"name": "data", "downwardAPI": {"items": [{"path": "x", "fieldRef": {"fieldPath": "status.podIP"}}]}},
         ["fieldRef.fieldPath", "status.podIP", "metadata.labels"]),
    ],
    ids=["nfs", "hostpath-missing", "downward-field"],
)
def test_volumes_a_local_run_cannot_set_up_are_refused_by_name(shared_tmp: Path, volume: dict[str, Any], words: list[str]) -> None:
    manifest = job("GenericJob", "g", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {
        "containers": [{"name": "main", "image": "x", "command": ["true"], "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [volume]}}}]})  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r"], shared_tmp)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--volume", "tutorial"], ["--volume 'tutorial'", "NAME=DIR"]),
        (["--volume", "tutorial=/nonexistent/dir"], ["/nonexistent/dir is not a directory"]),
        (["--volume", "Bad_Name=/tmp"], ["not a claim name"]),
        (["--python", "/nonexistent/python"], ["--python", "not an executable file"]),
        (["--python", "/bin/true"], ["--python", "not a Python 3 interpreter"]),
    ],
)
def test_bad_flags_get_one_line_and_exit_2(shared_tmp: Path, args: list[str], words: list[str]) -> None:
    manifest = job("GenericJob", "g", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["true"])}]})
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", *args], shared_tmp)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def test_without_namespaces_a_job_with_volumes_is_refused_and_one_without_runs(shared_tmp: Path) -> None:
    """A machine without mount namespaces (here chosen by hand: T9K_JOBS_SANDBOX=none): a job whose
    containers mount volumes is refused with what is missing; a job without runs as before."""
    with_volume = job("GenericJob", "v", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": mounted(
        {"containers": [{"name": "main", "image": "x", "command": ["true"]}]})}}]})  # fmt: skip
    (shared_tmp / "v.yaml").write_text(yaml.safe_dump(with_volume, sort_keys=False))
    done = run_cli(["run", "v.yaml", "--volume", f"tutorial={shared_tmp}"], shared_tmp, env={sandbox.MODE_ENV: "none"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "mount namespace" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    plain = job("GenericJob", "p", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(
        ["python", "-c", "import os; print('pid', os.getpid())"], name="main")}]})  # fmt: skip
    (shared_tmp / "p.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
    done = run_cli(["run", "p.yaml", "--run-dir", "r"], shared_tmp, env={sandbox.MODE_ENV: "none"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no namespaces" in done.stderr
    assert "pid 2\n" not in (shared_tmp / "r" / "p-worker-0.main.log").read_text()


# --------------------------------------------------------------------------- volume types


VOLUME_PROBE = """import json, os, pathlib
out = {}
def tryw(path):
    try:
        pathlib.Path(path).write_text("w")
        return "ok"
    except OSError as exc:
        return exc.strerror
mounts = open("/proc/self/mounts").read().split("\\n")
out["shm_fs"] = next((l.split()[2] for l in mounts if l.split()[1:2] == ["/cache"]), None)
out["scratch"] = sorted(os.listdir("/scratch"))
out["scratch_mode"] = oct(os.stat("/scratch").st_mode & 0o777)
out["ro_write"] = tryw("/code/should-not-exist")
out["sub"] = sorted(os.listdir("/sub"))
out["sub_write"] = tryw("/sub/from-replica")
out["made"] = os.path.isdir("/made")
out["podinfo"] = {p: open("/podinfo/" + p).read() for p in sorted(os.listdir("/podinfo"))}
out["host_file"] = open("/host/hello").read()
pathlib.Path(os.environ["OUT"]).write_text(json.dumps(out))
"""


def test_every_volume_type_as_a_kubelet_sets_it_up(shared_tmp: Path) -> None:
    """One pod with each type: an emptyDir an init container fills and the container reads
    (removed with the pod), a Memory emptyDir on a tmpfs, a read-only claim, a claim's subPath
    (made when missing), a hostPath DirectoryOrCreate (made) and Directory, the downward API."""
    code = shared_tmp / "code"
    code.mkdir()
    hostdir = shared_tmp / "host"
    hostdir.mkdir()
    (hostdir / "hello").write_text("from the host")
    made = shared_tmp / "made-by-kubelet-rules"
    out = shared_tmp / "probe.json"
    spec = {
        "initContainers": [{"name": "fill", "image": "x", "command": ["sh", "-c", "echo filled > /scratch/by-init"],
                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
        "containers": [{
            "name": "main", "image": "x", "command": ["python", "-c", VOLUME_PROBE],
            "env": [{"name": "OUT", "value": str(out)}, {"name": "SUB", "value": "per-replica"}],
            "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "cache", "mountPath": "/cache"},
                {"name": "code", "mountPath": "/code", "readOnly": True},
                {"name": "code", "mountPath": "/sub", "subPathExpr": "runs/$(SUB)"},
                {"name": "made", "mountPath": "/made"},
                {"name": "host", "mountPath": "/host"},
                {"name": "podinfo", "mountPath": "/podinfo"},
            ],
        }],
        "volumes": [
            {"name": "scratch", "emptyDir": {}},
            {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "code", "persistentVolumeClaim": {"claimName": "code"}},
            {"name": "made", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}},
            {"name": "host", "hostPath": {"path": str(hostdir), "type": "Directory"}},
            {"name": "podinfo", "downwardAPI": {"items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        ],
    }  # fmt: skip
    manifest = job("GenericJob", "vols", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]})
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet", "--volume", f"code={code}"], shared_tmp)
    assert done.returncode == 0, done.stdout + done.stderr + _logs(shared_tmp / "r")
    seen = json.loads(out.read_text())
    assert seen["scratch"] == ["by-init"] and seen["scratch_mode"] == "0o777"
    assert seen["shm_fs"] == "tmpfs"
    assert seen["ro_write"] == "Read-only file system" and not (code / "should-not-exist").exists()
    assert seen["sub"] == [] and seen["sub_write"] == "ok"
    assert (code / "runs" / "per-replica" / "from-replica").read_text() == "w"
    assert seen["made"] and made.is_dir()
    assert seen["host_file"] == "from the host"
    assert seen["podinfo"]["name"] == "vols-worker-0"
    assert 'batch.tensorstack.dev/replica-type="worker"' in seen["podinfo"]["labels"].splitlines()
    # The pod's own folders (emptyDirs, projections) went with it; the run dir keeps its logs.
    assert not (shared_tmp / "r" / "volumes").exists() or not any((shared_tmp / "r" / "volumes").iterdir())
    shutil.rmtree(made)


def test_a_configmap_volume_projects_the_items_with_their_modes(shared_tmp: Path) -> None:
    config = shared_tmp / "config"
    config.mkdir()
    (config / "app.conf").write_text("threads=2")
    (config / "unused").write_text("left out")
    probe = (
        "import os\n"
        "for root, dirs, files in os.walk('/config'):\n"
        "    for f in files:\n"
        "        p = os.path.join(root, f)\n"
        "        print(p, oct(os.stat(p).st_mode & 0o777), open(p).read())\n"
    )
    spec = {"containers": [{"name": "main", "image": "x", "command": ["python", "-c", probe],
                            "volumeMounts": [{"name": "config", "mountPath": "/config"}]}],
            "volumes": [{"name": "config", "configMap": {"name": "app-config", "defaultMode": 0o640,
                         "items": [{"key": "app.conf", "path": "conf/app.conf"}]}}]}  # fmt: skip
    manifest = job("GenericJob", "cm", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]})
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet", "--volume", f"app-config={config}"], shared_tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (shared_tmp / "r" / "cm-worker-0.main.log").read_text().splitlines() == ["/config/conf/app.conf 0o640 threads=2"]


# --------------------------------------------------------------------------- saved jobs, --python


def test_a_saved_job_with_status_succeeded_runs_anew(shared_tmp: Path) -> None:
    """A manifest saved from a cluster carries its status and server-set metadata: a local run
    and render read it as a create does (dropped, one note), so it runs instead of ending at once."""
    manifest = job(
        "GenericJob", "saved",
        {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["python", "-c", "print('ran again')"], name="main")}]},
        status={"phase": "Succeeded", "conditions": [{"type": "Completed", "status": "True", "reason": "Succeeded"}]},
        uid="0b6b6d2c-1111-2222-3333-444455556666", resourceVersion="4242", generation=3,
        creationTimestamp="2026-11-01T00:00:00Z", managedFields=[{"manager": "kubectl"}],
    )  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    rendered = run_cli(["render", "job.yaml"], shared_tmp)
    assert rendered.returncode == 0, rendered.stderr
    pods = [o for o in yaml.safe_load_all(rendered.stdout) if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["saved-worker-0"]
    assert "ownerReferences" not in pods[0]["metadata"]
    assert rendered.stderr.count("note: ") == 1 and "metadata.uid" in rendered.stderr
    done = run_cli(["run", "-", "--run-dir", "r"], shared_tmp, input=yaml.safe_dump(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note: <stdin>: status, metadata.uid, metadata.resourceVersion" in done.stderr
    assert "ran again" in done.stdout
    status = _status(shared_tmp / "r")
    assert status["phase"] == "Succeeded" and status["startTime"] != "2026-11-01T00:00:00Z"
    copy = yaml.safe_load((shared_tmp / "r" / "manifest.yaml").read_text())
    assert "status" not in copy and "uid" not in copy["metadata"]


def test_python_names_the_interpreter_python_python3_and_torchrun_mean(shared_tmp: Path) -> None:
    """--python: a user's own environment (here a venv that sees the test environment's packages
    through a .pth file) is what ``python``, ``python3`` and ``torchrun`` start in every replica."""
    venv = shared_tmp / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    import torch

    (site / "test-env.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    report = "import sys; print('prefix', sys.prefix)"
    script = shared_tmp / "where.py"
    script.write_text(report + "\n")
    commands = f"python -c \"{report}\" && python3 -c \"{report}\" && torchrun --standalone --nproc_per_node 1 {script}"
    manifest = job("GenericJob", "py", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(
        ["sh", "-c", commands], name="main")}]})  # fmt: skip
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--python", str(venv / "bin" / "python")], shared_tmp)
    assert done.returncode == 0, done.stdout + done.stderr + _logs(shared_tmp / "r")
    log = (shared_tmp / "r" / "py-worker-0.main.log").read_text()
    assert [line for line in log.splitlines() if line.startswith("prefix")] == [f"prefix {venv}"] * 3, log


# --------------------------------------------------------------------------- TensorBoard


def _tb_job(release: Path) -> dict[str, Any]:
    wait = f"import pathlib, time\nwhile not pathlib.Path({str(release)!r}).exists(): time.sleep(0.1)\n"
    return job("PyTorchTrainingJob", "tb", {
        "tensorboardSpec": {"trainingLogFilesets": ["t9k://pvc/tutorial/logs/run1"], "image": "t9kpublic/tensorflow-2.11.0:cpu-sdk-0.5.2"},
        "replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": mounted(
            {"containers": [{"name": "pytorch", "image": "x", "command": ["python", "-c", wait]}]})}}],
    })  # fmt: skip


def test_a_local_run_serves_its_tensorboard_over_the_claims_folder(start, shared_tmp: Path) -> None:
    folder = shared_tmp / "claim"
    (folder / "logs" / "run1").mkdir(parents=True)
    release = shared_tmp / "release"
    run = start(_tb_job(release), "--volume", f"tutorial={folder}", "--quiet")
    status = run.wait_for(lambda s: (s.get("tensorboard") or {}).get("ready") is True, timeout=120)
    note = status["tensorboard"]["note"]
    url = note.rsplit(" at ", 1)[1]
    assert url.startswith("http://127.0.0.1:") and note.startswith("TensorBoard [tb] is ready at ")
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200 and b"TensorBoard" in answer.read()
    described = run_cli(["describe", "pj", "tb", "--run-dir", str(run.run_dir)], shared_tmp)
    assert f"TensorBoard: {url}" in described.stdout, described.stdout + described.stderr
    release.write_text("go")
    assert run.finish(120) == 0, run.output
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)  # it lived with the run
    described = run_cli(["describe", "pj", "tb", "--run-dir", str(run.run_dir)], shared_tmp)
    assert "TensorBoard: not served: its run has ended" in described.stdout, described.stdout


def test_without_the_tensorboard_package_the_job_runs_with_a_warning(start, shared_tmp: Path) -> None:
    """The extra is missing (a package named tensorboard without its server shadows it here): the
    run says what to install, as a Warning, and the job runs to its end."""
    shadow = shared_tmp / "shadow" / "tensorboard"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    folder = shared_tmp / "claim"
    (folder / "logs" / "run1").mkdir(parents=True)
    release = shared_tmp / "release"
    release.write_text("at once")
    manifest = _tb_job(release)
    (shared_tmp / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--volume", f"tutorial={folder}"], shared_tmp,
                   env={"PYTHONPATH": str(shadow.parent)})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    events = (shared_tmp / "r" / "events.log").read_text()
    assert "Warning TensorBoardUnavailable" in events and "t9k-jobs[tensorboard]" in events
    assert _status(shared_tmp / "r")["tensorboard"]["reason"] == "DependentUnavailable"



def test_the_sdk_runs_a_tutorial_job_with_volumes_and_python(shared_tmp: Path) -> None:
    """``Client.local().run(..., volumes={CLAIM: DIR}, python=...)``: the same run in the background;
    a claim missing from ``volumes`` is a UsageError naming it, before anything starts."""
    from t9k_jobs import Client
    from t9k_jobs.errors import UsageError

    from .conftest import kill_run

    folder = shared_tmp / "claim"
    (folder / "code").mkdir(parents=True)
    (folder / "code" / "hello.py").write_text("import os, sys; print('from', os.getcwd(), sys.executable)\n")
    spec = mounted({"containers": [{"name": "main", "image": "x", "command": ["python", "hello.py"], "workingDir": "/t9k/mnt/code"}]})
    manifest = job("GenericJob", "sdk-vol", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]})
    client = Client.local(runs_dir=shared_tmp / "runs")
    with pytest.raises(UsageError, match="--volume tutorial=DIR"):
        client.run(manifest)
    assert not (shared_tmp / "runs").exists() or not any((shared_tmp / "runs").iterdir())
    run_dir = shared_tmp / "runs" / "r"
    started = client.run(manifest, run_dir=run_dir, volumes={"tutorial": folder}, python=sys.executable)
    assert Path(started.metadata.annotations["t9k-jobs.local/run-dir"]) == run_dir.resolve()
    try:
        done = client.wait("gj", "sdk-vol", phase="Succeeded", timeout="2m")
        assert done.status.phase == "Succeeded"
        assert f"[worker-0] from /t9k/mnt/code {sys.executable}" in list(client.logs("gj", "sdk-vol"))
    finally:
        kill_run(run_dir)
