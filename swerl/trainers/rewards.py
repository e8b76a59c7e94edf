"""Group rewards: score the G answers to one prompt together, so per-prompt work happens once.

A reward function takes the example and the group's completions and returns one `RewardResult` each;
`error` names the malformation (for the malformed-rate metrics) or is None.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from swerl.edit_format import FormatError
from swerl.errors import UserError
from swerl.reward import RewardConfig, RewardResult, normalized_diffs, similarity_reward
from swerl.reward.execution import ExecutionResult, ExecutionReward, answer_patch
from swerl.trainers.data import Example

if TYPE_CHECKING:
    from swerl.trainers.config import ExecutionConfig, GRPOConfig

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


@dataclass
class ExecutionGroupReward:
    """The execution reward of a group: its answers as patches against the base tree, judged together
    (identical patches once, distinct ones on `execution.workers` threads). `hybrid`: a row that cannot
    be executed gets the similarity reward instead."""

    execution: ExecutionReward
    hybrid: bool = False
    config: RewardConfig = RewardConfig()

    def __call__(self, example: Example, completions: Sequence[Any]) -> list[RewardResult]:
        instance = example.instance
        problem = self.execution.problem(instance)
        if problem is not None or instance is None:
            if self.hybrid:
                return swe_rl_reward(self.config)(example, completions)
            raise UserError(f"{example.instance_id}: not executable ({problem})")
        read = functools.partial(self.execution.backend.repos.read_file, instance.repo, instance.base_commit)
        patches: list[str | FormatError] = []
        for c in completions:
            patch, error = answer_patch({"output": c.text}, example.code_context, read)
            patches.append(patch if patch is not None else error)  # type: ignore[arg-type]
        return [_as_result(v) for v in self.execution.score_group(instance, patches)]

    def unexecutable(self, examples: Sequence[Example]) -> list[tuple[str, str]]:
        """(instance id, why) of the examples the execution reward cannot run."""
        found = ((e.instance_id or "?", self.execution.problem(e.instance)) for e in examples)
        return [(iid, f"{p[0]}: {p[1]}") for iid, p in found if p is not None]


def _as_result(verdict: ExecutionResult) -> RewardResult:
    """An execution verdict as the trainer's result; `error` only for a malformed answer (the malformed
    rates), an infrastructure failure flagged by its outcome (and 0.0, never trained on)."""
    return RewardResult(
        reward=verdict.reward if verdict.reward is not None else 0.0,
        error=verdict.error if verdict.kind == "malformed" else None,
        message=verdict.message or verdict.error,
        kind="execution",
        outcome=verdict.kind,
    )


class BackgroundRewards:
    """Scores groups on one background thread while the caller goes on sampling the next ones.

    Groups are scored one at a time in the order they are handed in (an execution reward already runs a
    group's answers in parallel, on `execution_workers`), each by the same call the sequential path makes,
    so the results are the same. The thread runs the reward function only: nothing collective (no
    torch.distributed call, no parameter gather), since the ranks' reward work differs. After the first
    failure the groups still queued are skipped; `results` raises it. Use as a context manager: leaving
    it cancels what has not started and waits for the group being scored.
    """

    def __init__(self, reward_fn: GroupReward) -> None:
        self.reward_fn = reward_fn
        self.busy_seconds = 0.0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swerl-reward")
        self._futures: dict[int, Future[list[RewardResult]]] = {}
        self._failed = threading.Event()

    def submit(self, index: int, example: Example, completions: Sequence[Any]) -> None:
        """Queue group `index` (its position in the round) for scoring."""
        self._futures[index] = self._pool.submit(self._score, example, completions)

    def _score(self, example: Example, completions: Sequence[Any]) -> list[RewardResult]:
        if self._failed.is_set():
            return []  # never read: `results` raises the earlier failure first
        t0 = time.perf_counter()
        try:
            return self.reward_fn(example, completions)
        except BaseException:
            self._failed.set()
            raise
        finally:
            self.busy_seconds += time.perf_counter() - t0

    def results(self) -> list[list[RewardResult]]:
        """Every group's results by index (0..n-1, each submitted once), once all are scored; the first
        failure in scoring order is raised instead."""
        for future in list(self._futures.values()):  # scoring order: a failure is met before any skip
            future.result()
        return [self._futures[k].result() for k in range(len(self._futures))]

    def __enter__(self) -> BackgroundRewards:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def build_reward(config: GRPOConfig) -> GroupReward:
    """The reward a GRPO config names; `execution` and `hybrid` build the local harness from it."""
    if config.reward not in ("execution", "hybrid"):
        return reward_from_name(config.reward, config.reward_strict)
    return ExecutionGroupReward(
        execution_reward(config), config.reward == "hybrid", RewardConfig(strict=config.reward_strict)
    )


def execution_reward(config: ExecutionConfig) -> ExecutionReward:
    """The execution reward a config's `execution_*` settings describe, over the local harness."""
    from swerl.execution.local import cached_backend

    backend = cached_backend(
        Path(config.execution_cache_dir),
        clones=config.execution_clones,
        offline=config.execution_offline,
        isolation=config.execution_isolation,
        timeout_s=config.execution_timeout_s,
        python=config.execution_python,
    )
    return ExecutionReward(
        backend,
        shaping=config.execution_shaping,
        workers=config.execution_workers,
        engine=config.execution_engine,
        min_test_strength=config.execution_min_test_strength,
        strength_weight=config.execution_strength_weight,
    )


def reward_from_name(name: str, strict: bool = False) -> GroupReward:
    """`similarity` (also `swe_rl`) or `token:N`, as written in a config."""
    if name in ("swe_rl", "similarity"):
        return swe_rl_reward(RewardConfig(strict=strict))
    if name.startswith("token:"):
        spec = name.split(":", 1)[1]
        lo, _, hi = spec.partition("-")
        return token_reward(range(int(lo), int(hi or lo) + 1))
    raise UserError(f"unknown reward {name!r}; use 'similarity', 'token:N' or 'token:LO-HI'")
