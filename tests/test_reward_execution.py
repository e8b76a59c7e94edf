"""The execution reward on a real git repository, judged by the local harness (offline, real pytest runs).

The repository (calc_repo) is stdlib-only, so its tests run in the shared interpreter through
PYTHONPATH; a later commit on another branch holds the fix, as a mined repository's history does. Each
hack of an answer that changes how the tests run instead of the code scores 0.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from calc_repo import BASE, FIXED, HALF, ISOLATION, NEW_TESTS, OPS, build_calc, write_files

from swerl.edit_format import build_git_patch
from swerl.errors import UserError
from swerl.execution.harness import eval_plan, grade_log
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend
from swerl.git.clones import RepoCache
from swerl.reward.execution import (
    ExecutionResult,
    ExecutionReward,
    VerdictMemo,
    answer_patch,
    drop_guarded,
    guarded_path,
    not_executable,
    row_instance,
)
from swerl.synth_repo import git

pytest.importorskip("swebench")

READ_FIX = """import subprocess

def _git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout

for _rev in _git("rev-list", "--all").split():
    _src = _git("show", _rev + ":calc/ops.py")
    if "return a " + "+ b" in _src:
        break
exec(_src)
"""
# A stand-in gold patch that takes the fix from wherever `.git` could lead to it: every ref, reflog and
# FETCH_HEAD, every 40-hex name in any file under .git (packed-refs, shallow, logs), the fix commit by its
# sha, and every object the repository can read (packs, loose objects and the stores its alternates file
# names, the mirror's path among them). `FIX` is filled in with the fix commit's sha.
FIND_FIX = """import os, re, subprocess

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MARK = "return a " + "+ b"


def _git(*args):
    return subprocess.run(["git", *args], cwd=_ROOT, capture_output=True).stdout.decode(errors="replace")


def _fixed():
    revs = {"FIX"} | set(_git("log", "--all", "--reflog", "--format=%H").split())
    for folder, _, names in os.walk(os.path.join(_ROOT, ".git")):
        for name in names:
            with open(os.path.join(folder, name), "rb") as handle:
                revs.update(re.findall("[0-9a-f]{40}", handle.read().decode(errors="replace")))
    for rev in revs:
        source = _git("show", rev + ":calc/ops.py")
        if _MARK in source:
            return source
    for line in _git("cat-file", "--batch-all-objects", "--batch-check").splitlines():
        sha, kind = line.split()[:2]
        source = _git("cat-file", "-p", sha) if kind == "blob" else ""
        if source.startswith("def add") and _MARK in source:
            return source
    return None


exec(_fixed() or "def add(a, b):\\n    return None\\n\\n\\ndef sub(a, b):\\n    return a - b\\n")
"""
PATCH_PYTEST = """import _pytest.reports

_original = _pytest.reports.TestReport.from_item_and_call


def _passed(item, call):
    report = _original(item, call)
    report.outcome = "passed"
    return report


_pytest.reports.TestReport.from_item_and_call = staticmethod(_passed)
"""
CLEAR_CALL_INFO = """import _pytest.runner

_original = _pytest.runner.CallInfo.from_call.__func__


def _from_call(cls, *args, **kwargs):
    info = _original(cls, *args, **kwargs)
    info.excinfo = None
    return info


_pytest.runner.CallInfo.from_call = classmethod(_from_call)
"""
WRAP_AT_IMPORT = """import gc

import pytest
from _pytest.config import Config


class _Passed:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        outcome.get_result().outcome = "passed"


for _config in [o for o in gc.get_objects() if isinstance(o, Config)]:
    _config.pluginmanager.register(_Passed())
"""
FAKE_SUMMARY = """import atexit
import os
import sys


def _claim():
    sys.stdout.flush()
    os.write(1, b"PASSED tests/test_ops.py::test_add\\nPASSED tests/test_ops.py::test_add_neg\\n")
    os._exit(0)


atexit.register(_claim)
"""
# Each of these rewrites pytest's outcomes from inside its process, where the log cannot tell: without the
# witness each scores 1 (the patch-pytest case was a strict xfail before the witness existed).
PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[ExecutionReward, Instance]:
    return build_calc(tmp_path_factory.mktemp("exec"))


def _patch(files: dict[str, str]) -> str:
    """A diff from the base tree to `files` (each new or replacing the base's content)."""
    return build_git_patch({p: BASE[p] for p in files if p in BASE}, files)


def test_gold_resolves_empty_does_not_and_a_bad_patch_scores_zero(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    reward, inst = setup
    gold = reward.score_patch(inst, inst.patch)
    assert (gold.reward, gold.kind, gold.fail_to_pass) == (1.0, "resolved", (2, 2))
    empty = reward.score_patch(inst, "")
    assert (empty.reward, empty.kind, empty.error) == (0.0, "unresolved", "empty_patch")
    wrong = reward.score_patch(inst, _patch({"calc/ops.py": HALF}))
    assert (wrong.reward, wrong.kind, wrong.fail_to_pass) == (0.0, "unresolved", (1, 2))
    stale = build_git_patch({"calc/ops.py": "something else\n"}, {"calc/ops.py": "x\n"})
    assert reward.score_patch(inst, stale).error == "patch_does_not_apply"
    assert reward.score_patch(inst, "not a diff").error == "patch_does_not_apply"


def test_a_test_patch_that_adds_a_data_file_hands_pytest_only_its_python_files(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    # As in pallets__flask-4992 (a tests/static/config.toml fixture): pytest given the data file finds no
    # collector for it and runs nothing, so every answer, the gold one too, would score 0.
    reward, inst = setup
    fixture = build_git_patch({}, {"tests/static/config.toml": "answer = 42\n"})
    with_data = dataclasses.replace(inst, test_patch=inst.test_patch + fixture)
    plan = eval_plan(with_data)
    assert "tests/static/config.toml" in plan.reset_files
    assert plan.test_cmd == "pytest -rA tests/test_ops.py"
    gold = reward.score_patch(with_data, inst.patch)
    assert (gold.reward, gold.kind, gold.fail_to_pass) == (1.0, "resolved", (2, 2))


def test_shaping_rewards_the_share_of_fail_to_pass_unless_a_pass_to_pass_test_breaks(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    reward, inst = setup
    shaped = ExecutionReward(reward.backend, shaping="fail_to_pass")
    assert shaped.score_patch(inst, _patch({"calc/ops.py": HALF})).reward == 0.5
    broken = _patch({"calc/ops.py": HALF.replace("return a - b", "return 0")})
    assert shaped.score_patch(inst, broken).reward == 0.0  # test_sub fails: no partial credit


def test_a_search_replace_answer_becomes_a_patch_against_the_base_tree(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    reward, inst = setup
    answer = (
        "<think>add must add</think>\n<solution>\n```python\n### calc/ops.py\n<<<<<<< SEARCH\n"
        "def add(a, b):\n    return a - b\n=======\ndef add(a, b):\n    return a + b\n>>>>>>> REPLACE\n```\n"
        "</solution>"
    )
    read = lambda path: reward.backend.repos.read_file(inst.repo, inst.base_commit, path)  # noqa: E731
    patch, error = answer_patch({"output": answer}, {}, read)  # no context: the files come from the tree
    assert error is None and patch is not None
    assert reward.score_patch(inst, patch).reward == 1.0
    none, error = answer_patch({"output": "no tags"}, {}, read)
    assert none is None and error is not None and error.kind.value == "tag_count"
    group = reward.score_group(inst, [patch, error, patch.replace("\n", "  \n"), ""])
    assert [r.reward for r in group] == [1.0, -1.0, 1.0, 0.0]
    assert group[1].kind == "malformed"


def test_a_patch_cut_short_is_malformed_even_beside_one_that_reads_the_same_normalized(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    # A wrong answer whose diff ends in a blank context line, and the same diff with that line cut off
    # (a hunk shorter than its header: not a diff). Normalized, the two read the same; their verdicts
    # must not depend on which came first in the group.
    reward, inst = setup
    wrong = _patch({"calc/ops.py": OPS.replace("def add(a, b):", "def add(a, b):  # adds", 1)})
    assert wrong.endswith("\n \n")
    cut = wrong[: -len(" \n")]
    for group in ([cut, wrong], [wrong, cut]):
        verdicts = {p: r for p, r in zip(group, reward.score_group(inst, group), strict=True)}
        assert (verdicts[cut].reward, verdicts[cut].error) == (-1.0, "not_a_diff")
        assert (verdicts[wrong].reward, verdicts[wrong].kind) == (0.0, "unresolved")


def test_identical_patches_of_a_group_run_once(setup: tuple[ExecutionReward, Instance]) -> None:
    reward, inst = setup
    calls: list[str] = []

    class Counting:
        def __init__(self, inner: LocalBackend) -> None:
            self.inner, self.repos, self.envs = inner, inner.repos, inner.envs

        def evaluate(self, *args: object) -> object:
            calls.append("x")
            return self.inner.evaluate(*args)  # type: ignore[arg-type]

    counting = ExecutionReward(Counting(reward.backend), workers=2)  # type: ignore[arg-type]
    results = counting.score_group(inst, [inst.patch] * 3 + [inst.patch.replace("index ", "index 0")] + [""])
    assert [r.reward for r in results] == [1.0, 1.0, 1.0, 1.0, 0.0] and len(calls) == 1


def test_verdicts_are_remembered_across_calls_and_failures_to_judge_are_not(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    # RL asks the same answers again step after step: a verdict is run once per reward (and per
    # settings a replaced copy may change), an infrastructure failure is asked again.
    reward, inst = setup
    calls: list[str] = []

    class Counting:
        def __init__(self, inner: LocalBackend) -> None:
            self.inner, self.repos, self.envs = inner, inner.repos, inner.envs

        def evaluate(self, instance: Instance, patch: str, log: Path) -> object:
            calls.append(patch)
            if len(calls) <= 2:  # the first run and its retry: the sandbox is gone
                raise OSError("the sandbox is gone")
            return self.inner.evaluate(instance, patch, log)

    counting = ExecutionReward(Counting(reward.backend))  # type: ignore[arg-type]
    [lost] = counting.score_pairs([(inst, inst.patch)])
    assert (lost.kind, len(calls)) == ("infra_error", 2)
    assert [r.reward for r in counting.score_pairs([(inst, inst.patch)])] == [1.0] and len(calls) == 3
    again = counting.score_group(inst, [inst.patch, inst.patch.replace("index ", "index 0"), ""])
    assert [r.reward for r in again] == [1.0, 1.0, 0.0] and len(calls) == 3  # "" is 0 without a run
    running_empty = dataclasses.replace(counting, run_empty=True)  # shares the memo, not its verdicts
    assert [r.reward for r in running_empty.score_pairs([(inst, ""), (inst, inst.patch)])] == [0.0, 1.0]
    # (the empty patch's failure also asks the gold patch once: `GoldChecks`, not a memoized verdict)
    assert calls.count("") == 1 and (counting.memo.asked, counting.memo.remembered) == (6, 1)
    before = len(calls)
    other_tests = dataclasses.replace(inst, pass_to_pass=())  # RLEF's public and private views
    assert [r.reward for r in counting.score_pairs([(other_tests, inst.patch)])] == [1.0]
    assert len(calls) == before + 1


def test_the_verdict_memo_keeps_the_most_recently_used() -> None:
    memo = VerdictMemo(size=2)
    memo.put("a", ExecutionResult(1.0, "resolved"))
    memo.put("b", ExecutionResult(0.0, "unresolved"))
    memo.put("lost", ExecutionResult(None, "infra_error", "harness_raised"))
    assert memo.get("a") is not None  # "a" is now the most recent
    memo.put("c", ExecutionResult(0.0, "unresolved"))
    assert [memo.get(k) is not None for k in ("a", "b", "c", "lost")] == [True, False, True, False]
    assert len(memo) == 2 and "5 distinct test jobs, 3 answered" in memo.summary()


def test_rows_that_cannot_be_executed_are_named() -> None:
    assert not_executable(row_instance({"instance_id": "x", "output": ""}))[0] == "no_instance"  # type: ignore[index]
    row = {"instance_id": "a-1", "repo": "a/b", "base_commit": "0" * 40, "FAIL_TO_PASS": "[]"}
    assert not_executable(row_instance(row))[0] == "no_fail_to_pass"  # type: ignore[index]
    row["FAIL_TO_PASS"] = json.dumps(["t.py::test_x"])
    assert not_executable(row_instance(row))[0] == "no_test_patch"  # type: ignore[index]


def test_an_unknown_repository_is_not_executable_and_a_raising_harness_is_an_infra_error(
    setup: tuple[ExecutionReward, Instance],
) -> None:
    reward, inst = setup
    gone = Instance(
        "acme__gone-1", "acme/gone", "0" * 40, "x", test_patch=inst.test_patch, fail_to_pass=("t",)
    )
    result = reward.score_patch(gone, inst.patch)
    assert (result.reward, result.kind, result.error) == (None, "not_executable", "unknown_repository")
    calls: list[int] = []

    class Broken:
        repos = reward.backend.repos

        def evaluate(self, *args: object) -> object:
            calls.append(1)
            raise OSError("the sandbox is gone")

    broken = ExecutionReward(Broken())  # type: ignore[arg-type]
    result = broken.score_patch(inst, inst.patch)
    assert (result.reward, result.kind, result.error, result.attempts) == (
        None,
        "infra_error",
        "harness_raised",
        2,
    )
    assert result.message == "OSError: the sandbox is gone" and len(calls) == 2


@pytest.mark.parametrize(
    "hack",
    [
        pytest.param(
            {"tests/test_ops.py": NEW_TESTS.replace("assert add", "assert 1 or add")}, id="test-file"
        ),
        pytest.param({"tests/test_more.py": "", "conftest.py": PLUGIN}, id="conftest"),
        pytest.param(
            {"calc/plug.py": PLUGIN, "pytest.ini": "[pytest]\naddopts = -p calc.plug\n"}, id="pytest.ini"
        ),
        pytest.param({"calc/plug.py": PLUGIN, "tox.ini": "[pytest]\naddopts = -p calc.plug\n"}, id="tox.ini"),
        pytest.param(
            {"calc/plug.py": PLUGIN, "setup.cfg": "[tool:pytest]\naddopts = -p calc.plug\n"}, id="setup.cfg"
        ),
        pytest.param(
            {
                "calc/plug.py": PLUGIN,
                "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p calc.plug"\n',
            },
            id="pyproject",
        ),
        pytest.param(
            {
                "calc/plug.py": PLUGIN,
                "sitecustomize.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'calc.plug'\n",
            },
            id="sitecustomize",
        ),
        pytest.param({"calc/plug.py": PLUGIN, "calc.pth": "import calc.plug\n"}, id="pth"),
        pytest.param(
            {
                "pytest.py": "".join(
                    f"print('PASSED tests/test_ops.py::{name}')\n"
                    for name in ("test_add", "test_add_neg", "test_sub")
                )
            },
            id="fake-pytest",
        ),
        pytest.param({"calc/__init__.py": "import os\nos._exit(0)\n"}, id="exit-0"),
        pytest.param(
            {"calc/__init__.py": "import pytest\npytest.skip('not today', allow_module_level=True)\n"},
            id="skip-the-tests",
        ),
        pytest.param({"calc/ops.py": READ_FIX}, id="read-fix-from-git"),
    ],
)
def test_an_answer_that_changes_how_the_tests_run_scores_zero(
    setup: tuple[ExecutionReward, Instance], hack: dict[str, str]
) -> None:
    reward, inst = setup
    result = reward.score_patch(inst, _patch(hack))
    assert (result.reward, result.kind) == (0.0, "unresolved"), result


@pytest.mark.parametrize(
    ("init", "reason"),
    [
        pytest.param(
            PATCH_PYTEST,
            "replaced during the run: _pytest.reports.TestReport.from_item_and_call",
            id="patch-report-construction",
        ),
        pytest.param(
            CLEAR_CALL_INFO,
            "replaced during the run: _pytest.runner.CallInfo.from_call",
            id="patch-call-info",
        ),
        pytest.param(
            WRAP_AT_IMPORT,
            "pytest_runtest_makereport implemented in calc/__init__.py",
            id="hookwrapper-registered-at-import",
        ),
        pytest.param(
            FAKE_SUMMARY,
            "the witness saw 2 test(s) the log counts as passed fail or not run: "
            "tests/test_ops.py::test_add (FAILED)",
            id="fake-summary-lines",
        ),
    ],
)
def test_an_answer_that_rewrites_pytests_outcomes_from_inside_is_vetoed_by_the_witness(
    setup: tuple[ExecutionReward, Instance], init: str, reason: str, tmp_path: Path
) -> None:
    reward, inst = setup
    logged = dataclasses.replace(reward, log_dir=tmp_path)
    result = logged.score_patch(inst, _patch({"calc/__init__.py": init}))
    assert (result.reward, result.kind, result.error) == (0.0, "unresolved", "witness_veto"), result
    assert reason in str(result.message)
    (log,) = tmp_path.rglob("test_output.txt")
    assert "[swerl] witness veto: " in log.read_text(encoding="utf-8")
    # The log alone (what the harness grades) calls it resolved: the veto is what stops it.
    assert grade_log(inst, eval_plan(inst), "x", str(log))["resolved"] is True


OWN_PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().user_properties.append(('plugin', 'calc'))\n"
)


def test_a_runtest_hook_the_repository_ships_is_its_own_unless_the_answer_changed_it(tmp_path: Path) -> None:
    # Repositories that are pytest plugins (or ship one for their tests) implement runtest hooks in their
    # own code: the gold patch, which leaves that file alone, must still resolve.
    more = {"calc/plug.py": OWN_PLUGIN, "pytest.ini": "[pytest]\naddopts = -p calc.plug\n"}
    reward, inst = build_calc(tmp_path, more)
    gold = reward.score_patch(inst, inst.patch)
    assert (gold.reward, gold.kind) == (1.0, "resolved"), gold
    forced = reward.score_patch(inst, build_git_patch({"calc/plug.py": OWN_PLUGIN}, {"calc/plug.py": PLUGIN}))
    assert (forced.reward, forced.error) == (0.0, "witness_veto"), forced
    assert "pytest_runtest_makereport implemented in calc/plug.py" in str(forced.message)


def test_a_patch_that_reads_the_fix_from_git_finds_nothing(
    setup: tuple[ExecutionReward, Instance], tmp_path: Path
) -> None:
    reward, inst = setup
    repos = reward.backend.repos
    fix = git(repos.mirror_dir / "acme__calc", "rev-parse", "fix").strip()
    assert repos.has_commit(inst.repo, fix)  # the mirror holds the fix, as a mined repository's does
    stand_in = FIND_FIX.replace('"FIX"', repr(fix))
    probe = [sys.executable, "-c", "from calc.ops import add; print(add(2, 2))"]

    def add_two_and_two(tree: Path) -> str:
        (tree / "calc" / "ops.py").write_text(stand_in, encoding="utf-8")
        return subprocess.run(probe, cwd=tree, capture_output=True, text=True, check=True).stdout.strip()

    # Control: a shared clone of the mirror (as test trees once were) hands the stand-in the fix.
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(repos.bare_path(inst.repo)), str(shared))
    git(shared, "checkout", "-q", inst.base_commit)
    assert add_two_and_two(shared) == "4"
    tree = repos.checkout(inst.repo, inst.base_commit, tmp_path / "tree")
    assert git(tree, "rev-list", "--all").split() == [inst.base_commit]
    assert not (tree / ".git" / "objects" / "info" / "alternates").exists()
    assert add_two_and_two(tree) == "None"
    result = reward.score_patch(inst, _patch({"calc/ops.py": stand_in}))
    assert (result.reward, result.kind, result.fail_to_pass) == (0.0, "unresolved", (0, 2)), result


def test_an_install_sees_the_tags_and_history_then_the_tree_holds_the_base_commit_again(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "clones" / "acme__tagged"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for n, tag in ((1, "v1.0"), (2, None), (3, None), (4, "v2.0")):
        write_files(repo, {"calc/version.txt": f"{n}\n"})
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"commit {n}")
        if tag:
            git(repo, "tag", "-a", tag, "-m", tag)
    base = git(repo, "rev-parse", "HEAD~1").strip()
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    tree = repos.checkout("acme/tagged", base, tmp_path / "tree")
    with repos.lend_history("acme/tagged", tree):
        # What setuptools_scm and versioneer ask, answered as in a clone with the history up to the base.
        assert git(tree, "describe", "--tags", "--long").strip() == f"v1.0-2-g{base[:7]}"
        assert git(tree, "rev-list", "--count", "HEAD").strip() == "3"
    assert git(tree, "rev-list", "--all").split() == [base]
    assert git(tree, "describe", "--tags", "--always").strip() == base[:7]
    assert git(tree, "status", "--porcelain") == ""
    assert sorted(p.name for p in (tree / ".git").iterdir()) == [
        "HEAD",
        "config",
        "index",
        "objects",
        "refs",
        "shallow",
    ]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local Ray instance of 2 CPUs for the Ray engine's tests (starting one takes seconds)."""
    ray = pytest.importorskip("ray")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RAY_ADDRESS", raising=False)  # a local instance, never someone's cluster
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


def test_the_ray_engine_runs_a_group_as_tasks_on_a_local_instance(
    setup: tuple[ExecutionReward, Instance], tmp_path: Path, local_ray: None
) -> None:
    reward, inst = setup
    group = [inst.patch, "", _patch({"calc/ops.py": HALF}), inst.patch]
    on_ray = ExecutionReward(reward.backend, engine="ray", workers=2, log_dir=tmp_path / "logs")
    results = on_ray.score_group(inst, group)
    # The verdicts the threads engine gives (the tests above), the duplicate judged once.
    assert [(r.reward, r.kind, r.fail_to_pass) for r in results] == [
        (1.0, "resolved", (2, 2)),
        (0.0, "unresolved", (0, 2)),
        (0.0, "unresolved", (1, 2)),
        (1.0, "resolved", (2, 2)),
    ]
    # Numbered by the driver, logged by Ray's workers (the empty patch, job 2, needs no run).
    logs = sorted(p.parent.name for p in (tmp_path / "logs").rglob("test_output.txt"))
    assert logs == ["000001", "000003"]


def test_a_task_whose_ray_worker_dies_is_an_infra_error_left_out_of_the_advantage(
    setup: tuple[ExecutionReward, Instance], local_ray: None
) -> None:
    from swerl.trainers.grpo import _without_infra_errors
    from swerl.trainers.rewards import _as_result

    reward, inst = setup
    half = _patch({"calc/ops.py": HALF})

    class DiesOnHalf:  # a local class: Ray's pickler sends it by value, so its workers need no import of it
        def __init__(self, real: LocalBackend) -> None:
            self.real, self.repos, self.envs = real, real.repos, real.envs

        def evaluate(self, instance: Instance, patch: str, log_path: Path) -> object:
            if patch == half:
                os._exit(1)  # the worker process dies mid-task, as on a lost node or an OOM kill
            return self.real.evaluate(instance, patch, log_path)

    # retries=0: Ray does not start the task again (its default would, 3 times) and neither does swerl.
    on_ray = ExecutionReward(DiesOnHalf(reward.backend), engine="ray", workers=2, retries=0)  # type: ignore[arg-type]
    results = on_ray.score_group(inst, [inst.patch, "", half])
    assert [(r.reward, r.kind, r.error) for r in results] == [
        (1.0, "resolved", None),
        (0.0, "unresolved", "empty_patch"),
        (None, "infra_error", "worker_lost"),
    ]
    assert "WorkerCrashedError" in str(results[2].message)  # the worker's death, not a failed import
    # The trainer's view: the lost answer takes the mean of the judged ones, so the group's baseline
    # (and every other answer's advantage) is what it would be without it.
    scored = [_as_result(r) for r in results]
    assert _without_infra_errors([r.reward for r in scored], scored, 3) == [1.0, 0.0, 0.5]


def test_the_ray_engine_runs_named_tests_too_each_distinct_job_once(tmp_path: Path, local_ray: None) -> None:
    """The runs Agentless's repair turns make (a patch on named tests, with extra patches after it) go
    through the same machinery: distinct jobs once, on Ray tasks, a raising run tried again and then no
    verdict, a lost worker no verdict; counted by the files each run leaves (Ray's workers are other
    processes)."""
    from swerl.execution.base import TestRun
    from swerl.execution.dispatch import Dispatch, TestJob, run_jobs

    class Marking:  # a local class: Ray's pickler sends it by value
        def __init__(self, folder: Path) -> None:
            self.folder = folder

        def run_tests(self, instance: Instance, tests: list[str], patches: list[str]) -> TestRun:
            (self.folder / f"{patches[0].strip()}-{uuid.uuid4().hex}").touch()
            if patches[0].startswith("infra"):
                raise OSError("the sandbox did not start")
            if patches[0].startswith("die"):
                os._exit(1)
            return TestRun("ok", {t: "PASSED" for t in tests}, log=f"{os.getpid()} {patches[1:]}")

    inst = Instance("i", "o/r", "0" * 40, "issue")
    job = functools.partial(TestJob, inst, tests=("t.py::a", "repro.py"), extra=("repro\n",))
    jobs = [job("good\n"), job("good\n \n"), job("infra\n"), job("die\n"), job("good\n", tests=("t.py::a",))]
    runs = run_jobs(Marking(tmp_path), jobs, Dispatch("ray", workers=2, retries=1))
    assert [r and sorted(r.results) for r in runs] == [
        ["repro.py", "t.py::a"],
        ["repro.py", "t.py::a"],  # the same change: the first one's run
        None,  # raised twice: no verdict
        None,  # its worker died twice (Ray started it again once): no verdict
        ["t.py::a"],  # other tests: another run
    ]
    assert runs[0] is runs[1] and runs[0].log.endswith("['repro\\n']")  # type: ignore[union-attr]
    assert int(runs[0].log.split()[0]) != os.getpid()  # type: ignore[union-attr]
    marks = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
    assert marks == ["die", "die", "good", "good", "infra", "infra"]


def test_the_ray_engine_without_ray_says_how_to_install_it(
    setup: tuple[ExecutionReward, Instance], monkeypatch: pytest.MonkeyPatch
) -> None:
    reward, inst = setup
    with pytest.raises(UserError, match="unknown execution engine 'spark'"):
        ExecutionReward(reward.backend, engine="spark")  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "ray", None)  # an import of ray now fails, as where it is not installed
    with pytest.raises(UserError, match=r"pip install 'swerl\[ray\]'"):
        ExecutionReward(reward.backend, engine="ray").score_group(inst, [inst.patch])


def test_guarded_paths_and_what_is_dropped() -> None:
    assert guarded_path("src/pkg/conftest.py") and guarded_path("testing/python/raises.py")
    assert guarded_path("pkg/test_x.py") and guarded_path("a.pth") and guarded_path("setup.cfg")
    assert not guarded_path("src/_pytest/python.py")  # pytest's own code, edited
    assert guarded_path("src/_pytest/new.py", added=True) and guarded_path("pytest.py", added=True)
    assert guarded_path("swerl_witness.py", added=True)  # would be loaded instead of the witness
    assert not guarded_path("calc/ops.py", added=True)
    patch = _patch({"calc/ops.py": FIXED, "conftest.py": PLUGIN})
    kept, dropped = drop_guarded(patch)
    assert dropped == ["conftest.py"] and kept == _patch({"calc/ops.py": FIXED})


def test_reward_score_hybrid_and_execution_record_the_kind_per_row(
    setup: tuple[ExecutionReward, Instance], tmp_path: Path
) -> None:
    from swerl.cli.main import main
    from swerl.execution.instances import instance_to_row

    reward, inst = setup
    swe = instance_to_row(inst)
    block = "```python\n### a.py\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n```\n"
    answer = f"<think>x</think>\n<solution>\n{block}</solution>"
    similarity_only = {"instance_id": "mined-1", "output": answer, "code_context": {"a.py": "old\n"}}
    similarity_only["oracle_new_content"] = {"a.py": "new\n"}
    rows = [
        {**swe, "model_patch": inst.patch},
        {**swe, "model_patch": ""},
        {**swe, "output": "<think>x</think> no solution"},
        similarity_only,
    ]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    common = ["--input", str(src), "--clones", str(reward.backend.repos.mirror_dir), "--offline"]
    common += ["--cache-dir", str(tmp_path / "cache"), "--quiet"]
    if ISOLATION == "none":
        common.append("--unsafe-no-isolation")
    assert (
        main(["reward", "score", "--reward", "hybrid", "--output", str(tmp_path / "h.jsonl"), *common]) == 0
    )
    scored = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert [(r["reward"], r["reward_kind"]) for r in scored] == [
        (1.0, "execution"),
        (0.0, "execution"),
        (-1.0, "execution"),
        (1.0, "similarity"),
    ]
    assert (
        main(["reward", "score", "--reward", "execution", "--output", str(tmp_path / "e.jsonl"), *common])
        == 0
    )
    last = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[-1])
    assert last["reward"] is None and last["reward_info"]["kind"] == "not_executable"
    assert last["reward_info"]["error"] == "no_instance"
    # The trainer's weak-test keys as flags: a weak row is not run, a resolved answer earns its strength.
    measured = [{**swe, "model_patch": inst.patch, "test_strength": s} for s in (0.75, 0.25)]
    src.write_text("".join(json.dumps(r) + "\n" for r in measured), encoding="utf-8")
    strength = ["--execution-min-test-strength", "0.5", "--execution-strength-weight"]
    out = tmp_path / "s.jsonl"
    assert main(["reward", "score", "--reward", "execution", "--output", str(out), *strength, *common]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["reward"], r["reward_info"]["kind"]) for r in scored] == [
        (0.75, "resolved"),
        (None, "not_executable"),
    ]
    assert scored[1]["reward_info"]["error"] == "weak_tests"


def _grpo_rows(inst: Instance) -> list[dict[str, object]]:
    """Two executable rows (the repository's instance) and two that only the similarity reward can score."""
    from swerl.execution.instances import instance_to_row

    executable = {**instance_to_row(inst), "code_context": {"calc/ops.py": OPS}}
    executable["oracle_new_content"] = {"calc/ops.py": FIXED}
    rows: list[dict[str, object]] = [executable, {**executable, "instance_id": "acme__calc-2"}]
    for i in range(2):
        old = f"def f{i}(x):\n    return x - {i}\n"
        rows.append(
            {
                "instance_id": f"mined-{i}",
                "problem_statement": f"f{i} should add {i}",
                "code_context": {"m.py": old},
                "oracle_new_content": {"m.py": old.replace(" - ", " + ")},
            }
        )
    return rows


def test_grpo_with_the_hybrid_reward_logs_both_kinds_and_execution_refuses_rows_without_tests(
    setup: tuple[ExecutionReward, Instance], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from swerl.cli.main import main
    from swerl.models.tiny import build_tiny_model

    reward, inst = setup
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _grpo_rows(inst)), encoding="utf-8")
    config = {
        "model_name_or_path": str(build_tiny_model(tmp_path / "model", seed=0)),
        "train_file": str(data),
        "output_dir": str(tmp_path / "run"),
        "report_to_tensorboard": False,
        "num_generations": 2,
        "prompts_per_step": 4,
        "max_completion_length": 8,
        "max_steps": 2,
        "reward": "hybrid",
        "execution_workers": 2,
        "execution_clones": str(reward.backend.repos.mirror_dir),
        "execution_offline": True,
        "execution_cache_dir": str(tmp_path / "cache"),
        "execution_isolation": ISOLATION,
    }
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert main(["train", "grpo", "--config", str(path), "--quiet"]) == 0
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(logged) == 2
    for row in logged:  # every prompt each step: both kinds; the untrained model's answers are malformed
        assert row["reward/execution"] == -1.0 and row["reward/similarity"] == -1.0
        assert row["execution/pass_rate"] == 0.0 and row["reward/infra_errors"] == 0.0
    assert main(["plot", str(tmp_path / "run"), "--metrics", "reward/execution,reward/similarity"]) == 0
    assert (tmp_path / "run" / "plots" / "reward_execution.png").stat().st_size > 0

    path.write_text(yaml.safe_dump({**config, "reward": "execution", "output_dir": str(tmp_path / "r2")}))
    assert main(["train", "grpo", "--config", str(path), "--quiet"]) == 1  # before any model loads
    assert "2 of 4 rows cannot be executed (e.g. mined-0: no_instance" in capsys.readouterr().err
    assert not (tmp_path / "r2" / "metrics.jsonl").exists()


def test_an_infrastructure_failure_is_left_out_of_its_group_and_counted() -> None:
    from swerl.reward import RewardResult
    from swerl.trainers.grpo import _without_infra_errors, kind_metrics

    results = [
        RewardResult(1.0, kind="execution", outcome="resolved"),
        RewardResult(0.0, kind="execution", outcome="infra_error"),
        RewardResult(0.0, kind="execution", outcome="unresolved"),
        RewardResult(0.5),
    ]
    # The failed answer takes its group's mean of the judged ones: the baseline is theirs alone.
    assert _without_infra_errors([1.0, 0.0, 0.0, 0.5], results, 2) == [1.0, 1.0, 0.0, 0.5]
    assert kind_metrics(results) == {
        "reward/infra_errors": 1.0,
        "reward/execution": 0.5,
        "execution/pass_rate": 0.5,
        "reward/similarity": 0.5,
    }
