"""Okapi BM25 over code, for ranking unmodified files against the issue text.

Identifiers are split on underscores and camelCase so that an issue saying "the parse date helper"
matches `parse_date` and `parseDate`. Document term counts are computed once per blob by the caller and
reused across PRs; a query only touches the terms it contains, so scoring a few thousand files costs
a few thousand dictionary look-ups per query term.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "is",
        "it",
        "for",
        "on",
        "with",
        "as",
        "be",
        "this",
        "that",
        "by",
        "at",
        "from",
        "not",
        "are",
        "was",
        "if",
        "we",
        "when",
        "def",
        "self",
        "return",
        "none",
        "true",
        "false",
        "import",
        "class",
    ]
)


# Terms of each distinct identifier, memoised: code repeats a small vocabulary, so splitting each word
# once instead of at every occurrence is what makes indexing a file cheap. Cleared when it grows large.
_WORD_TERMS: dict[str, tuple[str, ...]] = {}
_WORD_TERMS_MAX = 200_000


def _word_terms(word: str) -> tuple[str, ...]:
    found = _WORD_TERMS.get(word)
    if found is not None:
        return found
    lower = word.lower()
    parts = [p.lower() for p in _PART.findall(word)]
    out: list[str] = []
    if lower not in _STOP and len(lower) > 1:
        out.append(lower)
    if len(parts) > 1:
        out.extend(p for p in parts if p not in _STOP and len(p) > 1)
    if len(_WORD_TERMS) >= _WORD_TERMS_MAX:
        _WORD_TERMS.clear()
    _WORD_TERMS[word] = found = tuple(out)
    return found


def terms(text: str) -> list[str]:
    """Lower-case terms of a text: whole identifiers plus their underscore/camelCase parts."""
    out: list[str] = []
    for word in _WORD.findall(text):
        out.extend(_word_terms(word))
    return out


def bm25_scores(
    query: str, docs: Sequence[tuple[Counter[str], int]], *, k1: float = 1.5, b: float = 0.75
) -> list[float]:
    """BM25 score of each `(term counts, length)` document for `query`, in the documents' order."""
    if not docs:
        return []
    query_terms = Counter(terms(query))
    n = len(docs)
    avg_len = sum(length for _, length in docs) / n or 1.0
    scores = [0.0] * n
    for term, q_count in query_terms.items():
        postings = [(i, counts[term]) for i, (counts, _) in enumerate(docs) if term in counts]
        if not postings:
            continue
        idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
        for i, tf in postings:
            length = docs[i][1]
            scores[i] += q_count * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_len))
    return scores


def doc_stats(text: str) -> tuple[Counter[str], int]:
    """(term counts, number of terms) of a document: each distinct word is split once, not per use."""
    counts: Counter[str] = Counter()
    length = 0
    for word, n in Counter(_WORD.findall(text)).items():
        for term in _word_terms(word):
            counts[term] += n
            length += n
    return counts, length


def positive_scores(query: str, docs: Mapping[str, tuple[Counter[str], int]]) -> dict[str, float]:
    """path -> BM25 score of the documents that score above zero (the others share no term with the
    query), in the documents' order: a caller that ranks them sorts only these."""
    scores = bm25_scores(query, list(docs.values()))
    return {path: score for path, score in zip(docs, scores, strict=True) if score > 0}
