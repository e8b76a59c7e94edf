"""Benchmark: `swerl data mine --local` against `git log -p` over the same history (the floor).

Generates a repository with thousands of PR commits (squash and merge, real stdlib source, see
`data_pipeline.synthetic`), times `git log -p` over it, then times a full `--local` mining run (collect,
filter, extract, dedup, context, render, Parquet) in a subprocess, and prints the ratio and the peak
memory of each, as medians of `--repeat` alternated runs, and where mining's CPU went (the workers'
extract and render, from the manifest, and the rest). Goal: at most 3x the floor.

    PYTHONPATH=. .venv/bin/python bench/mining.py                 # 3,000 PRs, 40 modules: docs/benchmarks.md
    PYTHONPATH=. .venv/bin/python bench/mining.py --files 1000    # pools of ~1,000 files per PR
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

import pyarrow.parquet as pq  # noqa: E402

from data_pipeline.report.stats import funnel  # noqa: E402
from data_pipeline.synthetic import HistoryBuilder, random_fix  # noqa: E402
from swerl.git import safe_env  # noqa: E402

# The parent becomes a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER = 36) and waits for every
# descendant: a process the command leaves behind (a pool worker's `git cat-file` or `git diff-tree`
# reader, which exits on its own when the worker's end of the pipe closes) is reparented to it, and only
# a waited-for process counts in RUSAGE_CHILDREN. Without that, the CPU of those git readers is missing.
_PEAK = (
    "import ctypes, os, resource, subprocess, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        break\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(u.ru_maxrss, u.ru_utime + u.ru_stime)"
)


def _timed(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MiB, the largest process of the command's tree) and CPU seconds (user +
    system, every process of the tree) of one command.

    Each command runs under its own small parent, so one command's peak cannot mask the other's, and
    that parent waits for the processes the command orphans too (see `_PEAK`). CPU time is printed too
    because wall time on a shared machine swings with other load.
    """
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, *argv],
        check=True,
        capture_output=True,
        text=True,
        env=safe_env(),
        cwd=ROOT,
    )
    peak, cpu = proc.stdout.split()
    return time.perf_counter() - start, int(peak) / 1024, float(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prs", type=int, default=3000, help="PRs to generate (merges add branch commits)")
    parser.add_argument(
        "--files",
        type=int,
        default=40,
        help="Python modules in the repository (stdlib modules; past the ~80 of the right size, copies in "
        "subpackages)",
    )
    parser.add_argument("--workers", type=int, default=None, help="mining processes (default: all cores)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each, alternated; medians are reported (default 3)"
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    with tempfile.TemporaryDirectory(prefix="swerl-bench-mining-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        builder = HistoryBuilder(seed=0, files=args.files)
        for _ in range(args.prs):
            random_fix(builder)
        builder.write(root / "repo")
        commits = subprocess.run(
            ["git", "-C", str(root / "repo"), "rev-list", "--count", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(
            f"generated {args.prs} PRs, {commits} commits over {len(builder.source_paths())} modules "
            f"in {time.perf_counter() - start:.1f} s"
        )
        # Warm the clone cache so the measurement is mining, not `git clone` (one-time per repository).
        cache = root / "cache"
        subprocess.run(
            ["git", "clone", "-q", "--bare", str(root / "repo"), str(cache / "bench__repo.git")],
            check=True,
            env=safe_env(),
        )
        floors, mines = [], []
        stages: list[dict[str, float]] = []  # worker CPU per stage of each mining run (its manifest)
        for run in range(args.repeat):
            # Alternated, so that a change in the machine's load touches both sides alike.
            floors.append(_timed(["git", "-C", str(root / "repo"), "log", "-p"]))
            out = root / f"out-{run}"
            mines.append(_timed(_mine_argv(root, cache, out, args.workers)))
            rows = sum(pq.read_metadata(p).num_rows for p in (out / "data").glob("shard-*.parquet"))
            stages.append(funnel(out).cpu)
            print(
                f"run {run + 1}: floor {floors[-1][0]:.2f} s, mining {mines[-1][0]:.2f} s "
                f"({mines[-1][0] / floors[-1][0]:.2f}x wall), {rows} rows"
            )
        floor, floor_mem, floor_cpu = (statistics.median(values) for values in zip(*floors, strict=True))
        mined, mined_mem, mined_cpu = (statistics.median(values) for values in zip(*mines, strict=True))
        ratios = sorted(m[0] / f[0] for f, m in zip(floors, mines, strict=True))
        print(f"medians of {args.repeat} runs:")
        print(f"git log -p (floor)   {floor:7.2f} s   cpu {floor_cpu:7.2f} s   peak {floor_mem:7.1f} MiB")
        print(f"swerl data mine      {mined:7.2f} s   cpu {mined_cpu:7.2f} s   peak {mined_mem:7.1f} MiB")
        print(
            f"ratio                {mined / floor:7.2f} x wall   {mined_cpu / floor_cpu:7.2f} x cpu   "
            f"(per run {ratios[0]:.2f}-{ratios[-1]:.2f}x wall; goal <= 3x)"
        )
        # Where mining's CPU went: the workers' own time per stage, as the manifest records it, and the
        # rest (the driver's listing, dedup and bookkeeping, every git process, process start-up).
        extract, render = (
            statistics.median(run.get(stage, 0.0) for run in stages) for stage in ("extract", "render")
        )
        print(
            f"mining cpu: workers extract {extract:.2f} s, render {render:.2f} s; "
            f"driver, git and the rest {mined_cpu - extract - render:.2f} s"
        )
    return 0


def _mine_argv(root: Path, cache: Path, out: Path, workers: int | None) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "swerl",
        "data",
        "mine",
        "--local",
        str(root / "repo"),
        "--repo-name",
        "bench/repo",
        "--clones",
        str(cache),
        "--out",
        str(out),
        "--quiet",
    ]
    return [*argv, "--workers", str(workers)] if workers else argv


if __name__ == "__main__":
    sys.exit(main())
