"""A training run's directory is never overwritten or continued with other options by accident.

Why: a second `swerl train` into the same `output_dir` used to truncate `metrics.jsonl` and replace
`final/`, and `--resume` with nothing to resume from started again at step 1; both looked like success.
`prepare_run_dir` runs before any model loads and decides:

- a fresh start into a directory that holds a run is refused, unless `overwrite` (then the run's own
  files are removed; anything else in the directory is left alone);
- a resume needs a checkpoint, and the options recorded in the run's `config.yaml` must match the new
  ones, except those that do not change what the steps compute (`RESUMABLE_CHANGES`).

Only the process of global rank 0 checks and removes: other ranks may start seconds or minutes later
and would see the files rank 0 has begun to write.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from swerl.errors import UserError
from swerl.paths import hold_folder, other_files

RUN_FILES = ("config.yaml", "metrics.jsonl", "eval.json", "final", "tensorboard", "plots", "wandb")
_CHECKPOINT = re.compile(r"^checkpoint-\d+(\.tmp)?$")
RESUMABLE_CHANGES = frozenset(
    {
        "max_steps",  # run on for more steps (a decaying schedule then spans the new total)
        "resume_from_checkpoint",
        "logging_steps",
        "save_steps",
        "save_total_limit",
        "report_to_tensorboard",
        "report_to_wandb",
        "wandb_project",
        "output_dir",  # the same directory under another spelling
    }
)


def run_files(run_dir: Path) -> list[str]:
    """Names of what a training run wrote into `run_dir` (sorted; empty for a new directory)."""
    if not run_dir.is_dir():
        return []
    return sorted(p.name for p in run_dir.iterdir() if p.name in RUN_FILES or _CHECKPOINT.match(p.name))


def took_a_step(run_dir: Path, existing: list[str]) -> bool:
    """Whether the run files `existing` of `run_dir` hold any result: a metrics line, an evaluation, a
    checkpoint or a final model. config.yaml, an empty metrics file and TensorBoard's opening event file
    are written before the first step."""
    if any(name not in ("config.yaml", "metrics.jsonl", "tensorboard") for name in existing):
        return True
    metrics = run_dir / "metrics.jsonl"
    return metrics.is_file() and metrics.stat().st_size > 0


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def changed_options(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """'key: old -> new' for each option that differs and matters to what the run computes."""
    keys = sorted((set(recorded) | set(current)) - RESUMABLE_CHANGES)
    return [
        f"{key}: {_shown(recorded.get(key))} -> {_shown(current.get(key))}"
        for key in keys
        if recorded.get(key) != current.get(key)
    ]


def prepare_run_dir(config: Any, *, overwrite: bool = False, rank: int | None = None) -> None:
    """Refuse (UserError) to start a run that would silently overwrite or mis-continue another; with
    `overwrite`, remove the previous run's files. A no-op on ranks other than 0."""
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    if rank != 0:
        return
    run_dir = Path(config.output_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"output_dir {run_dir} is a file, not a directory")
    existing = run_files(run_dir)
    if config.resume_from_checkpoint:
        if overwrite:
            raise UserError("--overwrite and --resume contradict each other: choose one")
        _check_resume(config, run_dir)
    elif not existing:
        _warn_of_other_files(run_dir)
    # Held from here until the process ends: a run writing this folder now stops this one before any of
    # its files is removed below.
    hold_folder(run_dir, "training run")
    if config.resume_from_checkpoint or not existing:
        return
    if not overwrite and not took_a_step(run_dir, existing):
        # A start that failed before its first step (a missing package, a wrong option) left only its
        # bookkeeping: the corrected command replaces it rather than asking for --overwrite.
        print(f"swerl: replacing {', '.join(existing)} in {run_dir}: that run took no step", file=sys.stderr)
        remove_outputs(run_dir, existing)
        return
    if not overwrite:
        raise UserError(
            f"{run_dir} already holds a run ({', '.join(existing[:6])}); continue it with --resume, start it "
            f"again with --overwrite, or set another output_dir"
        )
    remove_outputs(run_dir, existing)


def _warn_of_other_files(run_dir: Path) -> None:
    """Not a refusal (a folder made ready for the run is fine), but a mining output or another tool's
    folder given by mistake would end up with the run's files mixed into its own."""
    shown = other_files(run_dir, 5)
    if shown:
        print(f"swerl: warning: output_dir {run_dir} already holds other files ({shown})", file=sys.stderr)


def remove_outputs(folder: Path, names: Iterable[str]) -> None:
    """Delete the files and folders `names` under `folder` (missing ones are fine), nothing else."""
    for name in names:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _checkpoint_step(ckpt: Path) -> int | None:
    """The step checkpoint `ckpt` was written at (None when its state file does not say)."""
    try:
        step = json.loads((ckpt / "trainer_state.json").read_text(encoding="utf-8")).get("step")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) else None


def _check_resume(config: Any, run_dir: Path) -> None:
    from swerl.learner.layout import checkpoint_dirs, checkpoint_model_dir

    target = config.resume_from_checkpoint
    if target == "latest":
        found = checkpoint_dirs(run_dir)
        if not found and not run_files(run_dir):
            raise UserError(f"--resume: {run_dir} holds no run to resume; start it without --resume")
        if not found:
            raise UserError(
                f"--resume: no checkpoint-N in {run_dir} to resume from (checkpoints are written every "
                f"save_steps steps and at the last one; with save_steps 0 only final/ is kept); start it "
                f"again with --overwrite"
            )
        path = found[-1]
    else:
        path = Path(target)
        if not path.exists():
            raise UserError(f"--resume: no such checkpoint directory {path}")
        if not (path / "trainer_state.json").is_file():
            raise UserError(f"--resume: {path} is not a checkpoint directory (no trainer_state.json)")
        owner = path.resolve().parent
        if owner != run_dir.resolve():
            # Another run's checkpoint carries that run's optimizer, schedule and step: resuming it here
            # trained with its settings and cut this run's own later metrics and checkpoints.
            raise UserError(
                f"--resume: {path} is a checkpoint of {owner}, not of output_dir {run_dir}; resume that run "
                f"with --set output_dir={owner}, or start a new run from its weights with --set "
                f"model_name_or_path={checkpoint_model_dir(path)}"
            )
    step = _checkpoint_step(path)
    if step is not None and step >= config.max_steps:
        raise UserError(
            f"--resume: {path} is at step {step} and max_steps is {config.max_steps}: nothing left to train; "
            f"raise max_steps (e.g. --set max_steps={step + config.max_steps}) to run on"
        )
    recorded_file = run_dir / "config.yaml"
    if not recorded_file.is_file():
        return
    recorded = yaml.safe_load(recorded_file.read_text(encoding="utf-8")) or {}
    changes = changed_options(recorded, config.to_dict())
    if changes:
        raise UserError(
            f"--resume: {run_dir} was run with other options ({'; '.join(changes)}); resume with the options "
            f"it was started with, or start a new output_dir"
        )
