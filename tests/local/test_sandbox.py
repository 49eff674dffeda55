"""The pieces of a replica's namespaces and volumes, without running a job: bubblewrap's command
line (nothing made on this machine), where paths are, the volume checks, a saved manifest read
as a create. The end-to-end behaviour is in test_volumes.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from t9k_jobs.api.created import as_created
from t9k_jobs.frameworks import parse_job
from t9k_jobs.local import sandbox
from t9k_jobs.local.sandbox import BWRAP, Sandbox, bwrap_argv, covering, host_path, hosts_file, inside, mounts_refused
from t9k_jobs.local.volumes import (
    Mount,
    PodVolumes,
    VolumeError,
    check_host_path,
    downward_value,
    parse_volume_flags,
    tensorboard_folders,
    volume_problems,
)
from tests.helpers import job, template


def _op(args: list[str], flag: str) -> list[tuple[str, ...]]:
    """The operands of every ``flag`` in a bwrap command line."""
    arity = {"--symlink": 2, "--dev-bind-try": 2, "--dev-bind": 2, "--bind": 2, "--ro-bind": 2, "--perms": 1,
             "--tmpfs": 1, "--dir": 1, "--proc": 1, "--chdir": 1, "--hostname": 1}  # fmt: skip
    out = []
    i = 1
    while i < len(args) and args[i] != "--":
        n = arity.get(args[i], 0)
        if args[i] == flag:
            out.append(tuple(args[i + 1 : i + 1 + n]))
        i += 1 + n
    return out


def test_a_mount_point_missing_here_is_made_on_a_tmpfs_root(tmp_path: Path) -> None:
    """/t9k does not exist here: the root becomes a tmpfs with every entry of / put back (links
    as links), and the claim goes at /t9k/mnt; nothing is made on this machine."""
    args = bwrap_argv("bwrap", ["python", "x.py"], "/t9k/mnt/code", [Mount("/t9k/mnt", tmp_path, False, "data")])
    assert ("/", "/") not in _op(args, "--dev-bind")
    put_back = {dest for _src, dest in _op(args, "--dev-bind-try")} | {dest for _t, dest in _op(args, "--symlink")}
    assert put_back == {f"/{e}" for e in os.listdir("/") if e != "proc"}
    assert _op(args, "--bind") == [(str(tmp_path), "/t9k/mnt")]
    assert _op(args, "--proc") == [("/proc",)] and _op(args, "--chdir") == [("/t9k/mnt/code",)]
    assert args[args.index("--") + 1 :] == ["python", "x.py"]
    assert "--unshare-pid" in args and "--die-with-parent" in args
    assert not os.path.lexists("/t9k")


def test_a_mount_point_that_exists_needs_no_tmpfs(tmp_path: Path) -> None:
    target = tmp_path / "existing"
    target.mkdir()
    args = bwrap_argv("bwrap", ["true"], "/", [Mount(str(target), tmp_path, True, "data")])
    assert _op(args, "--dev-bind") == [("/", "/")]
    assert _op(args, "--ro-bind") == [(str(tmp_path), str(target))]
    assert _op(args, "--tmpfs") == []


def test_a_missing_folder_under_an_existing_one_lays_a_tmpfs_over_that_one(tmp_path: Path) -> None:
    (tmp_path / "keep").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to("keep")
    tmp_path.chmod(0o751)
    wanted = str(tmp_path / "new" / "deeper")
    args = bwrap_argv("bwrap", ["true"], wanted, [], make=[wanted], hostname="job-worker-0", hosts=tmp_path / "hosts")
    assert _op(args, "--perms") == [("0751",)] and _op(args, "--tmpfs") == [(str(tmp_path),)]
    assert {d for _s, d in _op(args, "--dev-bind-try")} == {str(tmp_path / "keep"), str(tmp_path / "file")}
    assert _op(args, "--symlink") == [("keep", str(tmp_path / "link"))]
    assert _op(args, "--dir") == [(wanted,)]
    assert _op(args, "--hostname") == [("job-worker-0",)] and "--unshare-uts" in args
    assert (str(tmp_path / "hosts"), "/etc/hosts") in _op(args, "--ro-bind")
    assert not (tmp_path / "new").exists()


def test_paths_in_the_container_are_found_through_the_mounts(tmp_path: Path) -> None:
    mounts = [Mount("/t9k/mnt", tmp_path, False, "data"), Mount("/t9k/mnt/sub", tmp_path / "s", True, "sub")]
    assert covering("/t9k/mnt/sub/x", mounts) is mounts[1]
    assert covering("/t9k/mntx", mounts) is None
    assert host_path("/t9k/mnt/a/b", mounts) == tmp_path / "a" / "b"
    assert host_path("/t9k/mnt/sub", mounts) == tmp_path / "s"
    assert host_path("/etc/hosts", mounts) == Path("/etc/hosts")


def test_a_replicas_hosts_file_names_it_at_its_own_address(tmp_path: Path) -> None:
    path = hosts_file(tmp_path / "hosts" / "job-worker-1", "job-worker-1", "127.33.7.2")
    lines = path.read_text().splitlines()
    assert lines[-1] == "127.33.7.2\tjob-worker-1"
    assert any("localhost" in line for line in lines[:-1])


def test_inside_is_what_runs_below_the_namespaces_init(tmp_path: Path) -> None:
    """monitor -> init -> what the init started: signals go to those only (here two sleeps)."""
    script = "sleep 30 & sleep 30 & wait"
    monitor = subprocess.Popen(["sh", "-c", f"sh -c '{script}' & wait"], start_new_session=True)
    try:
        def found() -> list[int]:
            got = inside(monitor.pid)
            return got if len(got) == 2 else []

        from tests.helpers import wait_until

        pids = wait_until(found, "the tree", 20)
        init = [int(p) for p in Path(f"/proc/{monitor.pid}/task/{monitor.pid}/children").read_text().split()]
        assert monitor.pid not in pids and not set(init) & set(pids)
    finally:
        os.killpg(monitor.pid, 9)
        monitor.wait()


def test_a_sandbox_without_mounts_says_what_to_install() -> None:
    refused = mounts_refused(Sandbox("none", why_not_bwrap="bubblewrap is not installed (apt-get install bubblewrap)"))
    assert refused is not None and "mount namespace" in refused and "apt-get install bubblewrap" in refused
    assert mounts_refused(Sandbox(BWRAP, "/usr/bin/bwrap")) is None
    # Chosen by name, unshare skips bubblewrap without a reason of its own: the line says what it lacks.
    chosen = mounts_refused(Sandbox(sandbox.UNSHARE, "/usr/bin/unshare"))
    assert chosen is not None and "None" not in chosen and "T9K_JOBS_SANDBOX=unshare" in chosen and "bwrap" in chosen


def test_a_sandbox_mode_that_is_not_one_is_refused() -> None:
    with pytest.raises(sandbox.SandboxError, match="T9K_JOBS_SANDBOX='podman'"):
        sandbox.detect("podman")


# --------------------------------------------------------------------------- volumes


def test_volume_flags(tmp_path: Path) -> None:
    assert parse_volume_flags([f"tutorial={tmp_path}", f"tutorial={tmp_path}/."]) == {"tutorial": tmp_path.resolve()}
    for bad, words in (
        ("tutorial", "NAME=DIR"),
        ("=/tmp", "NAME=DIR"),
        (f"Tutorial={tmp_path}", "not a claim name"),
        ("t=/nonexistent/x", "is not a directory"),
    ):
        with pytest.raises(VolumeError, match=words):
            parse_volume_flags([bad])
    with pytest.raises(VolumeError, match="given twice"):
        parse_volume_flags([f"t={tmp_path}", "t=/tmp"])


def _generic(spec: dict) -> object:
    return parse_job(job("GenericJob", "g", {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": {"spec": spec}}]}))


def test_volume_problems_name_field_claim_and_flag() -> None:
    spec = {
        "containers": [{"name": "main", "image": "x", "command": ["true"], "volumeMounts": [
            {"name": "data", "mountPath": "/t9k/mnt"}, {"name": "data", "mountPath": "rel"},
            {"name": "data", "mountPath": "/x", "subPathExpr": "$(A)/../up"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "tutorial"}},
                    {"name": "opt", "configMap": {"name": "maybe", "optional": True}},
                    {"name": "gone", "gcePersistentDisk": {"pdName": "x"}}],
    }  # fmt: skip
    problems = volume_problems(_generic(spec), {}, frozenset())
    assert problems[0].startswith("spec.replicaSpecs[0].template.spec.volumes[2]: volume 'gone' is a gcePersistentDisk volume")
    assert "claim 'tutorial' (mounted at /t9k/mnt, rel, /x by the worker replicas) has no folder here: give one with --volume tutorial=DIR" in problems
    assert "spec.replicaSpecs[0].template.spec.containers[0].volumeMounts[1].mountPath: 'rel' is not an absolute path" in problems
    assert "spec.replicaSpecs[0].template.spec.containers[0].volumeMounts[2].subPathExpr: '$(A)/../up' must be a relative path without '..'" in problems
    assert not any("maybe" in p for p in problems), "an optional configMap may be missing"


def test_the_jobs_own_objects_need_no_flag() -> None:
    spec = {"containers": [{"name": "main", "image": "x", "command": ["true"]}],
            "volumes": [{"name": "keys", "secret": {"secretName": "g-ssh"}}]}  # fmt: skip
    assert volume_problems(_generic(spec), {}, frozenset({("Secret", "g-ssh")})) == []
    assert volume_problems(_generic(spec), {}, frozenset()) != []


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("Directory", "is not a directory"),
        ("File", "is not a file"),
        ("Socket", "is not a socket"),
        ("CharDevice", "is not a character device"),
        ("BlockDevice", "is not a block device"),
        ("Something", "is not a hostPath type"),
    ],
)
def test_host_path_types_are_checked_as_the_kubelet_checks_them(tmp_path: Path, kind: str, error: str) -> None:
    with pytest.raises(VolumeError, match=error):
        check_host_path({"path": str(tmp_path / "missing"), "type": kind}, create=True)


def test_host_path_or_create_makes_what_is_missing(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    assert check_host_path({"path": str(folder), "type": "DirectoryOrCreate"}, create=False) == folder
    assert not folder.exists()
    check_host_path({"path": str(folder), "type": "DirectoryOrCreate"}, create=True)
    assert folder.is_dir()
    file = tmp_path / "f"
    check_host_path({"path": str(file), "type": "FileOrCreate"}, create=True)
    assert file.is_file() and file.stat().st_size == 0
    with pytest.raises(VolumeError, match="does not exist"):
        check_host_path({"path": str(tmp_path / "x" / "f"), "type": "FileOrCreate"}, create=True)
    assert check_host_path({"path": "/dev/null", "type": "CharDevice"}, create=False) == Path("/dev/null")
    with pytest.raises(VolumeError, match="not an absolute path"):
        check_host_path({"path": "rel"}, create=False)


def test_downward_files_are_written_as_the_kubelet_writes_them() -> None:
    meta = {"name": "p", "namespace": "team", "labels": {"b": 'say "hi"', "a": "1"}, "annotations": {"k": "v"}}
    assert downward_value("metadata.name", meta, "uid-1") == "p"
    assert downward_value("metadata.namespace", meta, "uid-1") == "team"
    assert downward_value("metadata.uid", meta, "uid-1") == "uid-1"
    assert downward_value("metadata.labels", meta, "u") == 'a="1"\nb="say \\"hi\\""'
    assert downward_value("metadata.annotations['k']", meta, "u") == "v"


def test_pod_volumes_are_made_per_pod_and_removed_with_it(tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    claim.mkdir()
    own = tmp_path / "children" / "configmap" / "g-launch"
    own.mkdir(parents=True)
    (own / "hostfile").write_text("worker-0 slots=1\n")
    pod = {
        "metadata": {"name": "g-worker-0", "labels": {"a": "b"}},
        "spec": {"volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "tutorial", "readOnly": True}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "hostfile", "configMap": {"name": "g-launch"}},
            {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        ]},
    }  # fmt: skip
    volumes = PodVolumes(pod, "0123456789abcdef", tmp_path / "run", {"tutorial": claim}, {("ConfigMap", "g-launch"): own})
    volumes.prepare()
    container = {"volumeMounts": [
        {"name": "data", "mountPath": "/t9k/mnt/"}, {"name": "scratch", "mountPath": "/s"},
        {"name": "hostfile", "mountPath": "/etc/t9k", "readOnly": False}, {"name": "info", "mountPath": "/info"},
    ]}  # fmt: skip
    mounts = {m.path: m for m in volumes.mounts(container, {})}
    assert mounts["/t9k/mnt"] == Mount("/t9k/mnt", claim, True, "data")
    assert mounts["/s"].source.is_dir() and not mounts["/s"].read_only
    assert (mounts["/etc/t9k"].source / "hostfile").read_text() == "worker-0 slots=1\n" and mounts["/etc/t9k"].read_only
    assert (mounts["/info"].source / "labels").read_text() == 'a="b"'
    with pytest.raises(VolumeError, match="read-only volume"):
        volumes.mounts({"volumeMounts": [{"name": "data", "mountPath": "/x", "subPath": "missing"}]}, {})
    (claim / "out").symlink_to("/etc")
    with pytest.raises(VolumeError, match="leads outside the volume"):
        volumes.mounts({"volumeMounts": [{"name": "data", "mountPath": "/x", "subPath": "out"}]}, {})
    scratch = mounts["/s"].source
    (scratch / "sub").mkdir()
    (scratch / "sub" / "f").write_text("x")
    (scratch / "sub").chmod(0o500)
    volumes.remove()
    assert not scratch.exists() and claim.is_dir() and own.is_dir()


def test_tensorboard_filesets_resolve_through_the_claims(tmp_path: Path) -> None:
    pj = parse_job(job("PyTorchTrainingJob", "p", {
        "tensorboardSpec": {"trainingLogFilesets": ["t9k://pvc/tutorial/a/log", "t9k://minio/s/b/p"]},
        "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["true"])}],
    }))  # fmt: skip
    folders, problems = tensorboard_folders(pj, {"tutorial": tmp_path})
    assert folders == [tmp_path / "a" / "log"]
    assert problems == [
        "spec.tensorboardSpec.trainingLogFilesets[1]: 't9k://minio/s/b/p' is not t9k://pvc/CLAIM/PATH; a local TensorBoard reads claims only"
    ]
    _folders, problems = tensorboard_folders(pj, {})
    assert "claim 'tutorial' has no folder here: give one with --volume tutorial=DIR" in problems[-1]
    # A link in the claim to a folder outside it is refused, as a subPath through one is.
    claim, outside = tmp_path / "claim", tmp_path / "outside"
    claim.mkdir()
    (outside / "log").mkdir(parents=True)
    (claim / "a").symlink_to(outside)
    folders, problems = tensorboard_folders(pj, {"tutorial": claim})
    assert folders == [] and "spec.tensorboardSpec: tutorial/a/log leads outside the claim through a symbolic link" in problems
    (claim / "a").unlink()
    (claim / "real").mkdir()
    (claim / "a").symlink_to(claim / "real")  # a link that stays inside is followed, once
    folders, _ = tensorboard_folders(pj, {"tutorial": claim})
    assert folders == [claim / "real" / "log"]


def test_a_saved_manifest_is_read_as_a_create() -> None:
    saved = job("GenericJob", "g", {"replicaSpecs": []}, status={"phase": "Succeeded"}, uid="u", resourceVersion="7",
                generation=2, creationTimestamp="2026-01-01T00:00:00Z", managedFields=[], labels={"keep": "me"})  # fmt: skip
    doc, dropped = as_created(saved)
    assert dropped == ["status", "metadata.uid", "metadata.resourceVersion", "metadata.generation",
                       "metadata.creationTimestamp", "metadata.managedFields"]  # fmt: skip
    assert doc["metadata"] == {"name": "g", "labels": {"keep": "me"}} and "status" not in doc
    assert saved["status"] == {"phase": "Succeeded"}, "the input is left as it was"
    assert as_created(doc) == (doc, [])


def test_a_runner_embedded_in_a_program_never_ends_that_programs_children(tmp_path: Path) -> None:
    """Without namespaces a runtime sweeps what an ended container left among its own children
    (it is their subreaper). A :class:`LocalRunner` used inside another program (a test, a tool)
    that never ran :meth:`run` did that to the program's own children: the suite's control plane,
    a child of the pytest worker, was killed mid-session (issue 40). Only a runtime that runs
    sweeps; the program's child lives on."""
    import asyncio
    import subprocess

    from t9k_jobs.api import parse_job
    from t9k_jobs.local.display import Display
    from t9k_jobs.local.gpus import GpuInventory
    from t9k_jobs.local.runtime import LocalRunner
    from t9k_jobs.render import render

    bystander = subprocess.Popen(["sleep", "120"])
    try:
        the_job = parse_job(job("GenericJob", "embedded", {"replicaSpecs": [
            {"type": "worker", "replicas": 1, "template": template(["python", "-c", "print('done')"], name="main")}]}))  # fmt: skip
        (pod,) = [o for o in render(the_job) if o["kind"] == "Pod"]

        async def scenario() -> None:
            runner = LocalRunner(the_job, None, tmp_path, Display(quiet=True), False, GpuInventory.declared("none"))
            runner._start_pod(pod)
            task = runner.pods["embedded-worker-0"].task
            assert task is not None
            await asyncio.wait_for(task, 60)
            runner.job_log.close()
            runner.events_log.close()

        asyncio.run(scenario())
        assert bystander.poll() is None, "the program's own child was killed"
    finally:
        bystander.kill()
        bystander.wait()
