"""Benchmark: one GRPO step of swerl against TRL's GRPOTrainer, same model, data shape and settings.

Both trainers run in this process on the same tiny Llama (built locally, saved with save_pretrained),
with the same group size, prompts per step, prompt and completion lengths, beta 0, one optimizer step
per rollout batch and a cheap reward, so the time is the trainers' own: generation, log-probs, loss,
backward, optimizer. Reports the median step time of each and the ratio (goal: swerl <= 0.7x TRL).
TRL is a bench-only dependency (`pip install trl`).

    python bench/grpo_step.py [--steps 8] [--generations 8] [--prompts 2] [--completion-length 32]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from swerl.models.tiny import build_tiny_model, load_model_and_tokenizer
from swerl.trainers.config import GRPOConfig as OurConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.rewards import token_reward

PROMPT_TEXT = (
    "def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip(), value.strip()\n"
)


def prompts(tokenizer: Any, count: int, length: int) -> list[str]:
    """`count` distinct prompt strings of exactly `length` tokens (the same strings go to both trainers)."""
    ids = tokenizer(PROMPT_TEXT * 40)["input_ids"]
    return [tokenizer.decode(ids[i : i + length]) for i in range(count)]


def time_ours(model_dir: Path, texts: list[str], args: argparse.Namespace, out: Path) -> list[float]:
    model, tokenizer = load_model_and_tokenizer(model_dir)
    examples = [Example(prompt_ids=tokenizer(t)["input_ids"]) for t in texts]
    config = OurConfig(
        output_dir=str(out),
        max_steps=args.steps,
        num_generations=args.generations,
        prompts_per_step=args.prompts,
        max_completion_length=args.completion_length,
        micro_batch_size=args.prompts * args.generations,
        generation_batch_size=args.prompts * args.generations,
        learning_rate=1e-5,
        beta=0.0,
        report_to_tensorboard=False,
    )
    trainer = GRPOTrainer(config, model, tokenizer, examples, token_reward(range(100)), progress=False)
    rows = [trainer.train_step() for _ in range(args.steps)]
    lengths = [r["completions/mean_length"] for r in rows]
    print(f"swerl: mean completion length {statistics.mean(lengths):.1f} tokens")
    return [r["step_time"] for r in rows]


class _StepTimer:
    """A TrainerCallback (duck-typed) recording wall time from step begin to step end."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t0 = 0.0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.times.append(time.perf_counter() - self._t0)


def time_trl(model_dir: Path, texts: list[str], args: argparse.Namespace, out: Path) -> list[float]:
    from datasets import Dataset
    from trl import GRPOConfig
    from trl import GRPOTrainer as TRLTrainer

    model, tokenizer = load_model_and_tokenizer(model_dir)

    def reward(completions: list[str], **_: Any) -> list[float]:
        return [c.count("e") / max(1, len(c)) for c in completions]

    n = args.prompts * args.generations
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=args.steps,
        per_device_train_batch_size=n,
        num_generations=args.generations,
        max_completion_length=args.completion_length,
        learning_rate=1e-5,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        dataloader_num_workers=0,
        temperature=1.0,
    )
    data = Dataset.from_dict({"prompt": texts * (args.steps * 2)})
    timer = _StepTimer()
    trainer = TRLTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    trainer.train()
    lengths = [
        h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h
    ]
    print(f"TRL:   mean completion length {statistics.mean(lengths):.1f} tokens")
    return timer.times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the median")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--completion-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = build_tiny_model(root / "model", seed=0)
        _, tokenizer = load_model_and_tokenizer(model_dir)
        texts = prompts(tokenizer, args.prompts, args.prompt_length)
        torch.manual_seed(0)
        ours = time_ours(model_dir, texts, args, root / "ours")[args.warmup :]
        torch.manual_seed(0)
        theirs = time_trl(model_dir, texts, args, root / "trl")[args.warmup :]
    med_ours, med_trl = statistics.median(ours), statistics.median(theirs)
    print(
        f"model: tiny Llama; G={args.generations}, {args.prompts} prompts/step "
        f"({args.prompts * args.generations} completions), prompt {args.prompt_length} tokens, "
        f"completion {args.completion_length} tokens, beta 0, {torch.get_num_threads()} threads"
    )
    print(f"swerl GRPO step: median {med_ours * 1000:7.1f} ms over {len(ours)} steps")
    print(f"TRL   GRPO step: median {med_trl * 1000:7.1f} ms over {len(theirs)} steps")
    print(f"ratio swerl / TRL: {med_ours / med_trl:.2f}x (goal <= 0.70x)")


if __name__ == "__main__":
    main()
