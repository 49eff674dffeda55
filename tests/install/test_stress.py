"""``scripts/test.sh --stress`` (issue 40): what it repeats after a change
(``scripts/changed_tests.py``, checked on a small git repository of its own) and how it refuses
bad arguments. The load run itself is the stop routine's, not the suite's: it runs the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)  # fmt: skip


def _changed(repo: Path, rev: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "scripts/changed_tests.py", rev], cwd=repo, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_the_tests_of_what_changed_are_the_changed_ones_and_those_naming_a_changed_module(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for path, text in {
        "scripts/changed_tests.py": (REPO / "scripts/changed_tests.py").read_text(),
        "src/t9k_jobs/__init__.py": "",
        "src/t9k_jobs/local/__init__.py": "",
        "src/t9k_jobs/local/volumes.py": "A = 1\n",
        "src/t9k_jobs/local/volumes_extra.py": "B = 1\n",
        "examples/ddp/train.py": "print()\n",
        "tests/local/test_volumes.py": "from t9k_jobs.local.volumes import A\n",
        "tests/local/test_extra.py": "from t9k_jobs.local.volumes_extra import B\n",
        "tests/local/test_example.py": "EXAMPLE = 'examples/ddp/train.py'\n",
        "tests/test_untouched.py": "def test(): pass\n",
    }.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    assert _changed(repo, "HEAD").stdout.split() == []
    (repo / "src/t9k_jobs/local/volumes.py").write_text("A = 2\n")  # not committed: counts
    (repo / "tests/test_new.py").write_text("def test(): pass\n")  # new, not yet added: counts
    assert _changed(repo, "HEAD").stdout.split() == ["tests/local/test_volumes.py", "tests/test_new.py"]
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "change")
    (repo / "examples/ddp/train.py").write_text("print(1)\n")
    (repo / "tests/local/test_extra.py").unlink()  # changed, but gone: nothing to run
    assert _changed(repo, "HEAD~1").stdout.split() == [
        "tests/local/test_example.py", "tests/local/test_volumes.py", "tests/test_new.py",
    ]  # fmt: skip
    refused = _changed(repo, "no-such-rev")
    assert refused.returncode == 2 and "no-such-rev: not a commit here" in refused.stderr


def test_stress_refuses_a_revision_that_is_not_one_before_anything_runs(tmp_path: Path) -> None:
    """The arguments are checked where the load would start; the rest of test.sh is not needed
    for that, so the check runs on the script's own copy of the argument loop."""
    script = (REPO / "scripts/test.sh").read_text()
    assert "--stress) stress=1" in script and "--since=*)" in script and "--repeat=*)" in script
    check = script[script.index('  case "$repeat$hogs"'):script.index("  hog_pids=()")]
    for args, message in (("since=nope repeat=3 hogs=2", "--since=nope: not a commit here"),
                          ("since=HEAD repeat=x hogs=2", "--repeat and --hogs take a whole number")):  # fmt: skip
        out = subprocess.run(["bash", "-c", f'set -euo pipefail; root={REPO}; {args}\n{check}'],
                             capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
