"""`swerl train grpo|sft|rlef --config FILE`: run a training job described by a YAML config.

Multi-process runs use a launcher, which sets RANK/WORLD_SIZE/... for each process:

    torchrun --nproc_per_node 8 -m swerl train grpo --config configs/grpo_qwen25_coder_7b.yaml
    deepspeed --num_gpus 8 --module swerl train grpo --config ...

Everything that can be wrong with the config, its input files or the run directory is reported before
the trainer module (and with it torch and transformers) is imported.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from swerl.cli import silence_library_progress
from swerl.cli.args import absolute, config_file, local_or_name
from swerl.errors import UserError

# Subcommand -> (trainer module under swerl.trainers, its config class, what its run directory holds,
# a --set example that the config class has).
_TRAINERS = {
    "grpo": (
        "grpo",
        "GRPOConfig",
        "metrics.jsonl, eval_*.jsonl, final/",
        "--set max_steps=10 --set beta=0.04",
    ),
    "sft": (
        "sft",
        "SFTConfig",
        "metrics.jsonl, eval_*.jsonl, final/",
        "--set max_steps=10 --set learning_rate=2e-5",
    ),
    "rlef": ("rlef", "RLEFConfig", "metrics.jsonl, eval.json, final/", "--set max_steps=10 --set beta=0.1"),
}
# Trainers whose train_file holds the data pipeline's rows (RLEF reads code_contests problems).
_ROW_FILE_TRAINERS = ("grpo", "sft")
# Where each config class lives: the light module, so --fields and validation need no torch.
_CONFIG_MODULES = {
    "GRPOConfig": "swerl.trainers.config",
    "SFTConfig": "swerl.trainers.config",
    "RLEFConfig": "swerl.trainers.config",
}


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "train",
        help="train a policy: GRPO (SWE-RL, execution or hybrid reward), the SFT baseline, or RLEF",
        description="Train from a YAML config (see configs/ and docs/training.md). Every config field can be "
        "overridden with --set key=value; --fields lists them.",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for name, help_text in (
        ("grpo", "GRPO on the SWE-RL similarity reward or the tests (`reward: execution|hybrid`)"),
        ("sft", "supervised fine-tuning on canonical answers built from the oracle patches"),
        ("rlef", "RLEF: multi-turn PPO with execution feedback on contest problems or repository rows"),
    ):
        example = _TRAINERS[name][3]
        sub = commands.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  swerl train {name} --config configs/{name}_tiny_cpu.yaml {example}",
        )
        sub.add_argument(
            "--config",
            type=config_file,
            help="YAML file of config fields (required to train); configs/NAME.yaml falls back to swerl's "
            "own configs folder when it is not in this directory",
        )
        sub.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"override one field (parsed with the field's type), e.g. {example}",
        )
        sub.add_argument(
            "--resume",
            nargs="?",
            type=local_or_name,
            const="latest",
            default=None,
            metavar="CHECKPOINT",
            help="continue from a checkpoint directory (no value: the newest in output_dir); the options "
            "must be those the run was started with",
        )
        sub.add_argument(
            "--overwrite",
            action="store_true",
            help="start again from scratch in an output_dir that holds a run (its metrics, checkpoints "
            "and final model are deleted)",
        )
        sub.add_argument("--fields", action="store_true", help="list every config field and exit")
        sub.add_argument("--quiet", action="store_true", help="no progress bar")
        sub.set_defaults(run=_run, parser=sub)


def config_class(command: str) -> type:
    """The config dataclass of `swerl train COMMAND`, imported from the lightest module that has it."""
    module_name, config_name, _, _ = _TRAINERS[command]
    module = _CONFIG_MODULES.get(config_name, f"swerl.trainers.{module_name}")
    return getattr(importlib.import_module(module), config_name)


# Config fields that name local files or folders (those a config class has), made absolute against the
# current directory as the command line's own paths are: the run's config.yaml then says which files it
# read and wrote wherever it is read from, and no trainer step sees a relative path.
_PATH_FIELDS = (
    "model_name_or_path",
    "train_file",
    "eval_file",
    "output_dir",
    "deepspeed",
    "resume_from_checkpoint",
    "execution_cache_dir",
    "execution_clones",
    "execution_python",
)


def absolute_config_paths(config: Any) -> None:
    """Make `config`'s path fields absolute in place. Left as written: a hub model id, a data source
    that is not a file (`bundled:test`, `hf:NAME`) and resume's `latest`; a comma-separated list of
    files is resolved file by file."""
    from swerl.configs import looks_local
    from swerl.trainers.config import is_local_path

    for name in _PATH_FIELDS:
        value = getattr(config, name, None)
        if not isinstance(value, str) or not value or (name, value) == ("resume_from_checkpoint", "latest"):
            continue
        if name == "model_name_or_path":
            resolved = str(absolute(value)) if looks_local(value) else value
        elif name == "execution_python":  # a path, or a command found on PATH (python3.11)
            resolved = str(absolute(value)) if "/" in value else value
        else:
            parts = [part.strip() for part in value.split(",")]
            resolved = ",".join(str(absolute(p)) if is_local_path(p) else p for p in parts)
        setattr(config, name, resolved)


def load_checked(command: str, args: argparse.Namespace) -> Any:
    """The config with every value checked, its input files present and its run directory ready; all
    before any model is loaded."""
    from swerl.trainers.rundir import prepare_run_dir

    cls = config_class(command)
    config = cls.from_yaml(args.config, args.overrides)
    if args.resume:
        config.resume_from_checkpoint = args.resume
    absolute_config_paths(config)
    missing = config.missing_inputs()
    if not missing and command in _ROW_FILE_TRAINERS:
        from swerl.trainers.data import rows_file_problem

        for key in ("train_file", "eval_file"):
            problem = getattr(config, key) and rows_file_problem(getattr(config, key))
            if problem:
                missing.append((key, problem))
    overridden = {item.partition("=")[0].strip() for item in args.overrides}

    def where(key: str) -> str:
        return f"--set {key}" if key in overridden else f"{args.config}: {key}"

    if missing:
        found = "; ".join(f"{where(key)}: {why}" for key, why in missing)
        # The hint is for the config's own inputs that a first command writes, not for a value the
        # user set or a file of another kind.
        from_file = [key for key, why in missing if key not in overridden and why.startswith("no such")]
        raise UserError(found + (_hint(args.config) if from_file else ""))
    if getattr(config, "rollout_engine", "hf") == "vllm":
        from swerl.rollout.vllm_engine import vllm_missing

        problem = vllm_missing()
        if problem:
            raise UserError(f"{where('rollout_engine')}: vllm: {problem}")
    from swerl.hub import unavailable_model

    problem = unavailable_model(config.model_name_or_path)
    if problem:
        raise UserError(f"{where('model_name_or_path')}: {problem}")
    overlap = config.held_out_in_training()
    if overlap:
        print(f"swerl: warning: {overlap}", file=sys.stderr)
    prepare_run_dir(config, overwrite=args.overwrite)
    return config


def _hint(config_path: Path) -> str:
    if config_path.name.startswith("rlef_") and config_path.name.endswith("_cpu.yaml"):
        return " (the tiny RLEF configs start from a model built by the command in their header comment)"
    if config_path.name in ("grpo_tiny_cpu.yaml", "sft_tiny_cpu.yaml"):
        return " (the tiny CPU configs train on what `swerl quickstart` writes: run it first)"
    return ""


def _write_samples(path: Path, samples: list[dict[str, Any]]) -> None:
    """One held-out answer per line (instance, reward, error kind, text): what per-row statistics such
    as bootstrap intervals are computed from; the summary line alone cannot give them."""
    with path.open("w", encoding="utf-8") as f:
        for sample in samples:
            f.write(json.dumps(sample) + "\n")


def _run(args: argparse.Namespace) -> int:
    """Load the subcommand's config, run its trainer, report the held-out evaluations on rank 0."""
    if args.fields:
        from swerl.configs import format_fields

        print(format_fields(config_class(args.command)))
        return 0
    if args.config is None:
        args.parser.error("--config FILE is required (see configs/; --fields lists what it may set)")
    config = load_checked(args.command, args)
    if args.quiet:
        silence_library_progress()
    trainer = importlib.import_module(f"swerl.trainers.{_TRAINERS[args.command][0]}")
    result = trainer.run(config, progress=not args.quiet)
    from swerl.learner.dist import shutdown_distributed

    shutdown_distributed()
    if int(os.environ.get("RANK", "0")) == 0:
        out = config.output_dir
        for key in ("eval_before", "eval_after"):
            if key in result:
                print(f"{key.replace('_', ' ')}: {result[key].summary()}", file=sys.stderr)
                if args.command in _ROW_FILE_TRAINERS:  # RLEF writes its own eval.json
                    _write_samples(Path(out) / f"{key}.jsonl", result[key].samples)
        print(f"run directory: {out} ({_TRAINERS[args.command][2]}; plot with `swerl plot {out}`)")
    return 0
