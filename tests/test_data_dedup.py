"""The vectorised MinHash equals its definition, for random line sets and hash values at the edges of the
Mersenne-prime arithmetic (0, p - 1, p, 2^61, 2^64 - 1)."""

from __future__ import annotations

import hashlib
import random
import struct

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


def _reference_check(kept: list[tuple[str, list[int], set[str]]], repo: str, patch: str, threshold: float):
    """The near-duplicate rule one earlier row at a time: exact key, then each earlier row that shares a
    band (bands hashed from the packed signature values), in the order the bands meet them."""
    lines = dedup.changed_lines(patch)
    scope = "" if len(lines) >= dedup.MIN_LINES_GLOBAL else repo.lower()
    exact = hashlib.sha256("\n".join([scope, *lines]).encode("utf-8", "surrogatepass")).hexdigest()
    if any(exact == other for other, _, _ in kept):
        return "same changed lines as an earlier row"
    signature = dedup.minhash(set(lines)) if len(set(lines)) >= dedup.MIN_LINES_FOR_NEAR else None
    bands = set()
    if signature is not None:
        per = dedup.ROWS_PER_BAND
        for band in range(dedup.BANDS):
            packed = struct.pack(f"<{per}Q", *signature[band * per : (band + 1) * per])
            bands.add(f"{band}:{hashlib.blake2b(packed, digest_size=8).hexdigest()}")
        keys = [f"{b}:" for b in range(dedup.BANDS)]
        order = sorted(bands, key=lambda key: keys.index(key.split(":")[0] + ":"))
        compared = []
        for key in order:
            for other, other_signature, other_bands in kept:
                if key in other_bands and other not in compared:
                    compared.append(other)
                    same = (
                        sum(a == b for a, b in zip(signature, other_signature, strict=True)) / dedup.NUM_PERM
                    )
                    if same >= threshold:
                        return f"near duplicate (~{same:.2f} Jaccard) of an earlier row"
    kept.append((exact, signature or [], bands))
    return None


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.9])
def test_dedup_decisions_equal_the_pairwise_rule(threshold):
    """The index and its one-array comparison decide, and word their reasons, as comparing each earlier
    kept row in turn does, over patches that share more or fewer changed lines."""
    rng = random.Random(int(threshold * 10))
    pool = [f"{sign}    value_{i} = compute({i}, x)" for i in range(60) for sign in "+-"]
    chosen: list[list[str]] = []
    for _ in range(300):
        if chosen and rng.random() < 0.7:  # an earlier patch with a few lines changed: near or not
            lines = list(rng.choice(chosen))
            for _ in range(rng.randint(0, 3)):
                lines[rng.randrange(len(lines))] = rng.choice(pool)
        else:
            lines = rng.sample(pool, rng.randint(1, 40))
        chosen.append(lines)
    patches = ["".join(f"{line}\n" for line in lines) for lines in chosen]
    index = dedup.Deduplicator(threshold)
    kept: list[tuple[str, list[int], set[str]]] = []
    found = [index.check("acme/a", patch) for patch in patches]
    assert found == [_reference_check(kept, "acme/a", patch, threshold) for patch in patches]
    assert sum("near duplicate" in (why or "") for why in found) > 10
    assert sum(why is None for why in found) > 20
