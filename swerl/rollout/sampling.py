"""Logit filters and per-sequence random streams used by the transformers engine.

Kept apart from the decoding loop so the filters are tested on small hand-made tensors, and so the
seeding rule (one stream per prompt index and sample index) is stated in one place: it is what makes a
completion independent of which other prompts share its batch and how they are padded.
"""

from __future__ import annotations

import torch
from torch import Tensor

_MASK64 = (1 << 64) - 1


def mix_seed(*parts: int) -> int:
    """Combine integers into one 63-bit seed (splitmix64 finalizer per part): distinct parts, distant seeds.

    Seeding stream (i, j) with `base + i + j` would make prompt 0 sample 1 and prompt 1 sample 0 share a
    stream; mixing avoids such collisions.
    """
    h = 0x9E3779B97F4A7C15
    for part in parts:
        h = (h ^ (part & _MASK64)) & _MASK64
        h = (h + 0x9E3779B97F4A7C15) & _MASK64
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK64
        h ^= h >> 31
    return h >> 1


def filter_top_k(logits: Tensor, top_k: int) -> Tensor:
    """Keep the `top_k` largest logits per row, set the rest to -inf (0 disables; ties at the cut stay)."""
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def filter_top_p(logits: Tensor, top_p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability reaches `top_p`.

    A token is dropped when the probability mass strictly before it (in descending order) is already
    ≥ top_p, so the most likely token is always kept and the kept mass is the first to reach top_p.
    """
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs
    drop_sorted = mass_before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))
