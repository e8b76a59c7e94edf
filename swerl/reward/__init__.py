"""Rewards. `similarity` is the SWE-RL patch-similarity reward; `batch` scores many rows on all cores."""

from swerl.reward.similarity import (
    DEFAULT_MAX_DIFF_CHARS,
    RewardConfig,
    RewardResult,
    normalized_diffs,
    similarity_reward,
)

__all__ = [
    "DEFAULT_MAX_DIFF_CHARS",
    "RewardConfig",
    "RewardResult",
    "normalized_diffs",
    "similarity_reward",
]
