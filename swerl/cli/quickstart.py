"""`swerl quickstart`: the whole SWE-RL loop on a laptop CPU in minutes, offline.

1. data   — a git repository with a history of small fix-like commits (real stdlib code, cut to short
            files so a tiny model can read them); each commit becomes a row: the issue, the files before
            (code_context) and after (oracle_new_content). Written as JSONL, the trainers' input format.
2. model  — a tiny Llama with a byte-level BPE tokenizer trained on the spot, saved with save_pretrained.
3. SFT    — warm-up on canonical answers until most held-out answers are well formed (or a time budget).
4. GRPO   — steps with the SWE-RL similarity reward.
5. report — held-out mean reward and malformed rate before and after GRPO; plots; where everything is.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from swerl.synth_repo import build_history, stdlib_sources


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "quickstart",
        help="build data and a tiny model, run SFT then GRPO on CPU, report before/after (minutes)",
        description="An offline end-to-end run: synthetic fix commits -> rows -> tiny model -> SFT warm-up "
        "-> GRPO with the SWE-RL reward -> held-out reward and malformed rate before and after, plus plots.",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/quickstart"), help="where everything goes")
    parser.add_argument("--commits", type=int, default=260, help="fix commits to generate")
    parser.add_argument("--eval-size", type=int, default=16, help="held-out rows")
    parser.add_argument("--sft-minutes", type=float, default=4.0, help="time budget of the SFT warm-up")
    parser.add_argument("--grpo-steps", type=int, default=20, help="GRPO steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=_run)


def _short_sources(rng: random.Random, files: int, lines: int) -> dict[str, str]:
    """Windows of `lines` lines of real stdlib modules: realistic code, prompts a tiny model can read."""
    sources = {}
    for path, text in stdlib_sources(files * 2, rng).items():
        body = text.splitlines(keepends=True)
        starts = [i for i, line in enumerate(body) if line.startswith("def ") and i + lines < len(body)]
        if not starts:
            continue
        start = rng.choice(starts)
        sources[path] = "".join(body[start : start + lines])
        if len(sources) == files:
            break
    return sources


def _issue(old: dict[str, str], new: dict[str, str]) -> str:
    """An issue that points at the first changed line, as a bug report quoting the code would."""
    for path in sorted(new):
        before, after = old.get(path, "").splitlines(), new[path].splitlines()
        for i, line in enumerate(before):
            if i >= len(after) or after[i] != line:
                return f"Wrong behaviour in {path} around this line:\n\n    {line.strip()}\n\nPlease fix it."
    return "Please fix the bug."


def build_rows(repo: Path, commits: int, seed: int) -> list[dict[str, Any]]:
    """Rows in the data pipeline's shape (contents as {path, content} records) from generated commits."""
    rng = random.Random(seed)
    # Many files, few commits each: the generated edits insert lines, so a file grows with its history.
    history = build_history(repo, _short_sources(rng, files=max(8, commits // 5), lines=10), commits, rng)
    rows = []
    for commit in history:
        # One changed file per issue keeps prompts short enough for a tiny model on a CPU.
        if len(commit.new) != 1 or not any(commit.old.get(p) != c for p, c in commit.new.items()):
            continue
        rows.append(
            {
                "instance_id": f"quickstart-{commit.sha[:10]}",
                "problem_statement": _issue(commit.old, commit.new),
                "code_context": [{"path": p, "content": c} for p, c in commit.old.items()],
                "oracle_new_content": [{"path": p, "content": c} for p, c in commit.new.items()],
            }
        )
    return rows


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _run(args: argparse.Namespace) -> int:
    from swerl.cli.plot import plot_run
    from swerl.models.tiny import build_tiny_model, load_model_and_tokenizer
    from swerl.trainers.config import GRPOConfig, SFTConfig
    from swerl.trainers.data import build_examples
    from swerl.trainers.grpo import GRPOTrainer
    from swerl.trainers.rewards import swe_rl_reward
    from swerl.trainers.sft import SFTTrainer

    start = time.perf_counter()
    out: Path = args.out
    progress = not args.quiet

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", flush=True)

    # 1. Data.
    repo = out / "repo"
    if repo.exists():
        import shutil

        shutil.rmtree(repo)
    rows = build_rows(repo, args.commits, args.seed)
    random.Random(args.seed).shuffle(rows)
    eval_rows, train_rows = rows[: args.eval_size], rows[args.eval_size :]
    _write_jsonl(out / "data" / "train.jsonl", train_rows)
    _write_jsonl(out / "data" / "eval.jsonl", eval_rows)
    say(f"data: {len(train_rows)} training and {len(eval_rows)} held-out rows from {repo}")

    # 2. Model.
    model_dir = build_tiny_model(
        out / "tiny-model", hidden_size=128, intermediate_size=384, num_layers=4, seed=args.seed
    )
    model, tokenizer = load_model_and_tokenizer(model_dir)
    train, _ = build_examples(train_rows, tokenizer, max_prompt_length=1024)
    held_out, _ = build_examples(eval_rows, tokenizer, max_prompt_length=1024)
    n_params = sum(p.numel() for p in model.parameters())
    say(f"model: tiny Llama, {n_params / 1e6:.2f} M parameters, at {model_dir}")

    # 3. SFT warm-up: epochs until most held-out answers parse, or the time budget is spent.
    reward = swe_rl_reward()
    sft_config = SFTConfig(
        model_name_or_path=str(model_dir),
        output_dir=str(out / "sft"),
        max_steps=100_000,
        num_train_epochs=100_000,
        per_device_train_batch_size=8,
        micro_batch_size=4,
        learning_rate=3e-3,
        warmup_steps=20,
        max_seq_length=1536,
        max_completion_length=320,
        report_to_tensorboard=False,
        seed=args.seed,
    )
    sft = SFTTrainer(
        sft_config, model, tokenizer, train, eval_examples=held_out, reward_fn=reward, progress=False
    )
    deadline = time.perf_counter() + 60 * args.sft_minutes
    chunk = 40
    while time.perf_counter() < deadline:
        sft.config.max_steps = sft.step + chunk
        history = sft.train()
        report = sft.evaluate()
        say(f"SFT step {sft.step}: loss {history[-1]['loss']:.3f}; held-out {report.summary()}")
        if report.malformed_rate <= 0.25:
            break
    sft_dir = out / "sft" / "final"

    # 4. GRPO from the SFT model.
    grpo_config = GRPOConfig(
        model_name_or_path=str(sft_dir),
        output_dir=str(out / "grpo"),
        max_steps=args.grpo_steps,
        num_generations=8,
        prompts_per_step=4,
        max_completion_length=320,
        learning_rate=5e-4,
        micro_batch_size=16,
        report_to_tensorboard=False,
        seed=args.seed,
    )
    policy, tokenizer = load_model_and_tokenizer(sft_dir)
    grpo = GRPOTrainer(
        grpo_config, policy, tokenizer, train, reward, eval_examples=held_out, progress=progress
    )
    before = grpo.evaluate()
    say(f"before GRPO: {before.summary()}")
    grpo.train()
    after = grpo.evaluate()
    say(f"after {args.grpo_steps} GRPO steps: {after.summary()}")

    # 5. Report.
    plots = plot_run(out / "grpo") + plot_run(out / "sft")
    summary = {
        "before": {
            "mean_reward": before.mean_reward,
            "malformed_rate": before.malformed_rate,
            "errors": before.errors,
        },
        "after": {
            "mean_reward": after.mean_reward,
            "malformed_rate": after.malformed_rate,
            "errors": after.errors,
        },
        "seconds": time.perf_counter() - start,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    _write_jsonl(out / "eval_samples_after.jsonl", after.samples)
    print()
    print(f"held-out ({len(held_out)} prompts, greedy)   mean reward   malformed")
    for label, rep in (("before GRPO (after SFT)", before), (f"after {args.grpo_steps} GRPO steps", after)):
        print(f"  {label:<27}{rep.mean_reward:>13.3f}{rep.malformed_rate:>12.0%}")
    print()
    print(f"data:     {out / 'data'} (train.jsonl, eval.jsonl), repository {repo}")
    print(f"model:    {model_dir} (initial), {sft_dir} (SFT), {out / 'grpo' / 'final'} (GRPO)")
    print(f"metrics:  {out / 'sft' / 'metrics.jsonl'}, {out / 'grpo' / 'metrics.jsonl'}")
    print(f"plots:    {plots[0]}, {out / 'sft' / 'plots' / 'overview.png'}")
    print(f"samples:  {out / 'eval_samples_after.jsonl'}; summary: {out / 'summary.json'}")
    print(f"total:    {time.perf_counter() - start:.0f} s")
    return 0
