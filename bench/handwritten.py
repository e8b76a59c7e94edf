"""Does each piece of hand-written speed code earn its place? `swerl data mine --local` (and `swerl
reward score` on answers to the mined rows) with the piece and without it, side by side.

Each variant runs the same command in a fresh process with one piece taken out before swerl starts (the
code path a build without it would take), interleaved with the others round after round, so a slow
phase of a shared machine hits every variant alike. Reported: per variant the median wall and CPU
seconds (the command and its worker processes), and the median over rounds of the CPU ratio to the
round's `all` run; every variant must write identical rows (and identical rewards), or the run fails.

    python bench/handwritten.py --repo /path/to/bare-or-work-tree-clone --rounds 9
    python bench/handwritten.py --repo ... --variants all,regex_tokens --no-decontaminate

A piece stays only where taking it out costs at least 5% (docs/benchmarks.md). The variants of the
pieces that did not (`no_textscan`, `no_c_tokens`, `no_allocator`, `bm25_scalar`, `bm25_vector`) run
at commit 7425219, before their removal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What each variant changes in the process before swerl's command runs (Python source, run with -c).
VARIANTS = {
    "all": "",
    # The token estimate without its C extension: the regular expression that defines it.
    "regex_tokens": "sys.modules['data_pipeline.context._tokencount'] = None",
    # Parquet tables through pyarrow's own row conversion instead of the hand-built Arrow buffers.
    "no_arrow_builder": (
        "import pyarrow as pa, data_pipeline.run.shards as s; "
        "s.rows_to_table = lambda rows, schema: pa.Table.from_pylist(rows, schema=schema)"
    ),
}


def _run(variant: str, argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (this process and its children) of `swerl argv` under `variant`."""
    code = f"import sys; {VARIANTS[variant]}\nfrom swerl.cli.main import main; sys.exit(main({argv!r}))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{variant}: swerl {' '.join(argv)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _rows(out: Path) -> list[dict]:
    import pyarrow.parquet as pq

    rows = []
    for shard in sorted((out / "data").glob("*.parquet")):
        rows += pq.read_table(shard).to_pylist()
    return rows


def _digest(values: list) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _answers(rows: list[dict], path: Path) -> None:
    """Three answers per row: the canonical one, one with a line edited, one that is another row's."""
    from swerl.edit_format import canonical_answer
    from swerl.reward.batch import coerce_contents

    def answer(row: dict) -> str:
        return canonical_answer(
            coerce_contents(row["code_context"], "code_context"),
            coerce_contents(row["oracle_new_content"], "oracle_new_content"),
        )

    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as out:
        for i, row in enumerate(rows):
            good = answer(row)
            lines = good.splitlines(keepends=True)
            at = rng.randrange(len(lines))
            edited = "".join([*lines[:at], lines[at].replace("e", "a", 1), *lines[at + 1 :]])
            for k, output in enumerate((good, edited, answer(rows[(i + 1) % len(rows)]))):
                record = {key: row[key] for key in ("code_context", "oracle_new_content")}
                out.write(
                    json.dumps(
                        {**record, "instance_id": f"{row['instance_id']}#{k}", "output": output}, default=str
                    )
                    + "\n"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git clone to mine (--local)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default="all,regex_tokens,no_arrow_builder")
    parser.add_argument("--no-decontaminate", action="store_true", help="for a SWE-bench repository")
    parser.add_argument("--reward", action="store_true", help="also time `swerl reward score`")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if variants[0] != "all" or set(variants) - VARIANTS.keys():
        parser.error(f"--variants: 'all' first, then some of {', '.join(VARIANTS)}")
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    digests: dict[tuple[str, str], set[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        answers = Path(tmp, "answers.jsonl")
        for round_ in range(args.rounds):
            for variant in variants:
                out = Path(tmp, variant)
                shutil.rmtree(out, ignore_errors=True)
                mine = [
                    "data",
                    "mine",
                    "--local",
                    str(args.repo),
                    "--out",
                    str(out),
                    "--workers",
                    "1",
                    "--quiet",
                ]
                times.setdefault(("mine", variant), []).append(
                    _run(variant, mine + ["--no-decontaminate"] * args.no_decontaminate)
                )
                rows = _rows(out)
                digests.setdefault(("mine", variant), set()).add(_digest(rows))
                if args.reward:
                    if not answers.exists():
                        _answers(rows, answers)
                    scored = Path(tmp, f"{variant}.jsonl")
                    score = [
                        "reward",
                        "score",
                        "--input",
                        str(answers),
                        "--output",
                        str(scored),
                        "--workers",
                        "1",
                        "--quiet",
                    ]
                    times.setdefault(("reward", variant), []).append(_run(variant, score))
                    rewards = [json.loads(line)["reward"] for line in scored.read_text().splitlines()]
                    digests.setdefault(("reward", variant), set()).add(_digest(rewards))
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    for command in ("mine", "reward"):
        outputs = {frozenset(found) for (c, _), found in digests.items() if c == command}
        if len(outputs) > 1:
            raise SystemExit(f"{command}: the variants' outputs differ: {digests}")
    print(f"{'command':7} {'variant':17} {'wall s':>7} {'CPU s':>6} {'CPU vs all':>10}")
    for (command, variant), runs in sorted(times.items(), key=lambda item: item[0][0] != "mine"):
        base = times[(command, "all")]
        ratio = statistics.median(cpu / b for (_, cpu), (_, b) in zip(runs, base, strict=True))
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{command:7} {variant:17} {wall:7.2f} {cpu:6.2f} {ratio:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
