"""Sandbox overhead: an isolated run against a bare `python3` subprocess (the floor), same program.

    PYTHONPATH=. .venv/bin/python bench/sandbox.py [--runs 40] [--repeats 7] [--batch 200] [--flags "-I"]

Latency: each repeat times `runs` sequential runs of the floor, of the persistent sandbox (the default
mode) and of a bubblewrap per test, one block after the other, so all three see the same load; we report
the median over repeats of each block's mean, and the median of the per-repeat ratios. Throughput runs
`batch` tests on all cores (threads, like the pool) for the floor and for `run_batch`. The goal is an
isolated run within 1.5x the floor. `--flags` changes the interpreter flags of the floor and the sandbox
alike (the sandbox never runs a cheaper interpreter than the floor).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from swerl.sandbox import Job, Limits, SandboxConfig, TestCase, run_batch
from swerl.sandbox.persistent import shutdown
from swerl.sandbox.runner import execute_file, staged_program

PROGRAM = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
STDIN = "1 2 3 4 5\n"


def _bare(python: str, args: tuple[str, ...], program: str) -> None:
    subprocess.run([python, *args, program], input=STDIN.encode(), capture_output=True, check=True)


def _block_ms(run_once: Callable[[], None], runs: int) -> float:
    """Mean milliseconds per run over `runs` sequential runs."""
    start = time.perf_counter()
    for _ in range(runs):
        run_once()
    return (time.perf_counter() - start) / runs * 1000


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
    parser.add_argument("--repeats", type=int, default=7, help="samples; medians are reported")
    parser.add_argument("--batch", type=int, default=200, help="tests per throughput sample")
    parser.add_argument("--flags", default="-I", help="interpreter flags, floor and sandbox alike")
    args = parser.parse_args()
    config = SandboxConfig(python_args=tuple(args.flags.split()))
    per_test = replace(config, persistent=False)
    python, flags = config.interpreter(), config.python_args
    limits = Limits()
    workers = os.cpu_count() or 1

    floor, isolated, fresh, ratios = [], [], [], []
    with staged_program(PROGRAM) as program:
        _bare(python, flags, str(program))
        execute_file(program, STDIN, limits, config)  # starts the persistent sandbox, warms caches
        execute_file(program, STDIN, limits, per_test)
        for _ in range(args.repeats):
            floor.append(_block_ms(lambda: _bare(python, flags, str(program)), args.runs))
            isolated.append(_block_ms(lambda: execute_file(program, STDIN, limits, config), args.runs))
            fresh.append(_block_ms(lambda: execute_file(program, STDIN, limits, per_test), args.runs))
            ratios.append(isolated[-1] / floor[-1])

        def bare_batch() -> None:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda _: _bare(python, flags, str(program)), range(args.batch)))

        floor_tput = _throughput(bare_batch, args.batch, args.repeats)
    jobs = [Job(PROGRAM, [TestCase(STDIN, "15")] * 10) for _ in range(args.batch // 10)]
    run_batch(jobs[:1], limits=limits, config=config, workers=workers)  # start every worker's sandbox
    isolated_tput = _throughput(
        lambda: run_batch(jobs, limits=limits, config=config, workers=workers), args.batch, args.repeats
    )
    shutdown()

    floor_ms, isolated_ms, fresh_ms = (statistics.median(x) for x in (floor, isolated, fresh))
    ratio = statistics.median(ratios)
    print(
        f"interpreter          {python} {' '.join(flags)}   cores {workers}   uid switch {os.geteuid() == 0}"
    )
    print(f"floor (bare)         {floor_ms:7.2f} ms/test   {floor_tput:7.1f} tests/s on {workers} cores")
    print(
        f"isolated (zygote)    {isolated_ms:7.2f} ms/test   {isolated_tput:7.1f} tests/s on {workers} cores"
    )
    print(f"isolated (per test)  {fresh_ms:7.2f} ms/test   (a new bubblewrap per test, for reference)")
    print(f"samples (ms)         floor {[round(x, 1) for x in floor]}")
    print(f"                     zygote {[round(x, 1) for x in isolated]}")
    cost = floor_tput / isolated_tput
    print(
        f"ratio                {isolated_ms / floor_ms:7.2f} x latency (median of per-repeat ratios "
        f"{ratio:.2f})   {cost:.2f} x throughput cost   per-test bwrap {fresh_ms / floor_ms:.2f} x"
    )
    print(f"goal                 <= 1.50 x latency: {'met' if ratio <= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
