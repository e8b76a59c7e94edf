"""The verdict path never raises: any output and any run becomes a verdict, and a fault of ours becomes a
counted, logged judge_error instead of an exception into training or evaluation."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from swerl.codecontests.checker import outputs_match
from swerl.sandbox import Limits, TestCase, Verdict, pool
from swerl.sandbox.verdict import Execution

LIMITS = Limits(cpu_s=1.0, memory_bytes=1 << 28)

_runs = st.builds(
    Execution,
    exit_code=st.one_of(st.none(), st.integers(-1000, 1000)),
    signal=st.one_of(st.none(), st.sampled_from([int(s) for s in signal.valid_signals()][:40])),
    wall_s=st.floats(0, 100, allow_nan=False),
    cpu_s=st.floats(0, 100, allow_nan=False),
    peak_memory_bytes=st.integers(0, 1 << 40),
    stdout=st.one_of(
        st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")),
        st.text(alphabet=" \n\t\r\v\f0123456789.-+eEnaifNAIF", max_size=200),
        st.integers(min_value=10**4000, max_value=10**4001).map(lambda n: str(n) * 2),
    ),
    stderr_tail=st.text(max_size=100),
    timed_out=st.booleans(),
    output_exceeded=st.booleans(),
    oom_killed=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(run=_runs, expected=st.one_of(st.none(), st.text(max_size=50), st.just("9" * 5000)))
def test_fuzz_every_run_and_output_gets_a_verdict(run: Execution, expected: str | None) -> None:
    result = pool._judge(TestCase("", expected), Path("/x"), LIMITS, lambda *_: run, outputs_match)
    assert result.verdict in set(Verdict) - {Verdict.JUDGE_ERROR, Verdict.NO_CODE}
    if result.verdict is Verdict.PASSED:
        assert run.exit_code == 0 and run.signal is None and not run.oom_killed


def test_a_failing_checker_or_sandbox_is_a_counted_judge_error(caplog) -> None:
    run = Execution(0, None, 0.1, 0.05, 1 << 20, "1\n", "", False, False)

    def broken_checker(expected: str, actual: str) -> bool:
        raise ValueError("checker bug")

    def lost_sandbox(*_: object) -> Execution:
        raise RuntimeError("sandbox lost")

    before = pool.judge_errors()
    with caplog.at_level(logging.ERROR, logger="swerl.sandbox.pool"):
        checked = pool._judge(TestCase("", "1"), Path("/x"), LIMITS, lambda *_: run, broken_checker)
        lost = pool._judge(TestCase("", "1"), Path("/x"), LIMITS, lost_sandbox, outputs_match)
    assert (checked.verdict, lost.verdict) == (Verdict.JUDGE_ERROR, Verdict.JUDGE_ERROR)
    assert "checker bug" in checked.stderr_tail and checked.stdout_tail == "1\n"
    assert "sandbox lost" in lost.stderr_tail
    assert pool.judge_errors() == before + 2
    assert sum("judge_error" in r.getMessage() for r in caplog.records) == 2


def test_an_interrupt_drops_the_queued_tests_and_judges_none_of_them_in_error() -> None:
    from isolation import require_isolation

    from swerl.sandbox import Job, SandboxConfig, run_batch

    require_isolation()
    calls = 0

    def interrupted(expected: str, actual: str) -> bool:  # Ctrl-C arrives while the first test is checked
        nonlocal calls
        calls += 1
        raise KeyboardInterrupt

    jobs = [Job("print(input())", [TestCase(str(n), str(n)) for n in range(12)]) for _ in range(3)]
    before = pool.judge_errors()
    try:
        run_batch(jobs, checker=interrupted, limits=LIMITS, workers=1, config=SandboxConfig(persistent=False))
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt was swallowed")
    assert calls <= 2  # the worker may have taken the next test before the interrupt reached run_batch
    assert pool.judge_errors() == before
