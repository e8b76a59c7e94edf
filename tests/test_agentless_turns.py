"""Repair in turns: the public tests' failures go back to the model before rerank, on a real repository
with real pytest runs; the stage resumes from the last phase it saved."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentless.demo import GOLD_ANSWER, build_demo
from agentless.pipeline import Context, RunConfig, run, stage_path
from agentless.repair import turns
from swerl.execution.base import TestRun
from swerl.execution.dispatch import Dispatch
from swerl.execution.instances import Instance
from tests.test_agentless_e2e import REPRO_TEST, ScriptedEngine, _context, needs_bwrap

WRONG_FIX = GOLD_ANSWER.replace("return total / len(values)\n", "return total / len(values) + 1\n")
NOT_FOUND = GOLD_ANSWER.replace("(len(values) - 1)", "(len(values) - 2)", 1)
FIRST = [WRONG_FIX, WRONG_FIX, NOT_FOUND, GOLD_ANSWER]


def _answer(prompt: str, sample: int) -> str:
    """First answers by sample; any answer after a feedback turn is the fix."""
    if "Write a pytest test file" in prompt:
        return f"```python\n{REPRO_TEST}```"
    if prompt.count("<assistant>") > 1:  # the dialog holds an earlier answer: feedback was given
        return GOLD_ANSWER
    return FIRST[sample % len(FIRST)]


class Interrupted(BaseException):
    """A kill in the middle of the stage (not an Exception: the stage must not record it as a row)."""


class Counting:
    """The local backend, counting its runs."""

    def __init__(self, backend: object) -> None:
        self.backend, self.runs = backend, 0

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        self.runs += 1
        return self.backend.run_tests(instance, tests, patches)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Instance, Path, Path]:
    root = tmp_path_factory.mktemp("turns")
    instance, clones = build_demo(root)
    return instance, clones, root


def _ctx(demo: tuple[Instance, Path, Path], engine: ScriptedEngine) -> Context:
    from tests.test_agentless_e2e import CharTokenizer

    _, clones, root = demo
    ctx = _context(root, clones, engine, CharTokenizer(), backend=True)
    ctx.backend = Counting(ctx.backend)  # type: ignore[assignment]
    return ctx


CFG = RunConfig(
    model_name="scripted",
    num_samples=4,
    model_localization=False,
    reproduction=True,
    reproduction_samples=1,
    feedback_turns=2,
)


@needs_bwrap
def test_feedback_turns_fix_the_majority_and_resume_after_a_kill(
    demo: tuple[Instance, Path, Path], tmp_path: Path
) -> None:
    instance = demo[0]
    out = tmp_path / "run"
    answers_after_feedback = 0

    def killed_in_the_first_answer_phase(prompt: str, sample: int) -> str:
        nonlocal answers_after_feedback
        if prompt.count("<assistant>") > 1:
            answers_after_feedback += 1
            raise Interrupted
        return _answer(prompt, sample)

    with pytest.raises(Interrupted):
        run([instance], out, _ctx(demo, ScriptedEngine(killed_in_the_first_answer_phase)), CFG)
    saved = [json.loads(line) for line in stage_path(out, "feedback").read_text().splitlines()]
    assert [row["done"] for row in saved] == [False, False]  # the public tests, then the first runs
    episodes = saved[-1]["episodes"]
    assert [e["turns"][0]["tests"]["failed"] for e in episodes if e["turns"][0].get("tests")] == [
        ["test_swerl_reproduction_0.py"],
        ["test_swerl_reproduction_0.py"],
        [],
    ]
    # The RLEF repository environment's feedback, from the real pytest log: the failing reproduction
    # test and its assertion; for the edit that does not apply, which SEARCH text was not found.
    wrong = episodes[0]["turns"][0]["feedback"]
    assert "1 of 1 public tests fail:\nFAILED test_swerl_reproduction_0.py::test_repro" in wrong
    assert "assert 4.0 == 3" in wrong and "Give your whole answer again" in wrong
    assert episodes[2]["turns"][0]["error"] == "search_not_found"
    assert "A SEARCH block does not match the file exactly" in episodes[2]["turns"][0]["feedback"]
    assert [e["stopped"] for e in episodes] == [None, None, None, "passed"]

    engine = ScriptedEngine(_answer)
    ctx = _ctx(demo, engine)
    run([instance], out, ctx, CFG)
    # Resumed in the answer phase: no repair sample and no finished test run is made again.
    assert all(params.n == 1 for params in engine.calls)
    row = json.loads(stage_path(out, "feedback").read_text().splitlines()[-1])
    assert row["done"] is True
    assert row["tests"]["reproduction"] == ["test_swerl_reproduction_0.py"]
    assert [len(e["turns"]) for e in row["episodes"]] == [2, 2, 2, 1]
    assert [e["stopped"] for e in row["episodes"]] == ["passed"] * 4
    assert all(e["turns"][-1]["patch"] and "feedback" not in e["turns"][-1] for e in row["episodes"])
    # Rerank over the final answers: all four samples are one group now (the first answers' majority
    # was the wrong fix), and the prediction is the fix.
    rerank = json.loads(stage_path(out, "rerank").read_text())
    assert rerank["groups"][0]["members"] == [0, 1, 2, 3]
    prediction = json.loads(stage_path(out, "predictions").read_text())
    assert "return total / len(values)\n" in prediction["model_patch"]
    assert prediction["metadata"]["feedback_turns"] == 2
    # The second run: the 3 new answers, one distinct patch, run once; then rerank (baseline, one group).
    assert ctx.backend.runs == 1 + 2  # type: ignore[attr-defined]


class ScriptedBackend:
    """Public-test runs by patch text: a patch containing "good" passes, "infra" raises, others fail."""

    def __init__(self) -> None:
        self.patches: list[str] = []

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        self.patches.append(patches[0])
        if "infra" in patches[0]:
            raise OSError("sandbox did not start")
        status = "PASSED" if "good" in patches[0] else "FAILED"
        return TestRun("ok", {t: status for t in tests}, log=f"{status} {tests[0]} - AssertionError\n")


def _episode(index: int, patch: str, error: str | None = None) -> dict[str, object]:
    turn = {"answer": "a", "patch": patch, "paths": [], "error": error, "message": "m"}
    return {"index": index, "temperature": 0.0, "stopped": None, "turns": [turn]}


def test_a_turn_runs_each_distinct_patch_once_and_leaves_infra_errors_without_feedback() -> None:
    instance = Instance("i", "o/r", "0" * 40, "issue")
    tests = turns.PublicTests(("t.py::a",), (), "")
    episodes = [
        _episode(0, "bad\n"),
        _episode(1, "bad\n \n"),  # the same change (trailing blanks)
        _episode(2, "good\n"),
        _episode(3, "infra\n"),
        _episode(4, "", error="tag_count"),
        _episode(5, "bad\n"),
    ]
    episodes[5]["turns"] *= 3  # had its turns already
    backend = ScriptedBackend()
    turns.give_feedback(instance, backend, tests, episodes, max_turns=2)
    assert backend.patches == ["bad\n", "good\n", "infra\n", "infra\n"]  # the infra error retried once
    assert [e["stopped"] for e in episodes] == [None, None, "passed", "infra_error", None, "max_turns"]
    assert [bool(e["turns"][-1].get("feedback")) for e in episodes] == [True, True, False, False, True, False]
    assert episodes[0]["turns"][-1]["tests"] == {"status": "ok", "failed": ["t.py::a"]}
    # Run again (a resumed phase): the episodes with feedback wait for their answers; nothing runs.
    turns.give_feedback(instance, backend, tests, episodes, max_turns=2)
    assert len(backend.patches) == 4


def test_a_turn_runs_where_its_dispatch_says_with_the_reproduction_files_after_the_answer() -> None:
    instance = Instance("i", "o/r", "0" * 40, "issue")
    tests = turns.PublicTests(("t.py::a",), ("test_swerl_reproduction_0.py",), "repro\n")
    seen: list[tuple[str, ...]] = []

    class Recording(ScriptedBackend):
        def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
            seen.append((*tests, *patches))
            return super().run_tests(instance, tests, patches)

    episodes = [_episode(0, "infra\n"), _episode(1, "good\n"), _episode(2, "good\n")]
    turns.give_feedback(instance, Recording(), tests, episodes, 2, Dispatch(workers=2, retries=0))
    # retries=0: the raising run is not tried again; the same patch twice runs once.
    assert sorted(seen) == [
        ("t.py::a", "test_swerl_reproduction_0.py", "good\n", "repro\n"),
        ("t.py::a", "test_swerl_reproduction_0.py", "infra\n", "repro\n"),
    ]
    assert [e["stopped"] for e in episodes] == ["infra_error", "passed", "passed"]


class BaseBackend:
    """The base commit's outcomes: two repository tests, one passing; a reproduction test per file,
    the first failing."""

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        if patches:
            return TestRun(
                "ok",
                {"test_swerl_reproduction_0.py::test_a": "FAILED"}
                | {"test_swerl_reproduction_1.py::test_b": "PASSED"},
            )
        return TestRun("ok", {"tests/test_x.py::test_ok": "PASSED", "tests/test_x.py::test_bad": "FAILED"})


def test_public_tests_pass_at_the_base_or_reproduce_the_issue_there() -> None:
    instance = Instance("i", "o/r", "0" * 40, "issue")
    sources = ["def test_a():\n    assert False\n", "def test_b():\n    pass\n"]
    found = turns.public_tests(instance, BaseBackend(), ["tests/test_x.py"], sources, [])
    assert found.regression == ("tests/test_x.py::test_ok",)
    assert found.reproduction == ("test_swerl_reproduction_0.py",)
    assert "test_swerl_reproduction_0.py" in found.reproduction_patch
    assert "test_swerl_reproduction_1.py" not in found.reproduction_patch
    assert turns.PublicTests.from_row(found.to_row()) == found
    notes: list[str] = []
    assert turns.public_tests(instance, BaseBackend(), None, [], notes).empty


def test_without_public_tests_patches_end_and_bad_edits_still_get_feedback() -> None:
    instance = Instance("i", "o/r", "0" * 40, "issue")
    episodes = [
        _episode(0, "bad\n"),
        _episode(1, "", error="search_not_found"),
        _episode(2, "", "syntax_error"),
    ]
    turns.give_feedback(instance, ScriptedBackend(), turns.PublicTests((), (), ""), episodes, max_turns=2)
    assert [e["stopped"] for e in episodes] == ["no_tests", None, None]
    assert episodes[1]["turns"][-1]["feedback"].startswith("A SEARCH block does not match")
    assert episodes[2]["turns"][-1]["feedback"].startswith(
        "Your edits leave a Python file that does not parse"
    )
