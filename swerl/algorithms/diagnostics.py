"""How far the sampler's log-probs are from the trainer's for the same tokens.

A rollout engine (vLLM in bf16 with its own kernels, or HF generate with a KV cache) and the trainer's
forward pass compute log-probs of the very same sampled tokens slightly differently. If the gap grows,
the "on-policy" data is silently off-policy and the clipped ratio no longer means what it should; this
is the number to chart when vLLM and the trainer disagree. Metric names follow TRL's `sampling/*`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from swerl.algorithms.losses import kl_k3, masked_mean


def logprob_mismatch(sampler_logp: Tensor, trainer_logp: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """Masked statistics of trainer - sampler log-probs on `[B, T]` completion tokens (all detached).

    - `sampling/sampling_logp_difference/mean|max`: |trainer - sampler| per token.
    - `sampling/importance_sampling_ratio/min|mean|max`: exp(trainer - sampler), the weight that would
      correct for the mismatch (1 when the two agree).
    - `sampling/kl_k3`: the k3 estimate of KL(sampler ‖ trainer) on the sampled tokens, ≥ 0.
    Empty masks give zeros rather than NaN/inf.
    """
    m = mask.bool()
    with torch.no_grad():
        diff = trainer_logp.float() - sampler_logp.float()
        abs_diff = diff.abs()
        ratio = torch.exp(diff)
        any_token = bool(m.any())

        def masked_extreme(x: Tensor, largest: bool) -> Tensor:
            if not any_token:
                return x.new_zeros(())
            fill = torch.tensor(float("-inf") if largest else float("inf"), device=x.device)
            picked = torch.where(m, x, fill)
            return picked.max() if largest else picked.min()

        return {
            "sampling/sampling_logp_difference/mean": masked_mean(abs_diff, m),
            "sampling/sampling_logp_difference/max": masked_extreme(abs_diff, largest=True),
            "sampling/importance_sampling_ratio/min": masked_extreme(ratio, largest=False),
            "sampling/importance_sampling_ratio/mean": masked_mean(ratio, m),
            "sampling/importance_sampling_ratio/max": masked_extreme(ratio, largest=True),
            "sampling/kl_k3": masked_mean(kl_k3(sampler_logp, trainer_logp), m),
        }
