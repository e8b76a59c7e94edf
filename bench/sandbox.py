"""Sandbox overhead: an isolated run against a bare `python3` subprocess (the floor), same program.

    .venv/bin/python bench/sandbox.py [--runs 40] [--repeats 5] [--batch 200]

Per-test latency is the median over repeats of the mean wall time of `runs` sequential runs; throughput
runs `batch` tests on all cores (threads, like the pool) for both. Prints the ratios; the goal is an
isolated run within 1.5x the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from swerl.sandbox import Job, Limits, SandboxConfig, TestCase, run_batch
from swerl.sandbox.runner import execute_file, staged_program

PROGRAM = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
STDIN = "1 2 3 4 5\n"


def _bare(python: str, args: tuple[str, ...], program: str) -> None:
    subprocess.run([python, *args, program], input=STDIN.encode(), capture_output=True, check=True)


def _latency_ms(run_once: Callable[[], None], runs: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(runs):
            run_once()
        samples.append((time.perf_counter() - start) / runs * 1000)
    return statistics.median(samples)


def _throughput(run_many: Callable[[], None], batch: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_many()
        samples.append(batch / (time.perf_counter() - start))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=40, help="sequential runs per latency sample")
    parser.add_argument("--repeats", type=int, default=5, help="samples; the median is reported")
    parser.add_argument("--batch", type=int, default=200, help="tests per throughput sample")
    args = parser.parse_args()
    config = SandboxConfig()
    python, flags = config.interpreter(), config.python_args
    limits = Limits()
    workers = os.cpu_count() or 1

    with staged_program(PROGRAM) as program:
        _bare(python, flags, str(program))
        execute_file(program, STDIN, limits, config)  # warm caches and the bwrap probe
        floor = _latency_ms(lambda: _bare(python, flags, str(program)), args.runs, args.repeats)
        isolated = _latency_ms(lambda: execute_file(program, STDIN, limits, config), args.runs, args.repeats)

        def bare_batch() -> None:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda _: _bare(python, flags, str(program)), range(args.batch)))

        floor_tput = _throughput(bare_batch, args.batch, args.repeats)
    jobs = [Job(PROGRAM, [TestCase(STDIN, "15")] * 10) for _ in range(args.batch // 10)]
    isolated_tput = _throughput(
        lambda: run_batch(jobs, limits=limits, workers=workers), args.batch, args.repeats
    )

    print(f"interpreter        {python} {' '.join(flags)}   cores {workers}   uid switch {os.geteuid() == 0}")
    print(f"floor (bare)       {floor:7.2f} ms/test   {floor_tput:7.1f} tests/s on {workers} cores")
    print(f"isolated (bwrap)   {isolated:7.2f} ms/test   {isolated_tput:7.1f} tests/s on {workers} cores")
    cost = floor_tput / isolated_tput
    print(f"ratio              {isolated / floor:7.2f} x latency    {cost:7.2f} x throughput cost")
    print(f"goal               <= 1.50 x latency: {'met' if isolated / floor <= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
