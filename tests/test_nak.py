"""n@k solve rates: exact against every order of the dialogs on small cases, and their intervals."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Sequence

import pytest

from swerl.evaluation.nak import Dialog, Turn, bootstrap_interval, problem_solve_probability, solve_rate

FAIL, PUBLIC_ONLY, SOLVED, HIDDEN = Turn(False, False), Turn(True, False), Turn(True, True), Turn(False, True)


def brute_force(dialogs: Sequence[Dialog], n: int, k: int) -> float:
    """The definition read literally: every order of the dialogs, steps 1-4 of the module docstring."""
    kept = [d for d in dialogs if d]  # an empty dialog is skipped at no cost wherever it stands
    orders = list(itertools.permutations(range(len(kept))))
    return sum(_one_order(kept, n, k, order) for order in orders) / len(orders) if kept else 0.0


def random_dialog(rng: random.Random) -> list[Turn]:
    """Up to three answers; as in real episodes an answer that passes the public tests ends the dialog,
    but any verdicts may occur (HIDDEN: fails the public tests, passes the hidden ones)."""
    turns = []
    for _ in range(rng.randint(0, 3)):
        turns.append(rng.choice([FAIL, FAIL, PUBLIC_ONLY, SOLVED, HIDDEN]))
        if turns[-1].public:
            break
    return turns


def test_exact_against_every_order() -> None:
    rng = random.Random(0)
    for case in range(300):
        dialogs = [random_dialog(rng) for _ in range(rng.randint(1, 6))]
        n, k = rng.randint(1, 3), rng.randint(1, 9)
        want = brute_force(dialogs, n, k)
        assert problem_solve_probability(dialogs, n, k) == pytest.approx(want, abs=1e-12), (
            case,
            dialogs,
            n,
            k,
        )


def test_certain_outcomes_and_budget_in_answers() -> None:
    assert problem_solve_probability([[SOLVED]] * 5, 1, 1) == 1.0
    assert problem_solve_probability([[FAIL]] * 5, 5, 5) == 0.0
    assert problem_solve_probability([], 1, 10) == 0.0
    # One dialog solves only at its 3rd turn: with k=2 the dialog is cut before the fix.
    assert problem_solve_probability([[FAIL, FAIL, SOLVED]], 1, 3) == 1.0
    assert problem_solve_probability([[FAIL, FAIL, SOLVED]], 1, 2) == 0.0


def test_closed_forms() -> None:
    # 1@1 with 3 of 10 single correct answers: exactly 0.3 (the old 100-draw estimate was only near it).
    assert problem_solve_probability([[SOLVED]] * 3 + [[FAIL]] * 7, 1, 1) == pytest.approx(0.3, abs=1e-15)
    # 1@k over single answers: 1 - C(wrong, k) / C(m, k) when solved answers pass the public tests.
    assert problem_solve_probability([[SOLVED]] * 2 + [[FAIL]] * 8, 1, 3) == pytest.approx(1 - 56 / 120)
    # A public-only passer shadows a hidden-correct answer that failed the public tests.
    assert problem_solve_probability([[PUBLIC_ONLY], [HIDDEN]], 1, 2) == 0.0
    assert problem_solve_probability([[PUBLIC_ONLY], [HIDDEN]], 2, 2) == 1.0
    with pytest.raises(ValueError):
        problem_solve_probability([[SOLVED]], 0, 1)


def episode_dialog(rng: random.Random, public: float) -> list[Turn]:
    """A dialog as RLEF episodes make them: answers until one passes the public tests (then solved with
    probability 0.7), at most three; the hidden tests include the public ones."""
    turns = []
    for _ in range(3):
        if rng.random() < public:
            turns.append(SOLVED if rng.random() < 0.7 else PUBLIC_ONLY)
            break
        turns.append(FAIL)
    return turns


@pytest.mark.parametrize("public", [0.02, 0.1, 0.4])
def test_10_at_100_on_a_hundred_episodes_is_exact_and_fast(public: float) -> None:
    """The evaluation's default, 10@100 over 100 dialogs of up to 3 answers: no sampling, under a second
    here (it visits only the sets taken before the 10th public passer)."""
    rng = random.Random(1)
    dialogs = [episode_dialog(rng, public) for _ in range(100)]
    start = time.perf_counter()
    value = problem_solve_probability(dialogs, 10, 100)
    assert time.perf_counter() - start < 5.0
    assert 0.0 < value <= 1.0
    # The literal definition on 4,000 random orders agrees within four standard errors.
    orders = 4000
    hits = sum(_one_order(dialogs, 10, 100, rng.sample(range(100), 100)) for _ in range(orders))
    error = max(1e-3, (value * (1 - value) / orders) ** 0.5)
    assert abs(hits / orders - value) < 4 * error


def _one_order(dialogs: Sequence[Dialog], n: int, k: int, order: Sequence[int]) -> bool:
    budget, candidates = k, []
    for index in order:
        if budget <= 0:
            break
        used = min(len(dialogs[index]), budget)
        candidates.append(dialogs[index][used - 1])
        budget -= used
    return any(turn.private for turn in sorted(candidates, key=lambda turn: not turn.public)[:n])


def test_solve_rate_and_interval() -> None:
    problems = [[[SOLVED]]] * 30 + [[[FAIL]]] * 70
    result = solve_rate(problems, 1, 1)
    assert result.rate == pytest.approx(0.3)
    assert result.low < 0.3 < result.high
    assert result.low > 0.15 and result.high < 0.45
    assert str(result).startswith("1@1: 30.0%")
    assert solve_rate(problems, 1, 1) == result  # seeded: reproducible


def test_bootstrap_of_constant_is_degenerate() -> None:
    assert bootstrap_interval([0.5] * 10) == (0.5, 0.5)
    assert bootstrap_interval([]) == (0.0, 0.0)
