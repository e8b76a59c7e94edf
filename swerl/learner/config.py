"""Optimization settings shared by every trainer (GRPO, SFT): one dataclass, names as in TRL/HF."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from swerl.configs import BelowOne, NonNegativeFloat, NonNegativeInt, PositiveFloat


@dataclass
class LearnerConfig:
    """How the policy's weights are updated.

    Attributes:
        learning_rate: peak learning rate of AdamW.
        weight_decay: AdamW decoupled weight decay.
        adam_beta1, adam_beta2, adam_epsilon: AdamW moments and epsilon.
        max_grad_norm: clip the global gradient norm to this (0 disables clipping).
        lr_scheduler_type: "constant", "linear" (decay to 0) or "cosine" (to 0), after warmup.
        warmup_steps: optimizer steps of linear warmup from 0.
        gradient_checkpointing: recompute activations in backward (less memory, ~30% more time).
        bf16: "auto" uses bfloat16 where the hardware has it (a CUDA GPU with bf16), True forces it,
            False keeps float32. On CPU "auto" means float32: bf16 matmuls are slower there.
        deepspeed: path to a DeepSpeed JSON config (configs/deepspeed/*.json) or None for plain torch.
            "auto" values in it are filled from this config; an "optimizer" block is refused because the
            learner always passes a client optimizer (a config optimizer JIT-compiles FusedAdam).
        seed: seeds python, numpy and torch at start; each rank adds its rank so samples differ.
    """

    learning_rate: PositiveFloat = 1e-6
    weight_decay: NonNegativeFloat = 0.0
    adam_beta1: BelowOne = 0.9
    adam_beta2: BelowOne = 0.999
    adam_epsilon: PositiveFloat = 1e-8
    max_grad_norm: NonNegativeFloat = 1.0
    lr_scheduler_type: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: NonNegativeInt = 0
    gradient_checkpointing: bool = False
    bf16: bool | Literal["auto"] = "auto"
    deepspeed: str | None = None
    seed: NonNegativeInt = 0
