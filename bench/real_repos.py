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
baseline, so the machine's load affects both. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data_pipeline.gitstore import git_argv, safe_env  # noqa: E402


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


def floor_seconds(git_dir: Path) -> float:
    """Wall time of `git log -p --first-parent` over the history (the least any miner must read)."""
    started = time.perf_counter()
    subprocess.run(
        git_argv(git_dir, "log", "-p", "--first-parent", "HEAD"), stdout=subprocess.DEVNULL, check=True
    )
    return time.perf_counter() - started


def mine_one(name: str, path: Path, out: Path, clones: Path, extra: list[str]) -> dict:
    target = out / name.replace("/", "__")
    cmd = [sys.executable, "-m", "swerl.cli.data", "mine", "--local", str(path), "--repo-name", name]
    cmd += ["--out", str(target), "--clones", str(clones), "--quiet", *extra]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: {done.stderr.strip()}")
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="+", metavar="OWNER/NAME=PATH")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check", type=int, default=0, help="rows per repository to check the oracle of")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--floor", action="store_true", help="also time git log -p --first-parent (see above)"
    )
    args, extra = parser.parse_known_args(argv)
    clones = args.out / "clones"
    results = []
    for spec in args.repos:
        name, _, path = spec.partition("=")
        floor = None
        if args.floor:
            mine_one(name, Path(path), args.out / "warm-up", clones, extra)
            floor = floor_seconds(_git_dir(Path(path)))
        result = mine_one(name, Path(path), args.out, clones, extra)
        result["floor"] = floor
        if args.check:
            git_dir = _git_dir(Path(path))
            sample = random.Random(args.seed).sample(result["rows"], min(args.check, len(result["rows"])))
            result["checked"] = (sum(oracle_reproduces(git_dir, row) for row in sample), len(sample))
        results.append(result)
        print(f"{name}: {len(result['rows'])} rows in {result['seconds']:.1f} s", file=sys.stderr)
    reasons = [r for r, _ in sum((res["drops"] for res in results), Counter()).most_common(6)]
    head = ["repository", "first-parent commits", "candidates", "rows", *reasons, "other drops", "wall s"]
    if args.floor:
        head += ["git log -p s", "ratio"]
    if args.check:
        head.append("oracle reproduces merge")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for res in results:
        other = sum(n for r, n in res["drops"].items() if r not in reasons)
        cells = [res["name"], res["commits"], res["candidates"], len(res["rows"])]
        cells += [res["drops"].get(r, 0) for r in reasons] + [other, f"{res['seconds']:.1f}"]
        if args.floor:
            cells += [f"{res['floor']:.1f}", f"{res['seconds'] / res['floor']:.1f}x"]
        if args.check:
            ok, n = res["checked"]
            cells.append(f"{ok}/{n}")
        print("| " + " | ".join(str(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
