"""The incremental BM25 index scores exactly as BM25 over the same documents one by one, float for float,
through any sequence of additions, replacements and removals, and with documents left out of a query;
also when the documents are spread over several indexes ranked as one."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from swerl.retrieval import bm25

_WORDS = ["parse", "date", "value", "empty", "input", "module", "handler", "cache", "retry", "token"]


def _doc(rng: random.Random) -> tuple[Counter[str], int]:
    counts = Counter(rng.choices(_WORDS, k=rng.randint(1, 40)))
    return counts, counts.total()


@pytest.mark.parametrize("max_postings", [400_000, 30], ids=["postings-kept", "postings-evicted"])
def test_index_scores_equal_one_by_one_scores_through_changes_and_exclusions(max_postings):
    rng = random.Random(7)
    index = bm25.Index(max_postings=max_postings)  # 30: postings are dropped and rebuilt all the time
    # The same documents spread over three indexes, ranked as one (`joint_scores`).
    parts = [bm25.Index(max_postings=max_postings) for _ in range(3)]
    docs: dict[str, tuple[Counter[str], int]] = {}
    for step in range(400):
        at = rng.randrange(100)
        key = f"pkg/m{at}.py"  # slots of removed documents are reused
        part = parts[at % 3]
        if key in docs and rng.random() < 0.25:
            index.remove(key)
            part.remove(key)
            del docs[key]
        else:
            new = _doc(rng)
            changed = None
            if key in docs and rng.random() < 0.5:  # the caller says what changed (a superset of it)
                before = docs[key][0]
                changed = {t for t in before.keys() | new[0].keys() if before[t] != new[0][t]}
                changed |= set(rng.sample(_WORDS, 2))
            docs[key] = new
            index.put(key, *new, changed=changed)
            part.put(key, *new, changed=changed)
        query = " ".join(rng.choices([*_WORDS, "unrelated", "parse_date", "emptyInput"], k=rng.randint(1, 8)))
        left_out = set(rng.sample(sorted(docs), min(len(docs), rng.randint(0, 3))))
        kept = {key: doc for key, doc in docs.items() if key not in left_out}
        expected = dict(zip(kept, bm25.bm25_scores(query, list(kept.values())), strict=True))
        got = index.scores(query, exclude=left_out)
        assert got == {key: score for key, score in expected.items() if score > 0}, step  # exactly equal
        assert len(index) == len(docs)
        assert index._posted == sum(map(len, index._postings.values()))  # the bound counts what is kept
        assert bm25.joint_scores([(one, left_out) for one in parts], query) == got, step


def test_a_replaced_document_keeps_no_stale_terms():
    index = bm25.Index()
    index.put("a.py", Counter({"parse": 2, "date": 1}), 3)
    index.put("b.py", Counter({"value": 1}), 1)
    index.put("a.py", Counter({"value": 4}), 4)
    assert index.scores("parse date") == {}
    assert set(index.scores("value")) == {"a.py", "b.py"}
    index.remove("a.py")
    index.remove("b.py")
    assert index.scores("value") == {} and len(index) == 0
    assert not any(index._postings.values())  # the terms asked for stay known, with no document


def test_term_delta_is_the_difference_of_the_two_texts_stats():
    rng = random.Random(11)
    vocabulary = [*_WORDS, "parse_date", "emptyInput", "HTTPServer", "x", "import", "value2"]
    for _ in range(300):
        gone = " ".join(rng.choices(vocabulary, k=rng.randint(0, 12)))
        new = " ".join(rng.choices(vocabulary, k=rng.randint(0, 12)))
        change, moved = bm25.term_delta(gone, new)
        (before, before_length), (after, after_length) = bm25.doc_stats(gone), bm25.doc_stats(new)
        # doc_stats, counted from distinct words, against the terms of every occurrence one by one.
        assert (after, after_length) == (Counter(bm25.terms(new)), len(bm25.terms(new)))
        expected = Counter(after)
        expected.subtract(before)
        assert {t: n for t, n in change.items() if n} == {t: n for t, n in expected.items() if n}
        assert moved == after_length - before_length
