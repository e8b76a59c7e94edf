"""Output checking with the rules of the official CodeContests harness, so our solve rates match the papers'.

The rules are those of `OutputsMatch` / `ValuesMatch` in google-deepmind/code_contests,
execution/tester_sandboxer.cc (stated with their consequences in docs/sandbox.md; each has a test in
tests/test_codecontests_checker.py):

* both outputs are split into tokens at ASCII space, \\n, \\t, \\r and \\v (not \\f, not Unicode spaces),
  empty tokens dropped, and ASCII-lowercased;
* equal token lists match; lists of different lengths do not;
* otherwise token by token: when both tokens parse as doubles (absl::SimpleAtod: an optional leading `+`
  or `-`, a decimal with optional fraction and exponent, or inf / infinity / nan), they match when
  |a - b| < 1e-5. Integers take this path too (SimpleAtod accepts every integer, so the harness's exact
  integer branch is never reached): 2^53 + 1 matches 2^53, huge numbers overflow to +-inf, and inf or
  nan never match a token pairwise (inf - inf is nan);
* any other pair matches only when the (lowercased) tokens are equal.

This never raises: every token is either a string or a float, and float() takes any digit count.
"""

from __future__ import annotations

import re

ABS_TOLERANCE = 1e-5
"""Numbers match when |a - b| is strictly below this (the harness's kDoublePrecision)."""

_SEPARATORS = re.compile(r"[ \n\t\r\v]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_DOUBLE = re.compile(r"[+-]?(?:inf|infinity|nan(?:\([a-z0-9_]*\))?|(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)")
"""What SimpleAtod accepts, on an already lowercased token (absl::from_chars, general format)."""


def _tokens(output: str) -> list[str]:
    return [token for token in _SEPARATORS.split(output.translate(_ASCII_LOWER)) if token]


def _as_double(token: str) -> float | None:
    """The token's value as the harness reads it, or None when it is not a number."""
    if not _DOUBLE.fullmatch(token):
        return None
    if "nan" in token:
        return float("nan")  # also "nan(...)", which float() rejects
    return float(token)


def values_match(expected: str, actual: str) -> bool:
    """One (lowercased) expected token against one produced token: ValuesMatch."""
    want, got = _as_double(expected), _as_double(actual)
    if want is None or got is None:
        return expected == actual
    return abs(want - got) < ABS_TOLERANCE


def outputs_match(expected: str, actual: str) -> bool:
    """Whether a program's whole output is accepted for the expected one: OutputsMatch."""
    want, got = _tokens(expected), _tokens(actual)
    if want == got:
        return True
    return len(want) == len(got) and all(values_match(w, g) for w, g in zip(want, got, strict=True))
