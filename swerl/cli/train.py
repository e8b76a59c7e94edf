"""`swerl train grpo|sft --config FILE`: run a training job described by a YAML config.

Multi-process runs use a launcher, which sets RANK/WORLD_SIZE/... for each process:

    torchrun --nproc_per_node 8 -m swerl.cli.main train grpo --config configs/grpo_qwen25_coder_7b.yaml
    deepspeed --num_gpus 8 --module swerl.cli.main train grpo --config ...
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from swerl.learner.dist import shutdown_distributed
from swerl.trainers.config import C, GRPOConfig, SFTConfig


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "train",
        help="train a policy: GRPO with the SWE-RL reward, or the SFT baseline",
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
        sub.set_defaults(run={"grpo": _run_grpo, "sft": _run_sft, "rlef": _run_rlef}[name])


def _load(cls: type[C], args: argparse.Namespace) -> C:
    if not args.config.exists():
        raise FileNotFoundError(f"no config file {args.config}")
    config = cls.from_yaml(args.config, args.overrides)
    if args.resume:
        config.resume_from_checkpoint = args.resume
    return config


def _report(result: dict, output_dir: str) -> None:
    if int(os.environ.get("RANK", "0")) != 0:
        return
    for key in ("eval_before", "eval_after"):
        if key in result:
            print(f"{key.replace('_', ' ')}: {result[key].summary()}", file=sys.stderr)
    print(f"run directory: {output_dir} (metrics.jsonl, final/; plot with `swerl plot {output_dir}`)")


def _run_grpo(args: argparse.Namespace) -> int:
    from swerl.trainers import grpo

    config = _load(GRPOConfig, args)
    result = grpo.run(config, progress=not args.quiet)
    shutdown_distributed()
    _report(result, config.output_dir)
    return 0


def _run_sft(args: argparse.Namespace) -> int:
    from swerl.trainers import sft

    config = _load(SFTConfig, args)
    result = sft.run(config, progress=not args.quiet)
    shutdown_distributed()
    _report(result, config.output_dir)
    return 0


def _run_rlef(args: argparse.Namespace) -> int:
    from swerl.trainers import rlef

    config = _load(rlef.RLEFConfig, args)
    result = rlef.run(config, progress=not args.quiet)
    shutdown_distributed()
    if int(os.environ.get("RANK", "0")) == 0:
        for key in ("eval_before", "eval_after"):
            if key in result:
                print(f"{key.replace('_', ' ')}: {result[key].summary()}", file=sys.stderr)
        print(f"run directory: {config.output_dir} (metrics.jsonl, eval.json, final/)")
    return 0
