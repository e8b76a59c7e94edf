"""Reward functions with TRL's signature, for `trl.GRPOTrainer(reward_funcs=[swe_rl_reward], ...)`.

TRL (1.16) calls each reward function with keyword arguments: `prompts`, `completions`, `completion_ids`,
every column of the training dataset (one value per completion, a prompt's row repeated for each of its
generations) and a few of its own (`trainer_state`, `log_extra`, `log_metric`); a function takes what it
needs and `**kwargs` for the rest. It returns one float per completion, or None where the reward does
not apply (TRL logs it as NaN and leaves it out of the mean; a completion no reward function scored gets
no advantage). TRL names the logged metric after the function: `rewards/swe_rl_reward/mean`.

swerl's mined rows load in TRL as they are: `prompt` is a list of {role, content} messages (TRL's
conversational format, so completions come back as `[{"role": "assistant", "content": ...}]`), and
`code_context` / `oracle_new_content` are lists of {path, content}, which the reward reads in every shape
`swerl reward score` does (a mapping, a JSON object string, a Parquet map).

Every reward here turns TRL's arguments into the rows `swerl reward score` reads (the dataset's columns,
the completion as `output`) and scores them with `score_mixed_rows`, the function behind
`swerl reward score --reward similarity|execution|hybrid`, so a reward inside TRL and the command can never
disagree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from swerl.errors import UserError
from swerl.reward import RewardConfig
from swerl.reward.execution import ExecutionReward, Shaping
from swerl.reward.hybrid import RewardKind, score_mixed_rows

TrlReward = Callable[..., list[float | None]]

TRL_ARGUMENTS = frozenset(
    {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)
"""TRL's own keyword arguments; every other one is a dataset column."""


def completion_text(completion: Any) -> str:
    """The answer's text: a standard completion is the string itself, a conversational one is a list of
    messages whose last (the assistant's turn) holds it."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content")
        return content if isinstance(content, str) else ""
    raise TypeError(f"a completion is a string or a list of messages, got {type(completion).__name__}")


def answer_rows(completions: Sequence[Any], columns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per completion, as `swerl reward score` reads it: the dataset's columns (`columns` without
    TRL's own arguments) and the completion's text as `output`.

    A dataset's `model_patch` is left out: the answer being scored is the completion, and the execution
    reward would judge a row's `model_patch` instead of its `output`."""
    names = [k for k in columns if k not in TRL_ARGUMENTS and k != "model_patch"]
    for name in names:
        if not isinstance(columns[name], Sequence) or len(columns[name]) != len(completions):
            raise ValueError(
                f"column {name!r}: expected one value per completion ({len(completions)}), as TRL passes them"
            )
    return [
        {**{k: columns[k][i] for k in names}, "output": completion_text(c)} for i, c in enumerate(completions)
    ]


def _reward_function(
    kind: RewardKind, config: RewardConfig, execution: ExecutionReward | None, name: str
) -> TrlReward:
    def reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        scored = score_mixed_rows(answer_rows(completions, kwargs), kind, config, execution)
        log_metric = kwargs.get("log_metric")
        if kind != "similarity" and callable(log_metric):
            # TRL logs only the mean of the scored answers; the share the tests resolved and the runs
            # that failed (None, left out of the update) are what tell a healthy run, as `swerl train
            # grpo` logs them (execution/pass_rate, reward/infra_errors).
            judged = Counter(info.get("kind") for _, info, row_kind in scored if row_kind == "execution")
            executed = judged.total() - judged["infra_error"] - judged["not_executable"]
            if executed:
                log_metric(f"{name}/pass_rate", judged["resolved"] / executed)
            log_metric(f"{name}/infra_errors", float(judged["infra_error"]))
        return [score for score, _, _ in scored]

    reward.__name__ = reward.__qualname__ = name
    return reward


def similarity_reward_function(
    config: RewardConfig = RewardConfig(), name: str = "swe_rl_reward"
) -> TrlReward:
    """The SWE-RL similarity reward as a TRL reward function under `name` (the logged metric's name).

    -1 for a malformed answer, else the mean per-file similarity of the answer's diff to the developers'.
    A row that cannot be scored (a column missing or of another shape) gives None, not a fake -1: the
    model is not to blame for it. `config` as in `swerl reward score` (`--strict`, `--max-diff-chars`).
    """
    return _reward_function("similarity", config, None, name)


def execution_reward_function(
    cache_dir: str | Path,
    *,
    reward: Literal["execution", "hybrid"] = "execution",
    clones: str | Path | None = None,
    offline: bool = False,
    shaping: Shaping = "none",
    workers: int = 1,
    log_dir: Path | None = None,
    config: RewardConfig = RewardConfig(),
    name: str | None = None,
    **backend_options: Any,
) -> TrlReward:
    """The execution (or hybrid) reward of `swerl reward score --reward execution|hybrid` as a TRL reward
    function, named `execution_reward` / `hybrid_reward` unless `name` says otherwise.

    The rows need SWE-bench's columns (`instance_id`, `repo`, `base_commit`, `FAIL_TO_PASS`,
    `PASS_TO_PASS`, `test_patch`, `version`); the answer's edits apply to the files the model saw
    (`code_context`; one missing there is read from the base tree). 1 resolved, 0 not, -1 malformed.
    None where the tests cannot judge: a row that is not executable (under `hybrid` it gets the
    similarity reward instead) and an infrastructure failure after its retry.
    A batch's answers to one instance are judged as one group: identical patches run once, distinct ones
    `workers` at a time. The local harness lives in `cache_dir` (mirrors and environments, the layout
    `swerl agentless evaluate` and `swerl reward score --cache-dir` share); `clones`, `offline` and
    `backend_options` (`isolation`, `timeout_s`, `limits`, `env_specs`, `python`, `wheelhouse`) are the
    command's local backend options.
    """
    from swerl.execution.local import cached_backend  # the harness: only for those who run tests

    if reward not in ("execution", "hybrid"):
        raise UserError(f"unknown execution reward {reward!r}; use execution or hybrid")
    backend = cached_backend(Path(cache_dir), clones=clones, offline=offline, **backend_options)
    execution = ExecutionReward(backend, shaping=shaping, workers=workers, log_dir=log_dir)
    return _reward_function(reward, config, execution, name or f"{reward}_reward")


swe_rl_reward = similarity_reward_function()
