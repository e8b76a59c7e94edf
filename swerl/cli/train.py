"""`swerl train grpo|sft|rlef --config FILE`: run a training job described by a YAML config.

Multi-process runs use a launcher, which sets RANK/WORLD_SIZE/... for each process:

    torchrun --nproc_per_node 8 -m swerl.cli.main train grpo --config configs/grpo_qwen25_coder_7b.yaml
    deepspeed --num_gpus 8 --module swerl.cli.main train grpo --config ...
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from swerl.learner.dist import shutdown_distributed
from swerl.trainers.config import C

# Subcommand -> (trainer module under swerl.trainers, its config class, what its run directory holds).
_TRAINERS = {
    "grpo": ("grpo", "GRPOConfig", "metrics.jsonl, final/"),
    "sft": ("sft", "SFTConfig", "metrics.jsonl, final/"),
    "rlef": ("rlef", "RLEFConfig", "metrics.jsonl, eval.json, final/"),
}


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "train",
        help="train a policy: GRPO with the SWE-RL reward, the SFT baseline, or RLEF",
        description="Train from a YAML config (see configs/ and docs/training.md). Every config field can be "
        "overridden with --set key=value.",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for name, help_text in (
        ("grpo", "GRPO on the SWE-RL similarity reward (G sampled answers per issue)"),
        ("sft", "supervised fine-tuning on canonical answers built from the oracle patches"),
        ("rlef", "RLEF: multi-turn PPO with execution feedback on code_contests-shaped problems"),
    ):
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--config", type=Path, required=True, help="YAML file of config fields")
        sub.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override one field (YAML value), e.g. --set max_steps=10 --set beta=0.04",
        )
        sub.add_argument(
            "--resume",
            nargs="?",
            const="latest",
            default=None,
            metavar="CHECKPOINT",
            help="continue from a checkpoint directory (default: the newest in output_dir)",
        )
        sub.add_argument("--quiet", action="store_true", help="no progress bar")
        sub.set_defaults(run=_run)


def _load(cls: type[C], args: argparse.Namespace) -> C:
    if not args.config.exists():
        raise FileNotFoundError(f"no config file {args.config}")
    config = cls.from_yaml(args.config, args.overrides)
    if args.resume:
        config.resume_from_checkpoint = args.resume
    return config


def _run(args: argparse.Namespace) -> int:
    """Load the subcommand's config, run its trainer, report the held-out evaluations on rank 0."""
    module_name, config_name, holds = _TRAINERS[args.command]
    trainer = importlib.import_module(f"swerl.trainers.{module_name}")  # torch etc. only when training
    config = _load(getattr(trainer, config_name), args)
    result = trainer.run(config, progress=not args.quiet)
    shutdown_distributed()
    if int(os.environ.get("RANK", "0")) == 0:
        for key in ("eval_before", "eval_after"):
            if key in result:
                print(f"{key.replace('_', ' ')}: {result[key].summary()}", file=sys.stderr)
        out = config.output_dir
        print(f"run directory: {out} ({holds}; plot with `swerl plot {out}`)")
    return 0
