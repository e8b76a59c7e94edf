"""One test per rule of the CodeContests output checker."""

from __future__ import annotations

import pytest

from swerl.codecontests.checker import outputs_match, tokens_match


def test_whitespace_is_only_a_separator() -> None:
    assert outputs_match("1 2\n3\n", "1\n2   3")
    assert outputs_match("a\tb", "  a b  \n\n")


def test_different_token_counts_fail() -> None:
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("1", "")


def test_case_insensitive() -> None:
    assert outputs_match("YES\nNo", "yes\nNO")
    assert not outputs_match("yes", "yess")


def test_integers_compare_exactly() -> None:
    assert tokens_match("10", "+10") and tokens_match("-0", "0") and tokens_match("007", "7")
    assert not tokens_match("9223372036854775807", "9223372036854775806")


def test_doubles_within_absolute_tolerance() -> None:
    assert tokens_match("0.5", "0.500009")
    assert tokens_match("1e3", "1000.000001")
    assert not tokens_match("0.5", "0.50002")
    assert tokens_match("1000000", "1000000.000001")  # an int and a double: compared as doubles


def test_integers_beyond_64_bits_compare_as_doubles() -> None:
    big = str(1 << 70)
    assert tokens_match(big, str((1 << 70) + 1))  # equal as doubles
    assert not tokens_match(big, str(1 << 71))


@pytest.mark.parametrize(("a", "b"), [("nan", "nan1"), ("inf", "1e400"), ("1_000", "1000"), ("abc", "1")])
def test_only_plain_numbers_are_numbers(a: str, b: str) -> None:
    assert not tokens_match(a, b)


def test_equal_token_lists_pass_even_when_not_numbers() -> None:
    assert outputs_match("nan inf 1_000", "NaN INF 1_000")
