"""What another account of this machine can do to a local run (issue 40): nothing it makes first is
used, nothing of the run's is followed through a link it places, the run's TensorBoard answers
only who holds its URL, and a runs dir it controls is refused. Real runs as root (CI) with
``nobody`` as the other account; the pieces that need no run are tested on their own."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs.local.rundir import RunDirError, check_runs_dir
from t9k_jobs.local.volumes import _chmod_folder, _remove_tree
from tests.helpers import job

from .test_volumes import NOBODY, _tb_job, run_cli, unprivileged

pytestmark = pytest.mark.e2e

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="another account is made to act by root (CI runs as root)")


def _generic(name: str, code: str, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {"containers": [{"name": "main", "image": "x", "command": ["python", "-c", code], "volumeMounts": mounts}],
            "volumes": volumes}  # fmt: skip
    return job("GenericJob", name, {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]})


def _write(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / "job.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))


# --------------------------------------------------------------------------- /dev/shm


#: A replica that reports its Memory emptyDir's folder on this machine (from the run's shm.path)
#: and writes 1 MiB at a time into it until told to stop (``LIMIT`` MiB) or the tmpfs is full.
SHM_PROBE = """import errno, json, os, sys
shm = open(os.environ["SHM_FILE"]).read().strip()
st = os.stat(shm)
written, full = 0, False
try:
    with open("/cache/data", "wb") as f:
        for _ in range(int(os.environ["LIMIT"])):
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1
except OSError as exc:
    full = exc.errno == errno.ENOSPC
print(json.dumps({"shm": shm, "mode": oct(st.st_mode & 0o7777), "uid": st.st_uid, "written": written, "full": full}))
"""


@root_only
def test_a_memory_emptydir_is_in_a_folder_no_other_account_could_make_first(shared_tmp: Path) -> None:
    """The folder another account made under the name the run's /dev/shm folder once had (the run
    dir's hash: anyone could compute it) is neither used nor touched; the run's own is new, 0700,
    root's, and gone with the run."""
    run_dir = shared_tmp / "r"
    squatted = Path(f"/dev/shm/t9k-jobs-{hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]}")
    squatted.mkdir()
    try:
        os.chown(squatted, NOBODY, NOBODY)
        squatted.chmod(0o777)
        code = SHM_PROBE
        manifest = _generic("shm", code, [{"name": "cache", "emptyDir": {"medium": "Memory"}}],
                            [{"name": "cache", "mountPath": "/cache"}])  # fmt: skip
        manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "SHM_FILE", "value": str(run_dir / "shm.path")}, {"name": "LIMIT", "value": "1"}]
        _write(shared_tmp, manifest)
        done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet"], shared_tmp)
        assert done.returncode == 0, done.stdout + done.stderr
        seen = json.loads((run_dir / "shm-worker-0.main.log").read_text())
        assert Path(seen["shm"]) != squatted and Path(seen["shm"]).parent == Path("/dev/shm"), seen
        assert (seen["mode"], seen["uid"], seen["written"]) == ("0o700", 0, 1), seen
        assert not Path(seen["shm"]).exists()
        assert squatted.is_dir() and squatted.stat().st_uid == NOBODY and not any(squatted.iterdir())
    finally:
        squatted.rmdir()


@root_only
def test_a_memory_emptydir_size_limit_is_a_tmpfs_of_that_size(shared_tmp: Path) -> None:
    """``sizeLimit: 8Mi`` on a Memory emptyDir: a write past 8 MiB fails with ENOSPC, as in a pod;
    no mount is left once the run has ended."""
    manifest = _generic("sized", SHM_PROBE, [{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}],
                        [{"name": "cache", "mountPath": "/cache"}])  # fmt: skip
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "SHM_FILE", "value": str(shared_tmp / "r" / "shm.path")}, {"name": "LIMIT", "value": "32"}]
    _write(shared_tmp, manifest)
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet"], shared_tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sizeLimit" not in done.stdout + done.stderr  # enforced: nothing to say
    seen = json.loads((shared_tmp / "r" / "sized-worker-0.main.log").read_text())
    assert seen["full"] and 6 <= seen["written"] <= 8, seen
    assert seen["shm"] not in Path("/proc/self/mountinfo").read_text()


def test_size_limits_a_run_does_not_enforce_are_said_at_its_start(shared_tmp: Path) -> None:
    """A disk emptyDir's ``sizeLimit`` (a kubelet evicts past it) is said at the start, naming the
    field; so is a Memory one's for a user other than root (``nobody`` here, under CI's root)."""
    volumes = [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}]
    mounts = [{"name": "scratch", "mountPath": "/scratch"}, {"name": "cache", "mountPath": "/cache"}]
    _write(shared_tmp, _generic("limits", "print('ran')", volumes, mounts))
    as_nobody = os.geteuid() == 0
    if as_nobody:
        os.chown(shared_tmp, NOBODY, NOBODY)
        os.chown(shared_tmp / "job.yaml", NOBODY, NOBODY)
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet"], shared_tmp, as_nobody=as_nobody)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "spec.replicaSpecs[0].template.spec.volumes[0].emptyDir.sizeLimit: 1Gi is not enforced by a local run" in said
    assert "spec.replicaSpecs[0].template.spec.volumes[1].emptyDir.sizeLimit: 64Mi is not enforced for a user other than root" in said


def test_removing_a_pods_folders_follows_no_link(tmp_path: Path) -> None:
    """A container may leave a link to a folder outside its emptyDir, and read-only folders: the
    removal makes the folders inside writable and removes them, and leaves the link's target (its
    mode and files) as it was."""
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    (outside / "keep").write_text("kept")
    tree = tmp_path / "emptydir"
    (tree / "ro" / "deeper").mkdir(parents=True)
    (tree / "ro" / "deeper" / "f").write_text("x")
    (tree / "ro" / "deeper").chmod(0o500)
    (tree / "ro").chmod(0o500)
    (tree / "link").symlink_to(outside)
    _remove_tree(tree)
    assert not os.path.lexists(tree)
    assert (outside / "keep").read_text() == "kept" and outside.stat().st_mode & 0o777 == 0o755


def test_a_folder_swapped_for_a_link_is_not_chmodded_through_it(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("secret")
    target.chmod(0o600)
    swapped = tmp_path / "folder"
    swapped.symlink_to(target)
    with pytest.raises(OSError):
        _chmod_folder(swapped, 0o777)
    assert target.stat().st_mode & 0o777 == 0o600


def test_a_volume_at_or_under_proc_is_refused_before_the_run(shared_tmp: Path) -> None:
    """runc refuses a mount at or under ``/proc`` (the container's own /proc is there): so does a
    local run, exit 2, naming the field."""
    _write(shared_tmp, _generic("procs", "print('ran')", [{"name": "scratch", "emptyDir": {}}],
                                [{"name": "scratch", "mountPath": "/proc/sys"}]))  # fmt: skip
    done = run_cli(["run", "job.yaml", "--run-dir", "r", "--quiet"], shared_tmp)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "spec.replicaSpecs[0].template.spec.containers[0].volumeMounts[0].mountPath: '/proc/sys' is /proc" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- the runs dir


@root_only
def test_a_runs_dir_another_account_owns_is_refused(shared_tmp: Path) -> None:
    """``./t9k-runs`` made by ``nobody`` in a folder everyone may write (as /tmp is): root's run is
    refused with one line, exit 2, before anything starts; nothing is made in it."""
    shared_tmp.chmod(0o1777)
    runs = shared_tmp / "t9k-runs"
    runs.mkdir()
    os.chown(runs, NOBODY, NOBODY)
    _write(shared_tmp, _generic("squat", "print('ran')", [], []))
    done = run_cli(["run", "job.yaml", "--quiet"], shared_tmp)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "./t9k-runs" in done.stderr and "belongs to nobody, another account" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not any(runs.iterdir())


def test_a_runs_dir_others_may_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o777)
    with pytest.raises(RunDirError, match=r"writable by others \(mode 0777\).*chmod go-w"):
        check_runs_dir(runs, "./t9k-runs")
    runs.chmod(0o775)
    with pytest.raises(RunDirError, match="writable by its group"):
        check_runs_dir(runs, "./t9k-runs")
    runs.chmod(0o1777)  # as /tmp: no one renames another's entries
    check_runs_dir(runs, "./t9k-runs")
    runs.chmod(0o755)
    check_runs_dir(runs, "./t9k-runs")


# --------------------------------------------------------------------------- TensorBoard


def _answer(url: str, as_nobody: bool) -> int:
    """The HTTP status ``url`` answers with, asked by this process or by ``nobody``."""
    if not as_nobody:
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code
    code = ("import sys, urllib.request, urllib.error\n"
            "try:\n    print(urllib.request.urlopen(sys.argv[1], timeout=30).status)\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)\n")  # fmt: skip
    argv = unprivileged([sys.executable, "-c", code, url], Path("/tmp"))
    return int(subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout)


def test_a_local_tensorboard_answers_only_who_holds_its_url(start, shared_tmp: Path) -> None:
    """The TensorBoard serves under a random path: its port's other paths answer 404 to anyone
    (another account included), the path is on no command line (``ps`` shows those to every
    account), and the URL the run gives answers."""
    folder = shared_tmp / "claim"
    (folder / "logs" / "run1").mkdir(parents=True)
    release = shared_tmp / "release"
    run = start(_tb_job(release), "--volume", f"tutorial={folder}", "--quiet")
    try:
        status = run.wait_for(lambda s: (s.get("tensorboard") or {}).get("ready") is True, timeout=120)
        url = status["tensorboard"]["note"].rsplit(" at ", 1)[1]
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/([0-9a-f]{32})/", url)
        assert match, url
        port, secret = match.groups()
        assert _answer(url, as_nobody=False) == 200
        for guess in (f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/data/runs",
                      f"http://127.0.0.1:{port}/{secret[:-1]}/data/runs"):  # fmt: skip
            assert _answer(guess, as_nobody=False) == 404, guess
            if os.geteuid() == 0:
                assert _answer(guess, as_nobody=True) == 404, guess
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), pid
            except OSError:
                pass
        assert oct((run.run_dir / "tensorboard.url").stat().st_mode & 0o777) == "0o600"
    finally:
        release.write_text("go")
    assert run.finish(120) == 0, run.output
