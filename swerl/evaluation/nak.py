"""n@k solve rates (AlphaCode; RLEF, Gehring et al. 2025) with bootstrap confidence intervals.

Definitions. For each problem we hold sampled dialogs; each dialog is a sequence of turns, one model
answer per turn (RLEF: up to 3 turns, the next turn sees execution feedback on the public tests). k is the
sampling budget in *answers*: every turn counts, so one 3-turn dialog costs 3. n is how many final
answers may be submitted. A problem is solved when a submitted answer passes the held-out (private +
generated) tests.

The estimator, for one problem: put its dialogs in a uniformly random order, then
1. take them in that order while the turns used stay within k; a dialog that does not fit whole is cut to
   the turns still affordable (its final answer is then the last affordable one);
2. each taken dialog contributes its final answer as a candidate;
3. submit n candidates, those that pass the public tests first (the only signal available without the
   hidden tests, as in AlphaCode's filtering), in the random order;
4. solved if any submitted candidate passes the held-out tests.
The per-problem value is the probability of 4 over the random order, computed *exactly*
(`problem_solve_probability`, below), not estimated from draws: 100 draws per problem had a standard
deviation of about 0.04 that no interval accounted for. The solve rate is the mean over problems; its
confidence interval resamples problems with replacement (`resamples` times, 200 by default) and takes the
2.5 and 97.5 percentiles of the resampled means. A problem with fewer sampled answers than k uses all of
them (the value is then for a smaller budget).

How the probability is exact without visiting the m! orders. Each order is decided at one dialog z: the
last one taken, or earlier, the n-th dialog taken whole whose final answer passes the public tests (the
submission is then the first n public passers, whatever follows). Let S be the set taken before z, j = |S|.
Every set of j dialogs is equally likely to come first and every other dialog equally likely to come next:
P(S, then z) = 1 / (C(m, j) (m - j)). Given (S, z) the order inside S is still uniform, so the chance that
nothing submitted solves is a hypergeometric ratio of counts (`_unsolved`). Dialogs of one kind (turns,
final verdicts) are interchangeable in S, so the sum runs over how many of each kind S holds, aggregated
into (size, turns used, public passers, whether one solves, others that solve), with S holding fewer than
n public passers. For 1@3 that is a handful of sets; for 10@100 over 100 RLEF dialogs, well under a second
(tests/test_nak.py; many dialogs that fail the public tests but pass the hidden ones, which contest
episodes cannot produce, make it slower). The tests check it against all m! orders on small cases.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
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


def _hyper_none(total: int, good: int, take: int) -> float:
    """P(`take` items drawn without replacement from `total`, `good` of them good, are all bad)."""
    if take <= 0:
        return 1.0
    if good == 0:
        return 1.0
    if total - good < take:
        return 0.0
    return math.comb(total - good, take) / math.comb(total, take)


def _unsolved(a: int, pg: int, b: int, ng: int, last: Turn, n: int) -> float:
    """P(no submitted candidate is solved) when the taken dialogs' candidates are S (a < n public
    passers, pg of them solved; b others, ng of them solved; in uniform order) and then `last`."""
    if pg or (last.public and last.private):
        return 0.0  # every public passer is submitted (there are at most n)
    left = n - a - last.public  # slots for candidates that failed the public tests
    if left <= 0:
        return 1.0
    if b >= left:
        return _hyper_none(b, ng, left)
    return 0.0 if ng or (not last.public and last.private) else 1.0


def problem_solve_probability(dialogs: Sequence[Dialog], n: int, k: int) -> float:
    """The exact chance that n@k solves this problem, over the uniformly random order of its dialogs.

    Each order is decided at one dialog z: the last one taken, or, earlier, the n-th dialog taken whole
    whose final answer passes the public tests (the submission is then the first n public passers,
    whatever follows). Summing over z and over the set S taken before it, by kinds, visits only sets
    with fewer than n public passers.
    """
    if n < 1 or k < 1:
        raise ValueError("n and k must be at least 1")
    items = [tuple(d) for d in dialogs if d]  # an empty dialog costs nothing and offers nothing
    m = len(items)
    if m == 0:
        return 0.0
    whole = Counter(_kind(d) for d in items)
    solved = 0.0
    for z, copies in Counter(items).items():
        others = whole.copy()
        others[_kind(z)] -= 1
        for (j, used, a, pg, ng), sets in _subsets(others, k, n).items():
            last = used + len(z) >= k or j + 1 == m
            if not last and not (z[-1].public and a == n - 1):
                continue  # the order is not decided at z
            candidate = z[min(len(z), k - used) - 1]
            weight = copies * sets / (math.comb(m, j) * (m - j))
            solved += weight * (1.0 - _unsolved(a, pg, j - a, ng, candidate, n))
    return min(1.0, solved)


def _kind(dialog: Dialog) -> tuple[int, bool, bool]:
    """What a dialog taken whole contributes: the turns it uses and its final answer's verdicts."""
    return len(dialog), dialog[-1].public, dialog[-1].private


def _subsets(
    kinds: Counter[tuple[int, bool, bool]], k: int, n: int
) -> dict[tuple[int, int, int, int, int], int]:
    """Number of sets S of dialogs using fewer than k turns with fewer than n public passers, by (size,
    turns used, public passers, whether one solves (0/1), others that solve). Exact integers."""
    states: dict[tuple[int, int, int, int, int], int] = {(0, 0, 0, 0, 0): 1}
    for (length, public, private), count in kinds.items():
        grown: dict[tuple[int, int, int, int, int], int] = defaultdict(int)
        for (j, used, a, pg, ng), ways in states.items():
            for chosen in range(count + 1):
                if used + chosen * length >= k or a + chosen * public >= n:
                    break
                key = (
                    j + chosen,
                    used + chosen * length,
                    a + chosen * public,
                    pg or (chosen > 0 and public and private),
                    ng + chosen * (not public and private),
                )
                grown[key] += ways * math.comb(count, chosen)
        states = grown
    return states


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
    resamples: int = 200,
    seed: int = 0,
) -> SolveRate:
    """n@k over `problems` (each a list of dialogs), with its bootstrap confidence interval.

    The rate is exact; only the interval is random, and seeded, so two evaluations of the same samples
    report the same numbers.
    """
    per_problem = [problem_solve_probability(dialogs, n, k) for dialogs in problems]
    rate = float(np.mean(per_problem)) if per_problem else 0.0
    low, high = bootstrap_interval(per_problem, resamples=resamples, seed=seed)
    return SolveRate(n=n, k=k, rate=rate, low=low, high=high, problems=len(per_problem))
