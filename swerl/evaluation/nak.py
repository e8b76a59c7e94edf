"""n@k solve rates (AlphaCode; RLEF, Gehring et al. 2025) with bootstrap confidence intervals.

Definitions. For each problem we hold sampled dialogs; each dialog is a sequence of turns, one model
answer per turn (RLEF: up to 3 turns, the next turn sees execution feedback on the public tests). k is the
sampling budget in *answers*: every turn counts, so one 3-turn dialog costs 3. n is how many final
answers may be submitted. A problem is solved when a submitted answer passes the held-out (private +
generated) tests.

Estimator, for one problem and one draw:
1. shuffle its dialogs; take them in that order while the turns used stay within k; a dialog that does
   not fit whole is cut to the turns still affordable (its final answer is then the last affordable one);
2. each taken dialog contributes its final answer as a candidate;
3. submit n candidates, those that pass the public tests first (the only signal available without the
   hidden tests, as in AlphaCode's filtering), in the shuffled order;
4. solved if any submitted candidate passes the held-out tests.
The per-problem solve probability is the mean over `draws` draws; the solve rate is the mean over
problems. The confidence interval resamples problems with replacement (`resamples` times, 200 by
default) and takes the 2.5 and 97.5 percentiles of the resampled solve rates. A problem with fewer
sampled answers than k simply uses all of them (the estimate is then for a smaller budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Turn:
    """The verdicts of one answer: did it pass the public tests, and the held-out ones."""

    public: bool
    private: bool


Dialog = Sequence[Turn]


@dataclass(frozen=True)
class SolveRate:
    n: int
    k: int
    rate: float
    low: float
    high: float
    problems: int

    def __str__(self) -> str:
        return f"{self.n}@{self.k}: {100 * self.rate:.1f}% [{100 * self.low:.1f}, {100 * self.high:.1f}]"


def _draw_solved(dialogs: Sequence[Dialog], n: int, k: int, rng: np.random.Generator) -> bool:
    """One draw of steps 1-4 for one problem."""
    budget = k
    candidates: list[Turn] = []
    for index in rng.permutation(len(dialogs)):
        dialog = dialogs[index]
        if budget <= 0:
            break
        if not dialog:
            continue
        used = min(len(dialog), budget)
        candidates.append(dialog[used - 1])
        budget -= used
    submitted = sorted(candidates, key=lambda turn: not turn.public)[:n]
    return any(turn.private for turn in submitted)


def problem_solve_probability(
    dialogs: Sequence[Dialog], n: int, k: int, *, draws: int = 100, seed: int = 0
) -> float:
    """The chance that n@k solves this problem, estimated over `draws` random draws."""
    if n < 1 or k < 1:
        raise ValueError("n and k must be at least 1")
    if not dialogs:
        return 0.0
    rng = np.random.default_rng(seed)
    return sum(_draw_solved(dialogs, n, k, rng) for _ in range(draws)) / draws


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = 200, seed: int = 0
) -> tuple[float, float]:
    """2.5 / 97.5 percentiles of the mean over problems resampled with replacement."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def solve_rate(
    problems: Sequence[Sequence[Dialog]],
    n: int,
    k: int,
    *,
    draws: int = 100,
    resamples: int = 200,
    seed: int = 0,
) -> SolveRate:
    """n@k over `problems` (each a list of dialogs), with its bootstrap confidence interval.

    Deterministic for a given seed, so two evaluations of the same samples report the same numbers.
    """
    per_problem = [
        problem_solve_probability(dialogs, n, k, draws=draws, seed=seed + i)
        for i, dialogs in enumerate(problems)
    ]
    rate = float(np.mean(per_problem)) if per_problem else 0.0
    low, high = bootstrap_interval(per_problem, resamples=resamples, seed=seed)
    return SolveRate(n=n, k=k, rate=rate, low=low, high=high, problems=len(per_problem))
