"""The text the model reads after its program failed a public test (RLEF's execution feedback).

It shows what a contestant would see from a judge that reveals the sample: the input, the expected and
the actual output, or the end of the traceback, or which limit was hit. Long texts are cut in the middle
of nothing important: inputs and outputs keep their head (where the first difference usually is),
tracebacks keep their tail (where the exception is).
"""

from __future__ import annotations

from collections.abc import Sequence

from swerl.sandbox.pool import TestCase
from swerl.sandbox.verdict import TestResult, Verdict

MAX_FIELD_CHARS = 1000
MAX_TRACE_CHARS = 1500


def _head(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... ({len(text) - limit} more characters)"


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"({len(text) - limit} characters before) ...\n{text[-limit:]}"


def fenced(title: str, text: str) -> str:
    """A titled, fenced block of feedback: the form every feedback turn (contest or repository) shows
    program output and test reports in."""
    return f"{title}:\n```\n{text.rstrip()}\n```"


def _explanation(result: TestResult) -> str:
    messages = {
        Verdict.WRONG_ANSWER: "Your program produced the wrong output.",
        Verdict.TIMEOUT: "Your program exceeded the time limit and was stopped.",
        Verdict.MEMORY_LIMIT: "Your program exceeded the memory limit.",
        Verdict.OUTPUT_LIMIT: "Your program printed too much output and was stopped.",
        Verdict.NO_CODE: "No Python code was found in your answer. Put your program in a ```python block.",
        Verdict.JUDGE_ERROR: "The judge failed on this test (not your program's fault).",
    }
    if result.verdict in messages:
        return messages[result.verdict]
    how = f"signal {result.signal}" if result.signal is not None else f"exit code {result.exit_code}"
    return f"Your program crashed ({how})."


def render_failure(test: TestCase, result: TestResult, max_chars: int = MAX_FIELD_CHARS) -> str:
    """Feedback for one failed test."""
    if result.verdict is Verdict.NO_CODE:
        return _explanation(result)
    parts = [_explanation(result), fenced("Input", _head(test.input, max_chars))]
    if test.output is not None:
        parts.append(fenced("Expected output", _head(test.output, max_chars)))
    if result.verdict is Verdict.WRONG_ANSWER:
        parts.append(fenced("Your output", _head(result.stdout_tail, max_chars)))
    elif result.verdict is Verdict.RUNTIME_ERROR and result.stderr_tail.strip():
        parts.append(fenced("Error", _tail(result.stderr_tail, MAX_TRACE_CHARS)))
    elif result.verdict is Verdict.MEMORY_LIMIT and result.stderr_tail.strip():
        parts.append(fenced("Error", _tail(result.stderr_tail, MAX_TRACE_CHARS // 3)))
    return "\n\n".join(parts)


def render_syntax_error(report: str) -> str:
    """Feedback for an answer whose program does not parse: the interpreter's report, which names the
    line and the error, instead of "no code found" (the model did write code, and needs to know where
    it went wrong)."""
    return "\n\n".join(
        [
            "Your program is not valid Python; it stopped before running any test.",
            fenced("Error", _tail(report, MAX_TRACE_CHARS)),
            "Fix the program and give the complete corrected code.",
        ]
    )


def render_feedback(
    tests: Sequence[TestCase], results: Sequence[TestResult], max_failures: int = 1
) -> str | None:
    """Feedback on the first `max_failures` failed tests, or None when all passed (no new turn needed)."""
    failures = [(t, r) for t, r in zip(tests, results, strict=True) if not r.passed]
    if not failures:
        return None
    if failures[0][1].verdict is Verdict.NO_CODE:
        return _explanation(failures[0][1])
    header = f"Your code failed {len(failures)} of {len(tests)} public tests."
    shown = [render_failure(t, r) for t, r in failures[:max_failures]]
    return "\n\n".join([header, *shown, "Fix the program and give the complete corrected code."])
