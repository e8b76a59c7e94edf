"""Token counts for budgets and statistics.

With `--tokenizer` (a local Hugging Face tokenizer directory) counts are exact for that model. Without
one, a fixed estimate is used: code averages about one token per identifier, number or punctuation run,
and long identifiers split further. The estimate needs no download, is deterministic, and is recorded
in the manifest, so a budget means the same thing on every machine of a run.

Counting is on the hot path of mining (every file shown, every prompt), so text is counted in C by the
optional extension `data_pipeline.context._tokencount` (6-16x faster than numpy, whose fixed cost per call and
several whole-array passes dominate for a file, and ~30x faster than the regular expression). Where it
could not be built (no C compiler) ASCII text is counted with numpy (`_ascii_estimate`, also the tested
reference) and other text with the regular expression, which stays the definition. Each distinct text
is counted once (a file is shown by many PRs), and a rendered prompt is counted from the counts of the
files it shows (`count_composed`): no estimate piece crosses a newline, so the count of a text cut at
newline boundaries is the sum of the counts of its parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

try:
    from data_pipeline.context._tokencount import estimate as _compiled_estimate
except ImportError:  # built without a C compiler: the numpy path below gives the same counts
    _compiled_estimate = None

HAVE_EXTENSION: bool = _compiled_estimate is not None

# One token per run of up to 8 letters, 8 digits or 8 spaces, and per other symbol: what BPE code
# tokenizers give on average. This regex is the definition; `_ascii_estimate` computes the same count.
_PIECES = re.compile(r"[A-Za-z]{1,8}|\d{1,8}|[ \t]{1,8}|\n|[^\sA-Za-z\d]|\s")
_RUN = 8

TokenCounter = Callable[[str], int]

# ASCII character classes: 0 letters, 1 digits, 2 space/tab (runs, up to 8 per piece), 3 anything else
# (one piece per character: newline, punctuation, other whitespace). As a `bytes.translate` table, which
# maps a whole text to its classes in one C pass (non-ASCII text never gets here).
_OTHER = 3
_CLASSES = bytes(
    0 if chr(code).isalpha() else 1 if chr(code).isdigit() else 2 if chr(code) in " \t" else _OTHER
    for code in range(128)
) + bytes([_OTHER] * 128)


def _ascii_estimate(text: str) -> int:
    """`len(_PIECES.findall(text))` for ASCII text, from the runs of character classes.

    Every run of one class is one piece, except that a run of class `_OTHER` is one piece per character
    and a longer run than `_RUN` of the others is cut every `_RUN` characters: (length - 1) // `_RUN`
    more pieces. Counting the `_OTHER` characters and the starts of the other runs is a few whole-array
    passes; run lengths are only needed for the runs longer than `_RUN`."""
    classes = np.frombuffer(text.encode("ascii").translate(_CLASSES), dtype=np.int8)
    starts_mask = np.empty(len(classes), dtype=bool)
    starts_mask[0] = True
    np.not_equal(classes[1:], classes[:-1], out=starts_mask[1:])
    starts = np.flatnonzero(starts_mask)
    runs = classes[starts] != _OTHER
    lengths = np.diff(starts, append=len(classes))
    long_runs = runs & (lengths > _RUN)
    pieces = int(np.count_nonzero(classes == _OTHER)) + int(np.count_nonzero(runs))
    return pieces + int(((lengths[long_runs] - 1) // _RUN).sum())


# Below this many characters the regular expression is faster than numpy's fixed cost per call (the
# compiled path is faster for every length).
_NUMPY_FROM = 400


def _estimate(text: str) -> int:
    if not text:
        return 0
    if _compiled_estimate is not None:
        return _compiled_estimate(text)
    if len(text) >= _NUMPY_FROM and text.isascii():
        return _ascii_estimate(text)
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
