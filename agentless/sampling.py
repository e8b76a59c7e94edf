"""Text in, text out, over any `swerl.rollout.RolloutEngine`.

Engines are token-in/token-out (training needs the exact sampled ids). Agentless only needs text, so
this adapter renders chat messages with the tokenizer's chat template, calls the engine, and returns
the decoded completions. Repair draws one greedy sample and the rest at a temperature, as Agentless does:
the greedy answer is the most likely one, the sampled ones give the vote something to agree on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from swerl.rollout.base import RolloutEngine, SamplingParams

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Sample:
    """One completion: its text, why it stopped, and how it was drawn."""

    text: str
    finish_reason: str
    temperature: float


class TextSampler(Protocol):
    def sample(
        self, prompts: Sequence[Messages], *, n: int, temperature: float, max_new_tokens: int, seed: int
    ) -> list[list[Sample]]:
        """`n` samples per prompt, grouped by prompt."""
        ...


def prompt_ids(tokenizer: Any, messages: Messages) -> list[int]:
    """Chat-templated prompt ids. Rendered to text first: `apply_chat_template(tokenize=True)` returns
    different types across transformers versions, and the template already holds the special tokens."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class EngineSampler:
    """`TextSampler` over a rollout engine and the tokenizer of the engine's model.

    A prompt longer than `max_prompt_tokens`, or than the model's `context` (its positions), raises
    `PromptTooLong` rather than being cut: cutting would drop the instructions at its end. Callers record
    the instance as skipped. With a known `context`, an answer stops where prompt and answer fill it: past
    it a small model generated filler for minutes on positions it was never trained on.
    """

    engine: RolloutEngine
    tokenizer: Any
    max_prompt_tokens: int | None = None
    context: int | None = None

    def sample(
        self, prompts: Sequence[Messages], *, n: int, temperature: float, max_new_tokens: int, seed: int
    ) -> list[list[Sample]]:
        ids = [prompt_ids(self.tokenizer, m) for m in prompts]
        for i, p in enumerate(ids):
            if self.max_prompt_tokens is not None and len(p) > self.max_prompt_tokens:
                raise PromptTooLong(f"prompt {i} has {len(p)} tokens > {self.max_prompt_tokens}")
            if self.context is not None and len(p) >= self.context:
                raise PromptTooLong(
                    f"prompt {i} has {len(p)} tokens > {self.context - 1}, the model's context of "
                    f"{self.context} positions less one"
                )
        if self.context is not None:
            max_new_tokens = min(max_new_tokens, self.context - max(len(p) for p in ids))
        params = SamplingParams(n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
        groups = self.engine.generate(ids, params)
        return [[Sample(c.text, c.finish_reason, temperature) for c in group] for group in groups]


class PromptTooLong(ValueError):
    """The prompt does not fit the model's context; the instance is recorded as skipped, not crashed."""


def sample_mixed(
    sampler: TextSampler,
    messages: Messages,
    *,
    num_samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> list[Sample]:
    """One greedy sample, then `num_samples - 1` at `temperature` (all greedy when temperature is 0)."""
    out = sampler.sample([messages], n=1, temperature=0.0, max_new_tokens=max_new_tokens, seed=seed)[0]
    rest = num_samples - 1
    if rest > 0:
        t = temperature if temperature > 0 else 0.0
        out += sampler.sample(
            [messages], n=rest, temperature=t, max_new_tokens=max_new_tokens, seed=seed + 1
        )[0]
    return out
