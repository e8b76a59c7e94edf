"""The CodeContests output checker: one test per rule of the official OutputsMatch, and a fuzz that it
never raises and agrees with a straightforward reading of those rules."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swerl.codecontests.checker import outputs_match


def test_only_ascii_space_newline_tab_cr_vt_separate_tokens() -> None:
    assert outputs_match("1 2\n3\n", "1\n2   3")
    assert outputs_match("a\tb", "  a b \r\v\n\n")
    assert not outputs_match("a b", "a\fb")  # form feed is part of a token for the harness
    assert not outputs_match("a b", "a\u00a0b")  # so is a no-break space


def test_different_token_counts_fail() -> None:
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("1", "")
    assert outputs_match("", " \n")


def test_ascii_case_is_ignored_other_case_is_not() -> None:
    assert outputs_match("YES\nNo", "yes\nNO")
    assert not outputs_match("yes", "yess")
    assert not outputs_match("Ä", "ä")  # AsciiStrToLower leaves non-ASCII letters alone


def test_integers_compare_as_doubles() -> None:
    assert outputs_match("10", "+10") and outputs_match("-0", "0") and outputs_match("007", "7")
    assert outputs_match(str(2**53), str(2**53 + 1))  # the same double
    assert outputs_match("9223372036854775807", "9223372036854775806")
    assert not outputs_match("1", "2")


def test_absolute_tolerance_is_strict() -> None:
    assert outputs_match("0.5", "0.500009")
    assert outputs_match("1e3", "1000.000001")
    assert not outputs_match("0.5", "0.50002")
    assert not outputs_match("0", "0.00001")  # |a - b| < 1e-5, not <=
    assert outputs_match("1000000", "1000000.000001")


def test_huge_numbers_overflow_to_infinity_and_never_crash() -> None:
    huge = "9" * 5000  # past Python's 4,300-digit int() limit
    assert not outputs_match("1", huge)
    assert not outputs_match(huge, huge + " 1")
    assert outputs_match(huge, huge)  # identical token lists
    assert not outputs_match(f"{huge} 1", f"{huge} 2")  # inf - inf is nan: no pairwise match
    assert not outputs_match("1" + "0" * 400 + " 5", "1" + "0" * 400 + ".0 6")
    assert outputs_match("1" + "0" * 20, "100000000000000000001")  # 1e20 vs 1e20 + 1: same double


def test_what_counts_as_a_number() -> None:
    assert outputs_match("+5", "5") and outputs_match(".5", "0.5") and outputs_match("5.", "5")
    assert outputs_match("1E2 2", "100 2.0")
    for not_a_number in ("+-1", "1e", "0x10", "1_000", "1,5", "--1"):
        assert not outputs_match(f"{not_a_number} 1", f"{not_a_number.upper()}0 1")
        assert outputs_match(f"{not_a_number} 1", f"{not_a_number} 1.0")  # compared as strings


def test_nan_and_inf_match_only_in_identical_outputs() -> None:
    assert outputs_match("nan inf", "NaN INF")  # equal token lists after lowercasing
    assert not outputs_match("nan 1", "nan 2")
    assert not outputs_match("inf 1", "inf 2")
    assert not outputs_match("nan(x) 1", "nan 1.000001")
    assert not outputs_match("1e400 0", "inf 0.1")


_TOKEN = st.one_of(
    st.text(alphabet="0123456789+-.eEinfaINFA", max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=6),
    st.just("9" * 5000),
)
_SPACE = st.sampled_from([" ", "\n", "\t", "\r", "\v", "\f", "  \n", "\u00a0", ""])


@st.composite
def _output(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(_TOKEN, _SPACE), max_size=6))
    return "".join(token + space for token, space in parts)


@settings(max_examples=300, deadline=None)
@given(
    expected=_output(), actual=st.one_of(_output(), st.binary(max_size=64).map(lambda b: b.decode("latin-1")))
)
def test_fuzz_never_raises_and_is_symmetric(expected: str, actual: str) -> None:
    verdict = outputs_match(expected, actual)
    assert isinstance(verdict, bool)
    assert outputs_match(actual, expected) == verdict
    assert outputs_match(expected, expected)


@settings(max_examples=300, deadline=None)
@given(a=st.floats(allow_nan=False, allow_infinity=False), b=st.floats(allow_nan=False, allow_infinity=False))
def test_fuzz_numbers_match_exactly_when_within_tolerance(a: float, b: float) -> None:
    expected = abs(a - b) < 1e-5 or repr(a) == repr(b)
    assert outputs_match(repr(a), repr(b)) == (expected and not math.isnan(a - b))


@pytest.mark.parametrize("junk", ["\x00\xff", "\ud800", "\U0001f600 1", "1" * 100_000])
def test_odd_characters_are_strings_not_errors(junk: str) -> None:
    assert outputs_match(junk, junk)
    assert not outputs_match(junk + " x", junk + " y")
