"""Normalization, voting, test filters, the pytest report parser and the localization report."""

from __future__ import annotations

from collections.abc import Sequence

from agentless.report import gold_changed_lines, score_instance, summarize
from agentless.rerank.normalize import normalize_source, normalized_key
from agentless.rerank.regression import parse_excluded_tests, regression_filter_messages
from agentless.rerank.select import PatchCandidate, related_test_files, select_patch
from agentless.rerank.vote import group_candidates, majority_vote
from swerl.edit_format import build_git_patch
from swerl.execution.base import TestRun, parse_pytest_report
from swerl.execution.instances import Instance

OLD = 'def f(x):\n    """Add one."""\n    return x - 1\n'


def test_equivalent_fixes_normalize_equal() -> None:
    a = 'def f(x):\n    """Add one."""\n    return x + 1\n'
    b = "def f(x):\n    # fixed: was minus\n    return (x+1)\n"
    c = "def f(x):\n    '''Adds one to x.'''\n\n    return x + 1  # note\n"
    assert normalize_source(a) == normalize_source(b) == normalize_source(c)
    assert normalize_source("def f():\n    '''only a docstring'''\n") == "def f():\n    pass"
    keys = {normalized_key({"m.py": OLD}, {"m.py": t}) for t in (a, b, c)}
    assert len(keys) == 1
    cosmetic = 'def f(x):\n    """Subtract one, says the doc."""\n    return x - 1  # hmm\n'
    assert normalized_key({"m.py": OLD}, {"m.py": cosmetic}) is None
    assert normalized_key({"m.py": None}, {"m.py": "x = 1\n"}) is not None
    assert normalize_source("a  \n\n b\n", "notes.txt") == "a\n b"


def test_vote_largest_group_then_earliest() -> None:
    assert majority_vote([(0, "a"), (1, "b"), (2, "b"), (3, "a"), (4, "b")]) == 1
    assert majority_vote([(0, "a"), (1, "b")]) == 0  # tie: the greedy sample's group
    assert majority_vote([]) is None
    groups = group_candidates([(5, "x"), (2, "x"), (3, "y")])
    assert groups[0].members == (2, 5) and groups[0].representative == 2


def _cand(index: int, new: str) -> PatchCandidate:
    return PatchCandidate(index, build_git_patch({"m.py": OLD}, {"m.py": new}), {"m.py": OLD}, {"m.py": new})


GOOD = "def f(x):\n    return x + 1\n"
BREAKS = "def f(x):\n    return None\n"


class FakeBackend:
    """Answers like a test runner: the regression test fails under BREAKS, one patch does not apply."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], int]] = []

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        self.calls.append((tuple(tests), len(patches)))
        if any("return None" in p for p in patches):
            return TestRun("ok", {t: "FAILED" for t in tests})
        if any("x * 9" in p for p in patches):
            return TestRun("apply_failed")
        return TestRun("ok", {t: "PASSED" for t in tests})


def test_regression_filter_beats_the_majority() -> None:
    inst = Instance("o__r-1", "o/r", "a" * 40, "issue", pass_to_pass=("t.py::test_keep",))
    candidates = [
        _cand(0, BREAKS),
        _cand(1, BREAKS),
        _cand(2, GOOD),
        _cand(3, "def f(x):\n    return x * 9\n"),
    ]
    plain = select_patch(inst, candidates)
    assert plain.chosen == 0
    backend = FakeBackend()
    filtered = select_patch(inst, candidates, backend=backend, regression_tests=["t.py::test_keep"])
    assert filtered.chosen == 2
    failures = {tuple(g["members"]): g["regression_failures"] for g in filtered.to_row()["groups"]}
    assert failures == {(0, 1): 1, (2,): 0, (3,): 2}
    assert len(backend.calls) == 4  # one baseline run, then one run per group (not per sample)


def test_regression_tests_are_the_repositorys_own_for_the_edited_modules() -> None:
    paths = [
        "pkg/models.py",
        "tests/test_models.py",
        "tests/models_test.py",
        "tests/pkg/test_other.py",
        "tests/test_unrelated.py",
        "docs/test_models.txt",
    ]
    chosen = related_test_files(paths, ["pkg/models.py", "pkg/__init__.py"])
    assert chosen == ["tests/models_test.py", "tests/test_models.py", "tests/pkg/test_other.py"]
    assert related_test_files(paths, ["pkg/models.py"], limit=1) == ["tests/models_test.py"]
    assert related_test_files(paths, ["README.md"]) == []


def test_selection_with_nothing_usable() -> None:
    inst = Instance("o__r-1", "o/r", "a" * 40, "issue")
    cosmetic = _cand(0, OLD.replace("Add one.", "Adds one."))
    result = select_patch(inst, [cosmetic])
    assert result.chosen is None and result.patch == "" and "cosmetic" in result.notes[0]


def test_pytest_report_parser() -> None:
    log = (
        "==== short test summary info ====\n"
        "PASSED tests/test_a.py::test_ok\n"
        "PASSED tests/test_a.py::test_param[a - b]\n"
        "FAILED tests/test_a.py::TestC::test_bad - AssertionError: assert 1 == 2\n"
        "ERROR tests/test_b.py - ImportError\n"
        "SKIPPED [1] tests/test_c.py:3: no reason\n"
        "XFAIL tests/test_a.py::test_x - reason\n"
    )
    assert parse_pytest_report(log) == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::test_param[a": "PASSED",
        "tests/test_a.py::TestC::test_bad": "FAILED",
        "tests/test_b.py": "ERROR",
        "tests/test_a.py::test_x": "XFAIL",
    }


def test_localization_report_against_a_gold_patch() -> None:
    old = "import os\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n"
    new = old.replace("return 2", "return 3")
    gold = build_git_patch({"m.py": old}, {"m.py": new, "added.py": "x = 1\n"})
    assert gold_changed_lines(gold) == {"m.py": {9}}
    read = {"m.py": old}.get
    hit = score_instance(
        "i",
        gold,
        ["x.py", "m.py"],
        [{"path": "m.py", "name": "b"}],
        [{"path": "m.py", "start": 8, "end": 9}],
        read,
    )
    assert hit is not None and hit.hits == {1: False, 3: True, 5: True} and hit.rank == 2
    assert hit.element_coverage == 1.0 and hit.line_coverage == 1.0
    miss = score_instance("j", gold, ["x.py"], [], [], read)
    assert miss is not None and miss.rank is None and miss.element_coverage == 0.0
    summary = summarize([hit, miss])
    assert summary["file_hit@3"] == 0.5 and summary["instances"] == 2


def test_gold_pass_to_pass_only_on_request_and_recorded() -> None:
    from agentless.pipeline import RunConfig, prediction_metadata, regression_tests

    inst = Instance("o__r-1", "o/r", "a" * 40, "issue", pass_to_pass=("t.py::test_keep",))
    gold = RunConfig(regression=True, regression_from_gold=True)
    assert regression_tests(inst, [], None, gold) == ["t.py::test_keep"]  # type: ignore[arg-type]
    assert prediction_metadata(gold)["uses_gold_labels"] is True
    assert prediction_metadata(gold)["regression"] == "gold PASS_TO_PASS"
    honest = RunConfig(regression=True)
    assert prediction_metadata(honest) == {
        "uses_gold_labels": False,
        "regression": "repository tests",
        "reproduction": False,
        "num_samples": honest.num_samples,
    }
    assert regression_tests(inst, [], None, RunConfig()) is None  # type: ignore[arg-type]


class OldBehaviourBackend:
    """`test_old` asserts the buggy output: the right fix (x + 1) breaks it, a no-op edit does not."""

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        fixed = any("x + 1" in p for p in patches)
        return TestRun("ok", {t: "FAILED" if fixed and t.endswith("test_old") else "PASSED" for t in tests})


def test_model_filter_leaves_out_tests_a_fix_may_rightly_break() -> None:
    inst = Instance("o__r-1", "o/r", "a" * 40, "f should add one")
    noop = "def f(x):\n    y = x\n    return y - 1\n"
    candidates = [_cand(0, GOOD), _cand(1, GOOD), _cand(2, noop)]
    tests = ["t.py::test_old", "t.py::test_other"]
    strict = select_patch(inst, candidates, backend=OldBehaviourBackend(), regression_tests=tests)
    assert strict.chosen == 2  # the no-op breaks nothing, so it beats the fix
    answer = "```\nt.py::test_old\nt.py::test_made_up\n```"
    asked: list[list[str]] = []

    def model(passing: list[str]) -> list[str]:
        asked.append(passing)
        return parse_excluded_tests(answer, passing)

    filtered = select_patch(
        inst, candidates, backend=OldBehaviourBackend(), regression_tests=tests, exclude_regression=model
    )
    assert asked == [tests] and filtered.chosen == 0  # both groups now break nothing: the majority wins
    assert any("t.py::test_old" in note for note in filtered.notes)
    assert parse_excluded_tests("none of them", tests) == []  # no block: nothing is dropped
    messages = regression_filter_messages("f should add one", tests)
    assert "t.py::test_other" in messages[0]["content"] and "f should add one" in messages[0]["content"]
