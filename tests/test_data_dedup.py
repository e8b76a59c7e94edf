"""The vectorised MinHash equals its definition, for random line sets and hash values at the edges of the
Mersenne-prime arithmetic (0, p - 1, p, 2^61, 2^64 - 1)."""

from __future__ import annotations

import hashlib
import random
import re
import struct

import pytest

from data_pipeline.filter import dedup


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


def _reference_changed_lines(patch: str) -> list[str]:
    out = []
    for line in patch.splitlines():
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- ")):
            normal = re.sub(r"\s+", " ", line[1:]).strip()
            if normal:
                out.append(line[0] + normal)
    return out


def test_changed_lines_normalise_whitespace_as_the_regex_does():
    """`str.split()` and `\\s` agree on every whitespace character, Unicode ones included (some of which
    also end a line for `splitlines`)."""
    rng = random.Random(1)
    spaces = [" ", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "\ufeff"]
    for _ in range(300):
        body = "".join(rng.choice(["x", "y(", "=", "é", "+", *spaces]) for _ in range(rng.randint(0, 20)))
        patch = f"--- a/f\n+++ b/f\n@@ -1 +1 @@\n{rng.choice('+- ')}{body}\n"
        assert dedup.changed_lines(patch) == _reference_changed_lines(patch)


@pytest.mark.parametrize("threshold", [0.5, 0.9, 1.0])
def test_a_shard_of_fingerprints_equals_one_row_at_a_time(threshold):
    """Fingerprints made a shard at a time (one NumPy pass for every row's MinHash) are those made row by
    row, for rows long enough for near-duplicate search or not, in any mix."""
    rng = random.Random(int(threshold * 10))
    rows = []
    for i in range(80):
        count = rng.choice([0, 1, 2, 4, 5, 6, 12, 40])
        lines = "".join(f"{rng.choice('+-')}line {rng.randrange(30)} of {i % 7}\n" for _ in range(count))
        rows.append((rng.choice(["acme/a", "acme/b"]), f"--- a/f\n+++ b/f\n@@ -1 +1 @@\n{lines}"))
    batch = dedup.fingerprints(rows, threshold)
    assert batch == [dedup.fingerprint(repo, patch, threshold) for repo, patch in rows]
    assert any(f.signature is not None for f in batch) == (threshold < 1)
    assert dedup.fingerprints([], threshold) == []
