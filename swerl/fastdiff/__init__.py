"""Exact, fast equivalents of the `difflib.SequenceMatcher` computations used by the SWE-RL reward.

The similarity reward compares every model answer with the oracle patch through
`difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()` on unified diffs, ~10^4 times per training
step.  Pure-Python difflib needs ~13 ms for a small pair and tens of seconds for some 20 KB pairs, so it
would dominate the step.  The functions here return results bit-identical to Python 3.11's difflib
(same matching blocks, same tie-breaking, same float expression for the ratio) and do the matching in the
C extension `swerl.fastdiff._matcher`: per window of difflib's recursion, a suffix automaton for large
windows of characters, difflib's own walk over b2j for lines (which rarely repeat), a plain DP for small
windows, chosen by estimated cost (see the comment at the top of `_matcher.c`, which also lists the inputs
that remain slow).  The extension releases the GIL while it matches, so a thread pool can score pairs on
several cores.

When the extension could not be built (no C compiler at install time) every function falls back to the
standard library with identical results, and a single warning says so.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

__all__ = [
    "HAVE_EXTENSION",
    "grouped_opcodes",
    "matching_blocks",
    "matching_characters",
    "opcodes",
    "ratio",
    "unified_diff_body",
]

Opcode = tuple[str, int, int, int, int]

try:
    from swerl.fastdiff import _matcher
except ImportError:  # pragma: no cover - exercised only on installs without a compiler
    _matcher: Any = None
    warnings.warn(
        "swerl.fastdiff: the compiled matcher (swerl.fastdiff._matcher) is not available, falling back to "
        "pure-Python difflib, which is 50-1000x slower for the SWE-RL reward. Install a C compiler "
        "(e.g. `apt-get install build-essential`) and reinstall swerl (`pip install -e .`).",
        RuntimeWarning,
        stacklevel=2,
    )

HAVE_EXTENSION: bool = _matcher is not None


def matching_characters(a: str, b: str) -> int:
    """Number of matched characters M, as `SequenceMatcher(None, a, b, autojunk=False)` finds them.

    Kept as an integer (the sum of the matching block sizes) so that `ratio` can apply difflib's exact
    float expression to it.
    """
    if not isinstance(a, str) or not isinstance(b, str):
        raise TypeError("matching_characters expects two str")
    if a == b:
        # one block covering everything (difflib finds it first); frequent for correct answers
        return len(a)
    if _matcher is not None:
        return _matcher.matching_characters(a, b)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def ratio(a: str, b: str) -> float:
    """`difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()`, bit for bit.

    difflib computes `2.0 * matches / (len(a) + len(b))` (1.0 for two empty strings); the same expression
    on the same integers gives the same float.
    """
    total = len(a) + len(b)
    if not total:
        return 1.0
    return 2.0 * matching_characters(a, b) / total


def matching_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int, int]]:
    """`SequenceMatcher(None, a, b).get_matching_blocks()` (default autojunk=True) as plain tuples.

    Includes difflib's merging of adjacent blocks and the final `(len(a), len(b), 0)` sentinel.  Meant for
    lists of lines (the unified diff path), where difflib's autojunk ("popular" lines) rule applies, so it
    is reproduced here.  Two str are matched as sequences of characters.  Elements are compared the way
    difflib's `b2j` dict does (hash, identity, then ==), so they need a consistent, reflexive `==`.
    """
    if _matcher is not None:
        return _matcher.matching_blocks(a, b, True)
    return [tuple(block) for block in difflib.SequenceMatcher(None, a, b).get_matching_blocks()]


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Opcode]:
    """`SequenceMatcher(None, a, b).get_opcodes()`, derived from `matching_blocks`."""
    return _opcodes_from_blocks(matching_blocks(a, b))


def _opcodes_from_blocks(blocks: list[tuple[int, int, int]]) -> list[Opcode]:
    """Turns matching blocks into the edit script: the gap before each block is a replace/delete/insert."""
    codes: list[Opcode] = []
    i = j = 0
    for ai, bj, size in blocks:
        if i < ai and j < bj:
            codes.append(("replace", i, ai, j, bj))
        elif i < ai:
            codes.append(("delete", i, ai, j, bj))
        elif j < bj:
            codes.append(("insert", i, ai, j, bj))
        i, j = ai + size, bj + size
        if size:
            codes.append(("equal", ai, i, bj, j))
    return codes


def grouped_opcodes(a: Sequence[Hashable], b: Sequence[Hashable], n: int = 3) -> list[list[Opcode]]:
    """`list(SequenceMatcher(None, a, b).get_grouped_opcodes(n))`.

    Change clusters with at most `n` lines of context around them; an equal run longer than 2n splits two
    clusters.  A single all-equal group is dropped, so identical inputs give `[]`.
    """
    codes = _opcodes_from_blocks(matching_blocks(a, b))
    if not codes:
        # both inputs empty: difflib pretends one equal element so the trimming below works
        codes = [("equal", 0, 1, 0, 1)]
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n))

    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def _unified_range(start: int, stop: int) -> str:
    """difflib's `_format_range_unified`: 1-based start, `,len` unless len == 1, empty ranges start one
    line earlier (the line before the insertion point)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    if not length:
        return f"{start},0"
    return f"{start + 1},{length}"


def unified_diff_body(a_lines: list[str], b_lines: list[str], n: int = 3) -> str:
    """The unified diff of two line lists without its `---`/`+++` header, lines joined by "\\n".

    Equals `"\\n".join(list(difflib.unified_diff(a_lines, b_lines, fromfile="old", tofile="new",
    lineterm="", n=n))[2:])`, which is the text the SWE-RL reward compares; "" when there is no
    difference.  Like difflib, lines are emitted verbatim (embedded newlines or other odd characters
    included).
    """
    # difflib's own type check looks at the first line of each side only; a later non-str line fails when
    # it is printed.  Checking every line would cost as much as the matching itself.
    for lines in (a_lines, b_lines):
        if lines and not isinstance(lines[0], str):
            raise TypeError(f"lines to compare must be str, not {type(lines[0]).__name__} ({lines[0]!r})")
    # Each run of lines becomes one chunk, prefix + ("\n" + prefix).join(run): the same text as prefixing
    # every line and joining them all with "\n", but built by str.join in C instead of line by line.
    out: list[str] = []
    for group in grouped_opcodes(a_lines, b_lines, n):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_unified_range(first[1], last[2])} +{_unified_range(first[3], last[4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                if i1 < i2:
                    out.append(" " + "\n ".join(a_lines[i1:i2]))
                continue
            if tag != "insert" and i1 < i2:
                out.append("-" + "\n-".join(a_lines[i1:i2]))
            if tag != "delete" and j1 < j2:
                out.append("+" + "\n+".join(b_lines[j1:j2]))
    return "\n".join(out)
