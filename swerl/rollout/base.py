"""The one rollout interface: token ids in, sampled token ids and their log-probs out.

Every engine (transformers generate, vLLM in-process, an OpenAI-compatible server) speaks this
interface, so the trainer and the evaluators never care which one runs. It is token-in/token-out on
purpose: the trainer must score exactly the tokens that were sampled, and decoding to text and
re-tokenizing does not give them back (a BPE tokenizer may merge the same text differently).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample; the same fields mean the same thing in every engine.

    `temperature=0` is greedy decoding. `top_k=0` and `top_p=1` disable those filters. `seed` makes a
    call reproducible (None: drawn from torch's global RNG, so `torch.manual_seed` still controls it).
    Generation stops at the tokenizer's/model's EOS tokens and at any of `stop_token_ids`.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 disables it), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        # Accept any iterable of ints (lists from YAML) but store a tuple so the params stay hashable.
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

    @classmethod
    def from_known(cls, **values: Any) -> SamplingParams:
        """Params from the values among `values` that this class knows: a trainer passes its whole sampling
        configuration, whatever fields a given engine's params leave out."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class Completion:
    """One sampled continuation of one prompt.

    `token_ids` are the sampled ids, never re-tokenized, including the stop token when
    `finish_reason == "stop"` (the policy must learn to emit it, so the trainer scores it too).
    `logprobs[i]` is the sampler's log-prob of `token_ids[i]`; see each engine for which distribution
    (the transformers engine: log-softmax of logits / temperature, before top-k/top-p).
    `text` is the decoded completion without the stop token and special tokens, ready for the reward.
    A server that returns text only (a plain OpenAI one, see `OpenAIEngine`) leaves `token_ids` and
    `logprobs` empty: such completions serve evaluation, never training.
    """

    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    text: str
    metadata: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} log-probs")


@runtime_checkable
class RolloutEngine(Protocol):
    """What the trainer and evaluators need from a sampler."""

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions for every prompt, grouped: result[i] holds prompt i's n completions."""
        ...

    def sync_weights(self, model: object) -> None:
        """Make the engine sample from `model`'s current weights (after an optimizer step)."""
        ...

    def close(self) -> None:
        """Release what the engine holds (GPU memory, server connections, child processes)."""
        ...


def generate_groups(
    engine: RolloutEngine, prompts: Sequence[Sequence[int]], params: SamplingParams
) -> Iterator[tuple[int, list[Completion]]]:
    """`(i, prompt i's n completions)` as each group is complete, in whatever order they finish.

    An engine that produces groups incrementally says so with a `generate_groups` method of this
    signature (the transformers engine yields each sub-batch, the OpenAI client each answered request),
    so the caller can work on finished groups while the rest are sampled. Every other engine falls back to
    one `generate` call, whose groups then all arrive at its end. Either way the groups are the ones
    `generate` returns for the same arguments and seed.
    """
    incremental = getattr(engine, "generate_groups", None)
    if incremental is not None:
        yield from incremental(prompts, params)
    else:
        yield from enumerate(engine.generate(prompts, params))
