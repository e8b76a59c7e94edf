"""Benchmark of `swerl.fastdiff` against difflib (and cydifflib when installed).

Why: the SWE-RL similarity reward runs `SequenceMatcher(...).ratio()` on unified diffs ~10^4 times per
training step, so the compiled matcher must be both exact and fast.  This script builds realistic diff
pairs from the Python standard library sources (the same kind of text the reward sees: unified diff
bodies of edited Python files), times each implementation, and checks every computed value for exact
equality.  The printed mismatch count must be 0.

Sections:
  small   pairs of diff bodies of 1-3 KB each (a typical model answer vs the oracle patch);
  large   pairs of 1-20 KB each, the worst case; difflib is timed on a few of them only (it can take
          minutes), fastdiff on all, and all fastdiff values are checked against difflib unless
          --no-check-large;
  lines   line-level `matching_blocks` (difflib's autojunk rules) on files of 100-3000 lines.

Run: `python bench/matcher.py` (about 1-2 minutes; `--quick` for a smoke run).
"""

from __future__ import annotations

import argparse
import difflib
import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

from swerl import fastdiff

try:
    import cydifflib
except ImportError:  # optional comparison only
    cydifflib = None

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def load_sources(min_lines: int = 120) -> list[list[str]]:
    """Python files of the standard library, as line lists, in a fixed order (reproducible pairs)."""
    files = []
    for path in sorted(STDLIB.glob("*.py")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if len(lines) >= min_lines:
            files.append(lines)
    return files


def mutate(lines: list[str], rng: random.Random, edits: int) -> list[str]:
    """A plausible code edit: replaced, deleted and inserted lines at random places."""
    out = list(lines)
    for _ in range(edits):
        if not out:
            break
        pos = rng.randrange(len(out))
        kind = rng.random()
        if kind < 0.4:
            line = out[pos]
            words = line.split(" ")
            k = rng.randrange(len(words))
            words[k] = rng.choice(["value", "result", "self._cache", "None", "0", "x + 1", "len(items)"])
            out[pos] = " ".join(words)
        elif kind < 0.65:
            del out[pos : pos + rng.randint(1, 6)]
        else:
            indent = out[pos][: len(out[pos]) - len(out[pos].lstrip())]
            new = [
                indent + rng.choice(["if value is None:", "return result", "try:", "raise ValueError(msg)"])
                for _ in range(rng.randint(1, 4))
            ]
            out[pos:pos] = new
    return out


def diff_body(old: list[str], new: list[str]) -> str:
    """The text the reward compares (unified diff body, 3 lines of context), built with difflib."""
    return "\n".join(list(difflib.unified_diff(old, new, "old", "new", lineterm="", n=3))[2:])


def make_pairs(
    files: list[list[str]], rng: random.Random, count: int, lo: int, hi: int
) -> list[tuple[str, str]]:
    """Pairs (predicted diff, oracle diff) whose two sides are both lo..hi characters long.

    Half of the pairs edit the same file with partly shared edits (a partly right answer), the other
    half are diffs of unrelated files (a wrong answer) -- the latter are the slow ones for difflib.
    """
    pairs: list[tuple[str, str]] = []
    attempts = 0
    while len(pairs) < count and attempts < 200 * count:
        attempts += 1
        src = rng.choice(files)
        edits = rng.randint(2, max(3, hi // 400))
        start = rng.randrange(max(1, len(src) - 400))
        window = src[start : start + rng.randint(150, 1500)]
        oracle_new = mutate(window, rng, edits)
        oracle = diff_body(window, oracle_new)
        if rng.random() < 0.5:
            pred_new = mutate(oracle_new if rng.random() < 0.5 else window, rng, max(1, edits // 2))
            pred = diff_body(window, pred_new)
        else:
            other = rng.choice(files)
            ostart = rng.randrange(max(1, len(other) - 400))
            owin = other[ostart : ostart + rng.randint(150, 1500)]
            pred = diff_body(owin, mutate(owin, rng, edits))
        if lo <= len(oracle) <= hi and lo <= len(pred) <= hi:
            pairs.append((pred, oracle))
    return pairs


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median wall time of `repeats` calls, and the last result."""
    times = []
    result: object = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def difflib_ratio(a: str, b: str) -> float:
    """The reference computation."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def cy_ratio(a: str, b: str) -> float:
    """The compiled third-party port, for comparison."""
    return cydifflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def bench_small(pairs: list[tuple[str, str]], repeats: int) -> int:
    """Typical pairs: per-pair median times, speedups summarised by their median."""
    mismatches = 0
    vs_difflib, vs_cy, t_fast_all = [], [], []
    for a, b in pairs:
        t_ref, ref = timed(lambda a=a, b=b: difflib_ratio(a, b), 1)
        t_fast, got = timed(lambda a=a, b=b: fastdiff.ratio(a, b), repeats)
        mismatches += got != ref
        vs_difflib.append(t_ref / t_fast)
        t_fast_all.append(t_fast)
        if cydifflib is not None:
            t_cy, _ = timed(lambda a=a, b=b: cy_ratio(a, b), max(1, repeats // 4))
            vs_cy.append(t_cy / t_fast)
    print(f"small pairs (1-3 KB each): n={len(pairs)}")
    print(f"  fastdiff median {statistics.median(t_fast_all) * 1e6:.0f} us/pair")
    print(f"  speedup vs difflib: median {statistics.median(vs_difflib):.0f}x, min {min(vs_difflib):.0f}x")
    if vs_cy:
        print(f"  speedup vs cydifflib: median {statistics.median(vs_cy):.1f}x, min {min(vs_cy):.1f}x")
    return mismatches


def bench_large(pairs: list[tuple[str, str]], repeats: int, check: bool, difflib_timed: int) -> int:
    """Worst case: the maximum time per pair is what matters for a training step's tail latency."""
    mismatches = 0
    fast_times = []
    ref_times = []
    for n, (a, b) in enumerate(pairs):
        t_fast, got = timed(lambda a=a, b=b: fastdiff.ratio(a, b), repeats)
        fast_times.append(t_fast)
        if check or n < difflib_timed:
            t0 = time.perf_counter()
            ref = difflib_ratio(a, b)
            if n < difflib_timed:
                ref_times.append(time.perf_counter() - t0)
            mismatches += got != ref
    sizes = [len(a) + len(b) for a, b in pairs]
    print(f"large pairs (1-20 KB each): n={len(pairs)}, total chars/pair median {statistics.median(sizes)}")
    print(
        f"  fastdiff per pair: median {statistics.median(fast_times) * 1e3:.2f} ms, "
        f"max {max(fast_times) * 1e3:.2f} ms"
    )
    if ref_times:
        print(
            f"  difflib on the first {len(ref_times)}: median {statistics.median(ref_times):.2f} s, "
            f"max {max(ref_times):.2f} s"
        )
    return mismatches


def bench_lines(files: list[list[str]], rng: random.Random, count: int, repeats: int) -> int:
    """Line-level matching (the unified-diff path, with difflib's autojunk rule)."""
    mismatches = 0
    speedups, t_fast_all, body_speedups = [], [], []
    for _ in range(count):
        src = rng.choice(files)
        old = src[: rng.randint(100, 3000)]
        new = mutate(old, rng, rng.randint(1, 30))
        t_ref, ref = timed(lambda o=old, n=new: difflib.SequenceMatcher(None, o, n).get_matching_blocks(), 1)
        t_fast, got = timed(lambda o=old, n=new: fastdiff.matching_blocks(o, n), repeats)
        mismatches += got != [tuple(m) for m in ref]
        speedups.append(t_ref / t_fast)
        t_fast_all.append(t_fast)
        t_ref_body, ref_body = timed(lambda o=old, n=new: diff_body(o, n), 1)
        t_fast_body, body = timed(lambda o=old, n=new: fastdiff.unified_diff_body(o, n), repeats)
        mismatches += body != ref_body
        body_speedups.append(t_ref_body / t_fast_body)
    print(f"line level matching_blocks (100-3000 lines): n={count}")
    print(f"  fastdiff median {statistics.median(t_fast_all) * 1e6:.0f} us")
    print(f"  speedup vs difflib: median {statistics.median(speedups):.0f}x, min {min(speedups):.0f}x")
    print(
        f"  unified_diff_body vs difflib.unified_diff: median {statistics.median(body_speedups):.0f}x, "
        f"min {min(body_speedups):.0f}x"
    )
    return mismatches


def main(argv: list[str] | None = None) -> int:
    """Runs all sections and returns 1 if any value differed from difflib."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer pairs, for a smoke run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-check-large", action="store_true", help="skip difflib on the large pairs")
    args = parser.parse_args(argv)
    if not fastdiff.HAVE_EXTENSION:
        print("WARNING: swerl.fastdiff._matcher is not built; timing the difflib fallback")

    rng = random.Random(args.seed)
    files = load_sources()
    n_small, n_large, n_lines = (20, 10, 10) if args.quick else (200, 60, 60)
    mismatches = 0
    mismatches += bench_small(make_pairs(files, rng, n_small, 1000, 3000), repeats=7)
    mismatches += bench_large(
        make_pairs(files, rng, n_large, 1000, 20000),
        repeats=3,
        check=not args.no_check_large and not args.quick,
        difflib_timed=3 if args.quick else 10,
    )
    mismatches += bench_lines(files, rng, n_lines, repeats=5)
    print(f"mismatches: {mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
