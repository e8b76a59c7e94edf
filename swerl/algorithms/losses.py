"""Policy losses, KL and entropy as pure tensor functions over `[batch, completion_tokens]`.

Shapes: `logp`, `old_logp`, `ref_logp` and `mask` are `[B, T]` (one row per completion, padded on the
right; `mask` is 1 on completion tokens, 0 on padding). Advantages are `[B]` (one per completion, as in
GRPO) or `[B, T]` (per token, as after GAE). Every function computes in float32 and ignores masked
positions exactly, so padding can never leak into a loss or a metric.

Global normalisation. The default GRPO loss is a token mean over the *global* batch: every completion
token in the rollout batch weighs the same, however the batch is split into micro-batches and ranks.
A micro-batch alone cannot know that count, so the aggregation takes an explicit `normalizer`: the
number of tokens (token-mean) or sequences (seq-*) in the whole optimizer step across all ranks and
micro-batches. Each micro-batch then returns its *share* `sum(loss over its tokens) / normalizer`, and the
plain sum of the shares is the global mean. Engines that average instead of sum (DDP and DeepSpeed
average gradients over ranks; DeepSpeed also divides the loss by gradient_accumulation_steps in
`backward`) need the share multiplied back by `world_size * grad_accum_steps`, or equivalently
`normalizer = global_count / (world_size * grad_accum_steps)`. `tests/test_algorithms_losses.py` checks
that accumulated shares give the same loss and gradient as one big batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, Literal

import torch
from torch import Tensor

Aggregation = Literal["token-mean", "seq-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
AGGREGATIONS: tuple[str, ...] = Aggregation.__args__
ImportanceSamplingLevel = Literal["token", "sequence"]

# exp() of a log-ratio beyond this overflows float32 or makes the unclipped side of the objective huge;
# such tokens are clipped anyway whenever their advantage sign would use the large ratio.
_MAX_LOG_RATIO = 20.0
# verl's bound on a k3 value ("low_var_kl"): past it the penalty's gradient is that of a token already
# far from the reference, and an unbounded value would let one token dominate the batch's loss.
_MAX_K3 = 10.0
# Float32 elements one chunk of the log-prob/entropy computation may hold (64 MB): a few rows of a
# 152k vocabulary, whole rows of a small one. Chunks keep the [batch, length, vocabulary] float32
# copy from ever existing at once.
CHUNK_ELEMENTS = 1 << 24


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of `x` where `mask` is set. Uses `where`, not `x * mask`, so NaN/inf in padding cannot leak."""
    masked = torch.where(mask.bool(), x.float(), torch.zeros((), dtype=torch.float32, device=x.device))
    return masked.sum() if dim is None else masked.sum(dim=dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of `x` over masked positions; 0 (not NaN) where nothing is masked in, so metrics stay finite."""
    count = mask.float().sum() if dim is None else mask.float().sum(dim=dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1.0)


def aggregate_loss(
    per_token: Tensor,
    mask: Tensor,
    aggregation: Aggregation = "token-mean",
    normalizer: float | Tensor | None = None,
    max_length: int | None = None,
) -> Tensor:
    """Reduce a `[B, T]` per-token loss to a scalar the way `aggregation` says.

    - "token-mean": sum over all tokens / number of tokens. Every token weighs the same, so long answers
      count more (DAPO's choice; TRL's "dapo" loss type; the SWE-RL default here).
    - "seq-mean": each sequence's token mean, averaged over sequences (the original GRPO paper).
      Each answer weighs the same, so tokens of long answers weigh less.
    - "seq-mean-token-sum": each sequence's token sum, averaged over sequences (verl's name). No
      per-answer length division, so no length bias, but the loss scale grows with answer length.
    - "seq-mean-token-sum-norm": the same divided by the constant `max_length` (Dr. GRPO as published:
      token sums over the generation budget; TRL's `loss_type="dr_grpo"`, verl's name). The gradient
      points where "seq-mean-token-sum"'s does, on a scale that does not change with answer length.

    `normalizer` replaces the denominator (tokens for token-mean, sequences for the others) with the
    global count; see the module docstring. Without it, the micro-batch's own count is used.
    `max_length` is required by "seq-mean-token-sum-norm" (the run's max_completion_length, not the
    micro-batch's longest answer, or the constant would move from batch to batch).
    """
    if aggregation == "token-mean":
        total = masked_sum(per_token, mask)
        denom = mask.float().sum().clamp(min=1.0) if normalizer is None else normalizer
    elif aggregation in ("seq-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        per_seq = masked_sum(per_token, mask, dim=-1)
        if aggregation == "seq-mean":
            per_seq = per_seq / mask.float().sum(dim=-1).clamp(min=1.0)
        total = per_seq.sum()
        denom = per_seq.shape[0] if normalizer is None else normalizer
        if aggregation == "seq-mean-token-sum-norm":
            if not max_length or max_length <= 0:
                raise ValueError(
                    "aggregation 'seq-mean-token-sum-norm' needs max_length > 0 (Dr. GRPO's constant)"
                )
            denom = denom * max_length
    else:
        raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
    return total / denom


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(policy ‖ reference): exp(ref - logp) - (ref - logp) - 1, bounded.

    Schulman's k3 is unbiased for the KL when tokens are sampled from the policy, and unlike
    logp - ref_logp it is never negative, so it cannot reward the policy for moving away from the
    reference. Same form as TRL's and verl's "low_var_kl", with verl's bounds: the log-ratio is clamped
    to ±20 before `exp` (a token the reference gives probability ~0 would otherwise make exp overflow to
    inf, and inf - inf = NaN in the loss) and the value to at most 10.
    """
    diff = (ref_logp.float() - logp.float()).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return (torch.exp(diff) - diff - 1.0).clamp(max=_MAX_K3)


def _chunks(logits: Tensor, chunk_rows: int | None) -> Iterator[tuple[tuple[Any, ...], Tensor]]:
    """Views of at most `chunk_rows` positions of `logits` `[..., T, V]`, each with its index into
    `logits[..., 0]`. Rows are cut along T inside each leading index, so a view of a strided tensor (such
    as `logits[:, :-1]`) is never copied whole; a 1-D `[V]` is one chunk."""
    if logits.dim() == 1:
        yield (), logits
        return
    rows = chunk_rows or max(1, CHUNK_ELEMENTS // max(1, logits.shape[-1]))
    for lead in itertools.product(*map(range, logits.shape[:-2])):
        matrix = logits[lead]
        for lo in range(0, matrix.shape[0], rows):
            yield (*lead, slice(lo, lo + rows)), matrix[lo : lo + rows]


def _upcast(chunk: Tensor) -> Tensor:
    """A chunk in float32, or float64 when it already is (gradcheck runs in double)."""
    return chunk.to(torch.promote_types(chunk.dtype, torch.float32))


def entropy_from_logits(logits: Tensor, temperature: float = 1.0, chunk_rows: int | None = None) -> Tensor:
    """Entropy of softmax(logits / temperature) over the last dim, -sum(p log p), in float32, no gradient.

    Computed `chunk_rows` positions at a time (default: `CHUNK_ELEMENTS` worth), so a bf16 `[B, T, V]`
    never gets a float32 twin. Tokens with p = 0 (logit -inf, e.g. masked vocabulary padding) contribute
    0, not 0 * -inf = NaN.
    """
    out = torch.empty(logits.shape[:-1], dtype=torch.float32, device=logits.device)
    with torch.no_grad():
        for index, chunk in _chunks(logits, chunk_rows):
            z = chunk.float()
            if temperature != 1.0:
                z = z / temperature
            logp = torch.log_softmax(z, dim=-1)
            p = logp.exp()
            out[index] = -torch.where(p > 0, p * logp, torch.zeros((), device=logp.device)).sum(dim=-1)
    return out


class _ChunkedTokenLogprobs(torch.autograd.Function):
    """log softmax(logits / T) at `ids`, forward and backward a chunk of positions at a time.

    Autograd through a plain `log_softmax` saves its float32 output, `[B, T, V]` for the whole
    micro-batch. This keeps only the logits (held by the model's graph anyway) and one log-sum-exp per
    position, and recomputes each chunk's softmax in backward: d logp / d z = onehot(id) - softmax(z).
    The gradient is written in the logits' own dtype, so peak memory is the logits, their gradient and
    one float32 chunk.
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, ids: Tensor, temperature: float, chunk_rows: int | None) -> Tensor:
        out = torch.empty(ids.shape, dtype=_upcast(logits[:0]).dtype, device=logits.device)
        lse = torch.empty_like(out)
        for index, chunk in _chunks(logits, chunk_rows):
            z = _upcast(chunk)
            if temperature != 1.0:
                z = z / temperature
            lse[index] = torch.logsumexp(z, dim=-1)
            out[index] = z.gather(-1, ids[index].unsqueeze(-1)).squeeze(-1) - lse[index]
        ctx.save_for_backward(logits, ids, lse)
        ctx.temperature, ctx.chunk_rows = temperature, chunk_rows
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, None, None, None]:
        logits, ids, lse = ctx.saved_tensors
        temperature = ctx.temperature
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        for index, chunk in _chunks(logits, ctx.chunk_rows):
            z = _upcast(chunk)
            if temperature != 1.0:
                z = z / temperature
            g_out = grad_out[index].to(z.dtype).unsqueeze(-1)
            g = torch.exp(z - lse[index].unsqueeze(-1)).mul_(-g_out)
            g.scatter_add_(-1, ids[index].unsqueeze(-1), g_out)
            if temperature != 1.0:
                g.div_(temperature)
            grad[index] = g.to(grad.dtype)
        return grad, None, None, None


def token_logprobs(
    logits: Tensor, token_ids: Tensor, temperature: float = 1.0, chunk_rows: int | None = None
) -> Tensor:
    """log softmax(logits / temperature) at `token_ids`: `[B, T, V]`, `[B, T]` → `[B, T]` float32.

    The trainer and the rollout engines compute log-probs with this same definition (temperature-scaled,
    no top-k/top-p truncation), which is what makes sampler and trainer log-probs comparable. Forward
    and backward run `chunk_rows` positions at a time (`_ChunkedTokenLogprobs`): values and gradients
    equal the plain `log_softmax(...).gather(...)`, without its float32 `[B, T, V]` (tested).
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0 (greedy decoding uses temperature 1 for log-probs)")
    if token_ids.numel() == 0:
        return logits.new_zeros(token_ids.shape, dtype=torch.float32)
    return _ChunkedTokenLogprobs.apply(logits, token_ids, temperature, chunk_rows)


def truncated_is_weights(old_logp: Tensor, sampler_logp: Tensor, cap: float) -> Tensor:
    """Truncated importance-sampling weights min(exp(old - sampler), cap) per token, detached.

    The sampler (vLLM in bf16, other kernels) draws tokens from a slightly different distribution than
    the learner computes; weighting each token's policy-gradient term by learner / sampler probability
    corrects the expectation, and the cap bounds the variance a few tokens the sampler under-rates would
    add (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training";
    TRL's `vllm_importance_sampling_correction` with `vllm_importance_sampling_cap`). `old_logp` is the
    learner's log-prob before this batch's updates, so the PPO ratio keeps its meaning on top.
    """
    with torch.no_grad():
        log_ratio = (old_logp.float() - sampler_logp.float()).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
        return torch.exp(log_ratio).clamp(max=cap)


def clipped_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    aggregation: Aggregation = "token-mean",
    normalizer: float | Tensor | None = None,
    ref_logp: Tensor | None = None,
    beta: float = 0.0,
    *,
    importance_sampling_level: ImportanceSamplingLevel = "token",
    is_weights: Tensor | None = None,
    max_length: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate per token, aggregated; returns (loss, metrics).

    Per token, with ratio r = exp(logp - old_logp) and advantage A:
    loss = -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A). `eps_high` defaults to `eps_low`;
    a larger one (DAPO's "clip-higher", e.g. 0.28) lets unlikely tokens with positive advantage grow
    faster, which counters entropy collapse. With mu = 1 pass `old_logp = logp.detach()`: r = 1 and
    the loss is the plain policy gradient.

    `importance_sampling_level="sequence"` is GSPO (Zheng et al. 2025): every token of an answer uses
    the answer's ratio exp(mean over its tokens of logp - old_logp), the geometric mean of the token
    ratios, so one answer is clipped as a whole (TRL's `importance_sampling_level="sequence"`).

    `is_weights` (`[B, T]`, detached; see `truncated_is_weights`) multiply each token's policy term
    before the KL is added, correcting for a sampler that is not the learner (TRL's placement).

    With `ref_logp` and `beta > 0`, beta * k3(policy ‖ reference) is added per token before
    aggregation (TRL's placement), so it is weighted like the policy term.

    Metrics (detached, masked means over this micro-batch's tokens; TRL's names): `clip_ratio/low_mean`
    — tokens whose ratio fell below 1 - eps_low with A < 0 (the clip binds and the gradient is zero);
    `clip_ratio/high_mean` — ratio above 1 + eps_high with A > 0; `clip_ratio/region_mean` — either;
    plus `kl` when a reference is given.
    """
    eps_high = eps_low if eps_high is None else eps_high
    adv = advantages.float()
    if adv.dim() == 1:
        adv = adv.unsqueeze(-1)
    log_ratio = logp.float() - old_logp.float()
    if importance_sampling_level == "sequence":
        log_ratio = masked_mean(log_ratio, mask, dim=-1).unsqueeze(-1).expand_as(log_ratio)
    elif importance_sampling_level != "token":
        raise ValueError(
            f"importance_sampling_level must be 'token' or 'sequence', got {importance_sampling_level!r}"
        )
    ratio = torch.exp(log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if is_weights is not None:
        per_token = per_token * is_weights.detach().float()

    metrics: dict[str, Tensor] = {}
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp)
        if beta != 0.0:
            per_token = per_token + beta * kl
        metrics["kl"] = masked_mean(kl.detach(), mask)

    loss = aggregate_loss(per_token, mask, aggregation, normalizer, max_length)

    with torch.no_grad():
        low = (ratio < 1.0 - eps_low) & (adv < 0)
        high = (ratio > 1.0 + eps_high) & (adv > 0)
        metrics["clip_ratio/low_mean"] = masked_mean(low.float(), mask)
        metrics["clip_ratio/high_mean"] = masked_mean(high.float(), mask)
        metrics["clip_ratio/region_mean"] = masked_mean((low | high).float(), mask)
    return loss, metrics


def reinforce_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    aggregation: Aggregation = "token-mean",
    normalizer: float | Tensor | None = None,
    *,
    max_length: int | None = None,
    **_: object,
) -> tuple[Tensor, dict[str, Tensor]]:
    """-A * logp per token: the unclipped policy gradient.

    Its gradient equals `ppo_clip`'s when old_logp = logp.detach() (mu = 1), so tests use it as an
    obviously-correct reference; on-policy runs can also use it directly. `old_logp` is accepted only so
    every registered loss has one call signature.
    """
    del old_logp
    adv = advantages.float()
    if adv.dim() == 1:
        adv = adv.unsqueeze(-1)
    per_token = -adv * logp.float()
    return aggregate_loss(per_token, mask, aggregation, normalizer, max_length), {}
