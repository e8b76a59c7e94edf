"""PPO pieces for multi-turn episodes (RLEF): GAE over *turns*, the clipped value loss, whitening, the
per-answer KL-penalized reward.

In RLEF an episode is up to three turns: the model writes code, sees public-test feedback, writes
again. A value head scores each turn's state (the prompt so far), the reward arrives at the end of the
last turn, and the advantage of a turn is spread over all of that turn's tokens. GAE therefore runs over
the turn axis, not the token axis: `rewards`, `values` and `dones` are `[..., T]` with T turns.
"""

from __future__ import annotations

import torch
from torch import Tensor

from swerl.algorithms.losses import masked_mean


def turn_level_gae(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over turns; returns (advantages, returns), both `[..., T]`.

    delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}
    return_t = A_t + V_t (the value head's regression target).

    `values` has T + 1 entries when the last turn needs a bootstrap value (a trajectory cut off before
    its end) or T entries, in which case the value after the last turn is 0. `done_t` marks that the
    episode ended with turn t: nothing after it is bootstrapped from or accumulated across, so several
    episodes may sit one after another on the same axis. gamma = lam = 1 (the defaults) gives
    Monte-Carlo returns minus the value baseline, the usual choice for short, sparse-reward episodes.
    """
    num_turns = rewards.shape[-1]
    if values.shape[-1] == num_turns:
        values = torch.cat([values, torch.zeros_like(values[..., :1])], dim=-1)
    elif values.shape[-1] != num_turns + 1:
        raise ValueError(f"values must have T or T + 1 = {num_turns + 1} entries, got {values.shape[-1]}")
    r = rewards.float()
    v = values.float()
    not_done = 1.0 - dones.float()
    advantages = torch.zeros_like(r)
    running = torch.zeros_like(r[..., 0])
    for t in reversed(range(num_turns)):
        delta = r[..., t] + gamma * v[..., t + 1] * not_done[..., t] - v[..., t]
        running = delta + gamma * lam * not_done[..., t] * running
        advantages[..., t] = running
    return advantages, advantages + v[..., :num_turns]


def clipped_value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    clip: float,
    mask: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped value loss: 0.5 * mean(max((V - R)^2, (V_clip - R)^2)); returns (loss, metrics).

    V_clip = old_V + clip(V - old_V, -clip, +clip) keeps one update from moving a value estimate far
    from the one the advantages were computed with; taking the max makes the clip a pessimistic bound
    rather than a gradient cut-off in both directions. `vf_clipfrac` is the fraction of entries where
    the clipped term was the larger one (the clip bound).
    """
    if mask is None:
        mask = torch.ones_like(values, dtype=torch.bool)
    v = values.float()
    old = old_values.float()
    ret = returns.float()
    v_clipped = old + torch.clamp(v - old, -clip, clip)
    unclipped_err = (v - ret) ** 2
    clipped_err = (v_clipped - ret) ** 2
    loss = 0.5 * masked_mean(torch.maximum(unclipped_err, clipped_err), mask)
    with torch.no_grad():
        clipfrac = masked_mean((clipped_err > unclipped_err).float(), mask)
    return loss, {"vf_clipfrac": clipfrac}


def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the masked entries; masked-out entries come back unchanged.

    The variance is the unbiased one (divisor n - 1), as in verl's `masked_whiten`; with a single entry
    the variance is taken as 0. `shift_mean=False` rescales but keeps the mean (used for rewards, whose
    sign means something).
    """
    if mask is None:
        mask = torch.ones_like(x, dtype=torch.bool)
    m = mask.bool()
    xf = x.float()
    n = m.sum()
    mean = masked_mean(xf, m)
    var = torch.where(m, (xf - mean) ** 2, torch.zeros_like(xf)).sum() / (n - 1).clamp(min=1)
    scaled = (xf - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        scaled = scaled + mean
    return torch.where(m, scaled, xf)


def kl_penalized_rewards(task_rewards: Tensor, policy_logp: Tensor, ref_logp: Tensor, beta: float) -> Tensor:
    """R_t = r_t - beta * log(pi(a_t|c_t) / rho(a_t|c_t)); the log-probs are per answer (summed over tokens).

    The penalty is the sampled estimate of KL(pi || rho) for that answer: positive on average, so it pulls
    the policy back toward the start model, per turn, where the task reward lives.
    """
    return task_rewards.float() - beta * (policy_logp.float() - ref_logp.float())
