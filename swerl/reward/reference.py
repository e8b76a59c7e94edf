"""The pure-`difflib` reference engine: the executable definition the fast reward must equal.

It plugs the standard library into the same reward logic (`similarity_reward(..., engine=DIFFLIB)`), so
tests and `bench/reward.py` can demand bit-identical values and measure the speed-up of
`swerl.fastdiff` over exactly the computation the paper's reward performs.
"""

from __future__ import annotations

import difflib

from swerl.reward.similarity import DiffEngine


def difflib_diff_body(old_lines: list[str], new_lines: list[str], context: int) -> str:
    """The unified diff of two line lists without its `---`/`+++` header lines, joined by newlines."""
    lines = difflib.unified_diff(old_lines, new_lines, fromfile="old", tofile="new", lineterm="", n=context)
    return "\n".join(list(lines)[2:])


def difflib_ratio(a: str, b: str) -> float:
    """Character-level similarity exactly as the SWE-RL reward defines it."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


DIFFLIB = DiffEngine(diff_body=difflib_diff_body, ratio=difflib_ratio)
