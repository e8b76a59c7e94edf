"""SmolLM2-135M-Instruct through SFT then GRPO on rows mined from real repositories: data and report.

Two subcommands around the documented training commands (docs/training.md#a-real-model-run-that-learns):

    python bench/smollm2_learning.py data --model runs/smollm2/model --out runs/smollm2 \
        --repo CLONE=OWNER/NAME [--repo ...]
    swerl train sft --config configs/sft_smollm2_cpu.yaml
    swerl train grpo --config configs/grpo_smollm2_cpu.yaml
    python bench/smollm2_learning.py report runs/smollm2 [--images docs/images]

`data` mines each clone (`swerl data mine --local`, one modified file, no extra context files, prompts of
at most --mine-prompt-tokens in the compact style), holds out each repository's newest rows (`swerl data
split --by time`), and keeps the short-context rows: a prompt of at most --max-prompt-tokens chat tokens
and a canonical answer (what SFT trains on) of at most --max-answer-tokens. Every token of a prompt is
paid in each SFT step, each GRPO sample and each evaluation, and a 135 M model on two CPU cores affords
a few hundred; rows whose answers are longer would mostly teach it to stop in the middle.

`report` reads the held-out answers the trainers wrote (`eval_before.jsonl` / `eval_after.jsonl` of the
SFT run: the base model and the SFT model; `eval_after.jsonl` of the GRPO run), and gives the malformed
rate and mean SWE-RL reward of each with bootstrap 95% intervals over the held-out rows, as JSON and a
Markdown table, and a PNG of the three. The figures are the trainers' own greedy evaluations, so
rerunning the commands reproduces them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from swerl.edit_format import canonical_answer
from swerl.evaluation.nak import bootstrap_interval
from swerl.jsonl import read_records
from swerl.trainers.data import build_examples, read_rows

# The three held-out evaluations: (label, run subfolder, file the trainer wrote).
STAGES = (
    ("base", "sft", "eval_before.jsonl"),
    ("after SFT", "sft", "eval_after.jsonl"),
    ("after GRPO", "grpo", "eval_after.jsonl"),
)


def swerl(*args: str) -> None:
    """Run one swerl command as a user would, stopping on its failure."""
    cmd = [sys.executable, "-m", "swerl", *args]
    print("$ swerl " + " ".join(args), flush=True)
    subprocess.run(cmd, check=True)


def short_rows(path: Path, tokenizer: Any, max_prompt: int, max_answer: int) -> tuple[pa.Table, int]:
    """The rows of a split file whose prompt and canonical answer fit, and how many there were."""
    table = pq.read_table(path)
    examples, _ = build_examples(read_rows(path), tokenizer, 10**9)
    keep = []
    for i, ex in enumerate(examples):
        answer = canonical_answer(ex.code_context, ex.oracle_new_content)
        if len(ex.prompt_ids) <= max_prompt and len(tokenizer(answer)["input_ids"]) <= max_answer:
            keep.append(i)
    return table.take(pa.array(keep, type=pa.int64())), table.num_rows


def make_data(args: argparse.Namespace) -> None:
    """Mine, split and filter every repository; write OUT/data/{train,eval}.parquet."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    parts: dict[str, list[pa.Table]] = {"train": [], "eval": []}
    for spec in args.repo:
        clone, _, name = spec.partition("=")
        slug = name.replace("/", "__")
        mined, split = args.out / "mined" / slug, args.out / "split" / slug
        swerl(
            "data", "mine", "--local", clone, "--repo-name", name, "--out", str(mined),
            "--max-files", "1", "--max-extra-files", "0", "--prompt-style", "compact",
            "--max-prompt-tokens", str(args.mine_prompt_tokens), "--tokenizer", args.model,
            "--workers", "1", "--quiet",
        )  # fmt: skip
        swerl("data", "split", str(mined), "--by", "time", "--eval-fraction", str(args.eval_fraction),
              "--to", str(split), "--overwrite")  # fmt: skip
        for part in parts:
            kept, total = short_rows(
                split / f"{part}.parquet", tokenizer, args.max_prompt_tokens, args.max_answer_tokens
            )
            print(f"{name} {part}: {kept.num_rows} of {total} rows are short", flush=True)
            if kept.num_rows:
                parts[part].append(kept)
    (args.out / "data").mkdir(parents=True, exist_ok=True)
    for part, tables in parts.items():
        table = pa.concat_tables(tables, promote_options="permissive")
        pq.write_table(table, args.out / "data" / f"{part}.parquet")
        print(f"wrote {args.out / 'data' / f'{part}.parquet'}: {table.num_rows} rows")


def stage_stats(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Malformed rate and mean reward over held-out rows, each with its bootstrap 95% interval."""
    rewards = [float(s["reward"]) for s in samples]
    malformed = [1.0 if s["error"] else 0.0 for s in samples]
    return {
        "rows": len(samples),
        "malformed_rate": sum(malformed) / len(malformed),
        "malformed_ci": bootstrap_interval(malformed, resamples=2000),
        "mean_reward": sum(rewards) / len(rewards),
        "reward_ci": bootstrap_interval(rewards, resamples=2000),
    }


def plot(stats: dict[str, dict[str, Any]], path: Path) -> None:
    """Two panels (malformed rate, mean reward), one bar per stage with its interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    labels = list(stats)
    for ax, key, title in ((axes[0], "malformed", "held-out malformed rate"),
                           (axes[1], "reward", "held-out mean reward")):  # fmt: skip
        values = [stats[s]["malformed_rate" if key == "malformed" else "mean_reward"] for s in labels]
        lows = [v - stats[s][f"{key}_ci"][0] for v, s in zip(values, labels, strict=True)]
        highs = [stats[s][f"{key}_ci"][1] - v for v, s in zip(values, labels, strict=True)]
        ax.bar(labels, values, yerr=[lows, highs], capsize=4, color=["#999", "#4a7", "#37c"])
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_title(title)
    fig.suptitle(f"SmolLM2-135M-Instruct, {stats[labels[0]]['rows']} held-out mined rows (95% bootstrap)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def report(args: argparse.Namespace) -> None:
    """The before/after table of the three stages, from the trainers' own evaluation files."""
    stats = {}
    for label, run, name in STAGES:
        path = args.run / run / name
        if not path.exists():
            print(f"{label}: {path} is missing (has that run finished?)", file=sys.stderr)
            continue
        stats[label] = stage_stats(read_records(path))
    (args.run / "report.json").write_text(json.dumps(stats, indent=1) + "\n")
    print("| model | held-out rows | malformed (95% CI) | mean reward (95% CI) |")
    print("|---|---|---|---|")
    for label, s in stats.items():
        lo, hi = s["malformed_ci"]
        rlo, rhi = s["reward_ci"]
        print(
            f"| {label} | {s['rows']} | {s['malformed_rate']:.0%} ({lo:.0%}-{hi:.0%}) "
            f"| {s['mean_reward']:+.3f} ({rlo:+.3f} to {rhi:+.3f}) |"
        )
    if stats:
        args.images.mkdir(parents=True, exist_ok=True)
        plot(stats, args.images / "smollm2-heldout.png")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    data = commands.add_parser("data", help="mine, split and keep the short-context rows")
    data.add_argument("--model", required=True, help="the model folder (its tokenizer counts tokens)")
    data.add_argument("--out", type=Path, required=True)
    data.add_argument("--repo", action="append", required=True, metavar="CLONE=OWNER/NAME")
    data.add_argument("--mine-prompt-tokens", type=int, default=1024, help="mining's prompt budget")
    data.add_argument("--max-prompt-tokens", type=int, default=640, help="rows kept: prompt at most")
    data.add_argument("--max-answer-tokens", type=int, default=192, help="and canonical answer at most")
    data.add_argument("--eval-fraction", type=float, default=0.35)
    rep = commands.add_parser("report", help="held-out table and plot of the three stages")
    rep.add_argument("run", type=Path, help="the folder holding sft/ and grpo/")
    rep.add_argument("--images", type=Path, default=None, help="where the PNG goes (default RUN)")
    args = parser.parse_args()
    if args.command == "data":
        make_data(args)
    else:
        args.images = args.images or args.run
        report(args)


if __name__ == "__main__":
    main()
