"""Reward functions with TRL's signature, for `trl.GRPOTrainer(reward_funcs=[swe_rl_reward], ...)`.

TRL (1.16) calls each reward function with keyword arguments: `prompts`, `completions`, `completion_ids`,
every column of the training dataset (one value per completion, a prompt's row repeated for each of its
generations) and a few of its own (`trainer_state`, `log_extra`, `log_metric`); a function takes what it
needs and `**kwargs` for the rest. It returns one float per completion, or None where the reward does
not apply (TRL logs it as NaN and leaves it out of the mean). TRL names the logged metric after the
function: `rewards/swe_rl_reward/mean`.

swerl's mined rows load in TRL as they are: `prompt` is a list of {role, content} messages (TRL's
conversational format, so completions come back as `[{"role": "assistant", "content": ...}]`), and
`code_context` / `oracle_new_content` are lists of {path, content}, which the reward reads in every shape
`swerl reward score` does (a mapping, a JSON object string, a Parquet map).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from swerl.reward import RewardConfig
from swerl.reward.batch import score_row

TrlReward = Callable[..., list[float | None]]


def completion_text(completion: Any) -> str:
    """The answer's text: a standard completion is the string itself, a conversational one is a list of
    messages whose last (the assistant's turn) holds it."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content")
        return content if isinstance(content, str) else ""
    raise TypeError(f"a completion is a string or a list of messages, got {type(completion).__name__}")


def similarity_reward_function(
    config: RewardConfig = RewardConfig(), name: str = "swe_rl_reward"
) -> TrlReward:
    """The SWE-RL similarity reward as a TRL reward function under `name` (the logged metric's name).

    -1 for a malformed answer, else the mean per-file similarity of the answer's diff to the developers'.
    A row that cannot be scored (a column missing or of another shape) gives None, not a fake -1: the
    model is not to blame for it. `config` as in `swerl reward score` (`--strict`, `--max-diff-chars`).
    """

    def reward(
        completions: Sequence[Any],
        code_context: Sequence[Any] | None = None,
        oracle_new_content: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        contexts = code_context if code_context is not None else [None] * len(completions)
        oracles = oracle_new_content if oracle_new_content is not None else [None] * len(completions)
        scores: list[float | None] = []
        for completion, context, oracle in zip(completions, contexts, oracles, strict=True):
            row = {
                "output": completion_text(completion),
                "code_context": context,
                "oracle_new_content": oracle,
            }
            scores.append(score_row(row, config)[0])
        return scores

    reward.__name__ = reward.__qualname__ = name
    return reward


swe_rl_reward = similarity_reward_function()
