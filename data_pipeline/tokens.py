"""Token counts for budgets and statistics.

With `--tokenizer` (a local Hugging Face tokenizer directory) counts are exact for that model. Without
one, a fixed estimate is used: code averages about one token per identifier, number or punctuation run,
and long identifiers split further. The estimate needs no download, is deterministic, and is recorded
in the manifest, so a budget means the same thing on every machine of a run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

# One token per run of up to 8 letters, 8 digits or 8 spaces, and per other symbol: what BPE code
# tokenizers give on average, counted by a single regex scan (no Python loop per piece).
_PIECES = re.compile(r"[A-Za-z]{1,8}|\d{1,8}|[ \t]{1,8}|\n|[^\sA-Za-z\d]|\s")

TokenCounter = Callable[[str], int]


@lru_cache(maxsize=8192)
def estimate_tokens(text: str) -> int:
    """About what a BPE code tokenizer gives; cached because the same file is counted for many PRs."""
    return len(_PIECES.findall(text))


@lru_cache(maxsize=4)
def token_counter(tokenizer: str | None) -> TokenCounter:
    """The counter for a run: the named tokenizer's exact count, or the estimate."""
    if tokenizer is None:
        return estimate_tokens
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])
