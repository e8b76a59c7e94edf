"""`swerl quickstart`: the whole SWE-RL loop on a laptop CPU in minutes, offline.

1. repo   — a git repository with a history of small fix commits, squash-merged PRs whose message is the
            issue (`Fix ... (#N)`): tiny modules cut from real stdlib code, each commit changing one line.
2. data   — `swerl data mine --local` on it (the data pipeline, in process): Parquet rows with the
            issue, the files before (code_context) and after (oracle_new_content) and the chat prompt.
3. model  — a tiny Llama whose byte-level BPE tokenizer is trained on these prompts and their canonical
            answers (so the fixed instructions and the answer format take few tokens).
4. SFT    — warm-up on canonical answers until most held-out answers are well formed, the held-out
            reward stops improving, or its time share is spent.
5. GRPO   — steps with the SWE-RL similarity reward.
6. report — held-out mean reward and malformed rate before and after GRPO; plots; where everything is.

`--minutes` is the budget of the whole run on a 2-core CPU: SFT gets up to 55% of it, GRPO what is
left after the before/after evaluations; `--size small` is a smaller and faster variant for tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

from swerl.cli import silence_library_progress
from swerl.cli.args import nonnegative_int, output_dir, positive_float, positive_int
from swerl.edit_format.prompts import PromptStyle
from swerl.errors import UserError
from swerl.synth_repo import FastImport, stdlib_sources
from swerl.trainers.rundir import remove_outputs

# The tiny model's prompts are a few hundred tokens, most of them fixed instructions: the compact style
# nearly halves every SFT and GRPO step (see swerl.edit_format.prompts).
PROMPT_STYLE: PromptStyle = "compact"
# SFT's share of the time left after the data and the model are built, and how many held-out
# evaluations in a row without a better reward end it early.
SFT_SHARE = 0.55
SFT_PATIENCE = 3

# Single-token fixes a reader can name in the issue ("use `<=` instead of `<`").
_SWAPS = (
    ("==", "!="),
    ("!=", "=="),
    (" < ", " <= "),
    (" > ", " >= "),
    (" <= ", " < "),
    (" >= ", " > "),
    ("True", "False"),
    ("False", "True"),
    (" and ", " or "),
    (" or ", " and "),
    ("+ 1", "- 1"),
    ("- 1", "+ 1"),
    (" is not ", " is "),
    (" not in ", " in "),
)
_NUMBER = re.compile(r"\b\d+\b")

# What a quickstart writes into --out (all replaced by a rerun with --overwrite).
OUTPUTS = (
    "repo",
    "clones",
    "mined",
    "data",
    "tiny-model",
    "sft",
    "grpo",
    "summary.json",
    "eval_samples_before.jsonl",
    "eval_samples_after.jsonl",
)

# Sizes: (files, lines per file, commits, model hidden/intermediate/layers/heads, vocab, G, prompts/step).
SIZES: dict[str, dict[str, int]] = {
    "default": {
        "files": 80,
        "lines": 6,
        "commits": 2000,
        "hidden": 128,
        "intermediate": 384,
        "layers": 3,
        "heads": 4,
        "vocab": 2048,
        "generations": 8,
        "prompts": 4,
        "max_new_tokens": 96,
        "sft_chunk": 100,
    },
    "small": {
        "files": 12,
        "lines": 5,
        "commits": 48,
        "hidden": 64,
        "intermediate": 128,
        "layers": 2,
        "heads": 4,
        "vocab": 1024,
        "generations": 4,
        "prompts": 2,
        "max_new_tokens": 64,
        "sft_chunk": 10,
    },
}


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "quickstart",
        help="mine a generated repo, build a tiny model, SFT then GRPO on CPU, report before/after",
        description="An offline end-to-end run: a generated git history of fix PRs -> the data pipeline "
        "(`data mine --local`) -> a tiny model -> SFT warm-up -> GRPO with the SWE-RL reward -> held-out "
        "reward and malformed rate before and after, plus plots. About --minutes on a 2-core CPU. The "
        "toy model shows the loop, not a model's skill: for a real pretrained model (SmolLM2-135M-Instruct, "
        "offline: swerl models get smollm2-135m-instruct --out DIR) and a real-model run, see "
        "docs/training.md#a-real-model-smollm2-135m-instruct.",
        epilog="example: swerl quickstart --out runs/quickstart --minutes 9",
    )
    parser.add_argument(
        "--out", type=output_dir, default=Path("runs/quickstart"), help="where everything goes"
    )
    parser.add_argument(
        "--minutes",
        type=positive_float,
        default=9.0,
        help="budget of the whole run (default 9); a budget too short for one SFT stretch and one GRPO "
        "step is overrun by what those take",
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="default", help="data and model size")
    parser.add_argument(
        "--eval-size",
        type=positive_int,
        default=64,
        help="held-out rows, at most a quarter of the mined rows (default 64)",
    )
    parser.add_argument(
        "--grpo-steps", type=positive_int, default=None, help="GRPO steps (default: fill the budget)"
    )
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the repo, model and runs")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the results of an earlier quickstart in --out"
    )
    parser.set_defaults(run=_run)


# --------------------------------------------------------------------------------------------- repo
_AUTHOR = "Dev Eloper <dev@example.invalid>"


def _fixes(line: str) -> list[tuple[str, str]]:
    """The one-token fixes that apply to a line of code: (old, new)."""
    if not line.strip() or line.lstrip().startswith("#"):
        return []
    found = [(a, b) for a, b in _SWAPS if a in line]
    number = _NUMBER.search(line)
    if number:
        found.append((number.group(), str(int(number.group()) + 1)))
    return found


def tiny_sources(rng: random.Random, files: int, lines: int, windows: int = 16) -> dict[str, str]:
    """`files` modules of `lines` lines each: windows of real stdlib functions with editable lines."""
    out: dict[str, str] = {}
    modules = sorted(stdlib_sources(1000, rng, 40, 100_000).items())
    rng.shuffle(modules)
    for round_ in range(windows):  # several windows per stdlib module, until there are enough files
        for path, text in modules:
            body = text.splitlines(keepends=True)
            starts = [
                i
                for i, line in enumerate(body[: len(body) - lines])
                if line.lstrip().startswith("def ")
                and all(x.strip() and len(x) <= 72 and "\t" not in x for x in body[i : i + lines])
                and sum(bool(_fixes(x)) for x in body[i + 1 : i + lines]) >= 2
            ]
            if not starts:
                continue
            name = path if round_ == 0 else path.replace(".py", f"_{round_}.py")
            if name in out:
                continue
            start = rng.choice(starts)
            out[name] = "".join(body[start : start + lines])
            if len(out) == files:
                return out
    return out


def build_repo(repo: Path, files: int, lines: int, commits: int, seed: int) -> int:
    """A repository of tiny modules and `commits` squash-merged fix PRs; returns the commit count.

    Each PR changes one token on one line; its message (the mined problem statement) quotes the line
    and names the fix, so a tiny model can learn the task: find the line, copy it into a SEARCH block,
    write it again with the fix. Written with `git fast-import` (thousands of commits in a second).
    """
    rng = random.Random(seed)
    sources = tiny_sources(rng, files, lines)
    current = dict(sources)
    paths = sorted(sources)
    writer = FastImport(start=1_700_000_000, step=1)
    tip = writer.commit("Initial import", sources, author=_AUTHOR)
    fixes = 0
    seen: set[tuple[str, str]] = set()
    for number in range(1, commits + 1):
        path = rng.choice(paths)
        body = current[path].splitlines(keepends=True)
        choices = [(i, old, new) for i, line in enumerate(body[1:], 1) for old, new in _fixes(line)]
        if not choices:
            continue
        i, old, new = rng.choice(choices)
        line = body[i]
        body[i] = line.replace(old, new, 1)
        if (line, body[i]) in seen:  # the same change again would be dropped by the pipeline's dedup
            continue
        seen.add((line, body[i]))
        current[path] = "".join(body)
        # The issue quotes the old line and the fixed one exactly (indentation too): a correct answer
        # copies them into SEARCH and REPLACE, which a tiny model learns within minutes.
        message = (
            f"Fix {Path(path).stem} (#{number})\n\nThis line of {path} is wrong:\n{line.rstrip()}\n"
            f"Use `{new.strip()}` instead of `{old.strip()}`:\n{body[i].rstrip()}"
        )
        tip = writer.commit(message, {path: current[path]}, parent=tip, author=_AUTHOR)
        fixes += 1
    writer.write(repo, checkout=True)
    return fixes


def mine_rows(repo: Path, out: Path, quiet: bool) -> tuple[list[dict[str, Any]], str]:
    """`swerl data mine --local REPO --max-extra-files 0 --prompt-style compact` in process; returns the
    rows and the report."""
    from data_pipeline.config import ContextConfig, FilterConfig, MineConfig
    from data_pipeline.run.runner import mine
    from data_pipeline.sources.local import LocalSource
    from swerl.trainers.data import read_rows

    config = MineConfig(
        filters=FilterConfig(max_files=1, max_lines_changed=4),
        context=ContextConfig(max_prompt_tokens=2048, max_extra_files=0, prompt_style=PROMPT_STYLE),
        shard_size=256,
        # Tiny files: two fixes of one file share most shingles; only drop true repeats.
        dedup_threshold=0.97,
    )
    source = LocalSource(repo, out / "clones", repo="quickstart/demo")
    summary = mine(out / "mined", source, config, workers=1, progress=not quiet)
    return read_rows(out / "mined" / "data"), summary.report()


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")


def tokenizer_corpus(rows: list[dict[str, Any]]) -> list[str]:
    """The prompts' and canonical answers' text (repeated so the fixed parts merge whole), plus code."""
    from swerl.edit_format import canonical_answer
    from swerl.models.tiny import default_corpus
    from swerl.reward.batch import coerce_contents
    from swerl.trainers.data import row_messages

    texts = []
    for row in rows:
        texts += [m["content"] for m in row_messages(row)]
        with contextlib.suppress(ValueError):  # rows always have one; a stray one costs nothing
            old = coerce_contents(row["code_context"], "code_context")
            new = coerce_contents(row["oracle_new_content"], "oracle_new_content")
            texts.append(canonical_answer(old, new, context_lines=0))
    return texts + list(default_corpus(200_000))


# ---------------------------------------------------------------------------------------------- run
def _run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from swerl.cli.plot import plot_run
    from swerl.models.loading import load_model_and_tokenizer
    from swerl.models.tiny import build_tiny_model
    from swerl.trainers.config import GRPOConfig, SFTConfig
    from swerl.trainers.data import build_examples
    from swerl.trainers.grpo import GRPOTrainer
    from swerl.trainers.rewards import swe_rl_reward
    from swerl.trainers.sft import SFTTrainer

    earlier = sorted(name for name in OUTPUTS if (args.out / name).exists())
    if earlier and not args.overwrite:
        raise UserError(
            f"{args.out} holds an earlier quickstart ({', '.join(earlier)}); pass --overwrite to replace it, "
            "or choose another --out"
        )
    start = time.perf_counter()
    budget = 60.0 * args.minutes
    size = SIZES[args.size]
    out: Path = args.out
    progress = not args.quiet
    if args.quiet:
        silence_library_progress()

    def say(message: str) -> None:
        # Above GRPO's progress bar, which is open while its steps are reported, not through it.
        with tqdm.external_write_mode(file=sys.stdout):
            print(f"[{time.perf_counter() - start:6.1f}s] {message}", flush=True)

    def left() -> float:
        return budget - (time.perf_counter() - start)

    # 1-2. A generated repository, mined by the data pipeline.
    remove_outputs(out, OUTPUTS)
    repo = out / "repo"
    commits = build_repo(repo, size["files"], size["lines"], size["commits"], args.seed)
    say(f"repo: {commits} fix PRs at {repo}")
    rows, report = mine_rows(repo, out, args.quiet)
    rows.sort(key=lambda r: r["instance_id"])
    random.Random(args.seed).shuffle(rows)
    # The held-out share is capped so that the small size (tens of rows) still has most rows to train on.
    eval_size = min(args.eval_size, len(rows) // 4)
    if eval_size < 1:
        raise UserError(f"the generated repository gave only {len(rows)} rows; try another --seed")
    eval_rows, train_rows = rows[:eval_size], rows[eval_size:]
    _write_jsonl(out / "data" / "train.jsonl", train_rows)
    _write_jsonl(out / "data" / "eval.jsonl", eval_rows)
    say(f"data: {report.splitlines()[0]}; {len(train_rows)} training, {len(eval_rows)} held-out rows")

    # 3. Model and tokenizer.
    model_dir = build_tiny_model(
        out / "tiny-model",
        vocab_size=size["vocab"],
        hidden_size=size["hidden"],
        intermediate_size=size["intermediate"],
        num_layers=size["layers"],
        num_heads=size["heads"],
        # Prompts up to 1024 tokens plus an answer: past 1024 positions (RoPE: no weights depend on it).
        max_position_embeddings=2048,
        corpus=tokenizer_corpus(train_rows),
        seed=args.seed,
    )
    model, tokenizer = load_model_and_tokenizer(model_dir)
    train, _ = build_examples(train_rows, tokenizer, max_prompt_length=1024)
    held_out, _ = build_examples(eval_rows, tokenizer, max_prompt_length=1024)
    n_params = sum(p.numel() for p in model.parameters())
    prompt_len = sum(len(e.prompt_ids) for e in train) / max(1, len(train))
    say(f"model: tiny Llama, {n_params / 1e6:.2f} M parameters, mean prompt {prompt_len:.0f} tokens")

    # 4. SFT warm-up: until most held-out answers parse, or its share of the budget is spent.
    reward = swe_rl_reward()
    max_new = size["max_new_tokens"]
    sft_config = SFTConfig(
        model_name_or_path=str(model_dir),
        output_dir=str(out / "sft"),
        max_steps=100_000,
        num_train_epochs=100_000,
        per_device_train_batch_size=16,
        micro_batch_size=16,
        learning_rate=3e-3,
        warmup_steps=10,
        max_seq_length=1024,
        max_completion_length=max_new,
        report_to_tensorboard=False,
        bf16=False,
        seed=args.seed,
    )
    sft = SFTTrainer(
        sft_config,
        model,
        tokenizer,
        train,
        eval_examples=held_out,
        reward_fn=reward,
        progress=False,
        context_lines=0,  # the shortest canonical answers: SEARCH is the quoted line when it is unique
    )
    # SFT ends when most held-out answers are well formed, when the held-out reward has stopped improving
    # (the tiny model then memorises its training answers instead of learning to copy, and GRPO, which
    # is rewarded on fresh samples, gains more from the time), or at its share of the budget.
    sft_deadline = time.perf_counter() + SFT_SHARE * left()
    chunk = size["sft_chunk"]
    best, stale, finished = -math.inf, 0, False
    # The current stretch of steps between two held-out evaluations: its first step, length, start time.
    first, length, began = sft.step, chunk, time.perf_counter()

    def sft_stop(trainer: Any) -> bool:
        # Also mid-stretch once the deadline has passed: on a heavily loaded machine one stretch of steps
        # can take longer than the whole budget.
        return finished or (trainer.step > 0 and time.perf_counter() >= sft_deadline)

    def sft_evaluate(trainer: Any, row: dict[str, float]) -> None:
        nonlocal best, stale, finished, first, length, began
        if trainer.step - first < length:
            return
        report = trainer.evaluate()
        per_step = (time.perf_counter() - began) / length  # the evaluation included
        say(f"SFT step {trainer.step}: loss {row['loss']:.3f}; held-out {report.summary()}")
        best, stale = (report.mean_reward, 0) if report.mean_reward > best else (best, stale + 1)
        # The next stretch is cut to what fits before the deadline at the pace measured so far: on a busy
        # machine a whole one could overrun the budget.
        length = min(chunk, int((sft_deadline - time.perf_counter()) / per_step))
        finished = report.malformed_rate <= 0.25 or stale >= SFT_PATIENCE or length < chunk // 4
        first, began = trainer.step, time.perf_counter()

    # One `train()` call (one logger, one final save): `stop` ends it where a stretch ends the phase.
    sft.train(stop=sft_stop, on_step=sft_evaluate)
    say(f"SFT: {sft.step} steps done")
    sft_dir = out / "sft" / "final"

    # 5. GRPO from the SFT model.
    grpo_config = GRPOConfig(
        model_name_or_path=str(sft_dir),
        output_dir=str(out / "grpo"),
        max_steps=1,
        num_generations=size["generations"],
        prompts_per_step=size["prompts"],
        max_completion_length=max_new,
        learning_rate=2e-4,
        micro_batch_size=size["generations"] * size["prompts"],
        generation_batch_size=size["generations"] * size["prompts"],
        report_to_tensorboard=False,
        bf16=False,
        seed=args.seed,
    )
    policy, tokenizer = load_model_and_tokenizer(sft_dir)
    # Until a deadline the step count is unknown, so a bar would read 0% of 100,000: the steps are
    # reported every 10 instead. With --grpo-steps the bar has its real length.
    grpo = GRPOTrainer(
        grpo_config,
        policy,
        tokenizer,
        train,
        reward,
        eval_examples=held_out,
        progress=progress and args.grpo_steps is not None,
    )
    before = grpo.evaluate()
    say(f"before GRPO: {before.summary()} ({before.seconds:.1f} s)")
    # Steps until a wall-clock deadline that keeps time for the last evaluation and the plots (or a
    # fixed count with --grpo-steps), in one `train()` call that asks `stop` before each step.
    grpo_deadline = time.perf_counter() + left() - (1.5 * before.seconds + 10.0)
    target = args.grpo_steps if args.grpo_steps is not None else 100_000
    grpo.config.max_steps = target
    recent: list[float] = []  # the last steps' wall times: a step must fit before the deadline
    asked: float | None = None  # when `stop` was last asked: when the step just done began

    def stop(trainer: Any) -> bool:
        nonlocal recent, asked
        now = time.perf_counter()
        if asked is not None:
            recent = [*recent[-4:], now - asked]
        asked = now
        # At least one step, however short the budget: the report compares before and after GRPO.
        late = now + max(recent, default=0.0) >= grpo_deadline
        return args.grpo_steps is None and trainer.step > 0 and late

    def on_step(trainer: Any, row: dict[str, float]) -> None:
        if trainer.step == 1 or trainer.step % 10 == 0:
            say(f"GRPO step {trainer.step}: {row['step_time']:.1f} s, reward {row['reward']:.3f}")

    grpo.train(stop=stop, on_step=on_step)
    after = grpo.evaluate()
    steps = grpo.step
    say(f"after {steps} GRPO steps: {after.summary()}")

    # 6. Report.
    plots = plot_run(out / "grpo", smooth=10) + plot_run(out / "sft", smooth=10)
    summary = {
        "before": {"mean_reward": before.mean_reward, "malformed_rate": before.malformed_rate},
        "after": {"mean_reward": after.mean_reward, "malformed_rate": after.malformed_rate},
        "errors_before": before.errors,
        "errors_after": after.errors,
        "sft_steps": sft.step,
        "grpo_steps": steps,
        "train_rows": len(train),
        "eval_rows": len(held_out),
        "parameters": n_params,
        "seconds": time.perf_counter() - start,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    _write_jsonl(out / "eval_samples_before.jsonl", before.samples)
    _write_jsonl(out / "eval_samples_after.jsonl", after.samples)
    print()
    print(f"held-out ({len(held_out)} prompts, greedy)   mean reward   malformed")
    for label, rep in (("before GRPO (after SFT)", before), (f"after {steps} GRPO steps", after)):
        print(f"  {label:<27}{rep.mean_reward:>13.3f}{rep.malformed_rate:>12.0%}")
    print()
    print(f"repo:     {repo} ({commits} fix PRs); mined by the data pipeline into {out / 'mined'}")
    print(f"data:     {out / 'data'} (train.jsonl, eval.jsonl)")
    print(f"model:    {model_dir} (initial), {sft_dir} (SFT), {out / 'grpo' / 'final'} (GRPO)")
    print(f"metrics:  {out / 'sft' / 'metrics.jsonl'}, {out / 'grpo' / 'metrics.jsonl'}")
    print(f"plots:    {out / 'grpo' / 'plots' / 'overview.png'}, {out / 'sft' / 'plots' / 'overview.png'}")
    print(f"samples:  {out / 'eval_samples_before.jsonl'}, {out / 'eval_samples_after.jsonl'}")
    print(f"summary:  {out / 'summary.json'}")
    print(f"total:    {time.perf_counter() - start:.0f} s ({len(plots)} plots)")
    return 0
