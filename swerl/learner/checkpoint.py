"""Checkpoints that resume exactly: model (HF form), optimizer, scheduler, RNG streams, data position.

Layout of `RUN/checkpoint-STEP/`, as HF Trainer lays out its checkpoints, so that
`AutoModelForCausalLM.from_pretrained("RUN/checkpoint-STEP")` loads the policy of that step:

    config.json, model.safetensors, tokenizer files    save_pretrained of the policy and its tokenizer
    optimizer.pt         plain torch path (DeepSpeed keeps its sharded states under deepspeed/)
    scheduler.pt
    rng_state_RANK.pt    python, numpy, torch CPU (and CUDA) generators of each rank
    trainer_state.json   step, data position and whatever else the trainer needs to continue

A checkpoint is written into `checkpoint-STEP.tmp` and renamed when complete, so a crash mid-write
never leaves a directory that `latest_checkpoint` would pick.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from swerl.learner.dist import DistInfo, barrier
from swerl.learner.layout import checkpoint_dirs


def rng_state() -> dict[str, Any]:
    """Every generator sampling touches: generation draws from torch's, data order from its own seed."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def load_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def save_checkpoint(
    run_dir: Path,
    step: int,
    learner: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    dist: DistInfo,
    keep: int | None = None,
) -> Path:
    """Write checkpoint-STEP (all ranks call: DeepSpeed and ZeRO-3 gathering are collective)."""
    final = run_dir / f"checkpoint-{step}"
    tmp = run_dir / f"checkpoint-{step}.tmp"
    if dist.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier()
    learner.save_pretrained(tmp, tokenizer)
    learner.save_state(tmp)
    torch.save(rng_state(), tmp / f"rng_state_{dist.rank}.pt")
    barrier()
    if dist.is_main:
        (tmp / "trainer_state.json").write_text(json.dumps(trainer_state, indent=2), encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if keep is not None and keep > 0:
            for old in checkpoint_dirs(run_dir)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def load_checkpoint(ckpt: Path, learner: Any, dist: DistInfo) -> dict[str, Any]:
    """Restore optimizer, scheduler and this rank's RNG; returns the trainer state to continue from.

    The model weights were already loaded from the checkpoint when the trainer built the model.
    """
    learner.load_state(ckpt)
    rng_file = ckpt / f"rng_state_{dist.rank}.pt"
    if rng_file.exists():
        load_rng_state(torch.load(rng_file, weights_only=False))
    return json.loads((ckpt / "trainer_state.json").read_text(encoding="utf-8"))
