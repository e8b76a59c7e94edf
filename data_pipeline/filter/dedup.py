"""Stage 4, dedup: near-duplicate removal across the whole run: the same fix must not be trained on twice.

The same change reaches a data set many times: backports, cherry-picks, forks in GH Archive, a PR that
was reverted and re-landed. Two rows are duplicates when their oracle patches change the same lines
(whitespace aside), and near duplicates when the sets of changed lines have a Jaccard similarity of at
least the threshold, estimated with MinHash and found with LSH banding. The first row in the run's
order is kept, so the result does not depend on how shards were scheduled. Tiny patches (a line or
two) are compared within their repository only: across repositories the same one-line change is
usually a coincidence, not a copy.

Memory: per kept row, one exact key, plus a 64-value signature (as hex) and `BANDS` band keys when the
patch is long enough for near-duplicate search: about 2 KB. Given a spill directory, the index keeps at most
`limit` rows in memory and the rest in sqlite files there (`spill.SpillMap`), so a run of any length
fits in a fixed amount of memory.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import numpy as np

from data_pipeline.engines.spill import SpillMap

NUM_PERM = 64
BANDS = 16
ROWS_PER_BAND = NUM_PERM // BANDS
MIN_LINES_FOR_NEAR = 5
MIN_LINES_GLOBAL = 3
_PRIME = (1 << 61) - 1
_PARAMS = [
    (
        int.from_bytes(hashlib.sha256(f"a{i}".encode()).digest()[:8], "big") % (_PRIME - 1) + 1,
        int.from_bytes(hashlib.sha256(f"b{i}".encode()).digest()[:8], "big") % _PRIME,
    )
    for i in range(NUM_PERM)
]


def changed_lines(patch: str) -> list[str]:
    """The patch's added and removed lines, whitespace-normalised, with their sign.

    Normalised: runs of whitespace made one space, none at either end (`str.split` with no argument and
    `\\s` split on the same characters, so this is `re.sub(r"\\s+", " ", line).strip()`, at a third of
    its cost)."""
    out = []
    for line in patch.splitlines():
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- ")):
            normal = " ".join(line[1:].split())
            if normal:
                out.append(line[0] + normal)
    return out


def _hash64(text: str) -> int:
    return struct.unpack(
        "<Q", hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    )[0]


_A = np.array([a for a, _ in _PARAMS], dtype=np.uint64)[:, None]
_A0, _A1 = _A & np.uint64(0xFFFFFFFF), _A >> np.uint64(32)
_B = np.array([b for _, b in _PARAMS], dtype=np.uint64)[:, None]
_P = np.uint64(_PRIME)


def _mod_prime(x: np.ndarray) -> np.ndarray:
    """x mod 2^61 - 1 for x < 2^64 - 2^61: 2^61 is 1 modulo the prime, so fold the top bits in."""
    x = (x & _P) + (x >> np.uint64(61))
    return np.where(x >= _P, x - _P, x)


def minhash(lines: set[str]) -> list[int]:
    """`[min((a * h + b) % _PRIME for h in hashes) for a, b in _PARAMS]`."""
    return _minhash_many([lines])[0].tolist()


def _minhash_many(line_sets: list[set[str]]) -> np.ndarray:
    """`minhash` of each (non-empty) set, one row each, computed exactly in 64-bit integers for all
    permutations and all the sets' lines at once: NumPy's fixed cost per operation, most of the time for
    a patch of a few lines, is paid once per shard instead of once per row. With the Mersenne prime
    p = 2^61 - 1, 2^61 = 1 and 2^64 = 8 (mod p), so a 122-bit product splits into 32-bit halves whose
    pieces all fit in 64 bits."""
    hashes = np.fromiter(
        (_hash64(line) for lines in line_sets for line in lines),
        dtype=np.uint64,
        count=sum(map(len, line_sets)),
    )[None, :]
    x = _mod_prime(hashes)  # a * h = a * (h mod p) (mod p)
    x0, x1 = x & np.uint64(0xFFFFFFFF), x >> np.uint64(32)
    high = (_A1 * x1) << np.uint64(3)  # a1 x1 2^64 = 8 a1 x1 < 2^61
    mid = _A1 * x0 + _A0 * x1  # < 2^62; mid 2^32 = (mid >> 29) 2^61 + (mid & (2^29 - 1)) 2^32
    mid = (mid >> np.uint64(29)) + ((mid & np.uint64((1 << 29) - 1)) << np.uint64(32))
    low = _mod_prime(_A0 * x0)  # < 2^64 before the fold
    total = _mod_prime(high + mid + low + _B)  # < 2^63 + 2^61
    starts = np.fromiter(accumulate(map(len, line_sets[:-1]), initial=0), dtype=np.intp, count=len(line_sets))
    return np.minimum.reduceat(total, starts, axis=1).T


def _concat(old: list[str], new: list[str]) -> list[str]:
    return old + new


class Deduplicator:
    """Streams rows in run order; `check` says whether a row duplicates an earlier kept one."""

    def __init__(self, threshold: float = 0.9, spill_dir: Path | None = None, limit: int = 100_000) -> None:
        self.threshold = threshold

        def where(name: str) -> Path | None:
            return spill_dir / f"dedup-{name}.sqlite" if spill_dir is not None else None

        self._exact = SpillMap(where("exact"), limit)
        self._bands = SpillMap(where("bands"), limit * BANDS, _concat)
        self._signatures = SpillMap(where("signatures"), limit)

    def close(self) -> None:
        for index in (self._exact, self._bands, self._signatures):
            index.close()

    def check(self, repo: str, patch: str) -> str | None:
        """None to keep (and remember) the row; else why it is a duplicate."""
        return self.check_fingerprint(fingerprint(repo, patch, self.threshold))

    def check_fingerprint(self, found: Fingerprint) -> str | None:
        """`check` for a fingerprint computed beforehand (by the worker that extracted the row)."""
        if found.exact in self._exact:
            return "same changed lines as an earlier row"
        signature = found.signature
        if signature is not None:
            # The earlier rows that share a band with this one, each once, in the order the bands meet
            # them; all compared in one array operation, and the first similar enough one is reported.
            others = dict.fromkeys(other for key in found.keys for other in self._bands.get(key) or ())
            if others:
                table = _signatures("".join(self._signatures.get(other) for other in others))
                same = np.count_nonzero(table == _signatures(signature), axis=1)
                similar = np.flatnonzero(same / NUM_PERM >= self.threshold)
                if similar.size:
                    return (
                        f"near duplicate (~{int(same[similar[0]]) / NUM_PERM:.2f} Jaccard) of an earlier row"
                    )
        self._exact.put(found.exact, 1)
        if signature is not None:
            self._signatures.put(found.exact, signature)
            for key in found.keys:
                self._bands.put(key, [found.exact])
        return None


def _signatures(hexes: str) -> np.ndarray:
    """Signatures written by `fingerprint` (hex, one after the other) as rows of an array."""
    return np.frombuffer(bytes.fromhex(hexes), dtype="<u8").reshape(-1, NUM_PERM)


@dataclass(frozen=True)
class Fingerprint:
    """What `Deduplicator` compares of a row: the exact key, and the MinHash signature (its 64 values as
    little-endian 64-bit integers, in hex: compact, and JSON for a spilled index) with its LSH band keys
    when the patch is long enough for near-duplicate search."""

    exact: str
    signature: str | None
    keys: tuple[str, ...]


def fingerprint(repo: str, patch: str, threshold: float) -> Fingerprint:
    """A row's fingerprint (`fingerprints` of one row)."""
    return fingerprints([(repo, patch)], threshold)[0]


def fingerprints(rows: list[tuple[str, str]], threshold: float) -> list[Fingerprint]:
    """The fingerprint of each (repo, oracle patch). It depends on the row alone, so the workers that
    extract rows compute it in parallel, a shard at a time, and the sequential dedup pass only looks keys
    up."""
    exact: list[str] = []
    near: list[set[str]] = []  # the changed lines of the rows long enough for near-duplicate search
    for repo, patch in rows:
        lines = changed_lines(patch)
        scope = "" if len(lines) >= MIN_LINES_GLOBAL else repo.lower()
        exact.append(hashlib.sha256("\n".join([scope, *lines]).encode("utf-8", "surrogatepass")).hexdigest())
        unique = set(lines)
        near.append(unique if len(unique) >= MIN_LINES_FOR_NEAR and threshold < 1 else set())
    signatures = iter(_minhash_many([lines for lines in near if lines]) if any(near) else ())
    band = ROWS_PER_BAND * 8
    out = []
    for key, lines in zip(exact, near, strict=True):
        if not lines:
            out.append(Fingerprint(key, None, ()))
            continue
        packed = next(signatures).astype("<u8").tobytes()
        keys = tuple(
            f"{i}:{hashlib.blake2b(packed[i * band : (i + 1) * band], digest_size=8).hexdigest()}"
            for i in range(BANDS)
        )
        out.append(Fingerprint(key, packed.hex(), keys))
    return out
