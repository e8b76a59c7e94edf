"""Okapi BM25 over code, for ranking unmodified files against the issue text.

Identifiers are split on underscores and camelCase so that an issue saying "the parse date helper"
matches `parse_date` and `parseDate`. Document term counts are computed once per blob by the caller and
reused across PRs. `bm25_scores` scores a list of documents once; `Index` keeps an inverted index over a
set of documents that changes a few at a time, so a query visits only the documents holding its terms.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

# Okapi BM25's usual parameters: term frequency saturation and length normalisation.
K1 = 1.5
B = 0.75
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
    query: str, docs: Sequence[tuple[Counter[str], int]], *, k1: float = K1, b: float = B
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
        weight = q_count * _idf(n, len(postings))
        for i, tf in postings:
            scores[i] += weight * tf * (k1 + 1) / (tf + _norm(docs[i][1], avg_len, k1, b))
    return scores


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _norm(length: int, avg_len: float, k1: float, b: float) -> float:
    """A document's length normalisation. `bm25_scores` and `Index` both sum
    `q_count * idf * tf * (k1 + 1) / (tf + _norm(...))` in this order of operations, so that they give
    the same floating-point scores."""
    return k1 * (1 - b + b * length / avg_len)


class Index:
    """BM25 over a set of documents that changes a few documents at a time, with an inverted index:
    scoring a query visits the documents that hold its terms, not every document, and replacing a
    document touches only the terms whose counts changed. The context stage keeps one per repository
    in step with the pool of each PR in turn (thousands of files, of which a PR or two change a few).

    Postings are built per term when a query first asks for the term (one pass over the documents, as
    `bm25_scores` makes per term anyway) and then kept up to date: a pool ranked once costs what
    ranking it one by one costs, not the indexing of every term of every file (40x more for a pool of
    1,000 files), and the terms issues use again and again are looked up, not scanned for. At most
    `max_postings` (document, count) entries are kept over all terms (least recently asked terms out
    first): the memory they take is bounded by that, not by how many terms a long history asks for.

    `scores(query)` equals `bm25_scores` over the same documents, float for float: the same document
    frequencies, average length and per-term expression, summed per document in the query's term order.
    """

    def __init__(self, max_postings: int = 400_000) -> None:
        self._docs: dict[str, tuple[Counter[str], int]] = {}
        # term -> {document: count}, for the terms queries asked for (an empty one: no document has it).
        self._postings: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._max_postings = max_postings
        self._posted = 0  # entries in `_postings`
        self._total_length = 0
        # Dense ids: a document's slot in `_keys`, reused when freed, as `_holders` records it.
        self._ids: dict[str, int] = {}
        self._keys: list[str | None] = []
        self._free: list[int] = []
        # term -> the slots of the documents that hold it, for every term: 4 bytes a posting, kept up to
        # date with the documents, so the postings of a term no query asked for cost its documents
        # (few, for the terms an issue has that code rarely does) rather than a pass over all of them.
        self._holders: dict[str, array[int]] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def put(
        self, key: str, counts: Counter[str], length: int, *, changed: AbstractSet[str] | None = None
    ) -> None:
        """Add the document `key`, or replace it (only the posted terms whose counts differ are touched).
        `changed`, when the caller knows it, holds at least every term whose count differs from the
        document being replaced; else those are found by comparing the two."""
        old = self._docs.get(key)
        slot = self._slot(key)
        if old is not None:
            self._total_length -= old[1]
            if changed is None:
                # The (term, count) pairs of either version only: a set operation in C over both.
                changed = {term for term, _ in old[0].items() ^ counts.items()}
            before = old[0]
            for term in changed:
                now = counts.get(term, 0) > 0
                if now != (before.get(term, 0) > 0):
                    self._hold(term, slot) if now else self._release(term, slot)
        else:
            changed = counts.keys()
            for term, count in counts.items():
                if count > 0:
                    self._hold(term, slot)
        for term in changed & self._postings.keys():
            count = counts.get(term, 0)
            posting = self._postings[term]
            if count > 0:
                self._posted += key not in posting
                posting[key] = count
            elif posting.pop(key, None) is not None:
                self._posted -= 1
        self._docs[key] = (counts, length)
        self._total_length += length

    def _hold(self, term: str, slot: int) -> None:
        holders = self._holders.get(term)
        if holders is None:
            self._holders[term] = array("i", [slot])
        else:
            holders.append(slot)

    def _release(self, term: str, slot: int) -> None:
        holders = self._holders[term]
        holders.remove(slot)
        if not holders:
            del self._holders[term]

    def _slot(self, key: str) -> int:
        slot = self._ids.get(key)
        if slot is None:
            slot = self._free.pop() if self._free else len(self._keys)
            if slot == len(self._keys):
                self._keys.append(key)
            else:
                self._keys[slot] = key
            self._ids[key] = slot
        return slot

    def remove(self, key: str) -> None:
        counts, length = self._docs.pop(key)
        self._total_length -= length
        for term in counts.keys() & self._postings.keys():
            if self._postings[term].pop(key, None) is not None:
                self._posted -= 1
        slot = self._ids.pop(key)
        for term, count in counts.items():
            if count > 0:
                self._release(term, slot)
        self._keys[slot] = None
        self._free.append(slot)

    def _postings_of(self, wanted: Iterable[str]) -> list[dict[str, int]]:
        """The postings of the terms `wanted`, in their order. Those not kept are built from the slots
        of the documents holding them (`_holders`): a long issue text brings several terms no query
        asked for before, and a pass over thousands of documents for them was a quarter of the context
        stage's time on a large real repository (ansible/ansible)."""
        wanted = list(wanted)
        keys, docs = self._keys, self._docs
        # Added in the query's term order, so the least recently asked are evicted first.
        for term in dict.fromkeys(t for t in wanted if t not in self._postings):
            holders = [keys[slot] for slot in self._holders.get(term, ())]
            self._postings[term] = {key: docs[key][0][term] for key in holders if key is not None}
            self._posted += len(self._postings[term])
        for term in wanted:
            self._postings.move_to_end(term)
        found = [self._postings[term] for term in wanted]
        # The terms just asked stay, whatever their size (they are at the end).
        while self._posted > self._max_postings and len(self._postings) > len(found):
            term, posting = self._postings.popitem(last=False)
            self._posted -= len(posting)
        return found

    def scores(
        self, query: str, *, exclude: Iterable[str] = (), k1: float = K1, b: float = B
    ) -> dict[str, float]:
        """key -> score of the documents that share a term with `query` (all others score 0), as if the
        documents `exclude` were not in the index (the statistics leave them out too): a caller whose
        set of documents differs from one query to the next by a few can leave them in instead of
        removing and adding them back."""
        return joint_scores([(self, exclude)], query, k1=k1, b=b)

    def _scores(
        self,
        terms_in: list[tuple[float, str, dict[str, int]]],
        left_out: list[str],
        avg_len: float,
        k1: float,
        b: float,
    ) -> dict[str, float]:
        """`scores` over one index, term by term."""
        scores: dict[str, float] = {}
        norms: dict[str, float] = {}  # per document, computed once whatever the number of its terms
        docs = self._docs
        for weight, _, posting in terms_in:
            for key, tf in posting.items():
                if key in left_out:
                    continue
                norm = norms.get(key)
                if norm is None:
                    norm = norms[key] = _norm(docs[key][1], avg_len, k1, b)
                scores[key] = scores.get(key, 0.0) + weight * tf * (k1 + 1) / (tf + norm)
        return scores


def joint_scores(
    parts: Sequence[tuple[Index, Iterable[str]]], query: str, *, k1: float = K1, b: float = B
) -> dict[str, float]:
    """key -> score of the documents that share a term with `query`, over several indexes of disjoint
    keys taken as one (each less its documents `exclude`): the document count, total length and each
    term's document frequency are sums over the parts, so every score is the float one index over all
    their documents gives. The context stage keeps an index per file suffix and ranks a PR that
    changes `.py` and `.yml` files over both, instead of building an index per set of suffixes."""
    held = [
        (index, [key for key in dict.fromkeys(exclude) if key in index._docs]) for index, exclude in parts
    ]
    n = sum(len(index._docs) - len(left_out) for index, left_out in held)
    if n <= 0:
        return {}
    total = sum(
        index._total_length - sum(index._docs[key][1] for key in left_out) for index, left_out in held
    )
    avg_len = total / n or 1.0
    query_terms = Counter(terms(query))
    postings = [index._postings_of(query_terms) for index, _ in held]
    # Each query term's weight (count x idf over every part), in the query's term order; 0 for a term no
    # document holds.
    weights = []
    for at, q_count in enumerate(query_terms.values()):
        df = sum(
            len(found[at]) - sum(1 for key in left_out if key in found[at])
            for found, (_, left_out) in zip(postings, held, strict=True)
        )
        weights.append(q_count * _idf(n, df) if df > 0 else 0.0)
    scores: dict[str, float] = {}
    for found, (index, left_out) in zip(postings, held, strict=True):
        terms_in = [
            (weight, term, posting)
            for weight, term, posting in zip(weights, query_terms, found, strict=True)
            if posting and weight
        ]
        scores.update(index._scores(terms_in, left_out, avg_len, k1, b))
    return scores


def term_delta(gone: str, new: str) -> tuple[Counter[str], int]:
    """How a document's term counts and length change when text `gone` is replaced by `new`: words
    both hold cancel out before any is split into terms. The changes are exactly what
    `doc_stats(new)` minus `doc_stats(gone)` gives, terms left at 0 included."""
    words = Counter(_WORD.findall(new))
    words.subtract(_WORD.findall(gone))
    return _term_counts(words)


def doc_stats(text: str) -> tuple[Counter[str], int]:
    """(term counts, number of terms) of a document: each distinct word is split once, not per use."""
    return _term_counts(Counter(_WORD.findall(text)))


def _term_counts(words: Counter[str]) -> tuple[Counter[str], int]:
    """The terms of counted words, and their number: each word's count goes to each of its terms (a
    word counted 0 adds nothing, a negative count takes away)."""
    counts: Counter[str] = Counter()
    length = 0
    for word, n in words.items():
        if n:
            for term in _word_terms(word):
                counts[term] += n
                length += n
    return counts, length
