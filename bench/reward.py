"""Benchmark: the SWE-RL reward, compiled engine vs pure difflib, on realistic answers.

Part 1 builds a real git repository with a history of fix-like commits over real Python source
(`swerl.synth_repo`), turns each commit into an instance (old contents -> developers' new contents) and
a GRPO-like group of answers (exact, near misses, over-edits, wrong fixes, malformed), then scores every
answer with the pure-difflib reference and with swerl's reward in the same run. It prints the speed ratio
(median of repeats, one core) and the mismatch count, which must be 0 (values compared bit for bit).
It also times the paper's own setup (difflib diffs + cydifflib ratio) when cydifflib is installed, group
scoring with the oracle diff computed once, and the multi-core batch throughput.

With `--repo CLONE` the instances are real commits instead: the first-parent commits of a real git
history that change one to three existing `.py` files (old and new contents read with `git show`), with
the same 8 answers each. Part 1b then times the reward through the command a user runs, `swerl reward
score --workers 1` on a JSONL file of those cases, against the same pure-difflib loop; the JSON reading
and writing the command must do is timed alone in the same run and reported apart, so the ratio "beyond
JSON I/O" compares the scoring the command adds to it (its start-up included).

Part 2 times the worst case, single pairs of large unified diffs (1-20 KB each): see bench/matcher.py,
which this script runs at the end unless --no-worst-case.

    python bench/reward.py [--instances 40] [--repeats 3] [--seed 0] [--repo CLONE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swerl import fastdiff
from swerl.edit_format import canonical_answer
from swerl.reward import normalized_diffs, similarity_reward
from swerl.reward.batch import default_workers, score_rows
from swerl.reward.reference import DIFFLIB, difflib_diff_body
from swerl.reward.similarity import FAST, DiffEngine, RewardResult
from swerl.synth_repo import Commit, build_history, mutate_lines, stdlib_sources

Case = tuple[str, dict[str, str], dict[str, str]]  # (answer, code_context, oracle_new_content)


def _mutated(contents: dict[str, str], rng: random.Random, edits: int) -> dict[str, str]:
    return {p: "".join(mutate_lines(t.splitlines(keepends=True), rng, edits)) for p, t in contents.items()}


def answers_for(commit: Commit, rng: random.Random) -> list[str]:
    """A GRPO-like group of 8 answers of varying quality for one instance."""
    old, new = commit.old, commit.new
    exact = canonical_answer(old, new)
    first = sorted(new)[0]
    group = [
        exact,
        canonical_answer(old, _mutated(new, rng, 1)),  # near miss
        canonical_answer(old, _mutated(new, rng, 3)),  # over-edit
        canonical_answer(old, {first: new[first]}) if new[first] != old[first] else exact,  # one file only
        canonical_answer(old, _mutated(old, rng, 2)),  # a wrong fix elsewhere
        canonical_answer(old, _mutated(old, rng, 5)),
        exact.replace("</think>", "", 1),  # malformed: tag
        exact.replace("<<<<<<< SEARCH\n", "<<<<<<< SEARCH\n#", 1),  # malformed: search not found
    ]
    return group


def build_cases(instances: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        history = build_history(Path(tmp) / "repo", stdlib_sources(24, rng), instances, rng)
    cases = []
    for commit in history:
        if all(commit.old[p] == commit.new[p] for p in commit.new):
            continue
        cases += [(answer, commit.old, commit.new) for answer in answers_for(commit, rng)]
    return cases


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)
    return done.stdout.decode("utf-8", errors="surrogateescape")


def real_cases(repo: Path, instances: int, seed: int, max_bytes: int = 60_000) -> list[Case]:
    """8 answers to each of the newest `instances` first-parent commits of a real history that modify
    1-3 existing `.py` files of at most `max_bytes` each (changes no SEARCH/REPLACE answer can express,
    like a file made empty, are passed over)."""
    rng = random.Random(seed)
    cases: list[Case] = []
    found = 0
    for line in _git(repo, "log", "--first-parent", "--no-merges", "--format=%H %P").splitlines():
        sha, *parents = line.split()
        if found >= instances or not parents:
            break
        changes = _git(repo, "diff-tree", "--no-commit-id", "-r", "--name-status", parents[0], sha)
        rows = [r.split("\t") for r in changes.splitlines()]
        paths = [r[1] for r in rows if r[0] == "M" and r[1].endswith(".py")]
        if not 1 <= len(paths) <= 3 or len(paths) != len(rows):
            continue
        old = {p: _git(repo, "show", f"{parents[0]}:{p}") for p in paths}
        new = {p: _git(repo, "show", f"{sha}:{p}") for p in paths}
        if any(len(t) > max_bytes for t in (*old.values(), *new.values())):
            continue
        try:
            answers = answers_for(Commit(sha, "", old, new), rng)
        except ValueError:
            continue
        cases += [(answer, old, new) for answer in answers]
        found += 1
    return cases


def time_command(cases: list[Case], repeats: int) -> tuple[float, float, list[float | None]]:
    """Median wall time of `swerl reward score --workers 1` over the cases written as JSONL, the median
    time of the JSON reading and writing alone, and the command's rewards."""
    rows = [{"output": a, "code_context": c, "oracle_new_content": o} for a, c, o in cases]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        command = [sys.executable, "-m", "swerl", "reward", "score", "--quiet", "--workers", "1"]
        walls, io = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run(
                [*command, "--input", str(src), "--output", str(dst)], check=True, capture_output=True
            )
            walls.append(time.perf_counter() - start)
            start = time.perf_counter()
            with src.open(encoding="utf-8") as f, (Path(tmp) / "io.jsonl").open("w", encoding="utf-8") as out:
                for line in f:
                    row = json.loads(line)
                    row["reward"], row["reward_info"] = 0.5, {"similarities": {}}
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
            io.append(time.perf_counter() - start)
        with dst.open(encoding="utf-8") as f:
            rewards = [json.loads(line)["reward"] for line in f]
    return statistics.median(walls), statistics.median(io), rewards


def time_engine(cases: list[Case], engine: DiffEngine, repeats: int) -> tuple[float, list[RewardResult]]:
    timings, results = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results = [similarity_reward(a, ctx, oracle, engine=engine) for a, ctx, oracle in cases]
        timings.append(time.perf_counter() - start)
    return statistics.median(timings), results


def time_grouped(cases: list[Case], repeats: int) -> float:
    """The trainer's way: one oracle diff per instance, shared by the answers of its group."""
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        cache: dict[int, dict[str, str]] = {}
        for answer, ctx, oracle in cases:
            diffs = cache.get(id(oracle))
            if diffs is None:
                diffs = cache[id(oracle)] = normalized_diffs(ctx, oracle)
            similarity_reward(answer, ctx, oracle, oracle_diffs=diffs)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def time_batch(cases: list[Case], workers: int, rows_wanted: int = 8000) -> float:
    """Answers per second through `score_rows`, pool start-up included (large enough to amortise it)."""
    rows = [{"output": a, "code_context": c, "oracle_new_content": o} for a, c, o in cases]
    rows *= max(1, rows_wanted // len(rows))
    start = time.perf_counter()
    for _ in score_rows(rows, workers=workers):
        pass
    return len(rows) / (time.perf_counter() - start)


def _cydifflib_engine() -> DiffEngine | None:
    try:
        import cydifflib
    except ImportError:
        return None

    def ratio(a: str, b: str) -> float:
        return cydifflib.SequenceMatcher(None, a, b, autojunk=False).ratio()

    return DiffEngine(diff_body=difflib_diff_body, ratio=ratio)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", type=int, default=40, help="commits in the generated history")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (the median is reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-worst-case", action="store_true", help="skip part 2 (bench/matcher.py)")
    parser.add_argument(
        "--repo",
        type=Path,
        default=None,
        help="a real git clone: its commits are the instances (and part 1b)",
    )
    args = parser.parse_args()
    if not fastdiff.HAVE_EXTENSION:
        print("warning: the compiled matcher is not built; timings are of the difflib fallback")

    if args.repo:
        cases = real_cases(args.repo, args.instances, args.seed)
        source = f"real commits of {args.repo.resolve().name}"
    else:
        cases = build_cases(args.instances, args.seed)
        source = "a generated git history"
    diff_chars = [len(d) for _, c, o in cases[::8] for d in normalized_diffs(c, o).values()]
    print(
        f"part 1: {len(cases)} answers to {len(cases) // 8} instances from {source}; "
        f"oracle diff median {statistics.median(diff_chars):.0f} chars, max {max(diff_chars)}"
    )

    ref_s, ref = time_engine(cases, DIFFLIB, args.repeats)
    fast_s, fast = time_engine(cases, FAST, args.repeats)
    mismatches = sum(a != b for a, b in zip(ref, fast, strict=True))
    errors = sum(r.error is not None for r in fast)
    print(f"  pure difflib reference : {1e3 * ref_s / len(cases):8.3f} ms/answer")
    cy = _cydifflib_engine()
    if cy is not None:
        cy_s, cy_res = time_engine(cases, cy, args.repeats)
        mismatches += sum(a != b for a, b in zip(ref, cy_res, strict=True))
        print(f"  paper setup (cydifflib): {1e3 * cy_s / len(cases):8.3f} ms/answer   x{ref_s / cy_s:6.1f}")
    print(f"  swerl, one core        : {1e3 * fast_s / len(cases):8.3f} ms/answer   x{ref_s / fast_s:6.1f}")
    grouped_s = time_grouped(cases, args.repeats)
    print(
        f"  swerl, grouped oracle  : {1e3 * grouped_s / len(cases):8.3f} ms/answer"
        f"   x{ref_s / grouped_s:6.1f}"
    )
    workers = default_workers()
    one, many = time_batch(cases, 1), time_batch(cases, workers)
    print(f"  batch: {one:.0f} answers/s on 1 core, {many:.0f} on {workers} (x{many / one:.2f})")
    print(f"  malformed answers: {errors}; mismatches vs difflib: {mismatches}")
    if args.repo:
        wall, io, rewards = time_command(cases, args.repeats)
        mismatches += sum(r != ref_r.reward for r, ref_r in zip(rewards, ref, strict=True))
        print(
            f"part 1b: `swerl reward score --workers 1` on the {len(cases)} answers: {wall:.2f} s "
            f"(pure difflib {ref_s:.2f} s: x{ref_s / wall:.1f}); JSON I/O alone {io:.2f} s, so beyond it "
            f"x{ref_s / max(wall - io, 1e-9):.1f}; rewards equal to difflib's: {mismatches == 0}"
        )
    status = 0 if mismatches == 0 else 1
    if not args.no_worst_case:
        print("part 2: worst case (bench/matcher.py)", flush=True)
        status |= subprocess.call([sys.executable, str(Path(__file__).with_name("matcher.py"))])
    return status


if __name__ == "__main__":
    sys.exit(main())
