"""The vectorised MinHash equals its definition, for random line sets and hash values at the edges of the
Mersenne-prime arithmetic (0, p - 1, p, 2^61, 2^64 - 1)."""

from __future__ import annotations

import random

import pytest

from data_pipeline import dedup


def _reference(lines: set[str]) -> list[int]:
    hashes = [dedup._hash64(line) for line in lines]
    return [min((a * h + b) % dedup._PRIME for h in hashes) for a, b in dedup._PARAMS]


def test_minhash_equals_its_definition():
    rng = random.Random(0)
    for _ in range(200):
        lines = {
            "".join(rng.choice("ab c+-=xyz\u00e9") for _ in range(rng.randint(0, 30)))
            for _ in range(rng.randint(1, 200))
        }
        assert dedup.minhash(lines) == _reference(lines)


@pytest.mark.parametrize(
    "value", [0, 1, dedup._PRIME - 1, dedup._PRIME, dedup._PRIME + 1, 2**61, 2**63, 2**64 - 2**61, 2**64 - 1]
)
def test_minhash_at_the_edges_of_the_arithmetic(monkeypatch, value):
    monkeypatch.setattr(dedup, "_hash64", lambda text: value)
    assert dedup.minhash({"x"}) == _reference({"x"})
