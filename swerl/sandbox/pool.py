"""Many programs x many tests, in parallel: the batch API the RLEF trainer and the evaluators call.

Workers are threads: each one only spawns a sandbox and waits on its pipes, so the GIL is not the
bottleneck and nothing needs pickling. Each thread holds a slot (0..workers-1) for the duration of a run,
and a slot maps to its own uid (bwrap.slot_uid), which is what makes RLIMIT_NPROC per-program.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from swerl.sandbox.bwrap import SLOTS_PER_PROCESS, SandboxConfig, resolve_bwrap
from swerl.sandbox.limits import Limits
from swerl.sandbox.runner import execute_file, staged_program
from swerl.sandbox.verdict import TestResult, Verdict, failure_verdict, to_result

Checker = Callable[[str, str], bool]
"""checker(expected, actual) -> whether the actual output is accepted."""


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


def _judge(test: TestCase, program: Path, limits: Limits, config: SandboxConfig, slot: int, check: Checker):
    run = execute_file(program, test.input, limits, config, slot)
    verdict = failure_verdict(run, limits)
    if verdict is None:
        accepted = test.output is None or check(test.output, run.stdout)
        verdict = Verdict.PASSED if accepted else Verdict.WRONG_ANSWER
    return to_result(run, verdict, limits)


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
    if any(job.source is not None and job.tests for job in jobs):
        resolve_bwrap(config)  # refuse (or warn) once, before any thread starts
    workers = min(workers or default_workers(), SLOTS_PER_PROCESS)
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(workers):
        slots.put(slot)
    results: list[list[TestResult | None]] = [[None] * len(job.tests) for job in jobs]

    with ExitStack() as stack, ThreadPoolExecutor(max_workers=workers) as executor:
        futures = {}
        for i, job in enumerate(jobs):
            if job.source is None:
                results[i] = [TestResult(Verdict.NO_CODE) for _ in job.tests]
                continue
            if not job.tests:
                continue
            program = stack.enter_context(staged_program(job.source))
            job_limits = job.limits or base_limits
            for j, test in enumerate(job.tests):

                def task(test: TestCase = test, program: Path = program, job_limits: Limits = job_limits):
                    slot = slots.get()
                    try:
                        return _judge(test, program, job_limits, config, slot, checker)
                    finally:
                        slots.put(slot)

                futures[(i, j)] = executor.submit(task)
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
