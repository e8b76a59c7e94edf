"""Rollouts with a transformers causal LM: a batched KV-cache decoding loop, CPU or GPU.

Why a loop of our own rather than `model.generate`: we need, for every sampled token, its log-prob
under the distribution the trainer will recompute, and per-sequence random streams so a completion does
not depend on which prompts share its batch. The loop is short: left-padded prefill (each prompt once,
its cache then repeated for the n samples), then one forward per new token.

Log-probs: `Completion.logprobs[i]` is log softmax(logits / temperature) at the sampled token, computed
in float32 *before* top-k/top-p filtering (greedy, temperature 0: log softmax(logits)). That is exactly
what the trainer's `swerl.algorithms.token_logprobs` computes from a teacher-forced forward pass, so on
the same weights the two agree to float rounding (tested to 1e-4). Top-k/top-p change which tokens can
be drawn, not the log-probs reported for them; the trainer cannot reproduce the truncation either.

Randomness: sample j of prompt i draws from its own `torch.Generator` seeded with
`mix_seed(seed, i, j)`: one vector of uniforms per step, turned into a Gumbel-max draw. Results therefore
depend on the seed, the prompt's index and its sample index only, not on the batch size, the
length-sorting of prompts or the padding.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from swerl.rollout.base import Completion, FinishReason, SamplingParams
from swerl.rollout.sampling import filter_top_k, filter_top_p, mix_seed
from swerl.rollout.weight_sync import full_parameters


def _as_id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


class HFEngine:
    """`RolloutEngine` over a transformers model that may be the policy being trained (colocated).

    `batch_size` is the number of sequences decoded together (prompts * n); a prompt's n samples always
    share one batch, so when n > batch_size a batch holds that one prompt's n samples. Prompts are
    length-sorted before batching to waste less compute on padding; results come back in input order.
    The model is switched to eval mode during generation (no dropout) and restored afterwards.
    """

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        eos = _as_id_list(tokenizer.eos_token_id)
        eos += _as_id_list(getattr(getattr(model, "generation_config", None), "eos_token_id", None))
        self.eos_token_ids: tuple[int, ...] = tuple(dict.fromkeys(eos))
        pad = tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else (eos[0] if eos else 0))
        forward_params = inspect.signature(model.forward).parameters
        self._keeps_last_logits = "logits_to_keep" in forward_params
        # transformers 5.2x renamed `past_key_values` to `cache`; older releases know only the former.
        self._cache_kwarg = "cache" if "cache" in forward_params else "past_key_values"

    # -- RolloutEngine -------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions per prompt, grouped by prompt, in the order of `prompts`."""
        results: list[list[Completion]] = [[] for _ in prompts]
        for i, completions in self.generate_groups(prompts, params):
            results[i] = completions
        return results

    def generate_groups(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> Iterator[tuple[int, list[Completion]]]:
        """`(i, prompt i's completions)` one decoding batch at a time, in the length-sorted batch order.

        The seed is drawn before the first batch, so the groups equal `generate`'s; inference mode is
        entered per batch rather than around the yields, so it never leaks into the caller's code.
        """
        prompt_lists = [[int(t) for t in p] for p in prompts]
        if any(not p for p in prompt_lists):
            raise ValueError("every prompt needs at least one token")
        base_seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, ()).item())
        order = sorted(range(len(prompt_lists)), key=lambda i: len(prompt_lists[i]))
        per_batch = max(1, self.batch_size // params.n)
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), per_batch):
                indices = order[start : start + per_batch]
                with torch.inference_mode():
                    batch = self._generate_batch(
                        [prompt_lists[i] for i in indices], indices, params, base_seed
                    )
                yield from zip(indices, batch, strict=True)
        finally:
            if was_training:
                self.model.train()

    def sync_weights(self, model: Any) -> None:
        """No-op when `model` is the engine's own module (colocated: they share parameters).

        Otherwise copy its parameters in one at a time (a DeepSpeed/DDP wrapper is unwrapped via
        `.module`); ZeRO-3 partitioned ones are gathered one at a time by `full_parameters`.
        """
        source = getattr(model, "module", model)
        if source is self.model:
            return
        own = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in full_parameters(source):
                own[name].copy_(tensor)

    def close(self) -> None:
        """Nothing to release: the engine holds only references to the caller's model and tokenizer."""

    # -- decoding ------------------------------------------------------------------------------------

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _forward(self, cache: Any, **kwargs: Any) -> Tensor:
        """Logits of the last position; `cache` (a DynamicCache) is extended in place."""
        if self._keeps_last_logits:
            kwargs["logits_to_keep"] = 1
        kwargs[self._cache_kwarg] = cache
        return self.model(use_cache=True, **kwargs).logits[:, -1, :]

    def _generate_batch(
        self, prompts: list[list[int]], indices: list[int], params: SamplingParams, base_seed: int
    ) -> list[list[Completion]]:
        from transformers import DynamicCache

        device = self._device()
        n = params.n
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention[row, width - len(prompt) :] = 1
        input_ids, attention = input_ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)

        cache = DynamicCache(config=self.model.config)
        logits = self._forward(cache, input_ids=input_ids, attention_mask=attention, position_ids=positions)
        next_position = positions[:, -1:] + 1
        if n > 1:  # prefill each prompt once, then give each of its n samples a copy of the cache
            cache.batch_repeat_interleave(n)
            logits = logits.repeat_interleave(n, dim=0)
            attention = attention.repeat_interleave(n, dim=0)
            next_position = next_position.repeat_interleave(n, dim=0)

        rows = len(prompts) * n
        generators = [
            torch.Generator(device=device).manual_seed(mix_seed(base_seed, indices[r // n], r % n))
            for r in range(rows)
        ]
        noise = torch.empty((rows, logits.shape[-1]), dtype=torch.float32, device=device)
        stop_ids = torch.tensor(
            sorted(set(self.eos_token_ids) | set(params.stop_token_ids)), dtype=torch.long, device=device
        )
        finished = torch.zeros(rows, dtype=torch.bool, device=device)
        lengths = torch.full((rows,), params.max_new_tokens, dtype=torch.long, device=device)
        sampled: list[Tensor] = []
        sampled_logprobs: list[Tensor] = []
        for step in range(params.max_new_tokens):
            tokens, logprobs = self._sample(logits, params, generators, noise)
            tokens = torch.where(finished, torch.full_like(tokens, self.pad_token_id), tokens)
            sampled.append(tokens)
            sampled_logprobs.append(logprobs)
            stopped = torch.isin(tokens, stop_ids) & ~finished
            lengths = torch.where(stopped, torch.full_like(lengths, step + 1), lengths)
            finished |= stopped
            if step + 1 == params.max_new_tokens or bool(finished.all()):
                break
            attention = torch.cat([attention, attention.new_ones((rows, 1))], dim=1)
            logits = self._forward(
                cache, input_ids=tokens[:, None], attention_mask=attention, position_ids=next_position
            )
            next_position = next_position + 1

        token_rows = torch.stack(sampled, dim=1).tolist()
        logprob_rows = torch.stack(sampled_logprobs, dim=1).tolist()
        length_list = lengths.tolist()
        finished_list = finished.tolist()
        grouped: list[list[Completion]] = []
        for p, prompt in enumerate(prompts):
            group = []
            for r in range(p * n, (p + 1) * n):
                length = length_list[r]
                token_ids = token_rows[r][:length]
                reason: FinishReason = "stop" if finished_list[r] else "length"
                text_ids = token_ids[:-1] if reason == "stop" else token_ids
                group.append(
                    Completion(
                        prompt_ids=list(prompt),
                        token_ids=token_ids,
                        logprobs=logprob_rows[r][:length],
                        finish_reason=reason,
                        text=self.tokenizer.decode(text_ids, skip_special_tokens=True),
                    )
                )
            grouped.append(group)
        return grouped

    @staticmethod
    def _sample(
        logits: Tensor, params: SamplingParams, generators: list[torch.Generator], noise: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Next token per row and its log-prob (see the module docstring for which distribution)."""
        scaled = logits.float()
        if params.greedy:
            tokens = scaled.argmax(dim=-1)
        else:
            if params.temperature != 1.0:
                scaled = scaled / params.temperature
            keys = filter_top_p(filter_top_k(scaled, params.top_k), params.top_p)
            for row, generator in enumerate(generators):
                noise[row].uniform_(generator=generator)
            # Gumbel-max: argmax(z + G) with G = -log(-log U) draws from softmax(z); `keys` need not be
            # normalised. U = 0 gives G = -inf (never chosen), which has probability ~2^-24 per entry.
            # In place: noise becomes log(-log U) = -G.
            tokens = (keys - noise.log_().neg_().log_()).argmax(dim=-1)
        # log softmax at the sampled token only: z[token] - logsumexp(z), no [rows, V] output written.
        picked = scaled.gather(-1, tokens[:, None]).squeeze(-1)
        return tokens, picked - torch.logsumexp(scaled, dim=-1)
