"""Output checking with the rules of the CodeContests harness, so our solve rates match the papers'.

Rules (each has a test in tests/test_codecontests_checker.py):

* outputs are split into whitespace-separated tokens; different token counts fail;
* tokens equal ignoring case match ("YES" == "yes");
* otherwise both tokens must be numbers: two integers within the signed 64-bit range must be equal;
  any other pair of numbers (a decimal, or an integer too large for 64 bits) is compared as doubles
  with an absolute tolerance of 1e-5;
* anything else is a mismatch.

Numbers are recognised by a strict pattern (sign, digits, optional fraction and exponent), not by
Python's float(), which would also accept "nan", "inf" and "1_000".
"""

from __future__ import annotations

import math
import re

ABS_TOLERANCE = 1e-5
_INT = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT64 = range(-(1 << 63), 1 << 63)


def _as_number(token: str) -> int | float | None:
    """The token's value: int when it is an integer that fits 64 bits, float for other numbers, else None."""
    if _INT.fullmatch(token):
        value = int(token)
        return value if value in _INT64 else float(token)
    if _DECIMAL.fullmatch(token):
        return float(token)
    return None


def tokens_match(expected: str, actual: str) -> bool:
    """One expected token against one produced token, by the rules above."""
    if expected.lower() == actual.lower():
        return True
    want, got = _as_number(expected), _as_number(actual)
    if want is None or got is None:
        return False
    if isinstance(want, int) and isinstance(got, int):
        return want == got
    difference = abs(float(want) - float(got))
    return math.isfinite(difference) and difference <= ABS_TOLERANCE


def outputs_match(expected: str, actual: str) -> bool:
    """Whether a program's whole output is accepted for the expected one."""
    want, got = expected.split(), actual.split()
    return len(want) == len(got) and all(tokens_match(w, g) for w, g in zip(want, got, strict=True))
