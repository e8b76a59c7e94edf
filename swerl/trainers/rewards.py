"""Group rewards: score the G answers to one prompt together, so per-prompt work happens once.

A reward function takes the example and the group's completions and returns one `RewardResult` each;
`error` names the malformation (for the malformed-rate metrics) or is None.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from swerl.errors import UserError
from swerl.reward import RewardConfig, RewardResult, normalized_diffs, similarity_reward
from swerl.trainers.data import Example

GroupReward = Callable[[Example, Sequence[Any]], list[RewardResult]]


def swe_rl_reward(config: RewardConfig = RewardConfig()) -> GroupReward:
    """The SWE-RL similarity reward; the oracle diff is computed once per group, not G times."""

    def score(example: Example, completions: Sequence[Any]) -> list[RewardResult]:
        oracle = normalized_diffs(example.code_context, example.oracle_new_content)
        return [
            similarity_reward(
                c.text, example.code_context, example.oracle_new_content, config=config, oracle_diffs=oracle
            )
            for c in completions
        ]

    return score


def token_reward(token_ids: int | Collection[int]) -> GroupReward:
    """Fraction of answer tokens in `token_ids`: a dense reward any model can learn in a few steps.

    It reads token ids, not text, so it needs no tokenizer and cannot be fooled by decoding; tests and
    smoke configs use it to check that the GRPO plumbing raises a reward at all.
    """
    targets = {token_ids} if isinstance(token_ids, int) else set(token_ids)

    def score(example: Example, completions: Sequence[Any]) -> list[RewardResult]:
        del example
        results = []
        for c in completions:
            ids = list(c.token_ids)
            results.append(RewardResult(reward=sum(t in targets for t in ids) / max(1, len(ids))))
        return results

    return score


def reward_from_name(name: str, strict: bool = False) -> GroupReward:
    """`swe_rl` or `token:N`, as written in a config."""
    if name == "swe_rl":
        return swe_rl_reward(RewardConfig(strict=strict))
    if name.startswith("token:"):
        spec = name.split(":", 1)[1]
        lo, _, hi = spec.partition("-")
        return token_reward(range(int(lo), int(hi or lo) + 1))
    raise UserError(f"unknown reward {name!r}; use 'swe_rl', 'token:N' or 'token:LO-HI'")
