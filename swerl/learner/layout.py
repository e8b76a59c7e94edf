"""Where a run keeps its checkpoints: `RUN/checkpoint-STEP/`, found without importing torch.

Kept apart from `swerl.learner.checkpoint` (which saves and loads them with torch) so the command line
can check a run directory before deciding to load anything heavy.
"""

from __future__ import annotations

import re
from pathlib import Path

_CKPT = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Completed checkpoints of a run, oldest first (a `checkpoint-N.tmp` being written is not one)."""
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := _CKPT.match(p.name))]
    return [p for _, p in sorted(found)]


def checkpoint_model_dir(ckpt: Path) -> Path:
    """Where a checkpoint's HF model lies: the checkpoint itself, or its `model/` folder in checkpoints
    written before the layout followed HF Trainer's."""
    legacy = ckpt / "model"
    return legacy if (legacy / "config.json").is_file() else ckpt


def latest_checkpoint(run_dir: Path) -> Path | None:
    dirs = checkpoint_dirs(run_dir)
    return dirs[-1] if dirs else None
