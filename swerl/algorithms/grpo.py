"""Group-relative advantages (GRPO): each answer is judged against the other answers to the same prompt.

Rewards arrive flat, `[num_prompts * group_size]`, with the G answers of one prompt next to each other
(the order the rollout engines return them in). No value model is needed: the group mean is the
baseline.

Which standard deviation: the **unbiased** sample std (`torch.std`, Bessel's correction, divisor G - 1),
the one TRL's `GRPOTrainer` uses, so our advantages and TRL's agree number for number and runs can be
compared. With G = 1 the unbiased std is undefined; there the advantage is 0 anyway (r - mean = 0), and
we define the std as 0 rather than let a NaN into the loss. `eps` = 1e-4, also TRL's value, keeps a group
whose rewards differ by a hair from blowing up to ±1/eps-sized advantages while staying small next to
the reward scale (the SWE-RL reward lives in [-1, 1]).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

RewardScale = Literal["group", "batch", "none"]


def _grouped(rewards: Tensor, group_size: int) -> Tensor:
    """`[B*G]` → `[B, G]`, refusing sizes that would silently mix two prompts' answers in one group."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [num_prompts * group_size], got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    return rewards.view(-1, group_size)


def _unbiased_std(x: Tensor, dim: int | None = None) -> Tensor:
    """`torch.std` with divisor n - 1, but 0 (not NaN) when there is a single element."""
    n = x.numel() if dim is None else x.shape[dim]
    if n < 2:
        return torch.zeros_like(x.mean(dim=dim)) if dim is not None else x.new_zeros(())
    return x.std(dim=dim) if dim is not None else x.std()


def group_advantages(
    rewards: Tensor,
    group_size: int,
    scale: RewardScale = "group",
    eps: float = 1e-4,
) -> Tensor:
    """Advantage of every answer: (r - mean of its group) / (std + eps), flat like `rewards`.

    `scale` picks the std: "group" — each group's own unbiased std (GRPO as published); "batch" — one
    unbiased std over all rewards passed in (TRL's `scale_rewards="batch"`, more robust when a group is
    nearly constant; pass the rewards of the whole global batch to get the global std); "none" — no
    division (Dr. GRPO), which keeps advantages on the reward's own scale. The mean is always the group
    mean: the baseline must come from the same prompt or easy prompts would look good and hard ones bad.
    The computation is in float32 whatever the reward dtype, so bf16 rewards do not lose the baseline.
    """
    grouped = _grouped(rewards, group_size).float()
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group":
        std = _unbiased_std(grouped, dim=1).unsqueeze(1)
    elif scale == "batch":
        std = _unbiased_std(grouped.reshape(-1))
    elif scale == "none":
        return centered.reshape(-1)
    else:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    return (centered / (std + eps)).reshape(-1)


def zero_std_groups(rewards: Tensor, group_size: int) -> Tensor:
    """`[num_groups]` booleans: True where every answer in the group got exactly the same reward.

    Such a group has all-zero advantages, so it adds nothing to the policy gradient but still costs a
    forward/backward; its fraction is logged as `frac_reward_zero_std` and the trainer may drop it.
    Exact equality (max == min) rather than a std threshold: rewards that differ at all carry a signal.
    """
    grouped = _grouped(rewards, group_size)
    return grouped.amax(dim=1) == grouped.amin(dim=1)


def group_reward_metrics(rewards: Tensor, group_size: int) -> dict[str, Tensor]:
    """TRL-named metrics of one batch: reward, reward_std (mean per-group std), frac_reward_zero_std."""
    grouped = _grouped(rewards, group_size).float()
    return {
        "reward": grouped.mean(),
        "reward_std": _unbiased_std(grouped, dim=1).mean(),
        "frac_reward_zero_std": zero_std_groups(rewards, group_size).float().mean(),
    }


def soft_overlong_penalty(lengths: Tensor, max_length: int, buffer: int, factor: float = 1.0) -> Tensor:
    """DAPO's soft overlong punishment, added to the reward: 0 up to `max_length - buffer` tokens, then
    falling linearly to -factor at `max_length` (and -factor beyond).

    An answer cut at the budget gets a reward that says nothing about its quality; masking it
    (`mask_truncated_completions`) or grading the approach to the limit tells the policy that length
    itself costs, without a cliff at one token (Yu et al. 2025, DAPO, eq. 13; TRL's
    `get_soft_overlong_punishment`, verl's `overlong_buffer`). `buffer` 0 disables it.
    """
    if buffer < 0 or buffer > max_length:
        raise ValueError(f"overlong buffer must be in [0, max_length={max_length}], got {buffer}")
    if buffer == 0:
        return torch.zeros_like(lengths, dtype=torch.float32)
    over = (lengths.float() - (max_length - buffer)).clamp(min=0.0, max=float(buffer))
    return -factor * over / buffer
