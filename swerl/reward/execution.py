"""The execution reward: an answer scored by the repository's own tests, as the SWE-bench harness scores it.

An answer is the SWE-RL SEARCH/REPLACE text of a model (`output`) or a unified diff (`model_patch`, as
external predictions come). It becomes a patch against the row's base tree and is judged by
`LocalBackend.evaluate`, the very call behind `swerl agentless evaluate`: a fresh checkout of the base
commit, the harness's patch commands, the test files the test patch touches reset to the base, the test
patch applied, the instance's test command, and the harness's log parser and grading over FAIL_TO_PASS and
PASS_TO_PASS. The verdict comes from per-test statuses parsed by name (a fail-to-pass test skipped,
deselected or missing has failed), never from pytest's exit status.

reward = 1 resolved, 0 not, -1 malformed (the SWE-RL format's rule). With `shaping="fail_to_pass"` an
unresolved answer that breaks no PASS_TO_PASS test gets the share of FAIL_TO_PASS tests it makes pass.

What is not a verdict on the answer has a kind of its own, so that it is never trained on as a wrong
answer: `not_executable` (the row has no FAIL_TO_PASS, no test patch, no known repository or no test
plan: reward None, refused before training) and `infra_error` (an environment that does not build, a
run that raised, the harness's own time limit, a test patch that does not apply: retried once, then
left out of the group's advantage). An answer that does not resolve where the gold patch does not
resolve here either (tests that need the network, a test command that gives no results here) cannot be
judged here: `infra_error` too (`no_test_results`, `gold_unresolved`), never a 0. The gold patch is asked
once per instance and kept (`swerl.execution.evaluate.GoldChecks`, the check `swerl agentless evaluate`
makes); rows of `swerl data validate`, whose gold patch was run to admit them, are not asked.

Weak tests (`swerl data validate --mutants` measures each row's `test_strength`: the share of altered
gold patches its tests reject): with `min_test_strength` a row below it is `not_executable`
(`weak_tests`); with `strength_weight` a resolved answer earns the row's strength instead of 1. Both off
by default; docs/reward.md weighs them.

Unexploitable. Before the run, the answer's changes to files that decide how tests run are dropped:
test paths (`swerl.path_kinds.is_test_path`: under tests/, test/, testing/, spec/ and the like, test_*,
*_test.*, *_tests.*, conftest.py: what mining calls a test), pytest's configuration
(pytest.ini, .pytest.ini, tox.ini, setup.cfg, pyproject.toml), interpreter start-up hooks
(sitecustomize.py, usercustomize.py, *.pth) and new modules that would shadow the test runner (pytest,
_pytest, py, pluggy, swerl_witness). The harness then resets the test patch's files and grades by name,
so an answer that only changes how the tests run scores 0; the dropped paths are listed in the result.
Code that rewrites pytest's outcomes from inside its process is met by the backend's test-outcome
witness (`swerl.execution.witness`): a pass it does not confirm is vetoed (`witness_veto`).

Where the tests run (`engine`, `workers`, `retries`): `swerl.execution.dispatch`, the machinery that
Agentless's repair turns share. `threads` runs a group's distinct patches on this machine, `workers` at
a time; `ray` makes each one a Ray task that asks for one CPU and no GPU, so a cluster's CPU nodes run
the tests and the training GPUs never do (`pip install 'swerl[ray]'`). A task builds its own copy of the
backend, so each node keeps mirrors and environments under the same cache path.
"""

from __future__ import annotations

import collections
import functools
import tempfile
import threading
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import unidiff

from swerl.edit_format import (
    FormatError,
    apply_edits,
    build_git_patch,
    parse_answer,
    parse_patch,
    patch_paths,
)
from swerl.errors import UserError
from swerl.execution import witness
from swerl.execution.base import BUILD_FAILED
from swerl.execution.dispatch import Dispatch, Engine, normalized_patch, once_each
from swerl.execution.envs import EnvSetupError
from swerl.execution.evaluate import ALL_TESTS, GoldChecks, cannot_judge
from swerl.execution.harness import eval_plan, harness_api
from swerl.execution.instances import Instance, instance_from_row
from swerl.git import GitError
from swerl.path_kinds import is_test_path

if TYPE_CHECKING:
    from swerl.execution.local import EvalRun, LocalBackend

Kind = Literal["resolved", "unresolved", "malformed", "not_executable", "infra_error"]
CANNOT_JUDGE = ("gold_unresolved", "no_test_results")
"""Errors of an answer this machine cannot judge, indexed by whether the gold patch's tests give no
results here at all: the gold patch's verdict, known once, so never tried again."""
Shaping = Literal["none", "fail_to_pass"]
SHAPINGS: tuple[str, ...] = ("none", "fail_to_pass")
J = TypeVar("J")

_RUNNER_FILES = frozenset(
    {"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"}
    | {"sitecustomize.py", "usercustomize.py"}
)
_RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "py", "pluggy", "sitecustomize", "usercustomize", witness.PLUGIN}
)


def guarded_path(path: str, added: bool = False) -> bool:
    """Whether an answer's change to `path` could change how the tests run rather than what they test:
    a test path (`swerl.path_kinds.is_test_path`, the definition mining and Agentless use) or a file
    the test runner reads (its configuration, start-up hooks).

    `added`: the answer creates the file; a new top-level module named like the test runner (pytest.py,
    _pytest/...) would be imported instead of it. Editing such a file that exists is the repository's own
    code (pytest's src/_pytest)."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    if is_test_path(path) or name in _RUNNER_FILES or name.endswith(".pth"):
        return True
    if added:
        top = [p for p in parts if p != "src"][:1]
        return bool(top) and top[0].removesuffix(".py") in _RUNNER_MODULES
    return False


def drop_guarded(patch: str) -> tuple[str, list[str]]:
    """`patch` without its file sections that touch guarded paths; (what remains, the paths dropped)."""
    kept, dropped = [], []
    for patched in parse_patch(patch):
        section = str(patched)
        paths = patch_paths(section)
        if any(guarded_path(p, added=patched.is_added_file) for p in paths):
            dropped += paths
        else:
            kept.append(section)
    return "".join(kept), dropped


@dataclass
class ExecutionResult:
    """A reward and why. `reward` is None for a row that cannot be executed; `error` names the cause
    (a malformation, a reason the row is not executable, an infrastructure failure)."""

    reward: float | None
    kind: Kind
    error: str | None = None
    message: str | None = None
    fail_to_pass: tuple[int, int] = (0, 0)
    """(passed, listed) FAIL_TO_PASS tests."""
    dropped: list[str] = field(default_factory=list)
    attempts: int = 0
    log: str = field(default="", repr=False)
    """The evaluation's log (the harness's layout: apply commands, the test output); empty when no
    test ran. RLEF's repository feedback is read from it."""
    statuses: dict[str, str] = field(default_factory=dict, repr=False)
    """Per-test statuses as the harness's log parser read them (test id -> PASSED, FAILED, ...)."""

    def info(self) -> dict[str, Any]:
        """JSON-ready description, written to `reward_info` by `swerl reward score`."""
        info: dict[str, Any] = {"kind": self.kind}
        if self.error is not None:
            info.update(error=self.error, message=self.message)
        if self.kind in ("resolved", "unresolved"):
            info["fail_to_pass_passed"], info["fail_to_pass_total"] = self.fail_to_pass
        if self.dropped:
            info["dropped"] = self.dropped
        return info


def row_instance(row: Mapping[str, Any]) -> Instance | None:
    """The SWE-bench instance of a row (repo, base_commit, test lists, test_patch); None without one."""
    if not all(row.get(name) for name in ("instance_id", "repo", "base_commit")):
        return None
    return instance_from_row({"problem_statement": "-", **row})


def not_executable(instance: Instance | None) -> tuple[str, str] | None:
    """(error kind, message) when `instance` cannot be judged by its tests, else None. No I/O."""
    if instance is None:
        return "no_instance", "the row has no instance_id, repo and base_commit"
    if not instance.fail_to_pass:
        return "no_fail_to_pass", f"{instance.instance_id}: no FAIL_TO_PASS tests"
    if not instance.test_patch.strip():
        return "no_test_patch", f"{instance.instance_id}: no test_patch"
    try:
        eval_plan(instance)
    except UserError as err:
        return "no_test_plan", str(err)
    return None


def test_strength(instance: Instance) -> float | None:
    """The share of its gold patch's mutants the row's tests kill (`swerl data validate`'s
    `test_strength` column), or None where it was not measured."""
    value = instance.extra.get("test_strength")
    return None if value is None else float(value)


def weak_tests(instance: Instance, minimum: float) -> tuple[str, str] | None:
    """(`weak_tests`, message) when the row's test strength is below `minimum` or unknown, else None."""
    strength = test_strength(instance)
    if strength is not None and strength >= minimum:
        return None
    said = "not measured" if strength is None else f"{strength:.2f}"
    return "weak_tests", f"{instance.instance_id}: test strength {said}, below {minimum:g}"


def answer_patch(
    row: Mapping[str, Any], code_context: Mapping[str, str], read_base: Callable[[str], str | None]
) -> tuple[str | None, FormatError | None]:
    """The answer of a row as a git patch against the base tree: its `model_patch` as given, or its
    SEARCH/REPLACE `output` applied to the files the model saw (`code_context`; a file missing there is
    read from the base tree by `read_base`, as a new file when the tree lacks it too). A malformed
    answer gives (None, the error)."""
    if isinstance(row.get("model_patch"), str):
        return row["model_patch"], None
    try:
        edits = parse_answer(str(row.get("output") or "")).edits
        old = dict(code_context)
        for path in {e.path for e in edits} - set(old):
            text = read_base(path)
            if text is not None:
                old[path] = text
        new = apply_edits(old, edits)
    except FormatError as err:
        return None, err
    return build_git_patch(old, new), None


def _not_a_diff(patch: str) -> ExecutionResult | None:
    """-1 for an answer that is diff text but does not parse (a hunk shorter than its header says, as a
    patch cut short ends); None for a diff and for the empty answer. Text with no diff in it at all is
    left to the harness, which finds no patch to apply (0), as the official harness judges it."""
    if not patch.strip():
        return None
    try:
        parse_patch(patch)
    except unidiff.UnidiffParseError as err:
        return ExecutionResult(-1.0, "malformed", "not_a_diff", str(err)[:300])
    return None


class _Counter:
    """Numbers log folders uniquely across threads (a Ray task's count starts where the driver says)."""

    def __init__(self, start: int = 0) -> None:
        self._lock, self._value = threading.Lock(), start

    def next(self) -> int:
        with self._lock:
            self._value += 1
            return self._value


class VerdictMemo:
    """The verdicts of distinct (settings, row and its tests, normalized patch) jobs across calls, at most
    `size` of them, the least recently used dropped first.

    RL asks the same answer again and again: a sampled answer often repeats one of an earlier step or
    turn (a policy that has converged writes few distinct patches), and an evaluation repeats the
    training's. Each call's own duplicates already run once (`score_pairs`); this keeps what one run
    learned for the next call. Only verdicts are kept (reward not None): an infrastructure failure or a
    row that cannot be judged is asked again, as a retry would. A verdict is as deterministic as the
    tests: a flaky test's first outcome is the one every later ask gets, which is also what the
    in-call dedup gives it."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.asked = 0
        """Distinct jobs looked up (one per distinct key per call)."""
        self.remembered = 0
        """Of those, answered from the memo without a test run."""
        self._verdicts: collections.OrderedDict[Hashable, ExecutionResult] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> ExecutionResult | None:
        with self._lock:
            self.asked += 1
            found = self._verdicts.get(key)
            if found is not None:
                self.remembered += 1
                self._verdicts.move_to_end(key)
            return found

    def put(self, key: Hashable, result: ExecutionResult) -> None:
        if result.reward is None or self.size <= 0:
            return
        with self._lock:
            self._verdicts[key] = result
            self._verdicts.move_to_end(key)
            while len(self._verdicts) > self.size:
                self._verdicts.popitem(last=False)

    def through(
        self,
        jobs: list[J],
        key: Callable[[J], Hashable],
        run: Callable[[list[J]], list[ExecutionResult]],
    ) -> list[ExecutionResult]:
        """The verdict of each of `jobs` (of distinct keys): remembered where known, else from `run`,
        called once on the others, whose verdicts are then kept."""
        keys = [key(job) for job in jobs]
        found = {i: verdict for i, k in enumerate(keys) if (verdict := self.get(k)) is not None}
        todo = [i for i in range(len(jobs)) if i not in found]
        for i, verdict in zip(todo, run([jobs[i] for i in todo]), strict=True):
            self.put(keys[i], verdict)
            found[i] = verdict
        return [found[i] for i in range(len(jobs))]

    def __len__(self) -> int:
        return len(self._verdicts)

    def summary(self) -> str:
        """One line for a run's log: how many test runs the memo saved."""
        share = self.remembered / self.asked if self.asked else 0.0
        return (
            f"{self.asked} distinct test jobs, {self.remembered} answered from the verdict memo "
            f"({share:.1%}), {self.asked - self.remembered} run"
        )


@dataclass
class ExecutionReward:
    """Judges answers with a `LocalBackend`; `score_group` runs a group's distinct patches in parallel.

    `log_dir` keeps each evaluation's log (the harness's layout) under a folder per instance; without it
    logs go to a temporary folder and are removed. `engine`: where the tests run (module docstring)."""

    backend: LocalBackend
    shaping: Shaping = "none"
    workers: int = 1
    retries: int = 1
    log_dir: Path | None = None
    engine: Engine = "threads"
    run_empty: bool = False
    """Also run the tests of an empty patch (the base tree with the test patch) instead of scoring it
    unresolved unrun: for RLEF's feedback on an answer that changes nothing, which must say what failed."""
    min_test_strength: float | None = None
    """Rows whose tests killed less than this share of their gold patch's mutants (`swerl data validate
    --mutants`; a row that measured none counts as weak) are not executable: `weak_tests`."""
    strength_weight: bool = False
    """A resolved answer earns the row's test strength instead of 1 (a row without one: 1)."""
    memo: VerdictMemo = field(default_factory=VerdictMemo, repr=False)
    """Verdicts kept across `score_pairs` calls (`VerdictMemo(0)`: none). A copy made with
    `dataclasses.replace` shares it; its keys hold the settings a verdict depends on."""
    _counter: _Counter = field(default_factory=_Counter, repr=False)
    _known: dict[tuple[str, str], tuple[str, str] | None] = field(default_factory=dict, repr=False)
    _gold: GoldChecks | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.shaping not in SHAPINGS:
            raise UserError(f"unknown execution reward shaping {self.shaping!r}; use {', '.join(SHAPINGS)}")
        self.dispatch()  # an unknown engine is said before any answer is run
        harness_api()  # grading needs the swebench package: say so before any answer is run

    def dispatch(self) -> Dispatch:
        """Where the distinct runs go: `engine`, `workers`, `retries` (`swerl.execution.dispatch`)."""
        return Dispatch(self.engine, self.workers, self.retries)

    def problem(self, instance: Instance | None) -> tuple[str, str] | None:
        """`not_executable`, plus whether the backend has the repository and its base commit."""
        problem = not_executable(instance)
        if problem is None and instance is not None and self.min_test_strength is not None:
            problem = weak_tests(instance, self.min_test_strength)
        if problem is not None or instance is None:
            return problem
        key = (instance.repo, instance.base_commit)
        if key not in self._known:
            try:
                self.backend.repos.ensure(*key)
                self._known[key] = None
            except GitError as err:
                self._known[key] = ("unknown_repository", str(err).splitlines()[0][:300])
        return self._known[key]

    def score_patch(self, instance: Instance, patch: str) -> ExecutionResult:
        """One patch's verdict; an infrastructure failure is tried again `retries` times."""
        problem = self.problem(instance)
        if problem is not None:
            return ExecutionResult(None, "not_executable", *problem)
        malformed = _not_a_diff(patch)
        if malformed is not None:
            return malformed
        runnable, dropped = drop_guarded(patch) if patch.strip() else ("", [])
        if not dropped:  # the patch as written: the harness's own commands decide whether it applies
            runnable = patch
        result = ExecutionResult(None, "infra_error")
        for attempt in range(1 + max(0, self.retries)):
            result = self._judge(instance, runnable)
            result.attempts = attempt + 1
            if result.kind != "infra_error" or result.error in CANNOT_JUDGE:
                break
        result.dropped = dropped
        return result

    def gold_checks(self) -> GoldChecks:
        """The gold patch's verdicts here, kept beside the backend's mirrors (`CACHE/gold`)."""
        if self._gold is None:
            self._gold = GoldChecks(self.backend, self.backend.repos.root.parent / "gold")
        return self._gold

    def _judgeable(self, instance: Instance, result: ExecutionResult, run: EvalRun | None) -> ExecutionResult:
        """`result`, or an infrastructure error where the gold patch does not resolve here either: an
        answer's failure (or its run without results) then says nothing about the answer. Only asked of
        a verdict that rests on the tests' outcomes (an empty answer, a patch that does not apply or does
        not build is the answer's own). `run`: the answer's evaluation where the answer is the gold patch,
        which then is the gold patch's run (not made a second time)."""
        if result.kind != "unresolved" or result.error not in (None, "no_test_results", "witness_veto"):
            return result
        known = self.gold_checks().failures(instance, run)
        if not known:
            return result
        why = str(cannot_judge(known)["error"])
        return ExecutionResult(None, "infra_error", CANNOT_JUDGE[ALL_TESTS in known], why)

    def _judge(self, instance: Instance, patch: str) -> ExecutionResult:
        if not patch.strip() and not self.run_empty:
            listed = len(instance.fail_to_pass)
            return ExecutionResult(0.0, "unresolved", "empty_patch", fail_to_pass=(0, listed))
        with tempfile.TemporaryDirectory(prefix="swerl-exec-") as tmp:
            folder = Path(tmp)
            if self.log_dir is not None:
                folder = self.log_dir / instance.instance_id / f"{self._counter.next():06d}"
            try:
                run = self.backend.evaluate(instance, patch, folder / "test_output.txt")
            except (
                Exception
            ) as err:  # an environment, a clone or a sandbox that failed: not the answer's fault
                said = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:300]}"
                if self.log_dir is not None:
                    (folder / "run_instance.log").write_text(traceback.format_exc(), encoding="utf-8")
                error = "env_build_failed" if isinstance(err, EnvSetupError) else "harness_raised"
                return ExecutionResult(None, "infra_error", error, said)
        gold_run = run if patch == instance.patch else None
        result = self._judgeable(instance, self._verdict(instance, run.log, run.report), gold_run)
        result.log, result.statuses = run.log, dict(run.statuses)
        return result

    def _verdict(self, instance: Instance, log: str, report: Mapping[str, Any]) -> ExecutionResult:
        api = harness_api()
        listed = len(instance.fail_to_pass)
        if api.APPLY_PATCH_FAIL in log:
            return ExecutionResult(0.0, "unresolved", "patch_does_not_apply", fail_to_pass=(0, listed))
        if BUILD_FAILED in log:  # the answer's compiled code does not compile: no test ran
            return ExecutionResult(0.0, "unresolved", "does_not_build", fail_to_pass=(0, listed))
        if "[swerl] the test patch does not apply" in log:
            return ExecutionResult(None, "infra_error", "test_patch_does_not_apply", "the row's test patch")
        if f"{api.TESTS_TIMEOUT}:" in log:
            return ExecutionResult(
                None, "infra_error", "harness_timeout", "the tests passed their time limit"
            )
        if not report.get("patch_successfully_applied"):  # the harness found no test results it trusts
            return ExecutionResult(0.0, "unresolved", "no_test_results", fail_to_pass=(0, listed))
        tests = report.get("tests_status", {})
        passed = len(tests.get("FAIL_TO_PASS", {}).get("success", []))
        if report.get("resolved"):
            return ExecutionResult(1.0, "resolved", fail_to_pass=(passed, listed))
        reward = 0.0
        if self.shaping == "fail_to_pass" and not tests.get("PASS_TO_PASS", {}).get("failure"):
            reward = passed / listed
        veto = report.get("witness_veto")  # passes the log claims and the test-outcome witness denies
        if veto:
            return ExecutionResult(reward, "unresolved", "witness_veto", str(veto)[:300], (passed, listed))
        return ExecutionResult(reward, "unresolved", fail_to_pass=(passed, listed))

    def score_group(self, instance: Instance, patches: Sequence[str | FormatError]) -> list[ExecutionResult]:
        """Verdicts of a group's patches (a FormatError: a malformed answer, -1); identical normalized
        patches run once, the distinct ones at most `workers` at a time."""
        return self.score_pairs([(instance, patch) for patch in patches])

    def score_pairs(self, pairs: Sequence[tuple[Instance, str | FormatError]]) -> list[ExecutionResult]:
        """`score_group` over answers to several instances at once (RLEF's turn: one answer per episode,
        episodes of many rows): the same patch for the same instance runs once, every distinct
        (instance, patch) at most `workers` at a time, or as Ray tasks."""
        # A patch that does not parse is judged alone: it may share its normalized text with one that
        # does (a last context line of blanks cut off), and must not take that one's verdict or give it -1.
        broken = {i: r for i, (_, p) in enumerate(pairs) if isinstance(p, str) and (r := _not_a_diff(p))}
        # The same row graded on other tests (RLEF's public and private views) is another job.
        runnable = {
            i: (instance, p)
            for i, (instance, p) in enumerate(pairs)
            if isinstance(p, str) and i not in broken
        }
        # What else decides a verdict (an empty patch run or not, the shaping, weak rows): a replaced
        # copy of this reward shares the memo and may differ in them.
        settings = (id(self.backend), self.shaping, self.run_empty, self.min_test_strength)

        def same_run(job: tuple[Instance, str]) -> tuple[Any, ...]:
            return (_graded_by(job[0]), normalized_patch(job[1]))

        judged = once_each(
            list(runnable.values()),
            same_run,
            lambda jobs: self.memo.through(jobs, lambda job: (settings, same_run(job)), self._judge_all),
        )
        verdicts = dict(zip(runnable, judged, strict=True))
        out = []
        for i, (_, patch) in enumerate(pairs):
            if i in broken:
                out.append(broken[i])
            elif isinstance(patch, FormatError):
                out.append(ExecutionResult(-1.0, "malformed", str(patch.kind.value), str(patch)))
            else:
                out.append(self._weighted(pairs[i][0], _copy(verdicts[i])))
        return out

    def _judge_all(self, jobs: list[tuple[Instance, str]]) -> list[ExecutionResult]:
        """`score_patch` of each distinct (instance, patch), where `dispatch` says; on Ray, a task builds an
        `ExecutionReward` like this one (its log folder numbered here, as the driver's counter would),
        and a task Ray lost is an infrastructure error, never a verdict."""
        options = (self.backend, self.shaping, self.retries, self.log_dir, self.run_empty)
        return self.dispatch().map(
            jobs,
            lambda job: self.score_patch(*job),
            lambda job: functools.partial(_score_task, options, *job, self._counter.next() - 1),
            lambda said: ExecutionResult(None, "infra_error", "worker_lost", said),
        )

    def _weighted(self, instance: Instance, result: ExecutionResult) -> ExecutionResult:
        """A resolved answer's reward times the row's test strength, with `strength_weight`."""
        strength = test_strength(instance)
        if self.strength_weight and result.kind == "resolved" and strength is not None:
            result.reward = strength
        return result


def _score_task(
    options: tuple[LocalBackend, Shaping, int, Path | None, bool],
    instance: Instance,
    patch: str,
    sequence: int,
) -> ExecutionResult:
    """One patch's verdict on a Ray worker, by an `ExecutionReward` like the driver's (`sequence` numbers
    its log folder as the driver's counter would)."""
    backend, shaping, retries, log_dir, run_empty = options
    reward = ExecutionReward(
        backend,
        shaping,
        retries=retries,
        log_dir=log_dir,
        run_empty=run_empty,
        _counter=_Counter(sequence),
    )
    return reward.score_patch(instance, patch)


def _graded_by(instance: Instance) -> tuple[Any, ...]:
    """What a verdict depends on besides the patch: the row and the tests that grade it."""
    return (instance.instance_id, instance.base_commit, instance.fail_to_pass, instance.pass_to_pass)


def _copy(result: ExecutionResult) -> ExecutionResult:
    return ExecutionResult(**{**result.__dict__, "dropped": list(result.dropped)})
