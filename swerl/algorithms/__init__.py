"""The RL math as small pure tensor functions: advantages, policy/value losses, KL, entropy.

Nothing here knows about models, optimizers or data: every function takes tensors and returns tensors
(and a dict of detached metrics where a loss has some), so each one is unit-tested on hand-computed
numbers. docs/algorithms.md states the choices.
"""

from swerl.algorithms.diagnostics import logprob_mismatch
from swerl.algorithms.grpo import (
    group_advantages,
    group_reward_metrics,
    soft_overlong_penalty,
    zero_std_groups,
)
from swerl.algorithms.losses import (
    aggregate_loss,
    clipped_policy_loss,
    entropy_from_logits,
    kl_k3,
    masked_mean,
    masked_sum,
    reinforce_loss,
    token_logprobs,
    truncated_is_weights,
)
from swerl.algorithms.ppo import clipped_value_loss, kl_penalized_rewards, turn_level_gae, whiten

__all__ = [
    "aggregate_loss",
    "clipped_policy_loss",
    "clipped_value_loss",
    "entropy_from_logits",
    "group_advantages",
    "group_reward_metrics",
    "kl_k3",
    "kl_penalized_rewards",
    "logprob_mismatch",
    "masked_mean",
    "masked_sum",
    "reinforce_loss",
    "soft_overlong_penalty",
    "token_logprobs",
    "truncated_is_weights",
    "turn_level_gae",
    "whiten",
    "zero_std_groups",
]
