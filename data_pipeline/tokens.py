"""Token counts for budgets and statistics.

With `--tokenizer` (a local Hugging Face tokenizer directory) counts are exact for that model. Without
one, a fixed estimate is used: code averages about one token per identifier, number or punctuation run,
and long identifiers split further. The estimate needs no download, is deterministic, and is recorded
in the manifest, so a budget means the same thing on every machine of a run.

Counting is on the hot path of mining (every file shown, every prompt), so the estimate is computed
with numpy over ASCII text (the regular expression stays the definition and handles other text), each
distinct text is counted once (a file is shown by many PRs), and a rendered prompt is counted from the
counts of the files it shows (`count_composed`): no estimate piece crosses a newline, so the count of a
text cut at newline boundaries is the sum of the counts of its parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

# One token per run of up to 8 letters, 8 digits or 8 spaces, and per other symbol: what BPE code
# tokenizers give on average. This regex is the definition; `_ascii_estimate` computes the same count.
_PIECES = re.compile(r"[A-Za-z]{1,8}|\d{1,8}|[ \t]{1,8}|\n|[^\sA-Za-z\d]|\s")
_RUN = 8

TokenCounter = Callable[[str], int]

# ASCII character classes: 0 letters, 1 digits, 2 space/tab (runs, up to 8 per piece), 3 anything else
# (one piece per character: newline, punctuation, other whitespace).
_CLASS = np.full(128, 3, dtype=np.int8)
for _code in range(128):
    _char = chr(_code)
    if _char.isalpha():
        _CLASS[_code] = 0
    elif _char.isdigit():
        _CLASS[_code] = 1
    elif _char in " \t":
        _CLASS[_code] = 2


def _ascii_estimate(text: str) -> int:
    """`len(_PIECES.findall(text))` for ASCII text, from the runs of character classes."""
    classes = _CLASS[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    starts = np.flatnonzero(np.concatenate(([True], classes[1:] != classes[:-1])))
    lengths = np.diff(np.append(starts, len(classes)))
    single = classes[starts] == 3
    return int(lengths[single].sum() + ((lengths[~single] + _RUN - 1) // _RUN).sum())


# Below this many characters the regular expression is faster than numpy's fixed cost per call.
_NUMPY_FROM = 400


def _estimate(text: str) -> int:
    if not text:
        return 0
    if len(text) >= _NUMPY_FROM and text.isascii():
        return _ascii_estimate(text)
    return len(_PIECES.findall(text))


def estimate_uncached(text: str) -> int:
    """`estimate_tokens` without the cache, for one-off texts (such as a diff's changed lines)."""
    return _estimate(text)


@lru_cache(maxsize=8192)
def estimate_tokens(text: str) -> int:
    """About what a BPE code tokenizer gives; cached because the same file is counted for many PRs."""
    return _estimate(text)


@lru_cache(maxsize=4)
def token_counter(tokenizer: str | None) -> TokenCounter:
    """The counter for a run: the named tokenizer's exact count, or the estimate."""
    if tokenizer is None:
        return estimate_tokens
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def _newline_boundary(text: str, at: int) -> bool:
    return at == 0 or at == len(text) or text[at - 1] == "\n" or text[at] == "\n"


def count_composed(count: TokenCounter, text: str, parts: Sequence[str]) -> int:
    """`count(text)`, where `text` holds each of `parts` verbatim and in order (a prompt and its files).

    For the estimate, each part found at newline boundaries is counted through the (cached) per-part
    count and only the text between parts is scanned. Any other counter, or a part that is not where
    expected, counts the whole text: the result is always exactly `count(text)`.
    """
    if count is not estimate_tokens:
        return count(text)
    total, pos = 0, 0
    for part in parts:
        if not part:
            continue
        at = text.find(part, pos)
        end = at + len(part)
        if at < 0 or not (_newline_boundary(text, at) and _newline_boundary(text, end)):
            return count(text)
        total += _estimate(text[pos:at]) + estimate_tokens(part)
        pos = end
    return total + _estimate(text[pos:])
