"""Many programs x many tests, in parallel: the batch API the RLEF trainer and the evaluators call.

Workers are threads: each one owns a persistent sandbox (persistent.py) for the whole batch and only
sends it requests and reads its pipes, so the GIL is not the bottleneck, nothing needs pickling, and the
calling process never forks per test (its size does not matter). Each sandbox holds a slot, and a slot
maps to its own uid (bwrap.slot_uid), which is what makes RLIMIT_NPROC per-program. Where persistent
sandboxes are off or unavailable, each thread holds a slot and starts a fresh sandbox per test instead.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from swerl.sandbox import persistent
from swerl.sandbox.bwrap import SLOTS_PER_PROCESS, SandboxConfig, protections, resolve_bwrap
from swerl.sandbox.limits import Limits
from swerl.sandbox.runner import execute_fresh, staged_program
from swerl.sandbox.verdict import Execution, TestResult, Verdict, failure_verdict, to_result

Checker = Callable[[str, str], bool]
"""checker(expected, actual) -> whether the actual output is accepted."""
Runner = Callable[[Path, bytes, Limits], Execution]
"""runner(program, stdin, limits): one run in one worker's sandbox."""


@dataclass(frozen=True)
class TestCase:
    """One stdin and the output it should produce (None: any output passes if the program exits 0)."""

    __test__ = False  # not a pytest class, despite the name

    input: str
    output: str | None = None


@dataclass(frozen=True)
class Job:
    """One program (None: the answer had no usable code) against its tests, under its own limits."""

    source: str | None
    tests: Sequence[TestCase]
    limits: Limits | None = None


def exact_tokens(expected: str, actual: str) -> bool:
    """The default checker: same whitespace-separated tokens (CodeContests has a smarter one)."""
    return expected.split() == actual.split()


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, SLOTS_PER_PROCESS))


_log = logging.getLogger(__name__)
_judge_errors = 0
_judge_errors_lock = threading.Lock()


def judge_errors() -> int:
    """How many tests this process has judged `judge_error` (our fault: a lost sandbox, a failing checker)."""
    return _judge_errors


def _judge(test: TestCase, program: Path, limits: Limits, runner: Runner, check: Checker) -> TestResult:
    """One test's result; never raises for anything but an interrupt. Whatever the program printed becomes a
    verdict; a fault of ours (sandbox, checker) becomes JUDGE_ERROR, counted and logged with its trace,
    so training and evaluation go on and the count shows whether the judge can be trusted."""
    global _judge_errors
    run = None
    try:
        run = runner(program, test.input.encode(), limits)
        verdict = failure_verdict(run, limits)
        if verdict is None:
            accepted = test.output is None or check(test.output, run.stdout)
            verdict = Verdict.PASSED if accepted else Verdict.WRONG_ANSWER
        return to_result(run, verdict, limits)
    except Exception as err:
        with _judge_errors_lock:
            _judge_errors += 1
        _log.exception("judge_error on a test (%s); %d so far in this process", err, _judge_errors)
        detail = f"{type(err).__name__}: {err}"
        if run is None:
            return TestResult(Verdict.JUDGE_ERROR, stderr_tail=detail)
        return replace(to_result(run, Verdict.JUDGE_ERROR, limits), stderr_tail=detail)


def _runners(stack: ExitStack, config: SandboxConfig, bwrap: str | None, count: int) -> list[Runner]:
    """One runner per worker: a persistent sandbox each, else a slot each for per-test sandboxes."""
    if bwrap:
        sandboxes = stack.enter_context(persistent.leased(config, bwrap, count))
        if sandboxes:
            return [sandbox.run for sandbox in sandboxes]
    slots = persistent.take_slots(count)
    stack.callback(persistent.give_slots, slots)
    return [functools.partial(_fresh, config=config, slot=slot) for slot in slots]


def _fresh(program: Path, stdin: bytes, limits: Limits, *, config: SandboxConfig, slot: int) -> Execution:
    return execute_fresh(program, stdin, limits, config, slot)


def run_batch(
    jobs: Sequence[Job],
    *,
    checker: Checker = exact_tokens,
    limits: Limits | None = None,
    config: SandboxConfig | None = None,
    workers: int | None = None,
) -> list[list[TestResult]]:
    """Run every job's program on each of its tests; results[i][j] is job i on its test j.

    All (program, test) pairs share one pool sized to the cores, so a batch of many short programs keeps
    every core busy. Raises SandboxUnavailable up front when isolation is impossible and not waived.
    """
    config = config or SandboxConfig()
    base_limits = limits or Limits()
    results: list[list[TestResult | None]] = [[None] * len(job.tests) for job in jobs]
    pending = sum(len(job.tests) for job in jobs if job.source is not None)
    for i, job in enumerate(jobs):
        if job.source is None:
            results[i] = [TestResult(Verdict.NO_CODE) for _ in job.tests]
    if not pending:
        return [[r for r in row if r is not None] for row in results]
    bwrap = resolve_bwrap(config)  # refuse (or warn) once, before any sandbox starts
    protections(config, bwrap)  # likewise for a missing seccomp filter or --disable-userns
    count = max(1, min(workers or default_workers(), SLOTS_PER_PROCESS, pending))

    with ExitStack() as stack:
        runners: queue.SimpleQueue[Runner] = queue.SimpleQueue()
        leased = _runners(stack, config, bwrap, count)
        for runner in leased:
            runners.put(runner)
        executor = stack.enter_context(ThreadPoolExecutor(max_workers=len(leased)))
        futures = {}
        for i, job in enumerate(jobs):
            if job.source is None or not job.tests:
                continue
            program = stack.enter_context(staged_program(job.source))
            job_limits = job.limits or base_limits
            for j, test in enumerate(job.tests):

                def task(test: TestCase = test, program: Path = program, job_limits: Limits = job_limits):
                    runner = runners.get()
                    try:
                        return _judge(test, program, job_limits, runner, checker)
                    finally:
                        runners.put(runner)

                futures[(i, j)] = executor.submit(task)
        # Registered last, so it runs first on the way out: an interrupt (Ctrl-C) drops the queued tests
        # and waits only for those running, before the staged programs are deleted (the queued ones
        # then failed by the hundred as judge errors on missing files, and the exit waited for them all).
        stack.callback(executor.shutdown, wait=True, cancel_futures=True)
        for (i, j), future in futures.items():
            results[i][j] = future.result()
    return [[r for r in row if r is not None] for row in results]


def run_tests(
    source: str | None,
    tests: Sequence[TestCase],
    *,
    checker: Checker = exact_tokens,
    limits: Limits | None = None,
    config: SandboxConfig | None = None,
    workers: int | None = None,
) -> list[TestResult]:
    """One program on many tests (in parallel); the CLI and feedback loop use this."""
    job = Job(source, tests)
    return run_batch([job], checker=checker, limits=limits, config=config, workers=workers)[0]
