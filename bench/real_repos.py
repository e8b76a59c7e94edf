#!/usr/bin/env python3
"""`swerl data mine --local` on real clones: each run's funnel and wall time, and an oracle check.

    python bench/real_repos.py OWNER/NAME=PATH [OWNER/NAME=PATH ...] --out runs/real [--check 40]

Each clone (bare or not) is mined into OUT/<owner>__<name> with the default options (pass
`--no-decontaminate` for SWE-bench repositories, whose rows are otherwise all dropped). Then, for up to
`--check` random rows of each, the oracle patch is applied with `git apply --cached` to the row's base
commit read into a scratch index (no checkout: nothing of the repository runs) and every file the
oracle writes must then be byte for byte the file of the merge commit. With `--floor`, each repository
is mined once first (to fill the clone cache), then `git log -p --first-parent` over the same history
(output discarded) is timed right before the timed mining run, and the ratio is printed: a same-run
baseline, so the machine's load affects both. `--repeat N` alternates the two N times and reports
medians, with each command's peak RSS (its largest process) and CPU time. `--lengths 10000,20000`
mines the history up to its 10,000th and 20,000th first-parent commit too (floor and mining alike), to
show how time and memory grow with the history. Prints Markdown tables.

    python bench/real_repos.py ansible/ansible=PATH --out runs/speed --floor --repeat 3 \
        --lengths 10000,20000,30000 --workers 2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mining import _timed  # noqa: E402
from swerl.git import git_argv, safe_env  # noqa: E402


def _git(git_dir: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        git_argv(git_dir, *args), input=stdin, capture_output=True, env={**safe_env(), **(env or {})}
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode("utf-8", "replace").strip())
    return done.stdout


def oracle_reproduces(git_dir: Path, row: dict) -> bool:
    """The row's oracle patch applies to its base commit and yields the merge commit's files."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(git_dir, "read-tree", row["base_commit"], env=env)
        try:
            _git(git_dir, "apply", "--cached", "-", env=env, stdin=row["oracle_patch"].encode())
        except RuntimeError:
            return False
        for item in row["oracle_new_content"]:
            staged = _git(git_dir, "ls-files", "-s", "--", item["path"], env=env).split()
            merged = _git(git_dir, "rev-parse", f"{row['merge_commit']}:{item['path']}").strip()
            if len(staged) < 2 or staged[1] != merged:
                return False
    return True


def _git_dir(path: Path) -> Path:
    """The git directory of a clone: `.git` in a work tree, the directory itself when bare."""
    return path / ".git" if (path / ".git").exists() else path


def floor_argv(git_dir: Path, head: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """`git log -p --first-parent` over the history up to `head`: the least any miner must read. Paths in
    `exclude` are left out: a mirror may lack a large file's blob, which ends `git log -p` there (mining
    drops the PRs that touch it and goes on)."""
    paths = ("--", ".", *(f":(exclude){path}" for path in exclude)) if exclude else ()
    return git_argv(git_dir, "log", "-p", "--first-parent", head, *paths)


def mine_one(
    name: str, path: Path, out: Path, clones: Path, extra: list[str], ref: str = "HEAD"
) -> dict[str, Any]:
    """One `swerl data mine --local` run: its funnel, rows, wall and CPU seconds and peak RSS (MiB)."""
    target = out / name.replace("/", "__")
    cmd = [sys.executable, "-m", "swerl", "data", "mine", "--local", str(path), "--repo-name", name]
    cmd += ["--ref", ref, "--out", str(target), "--clones", str(clones), "--quiet", *extra]
    try:
        seconds, peak, cpu = _timed(cmd)
    except subprocess.CalledProcessError as err:
        raise SystemExit(f"{name}: mining failed ({err}); run the command by hand to see why") from None
    manifest = json.loads((target / "manifest.json").read_text())
    drops: Counter[str] = Counter()
    for stage in manifest["stages"].values():
        for info in stage["shards"].values():
            drops.update(info.get("drops", {}))
    collect = manifest["stages"]["collect"]
    rows = [r for f in sorted((target / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return {
        "name": name,
        "commits": collect.get("commits_scanned", 0),
        "candidates": sum(i["rows"] for i in collect["shards"].values()),
        "rows": rows,
        "drops": drops,
        "seconds": seconds,
        "peak": peak,
        "cpu": cpu,
    }


def history_points(git_dir: Path, lengths: list[int]) -> list[tuple[str, str]]:
    """(label, commit) of the history's `lengths`-th first-parent commits (those it has), then HEAD."""
    line = _git(git_dir, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    points = [(f"{n:,}", line[n - 1].decode()) for n in lengths if n < len(line)]
    return [*points, (f"{len(line):,}", "HEAD")]


def timed_point(
    name: str,
    path: Path,
    out: Path,
    clones: Path,
    extra: list[str],
    ref: str,
    repeat: int,
    warm_up: bool,
    exclude: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Mining up to `ref` and the floor over the same history, alternated `repeat` times (after one
    warm-up run that fills the clone cache and the page cache, if `warm_up`): the last run's funnel and
    the medians."""
    if warm_up:
        mine_one(name, path, out / "warm-up", clones, extra, ref)
    floors, mines = [], []
    for run in range(repeat):
        floors.append(_timed(floor_argv(_git_dir(path), ref, exclude)))
        result = mine_one(name, path, out / f"run-{run}", clones, extra, ref)
        mines.append((result["seconds"], result["peak"], result["cpu"]))
        print(
            f"{name} @ {ref[:12]} run {run + 1}: floor {floors[-1][0]:.1f} s, mining {mines[-1][0]:.1f} s",
            file=sys.stderr,
        )
    result["floor"], result["floor_peak"], result["floor_cpu"] = map(
        statistics.median, zip(*floors, strict=True)
    )
    result["seconds"], result["peak"], result["cpu"] = map(statistics.median, zip(*mines, strict=True))
    ratios = sorted(m[0] / f[0] for f, m in zip(floors, mines, strict=True))
    result["ratios"] = (ratios[0], ratios[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="+", metavar="OWNER/NAME=PATH")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check", type=int, default=0, help="rows per repository to check the oracle of")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--floor", action="store_true", help="also time git log -p --first-parent (see above)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="with --floor: alternated runs (medians)")
    parser.add_argument(
        "--lengths", default="", help="with --floor: also the first N first-parent commits, N comma-separated"
    )
    parser.add_argument(
        "--floor-exclude",
        action="append",
        default=[],
        metavar="PATH",
        help="with --floor: leave PATH out of git log -p (a blob the clone lacks; repeatable)",
    )
    args, extra = parser.parse_known_args(argv)
    lengths = [int(n) for n in args.lengths.split(",") if n]
    clones = args.out / "clones"
    results, speed = [], []
    for spec in args.repos:
        name, _, path = spec.partition("=")
        if args.floor:
            for at, (label, ref) in enumerate(history_points(_git_dir(Path(path)), lengths)):
                out = args.out / label
                point = timed_point(
                    name, Path(path), out, clones, extra, ref, args.repeat, at == 0, tuple(args.floor_exclude)
                )
                speed.append((label, point))
            result = point
        else:
            result = mine_one(name, Path(path), args.out, clones, extra)
        if args.check:
            git_dir = _git_dir(Path(path))
            sample = random.Random(args.seed).sample(result["rows"], min(args.check, len(result["rows"])))
            result["checked"] = (sum(oracle_reproduces(git_dir, row) for row in sample), len(sample))
        results.append(result)
        print(f"{name}: {len(result['rows'])} rows in {result['seconds']:.1f} s", file=sys.stderr)
    _funnel_table(results, args.check)
    if speed:
        _speed_table(speed, args.repeat)
    return 0


def _funnel_table(results: list[dict[str, Any]], check: int) -> None:
    reasons = [r for r, _ in sum((res["drops"] for res in results), Counter()).most_common(6)]
    head = ["repository", "first-parent commits", "candidates", "rows", *reasons, "other drops", "wall s"]
    if check:
        head.append("oracle reproduces merge")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for res in results:
        other = sum(n for r, n in res["drops"].items() if r not in reasons)
        cells = [res["name"], res["commits"], res["candidates"], len(res["rows"])]
        cells += [res["drops"].get(r, 0) for r in reasons] + [other, f"{res['seconds']:.1f}"]
        if check:
            ok, n = res["checked"]
            cells.append(f"{ok}/{n}")
        print("| " + " | ".join(str(c) for c in cells) + " |")


def _speed_table(speed: list[tuple[str, dict[str, Any]]], repeat: int) -> None:
    print(f"\nMedians of {repeat} alternated runs (CPU: every process of the command, git included):\n")
    head = ["repository", "first-parent commits", "candidates", "rows", "git log -p s", "mining s", "ratio"]
    head += ["per run", "git log -p CPU s", "mining CPU s", "CPU ratio", "peak RSS git log -p MiB"]
    head.append("peak RSS mining MiB")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label, res in speed:
        low, high = res["ratios"]
        cells = [res["name"], label, res["candidates"], len(res["rows"]), f"{res['floor']:.1f}"]
        cells += [f"{res['seconds']:.1f}", f"{res['seconds'] / res['floor']:.2f}x", f"{low:.2f}-{high:.2f}x"]
        cells += [f"{res['floor_cpu']:.1f}", f"{res['cpu']:.1f}", f"{res['cpu'] / res['floor_cpu']:.1f}x"]
        cells += [f"{res['floor_peak']:.0f}", f"{res['peak']:.0f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
