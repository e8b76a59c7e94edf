"""Test strength in `swerl data validate`: a real git repository built here whose fix has two hunks and
whose new test checks only the first, so the second hunk's mutants survive; the stats, the
--min-test-strength filter and the execution reward's config read the measure."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_pipeline.validate.rows import load_input
from data_pipeline.validate.runner import Verdicts, read_results, write_output
from data_pipeline.validate.strength import killed
from swerl.cli.main import main
from swerl.edit_format import build_git_patch
from swerl.execution.base import TestRun
from swerl.execution.instances import Instance
from swerl.reward.execution import ExecutionResult, ExecutionReward, weak_tests
from swerl.sandbox.bwrap import isolation_available
from swerl.synth_repo import git

ISOLATION = "bwrap" if isolation_available() is None else "none"

OPS = "def clamp(x, lo, hi):\n    return x\n" + "\n" * 8 + "\ndef sign(x):\n    return 1\n"
FIXED = OPS.replace("    return x\n", "    return max(lo, min(x, hi))\n").replace(
    "    return 1\n", "    return -1 if x < 0 else 1\n"
)
TESTS = "def test_nothing():\n    assert True\n"
NEW_TESTS = "from calc.ops import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n"


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One row in SWE-bench's schema, validated with 2 mutants: the two hunk drops (each costs a test run:
    the operators are tested without running, in test_execution_mutants)."""
    root = tmp_path_factory.mktemp("strength")
    repo = root / "clones" / "acme__calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS)
    (repo / "tests" / "test_ops.py").write_text(TESTS)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    row = {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": git(repo, "rev-parse", "HEAD").strip(),
        "problem_statement": "clamp and sign are wrong",
        "patch": build_git_patch({"calc/ops.py": OPS}, {"calc/ops.py": FIXED}),
        "test_patch": build_git_patch({"tests/test_ops.py": TESTS}, {"tests/test_ops.py": NEW_TESTS}),
    }
    dataset = root / "rows.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    out = root / "out"
    argv = ["data", "validate", str(dataset), "--out", str(out), "--clones", str(root / "clones")]
    argv += ["--cache-dir", str(root / "cache"), "--offline", "--quiet", "--repeats", "1", "--mutants", "2"]
    assert main([*argv, *(["--unsafe-no-isolation"] if ISOLATION == "none" else [])]) == 0
    return out


def test_a_row_records_its_strength_and_survivors(validated: Path) -> None:
    record = read_results(validated)["acme__calc-1"]
    assert record["reason"] == "executable"
    assert (record["mutants_run"], record["mutants_killed"], record["test_strength"]) == (2, 1, 0.5)
    survivors = record["surviving_mutants"]  # `clamp`'s hunk left out fails test_clamp; `sign`'s passes
    assert [(s["operator"], s["path"], s["line"]) for s in survivors] == [("drop_hunk", "calc/ops.py", 13)]
    assert "-    return -1 if x < 0 else 1\n+    return 1\n" in survivors[0]["diff"]
    row = pq.read_table(validated / "test.parquet").to_pylist()[0]
    assert row["test_strength"] == 0.5 and json.loads(row["surviving_mutants"]) == survivors


def test_stats_show_the_distribution(validated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", str(validated)]) == 0
    said = capsys.readouterr().out
    assert "test strength: 1 rows, median 0.50" in said
    assert "rows with a surviving mutant      1  100%" in said
    assert (validated / "stats" / "test_strength.png").is_file()


def test_min_test_strength_keeps_strong_rows_only(
    validated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = load_input(validated.parent / "rows.jsonl")
    for minimum, kept in ((0.5, 1), (0.75, 0)):
        assert write_output(validated, rows, Verdicts(validated), ["acme__calc-1"], minimum) == kept
        assert pq.read_table(validated / "test.parquet").num_rows == kept
    argv = ["data", "validate", str(validated.parent / "rows.jsonl"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--mutants", "0", "--min-test-strength", "0.5"]) != 0
    assert "--min-test-strength needs mutants" in capsys.readouterr().err


def test_a_mutant_is_killed_by_any_test_not_passing() -> None:
    tests = ["t.py::a", "t.py::b"]
    assert killed(TestRun("ok", {"t.py::a": "PASSED", "t.py::b": "PASSED"}), tests) is False
    assert killed(TestRun("ok", {"t.py::a": "PASSED"}), tests) is True  # b did not even run
    assert killed(TestRun("timeout", {"t.py::a": "PASSED", "t.py::b": "PASSED"}), tests) is True
    assert killed(TestRun("apply_failed"), tests) is None and killed(TestRun("build_failed"), tests) is None


def test_the_execution_reward_skips_or_weights_weak_rows() -> None:
    def row(strength: float | None) -> Instance:
        extra = {} if strength is None else {"test_strength": strength}
        return Instance("a__b-1", "a/b", "0" * 40, "x", extra=extra)

    assert weak_tests(row(0.8), 0.5) is None
    assert weak_tests(row(0.25), 0.5) == ("weak_tests", "a__b-1: test strength 0.25, below 0.5")
    assert weak_tests(row(None), 0.5)[1].endswith("not measured, below 0.5")  # type: ignore[index]
    weighted = ExecutionReward(None, strength_weight=True)  # type: ignore[arg-type]
    assert weighted._weighted(row(0.25), ExecutionResult(1.0, "resolved")).reward == 0.25
    assert weighted._weighted(row(0.25), ExecutionResult(0.0, "unresolved")).reward == 0.0
    assert weighted._weighted(row(None), ExecutionResult(1.0, "resolved")).reward == 1.0
    plain = ExecutionReward(None)  # type: ignore[arg-type]
    assert plain._weighted(row(0.25), ExecutionResult(1.0, "resolved")).reward == 1.0
