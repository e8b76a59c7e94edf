"""The RL math as small pure tensor functions: advantages, policy/value losses, KL, entropy.

Nothing here knows about models, optimizers or data: every function takes tensors and returns tensors
(and a dict of detached metrics where a loss has some), so each one is unit-tested on hand-computed
numbers. Estimators and losses are registered by name (`ADVANTAGE_ESTIMATORS`, `POLICY_LOSSES`) so a
config can choose them without the trainer branching on strings. docs/algorithms.md states the choices.
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
from swerl.algorithms.ppo import clipped_value_loss, turn_level_gae, whiten
from swerl.algorithms.registry import (
    ADVANTAGE_ESTIMATORS,
    POLICY_LOSSES,
    get_advantage_estimator,
    get_policy_loss,
    register_advantage,
    register_policy_loss,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "POLICY_LOSSES",
    "aggregate_loss",
    "clipped_policy_loss",
    "clipped_value_loss",
    "entropy_from_logits",
    "get_advantage_estimator",
    "get_policy_loss",
    "group_advantages",
    "group_reward_metrics",
    "kl_k3",
    "logprob_mismatch",
    "masked_mean",
    "masked_sum",
    "register_advantage",
    "register_policy_loss",
    "reinforce_loss",
    "soft_overlong_penalty",
    "token_logprobs",
    "truncated_is_weights",
    "turn_level_gae",
    "whiten",
    "zero_std_groups",
]
