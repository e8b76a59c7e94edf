"""HumanEval through the sandbox: every canonical solution passes, a corrupted one fails."""

from __future__ import annotations

import os

import pytest

from swerl.codecontests.humaneval import job, load_humaneval
from swerl.sandbox import Verdict, run_batch
from swerl.sandbox.bwrap import isolation_available


@pytest.fixture(scope="module")
def problems():
    problem = isolation_available()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the sandbox tests isolated: {problem}")
        pytest.skip(f"!!! SANDBOX ISOLATION TESTS SKIPPED: {problem} !!!")
    return load_humaneval()


def test_all_164_canonical_solutions_pass(problems) -> None:
    assert len(problems) == 164
    results = run_batch([job(p, p.canonical_solution) for p in problems])
    failed = [
        (p.task_id, r[0].verdict, r[0].stderr_tail[-300:])
        for p, r in zip(problems, results, strict=True)
        if not r[0].passed
    ]
    assert not failed


def test_corrupted_solutions_fail(problems) -> None:
    first = problems[0]
    wrong = job(
        first, "    return not " + first.canonical_solution.strip().splitlines()[-1].strip()[7:] + "\n"
    )
    crash = job(first, "    raise RuntimeError('boom')\n")
    missing = job(first, None)
    results = run_batch([wrong, crash, missing])
    assert [r[0].verdict for r in results] == [Verdict.RUNTIME_ERROR, Verdict.RUNTIME_ERROR, Verdict.NO_CODE]
    assert "AssertionError" in results[0][0].stderr_tail and "boom" in results[1][0].stderr_tail
