"""n@k solve rates and their bootstrap intervals."""

from __future__ import annotations

import pytest

from swerl.evaluation.nak import Turn, bootstrap_interval, problem_solve_probability, solve_rate

FAIL, PUBLIC_ONLY, SOLVED = Turn(False, False), Turn(True, False), Turn(True, True)


def test_certain_outcomes() -> None:
    assert problem_solve_probability([[SOLVED]] * 5, 1, 1) == 1.0
    assert problem_solve_probability([[FAIL]] * 5, 5, 5) == 0.0
    assert problem_solve_probability([], 1, 10) == 0.0


def test_every_turn_counts_toward_k() -> None:
    # One dialog solves only at its 3rd turn: with k=2 the dialog is cut before the fix.
    dialogs = [[FAIL, FAIL, SOLVED]]
    assert problem_solve_probability(dialogs, 1, 3) == 1.0
    assert problem_solve_probability(dialogs, 1, 2) == 0.0


def test_matches_the_closed_form_for_single_turn_samples() -> None:
    # 1@1 with 3 of 10 correct single answers: 0.3 in expectation.
    dialogs = [[SOLVED]] * 3 + [[FAIL]] * 7
    assert problem_solve_probability(dialogs, 1, 1, draws=4000) == pytest.approx(0.3, abs=0.03)
    # 1@2: the correct answer also passes the public tests, so it is always the one submitted.
    assert problem_solve_probability([[SOLVED], [FAIL]], 1, 2, draws=4000) == pytest.approx(1.0)


def test_public_passers_are_submitted_first() -> None:
    # Two candidates, one passes public tests (and is correct); with n=1 it is always the one submitted.
    assert problem_solve_probability([[FAIL], [SOLVED]], 1, 2, draws=200) == 1.0
    # A public-only passer shadows a hidden-correct answer that failed public tests.
    hidden = Turn(False, True)
    assert problem_solve_probability([[PUBLIC_ONLY], [hidden]], 1, 2, draws=200) == 0.0
    assert problem_solve_probability([[PUBLIC_ONLY], [hidden]], 2, 2, draws=200) == 1.0


def test_n_must_be_positive() -> None:
    with pytest.raises(ValueError):
        problem_solve_probability([[SOLVED]], 0, 1)


def test_solve_rate_and_interval() -> None:
    problems = [[[SOLVED]]] * 30 + [[[FAIL]]] * 70
    result = solve_rate(problems, 1, 1, draws=10)
    assert result.rate == pytest.approx(0.3)
    assert result.low < 0.3 < result.high
    assert result.low > 0.15 and result.high < 0.45
    assert str(result).startswith("1@1: 30.0%")
    assert solve_rate(problems, 1, 1, draws=10) == result  # seeded: reproducible


def test_bootstrap_of_constant_is_degenerate() -> None:
    assert bootstrap_interval([0.5] * 10) == (0.5, 0.5)
    assert bootstrap_interval([]) == (0.0, 0.0)
