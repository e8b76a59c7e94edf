"""Token counts for budgets and statistics.

With `--tokenizer` (a local Hugging Face tokenizer directory) counts are exact for that model. Without
one, a fixed estimate is used: code averages about one token per identifier, number or punctuation run,
and long identifiers split further. The estimate needs no download, is deterministic, and is recorded
in the manifest, so a budget means the same thing on every machine of a run.

Counting is on the hot path of mining (every file shown, every prompt), so text is counted in C by the
optional extension `data_pipeline.context._tokencount` (~30x faster than the regular expression per
file; without it, `swerl data mine --local` on a real repository takes about twice as long). Where it
could not be built (no C compiler) text is counted with the regular expression, which is the
definition and the tested reference. Each distinct text
is counted once (a file is shown by many PRs), and a rendered prompt is counted from the counts of the
files it shows (`count_composed`): no estimate piece crosses a newline, so the count of a text cut at
newline boundaries is the sum of the counts of its parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

try:
    from data_pipeline.context._tokencount import estimate as _compiled_estimate
except ImportError:  # built without a C compiler: the regular expression gives the same counts
    _compiled_estimate = None

HAVE_EXTENSION: bool = _compiled_estimate is not None

# One token per run of up to 8 letters, 8 digits or 8 spaces, and per other symbol: what BPE code
# tokenizers give on average. This regex is the definition; the extension computes the same count.
_PIECES = re.compile(r"[A-Za-z]{1,8}|\d{1,8}|[ \t]{1,8}|\n|[^\sA-Za-z\d]|\s")

TokenCounter = Callable[[str], int]


def _estimate(text: str) -> int:
    if not text:
        return 0
    if _compiled_estimate is not None:
        return _compiled_estimate(text)
    return len(_PIECES.findall(text))


def estimate_uncached(text: str) -> int:
    """`estimate_tokens` without the cache, for one-off texts (such as a diff's changed lines)."""
    return _estimate(text)


def estimate_tokens(text: str) -> int:
    """About what a BPE code tokenizer gives. Not memoised: counting is faster than hashing the text
    (~25 us for 64 KiB with the extension), and a memo keyed by whole files held hundreds of MiB of
    them late in a long history."""
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


# `str.find` preprocesses the whole needle on every call: for a file of tens of kB that costs more than
# the short scan to where the file starts. So `_find` looks for a short prefix first.
_PREFIX = 64


def _find(text: str, part: str, pos: int) -> int:
    """`text.find(part, pos)`. The first place at or after `pos` where `part` starts is also the first
    place where its prefix starts unless the prefix occurs earlier; only then is the full search needed."""
    if len(part) > _PREFIX:
        at = text.find(part[:_PREFIX], pos)
        if at < 0 or text.startswith(part, at):
            return at
    return text.find(part, pos)


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
        at = _find(text, part, pos)
        end = at + len(part)
        if at < 0 or not (_newline_boundary(text, at) and _newline_boundary(text, end)):
            return count(text)
        total += _estimate_glue(text[pos:at]) + estimate_tokens(part)
        pos = end
    return total + _estimate_glue(text[pos:])


@lru_cache(maxsize=4096)
def _estimate_glue(text: str) -> int:
    """The estimate of the text between a prompt's files: mostly the same few strings again (a file's
    closing fence and the next one's header, the instructions after the last file), so cached apart
    from the files' own counts, which it would otherwise push out of their cache."""
    return _estimate(text)
