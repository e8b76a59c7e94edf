"""Benchmark: one GRPO step of swerl against TRL's GRPOTrainer, same model, data shape and settings.

Both trainers run in this process on the same tiny Llama (built locally, saved with save_pretrained),
with the same group size, prompts per step, prompt and completion lengths, beta 0, one optimizer step
per rollout batch and a cheap reward, so the time is the trainers' own: generation, log-probs, loss,
backward, optimizer. The machine's load changes while the bench runs, so the two are timed in
alternating rounds (swerl, TRL, swerl, TRL, ...) of `--steps-per-round` steps each; the first step of
every round is left out (TRL restarts its loop each round), and the medians over all rounds are
compared. Prints the medians, swerl's breakdown (generate / reward / train) and the ratio (goal: swerl
<= 0.7x TRL). TRL is a bench-only dependency (`pip install trl`).

    PYTHONPATH=. python bench/grpo_step.py [--rounds 6] [--steps-per-round 4] [--generations 8]
        [--prompts 2] [--prompt-length 64] [--completion-length 32] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
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


class Ours:
    """swerl's GRPOTrainer; `round(k)` runs k steps and returns their metrics rows."""

    def __init__(self, model_dir: Path, texts: list[str], args: argparse.Namespace, out: Path) -> None:
        model, tokenizer = load_model_and_tokenizer(model_dir)
        examples = [Example(prompt_ids=tokenizer(t)["input_ids"]) for t in texts]
        n = args.prompts * args.generations
        config = OurConfig(
            output_dir=str(out),
            max_steps=10**6,
            num_generations=args.generations,
            prompts_per_step=args.prompts,
            max_completion_length=args.completion_length,
            micro_batch_size=n,
            generation_batch_size=n,
            learning_rate=1e-5,
            beta=0.0,
            bf16=False,
            report_to_tensorboard=False,
        )
        self.trainer = GRPOTrainer(
            config, model, tokenizer, examples, token_reward(range(100)), progress=False
        )

    def round(self, steps: int) -> list[dict[str, float]]:
        return [self.trainer.train_step() for _ in range(steps)]


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


class Theirs:
    """TRL's GRPOTrainer; each round is one `train()` of k steps (the timer sees only the steps)."""

    def __init__(self, model_dir: Path, texts: list[str], args: argparse.Namespace, out: Path) -> None:
        from datasets import Dataset
        from trl import GRPOConfig
        from trl import GRPOTrainer as TRLTrainer

        model, tokenizer = load_model_and_tokenizer(model_dir)

        def reward(completions: list[str], **_: Any) -> list[float]:
            return [c.count("e") / max(1, len(c)) for c in completions]

        n = args.prompts * args.generations
        config = GRPOConfig(
            output_dir=str(out),
            max_steps=args.steps_per_round,
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
            disable_tqdm=True,
        )
        # Each prompt repeated G times in a row: one group per prompt, as TRL's sampler lays them out.
        data = Dataset.from_dict({"prompt": texts * (args.steps_per_round * 4)})
        self.timer = _StepTimer()
        self.trainer = TRLTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=data,
            processing_class=tokenizer,
            callbacks=[self.timer],
        )

    def round(self, steps: int) -> list[float]:
        del steps  # fixed in the config
        start = len(self.timer.times)
        self.trainer.train()
        return self.timer.times[start:]

    def mean_length(self) -> float:
        rows = self.trainer.state.log_history
        lengths = [h["completions/mean_length"] for h in rows if "completions/mean_length" in h]
        return statistics.mean(lengths) if lengths else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds of each trainer")
    parser.add_argument("--steps-per-round", type=int, default=4, help="steps per round (first one dropped)")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--completion-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--profile", action="store_true", help="cProfile swerl's steps, print the top")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    k = args.steps_per_round
    ours_times: list[float] = []
    parts: dict[str, list[float]] = {"time/generate": [], "time/reward": [], "time/train": []}
    trl_times: list[float] = []
    lengths: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = build_tiny_model(root / "model", seed=0)
        _, tokenizer = load_model_and_tokenizer(model_dir)
        texts = prompts(tokenizer, args.prompts, args.prompt_length)
        torch.manual_seed(0)
        ours = Ours(model_dir, texts, args, root / "ours")
        torch.manual_seed(0)
        theirs = Theirs(model_dir, texts, args, root / "trl")
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
        for r in range(args.rounds):
            if profiler is not None:
                profiler.enable()
            rows = ours.round(k)[1:]
            if profiler is not None:
                profiler.disable()
            ours_times += [row["step_time"] for row in rows]
            lengths += [row["completions/mean_length"] for row in rows]
            for name, values in parts.items():
                values += [row[name] for row in rows]
            trl_times += theirs.round(k)[1:]
            print(
                f"round {r + 1}/{args.rounds}: swerl {statistics.median(ours_times) * 1000:.1f} ms, "
                f"TRL {statistics.median(trl_times) * 1000:.1f} ms (running medians)",
                flush=True,
            )
        trl_length = theirs.mean_length()
    med_ours, med_trl = statistics.median(ours_times), statistics.median(trl_times)
    print(
        f"model: tiny Llama; G={args.generations}, {args.prompts} prompts/step "
        f"({args.prompts * args.generations} completions), prompt {args.prompt_length} tokens, "
        f"completion {args.completion_length} tokens (mean sampled: swerl {statistics.mean(lengths):.1f}, "
        f"TRL {trl_length:.1f}), beta 0, mu 1, {torch.get_num_threads()} threads"
    )
    breakdown = ", ".join(f"{name[5:]} {statistics.median(v) * 1000:.1f}" for name, v in parts.items())
    print(f"swerl GRPO step: median {med_ours * 1000:7.1f} ms over {len(ours_times)} steps ({breakdown} ms)")
    print(f"TRL   GRPO step: median {med_trl * 1000:7.1f} ms over {len(trl_times)} steps")
    print(f"ratio swerl / TRL: {med_ours / med_trl:.2f}x (goal <= 0.70x)")
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
