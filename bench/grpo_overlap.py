"""Benchmark: one GRPO step's rollout (generation and rewards) with the rewards overlapped, against after.

The tiny CPU Llama samples G answers to each of a step's prompts, one prompt per decoding batch
(`generation_batch_size` = G), so the transformers engine hands over each group as it is decoded. The
reward has a realistic cost:

- with `--dataset`: the execution reward on real SWE-bench rows (every answer of a group is the row's
  gold patch, so its tests really run: one distinct answer per group, a fresh checkout, the test patch,
  the test command in bubblewrap, grading). Each prompt of a step is one of `--instance-ids`, in turn.
  The instances' environments must be in `--cache-dir` already (a warm-up run scores each once);
- with `--busy-seconds S`: a reward that runs a subprocess computing for S seconds per group;
- with `--sleep-seconds S`: one that sleeps for S seconds per group instead, as tests run on other
  machines (Ray's CPU nodes) cost the trainer's machine nothing but the wait.

The sampler gets `--torch-threads` threads (default 1) and the reward the machine's other cores, as
in a real run, where the GPUs sample and the tests run on CPUs: on a machine where both compete for
the same cores, overlapping them can only share those cores out differently.

One trainer takes its steps alternately with `overlap_rewards` on and off (the order swapped every
round, so the machine's changing load hits both alike); the rollout of a step is `time/generate` +
`time/reward_wait` (generation, then the wait for the rewards still running when it ended). Prints the
medians over `--rounds` rounds and the ratio on / off.

    PYTHONPATH=. python bench/grpo_overlap.py --dataset SWE-bench_Lite_test.parquet --clones DIR \
        --cache-dir runs/agentless-cache --instance-ids pallets__flask-4992 [--rounds 4] [--prompts 4] \
        [--generations 8] [--completion-length 64]
    PYTHONPATH=. python bench/grpo_overlap.py --busy-seconds 1.0 | --sleep-seconds 1.0
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from swerl.execution.instances import Instance, load_instances
from swerl.execution.local import cached_backend
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.reward import RewardResult
from swerl.reward.execution import ExecutionReward
from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer

PROMPT_TEXT = "def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip()\n"


class GoldTests:
    """The execution reward of a group whose answers are all its row's gold patch (one test run)."""

    def __init__(self, execution: ExecutionReward, instances: dict[str, Instance]) -> None:
        self.execution = execution
        self.instances = instances

    def __call__(self, example: Example, completions: Sequence[Any]) -> list[RewardResult]:
        instance = self.instances[example.instance_id]
        verdicts = self.execution.score_group(instance, [instance.patch] * len(completions))
        return [RewardResult(reward=v.reward if v.reward is not None else 0.0) for v in verdicts]


class FixedCost:
    """A reward of fixed cost: a Python subprocess per group that computes (`busy`) or sleeps for
    `seconds`; sleeping stands for tests that run elsewhere (Ray's CPU nodes) while this process waits."""

    def __init__(self, seconds: float, busy: bool) -> None:
        spin = f"end = time.perf_counter() + {seconds}\nwhile time.perf_counter() < end: pass"
        self.code = "import time\n" + (spin if busy else f"time.sleep({seconds})")

    def __call__(self, example: Example, completions: Sequence[Any]) -> list[RewardResult]:
        subprocess.run([sys.executable, "-c", self.code], check=True)
        return [RewardResult(reward=float(i % 2)) for i in range(len(completions))]


def build(args: argparse.Namespace, out: Path) -> tuple[GRPOTrainer, str]:
    """The trainer on the tiny model, its reward and a name for that reward."""
    model_dir = build_tiny_model(out / "model", seed=0)
    model, tokenizer = load_model_and_tokenizer(model_dir)
    ids = tokenizer(PROMPT_TEXT * 20)["input_ids"]
    if args.dataset:
        backend = cached_backend(args.cache_dir, clones=args.clones, offline=True)
        execution = ExecutionReward(backend, workers=1)
        instances = {i.instance_id: i for i in load_instances(args.dataset, instance_ids=args.instance_ids)}
        for instance in instances.values():  # warm: the environment is there, the mirror read
            verdict = execution.score_patch(instance, instance.patch)
            if verdict.reward != 1:
                raise SystemExit(f"{instance.instance_id}: the gold patch scored {verdict}")
        reward: Any = GoldTests(execution, instances)
        names = list(instances)
        name = "execution, gold patch of " + ", ".join(names)
    elif args.sleep_seconds is not None:
        reward, names = FixedCost(args.sleep_seconds, busy=False), [""]
        name = f"subprocess sleeping {args.sleep_seconds:g} s"
    else:
        reward, names = FixedCost(args.busy_seconds, busy=True), [""]
        name = f"subprocess computing {args.busy_seconds:g} s"
    examples = [
        Example(prompt_ids=ids[i : i + 24], instance_id=names[i % len(names)]) for i in range(args.prompts)
    ]
    config = GRPOConfig(
        output_dir=str(out / "run"),
        max_steps=10**6,
        num_generations=args.generations,
        prompts_per_step=args.prompts,
        max_completion_length=args.completion_length,
        generation_batch_size=args.generations,
        micro_batch_size=args.prompts * args.generations,
        learning_rate=1e-6,
        beta=0.0,
        bf16=False,
        report_to_tensorboard=False,
        seed=0,
    )
    return GRPOTrainer(config, model, tokenizer, examples, reward, progress=False), name


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", help="SWE-bench rows (parquet/JSONL); without it, --busy-seconds")
    parser.add_argument("--clones", type=Path)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/agentless-cache"))
    parser.add_argument("--instance-ids", nargs="+", default=[])
    parser.add_argument("--busy-seconds", type=float, default=1.0)
    parser.add_argument(
        "--sleep-seconds", type=float, help="instead of --busy-seconds: a subprocess that sleeps"
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--completion-length", type=int, default=64)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    if args.dataset and not args.instance_ids:
        parser.error("--dataset needs --instance-ids")
    with tempfile.TemporaryDirectory(prefix="swerl-bench-overlap-") as tmp:
        trainer, name = build(args, Path(tmp))
        trainer.train_step()  # warm: first forward passes, allocator
        seen: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for r in range(args.rounds):
            for overlap in (True, False) if r % 2 == 0 else (False, True):
                trainer.config.overlap_rewards = overlap
                seen[overlap].append(trainer.train_step())
    load = os.getloadavg()[0]

    def med(overlap: bool, *names: str) -> float:
        return statistics.median(sum(m[n] for n in names) for m in seen[overlap])

    rollout = {o: med(o, "time/generate", "time/reward_wait") for o in (True, False)}
    shape = f"{args.prompts} prompts x {args.generations} answers x {args.completion_length} tokens"
    print(f"reward: {name}; {shape}; {args.torch_threads} torch thread(s)")
    print(f"medians of {args.rounds} steps each, load average at the end {load:.2f}")
    print("| overlap_rewards | time/generate | time/reward | time/reward_wait | rollout (generate + wait) |")
    print("|---|---|---|---|---|")
    for o in (False, True):
        print(
            f"| {str(o).lower()} | {med(o, 'time/generate'):.2f} s | {med(o, 'time/reward'):.2f} s | "
            f"{med(o, 'time/reward_wait'):.2f} s | {rollout[o]:.2f} s |"
        )
    print(f"rollout on / off: {rollout[True] / rollout[False]:.2f}x")


if __name__ == "__main__":
    main()
