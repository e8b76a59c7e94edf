"""Benchmark: `swerl data mine --local` against `git log -p` over the same history (the floor).

Generates a repository with thousands of PR commits (squash and merge, real stdlib source, see
`data_pipeline.synthetic`), times `git log -p` over it, then times a full `--local` mining run (collect,
filter, extract, dedup, context, render, Parquet) in a subprocess, and prints the ratio and the peak
memory of each. Goal (issue 3): at most 3x the floor.

    PYTHONPATH=. .venv/bin/python bench/mining.py            # 3,000 PRs, the figures in docs/data_pipeline.md
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from data_pipeline.gitstore import safe_env  # noqa: E402
from data_pipeline.synthetic import HistoryBuilder, random_fix  # noqa: E402

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
    parser.add_argument("--files", type=int, default=40, help="stdlib modules in the repository")
    parser.add_argument("--workers", type=int, default=None, help="mining processes (default: all cores)")
    args = parser.parse_args()
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
        print(f"generated {args.prs} PRs, {commits} commits in {time.perf_counter() - start:.1f} s")
        floor, floor_mem, floor_cpu = _timed(["git", "-C", str(root / "repo"), "log", "-p"])
        # Warm the clone cache so the measurement is mining, not `git clone` (one-time per repository).
        cache = root / "cache"
        subprocess.run(
            ["git", "clone", "-q", "--bare", str(root / "repo"), str(cache / "bench__repo.git")],
            check=True,
            env=safe_env(),
        )
        argv = [
            sys.executable,
            "-m",
            "swerl.cli.data",
            "mine",
            "--local",
            str(root / "repo"),
            "--repo-name",
            "bench/repo",
            "--clones",
            str(cache),
            "--out",
            str(root / "out"),
            "--quiet",
        ]
        if args.workers:
            argv += ["--workers", str(args.workers)]
        mined, mined_mem, mined_cpu = _timed(argv)
        rows = sum(
            __import__("pyarrow.parquet").parquet.read_metadata(p).num_rows
            for p in (root / "out" / "data").glob("shard-*.parquet")
        )
        print(f"git log -p (floor)   {floor:7.2f} s   cpu {floor_cpu:7.2f} s   peak {floor_mem:7.1f} MiB")
        print(
            f"swerl data mine      {mined:7.2f} s   cpu {mined_cpu:7.2f} s   peak {mined_mem:7.1f} MiB"
            f"   ({rows} rows)"
        )
        ratio_cpu = mined_cpu / floor_cpu
        print(f"ratio                {mined / floor:7.2f} x wall   {ratio_cpu:7.2f} x cpu   (goal <= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
