"""A real git repository whose tests judge an answer, for the tests of the execution reward.

The repository is stdlib-only, so its tests run in the shared interpreter through PYTHONPATH; a later
commit on another branch holds the fix, as a mined repository's history does. `build_calc` returns the
reward over the local harness and the SWE-bench instance (FAIL_TO_PASS: test_add, test_add_neg;
PASS_TO_PASS: test_sub).
"""

from __future__ import annotations

from pathlib import Path

from swerl.edit_format import build_git_patch
from swerl.execution.envs import EnvManager
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend
from swerl.git.clones import RepoCache
from swerl.reward.execution import ExecutionReward
from swerl.sandbox.bwrap import isolation_available
from swerl.synth_repo import git

ISOLATION = "bwrap" if isolation_available() is None else "none"

OPS = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
FIXED = OPS.replace("return a - b\n\n\ndef sub", "return a + b\n\n\ndef sub")
TESTS = "from calc.ops import add, sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
NEW_TESTS = (
    TESTS
    + "\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\ndef test_add_neg():\n    assert add(-1, 1) == 0\n"
)
HALF = OPS.replace("return a - b\n\n\ndef sub", "return a * b\n\n\ndef sub")  # right for 2 + 2 only
BASE = {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": TESTS}


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def build_calc(root: Path, more: dict[str, str] | None = None) -> tuple[ExecutionReward, Instance]:
    """The repository as root/clones/acme__calc, mirrored offline into root/repos; `more`: files the
    base commit has besides BASE."""
    repo = root / "clones" / "acme__calc"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write_files(repo, {**BASE, **(more or {})})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "fix")  # the fix lies in the history, as in any mined repository
    write_files(repo, {"calc/ops.py": FIXED, "tests/test_ops.py": NEW_TESTS})
    git(repo, "commit", "-qam", "fix add")
    git(repo, "checkout", "-q", "main")
    instance = Instance(
        "acme__calc-1",
        "acme/calc",
        base,
        "add subtracts",
        patch=build_git_patch({"calc/ops.py": OPS}, {"calc/ops.py": FIXED}),
        test_patch=build_git_patch({"tests/test_ops.py": TESTS}, {"tests/test_ops.py": NEW_TESTS}),
        fail_to_pass=("tests/test_ops.py::test_add", "tests/test_ops.py::test_add_neg"),
        pass_to_pass=("tests/test_ops.py::test_sub",),
        version="1.0",
    )
    repos = RepoCache(root / "repos", mirror_dir=root / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(root / "envs"), isolation=ISOLATION, timeout_s=120)
    return ExecutionReward(backend), instance
