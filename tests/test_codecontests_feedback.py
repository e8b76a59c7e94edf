"""The execution feedback the model sees after failing public tests."""

from __future__ import annotations

from swerl.codecontests.feedback import render_failure, render_feedback
from swerl.sandbox import TestCase, TestResult, Verdict

TEST = TestCase("1 2\n", "3\n")


def test_all_passed_needs_no_feedback() -> None:
    assert render_feedback([TEST], [TestResult(Verdict.PASSED)]) is None


def test_wrong_answer_shows_input_expected_and_actual() -> None:
    text = render_feedback(
        [TEST, TEST], [TestResult(Verdict.PASSED), TestResult(Verdict.WRONG_ANSWER, stdout_tail="4\n")]
    )
    assert text is not None
    assert "failed 1 of 2" in text and "1 2" in text and "Expected output" in text and "4" in text


def test_runtime_error_shows_the_end_of_the_trace() -> None:
    trace = (
        "Traceback (most recent call last):\n" + "  frame\n" * 1000 + "ZeroDivisionError: division by zero\n"
    )
    text = render_failure(TEST, TestResult(Verdict.RUNTIME_ERROR, exit_code=1, stderr_tail=trace))
    assert text.rstrip().endswith("ZeroDivisionError: division by zero\n```".rstrip())
    assert "characters before" in text and len(text) < 2500


def test_limits_are_named() -> None:
    assert "time limit" in render_failure(TEST, TestResult(Verdict.TIMEOUT))
    assert "memory limit" in render_failure(TEST, TestResult(Verdict.MEMORY_LIMIT))
    assert "too much output" in render_failure(TEST, TestResult(Verdict.OUTPUT_LIMIT))
    assert "No Python code" in (render_feedback([TEST], [TestResult(Verdict.NO_CODE)]) or "")


def test_long_inputs_are_truncated() -> None:
    text = render_failure(TestCase("9" * 50_000, "1"), TestResult(Verdict.WRONG_ANSWER, stdout_tail="2"))
    assert "more characters" in text and len(text) < 3000
