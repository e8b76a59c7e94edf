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

from typing import Literal

import torch
from torch import Tensor

from swerl.algorithms.registry import register_policy_loss

Aggregation = Literal["token-mean", "seq-mean", "seq-mean-token-sum"]

# exp() of a log-ratio beyond this overflows float32 or makes the unclipped side of the objective huge;
# such tokens are clipped anyway whenever their advantage sign would use the large ratio.
_MAX_LOG_RATIO = 20.0


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
) -> Tensor:
    """Reduce a `[B, T]` per-token loss to a scalar the way `aggregation` says.

    - "token-mean": sum over all tokens / number of tokens. Every token weighs the same, so long answers
      count more (DAPO's choice; TRL's "dapo" loss type; the SWE-RL default here).
    - "seq-mean": each sequence's token mean, averaged over sequences (the original GRPO paper).
      Each answer weighs the same, so tokens of long answers weigh less.
    - "seq-mean-token-sum": each sequence's token sum, averaged over sequences (Dr. GRPO's unbiased form;
      the length bias then lives in the advantage, not in the normaliser).

    `normalizer` replaces the denominator (tokens for token-mean, sequences for the others) with the
    global count; see the module docstring. Without it, the micro-batch's own count is used.
    """
    if aggregation == "token-mean":
        total = masked_sum(per_token, mask)
        denom = mask.float().sum().clamp(min=1.0) if normalizer is None else normalizer
    elif aggregation in ("seq-mean", "seq-mean-token-sum"):
        per_seq = masked_sum(per_token, mask, dim=-1)
        if aggregation == "seq-mean":
            per_seq = per_seq / mask.float().sum(dim=-1).clamp(min=1.0)
        total = per_seq.sum()
        denom = per_seq.shape[0] if normalizer is None else normalizer
    else:
        raise ValueError(
            f"aggregation must be 'token-mean', 'seq-mean' or 'seq-mean-token-sum', got {aggregation!r}"
        )
    return total / denom


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(policy ‖ reference): exp(ref - logp) - (ref - logp) - 1.

    Schulman's k3 is unbiased for the KL when tokens are sampled from the policy, and unlike
    logp - ref_logp it is never negative, so it cannot reward the policy for moving away from the
    reference. Same form as TRL's and verl's "low_var_kl" (without verl's clamp).
    """
    diff = ref_logp.float() - logp.float()
    return torch.exp(diff) - diff - 1.0


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of softmax(logits) over the last dim, -sum(p log p), in float32 even for bf16 logits.

    Tokens with p = 0 (logit -inf, e.g. masked vocabulary padding) contribute 0, not 0 * -inf = NaN.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros((), device=logp.device)).sum(dim=-1)


def token_logprobs(logits: Tensor, token_ids: Tensor, temperature: float = 1.0) -> Tensor:
    """log softmax(logits / temperature) at `token_ids`: `[B, T, V]`, `[B, T]` → `[B, T]` float32.

    The trainer and the rollout engines compute log-probs with this same definition (temperature-scaled,
    no top-k/top-p truncation), which is what makes sampler and trainer log-probs comparable. Rows are
    processed one at a time so a bf16 `[B, T, V]` tensor is never copied whole to float32.
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0 (greedy decoding uses temperature 1 for log-probs)")
    rows = []
    for row_logits, row_ids in zip(logits, token_ids, strict=True):
        z = row_logits.float()
        if temperature != 1.0:
            z = z / temperature
        picked = z.gather(-1, row_ids.unsqueeze(-1)).squeeze(-1)
        rows.append(picked - torch.logsumexp(z, dim=-1))
    return torch.stack(rows) if rows else logits.new_zeros(token_ids.shape, dtype=torch.float32)


@register_policy_loss("ppo_clip")
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
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate per token, aggregated; returns (loss, metrics).

    Per token, with ratio r = exp(logp - old_logp) and advantage A:
    loss = -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A). `eps_high` defaults to `eps_low`;
    a larger one (DAPO's "clip-higher", e.g. 0.28) lets unlikely tokens with positive advantage grow
    faster, which counters entropy collapse. With mu = 1 pass `old_logp = logp.detach()`: r = 1 and
    the loss is the plain policy gradient.

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
    log_ratio = (logp.float() - old_logp.float()).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)

    metrics: dict[str, Tensor] = {}
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp)
        if beta != 0.0:
            per_token = per_token + beta * kl
        metrics["kl"] = masked_mean(kl.detach(), mask)

    loss = aggregate_loss(per_token, mask, aggregation, normalizer)

    with torch.no_grad():
        low = (ratio < 1.0 - eps_low) & (adv < 0)
        high = (ratio > 1.0 + eps_high) & (adv > 0)
        metrics["clip_ratio/low_mean"] = masked_mean(low.float(), mask)
        metrics["clip_ratio/high_mean"] = masked_mean(high.float(), mask)
        metrics["clip_ratio/region_mean"] = masked_mean((low | high).float(), mask)
    return loss, metrics


@register_policy_loss("reinforce")
def reinforce_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    aggregation: Aggregation = "token-mean",
    normalizer: float | Tensor | None = None,
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
    return aggregate_loss(per_token, mask, aggregation, normalizer), {}
