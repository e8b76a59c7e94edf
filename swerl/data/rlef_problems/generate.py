"""Write the bundled RLEF problem set: tiny stdin/stdout tasks from templates, in the code_contests shape.

Why templates: the CPU learning run needs problems a 1M-parameter model can solve at all, with a real
held-out split. Each family ("print n + k", "repeat the word k times", ...) is instantiated with several
values of its parameter k; train gets k in TRAIN_KS, valid and test get values never seen in training,
so a held-out solve means the model read the statement, not that it memorised the problem. Families
without a parameter are train-only.

Why train also has two-digit constants (TRAIN_KS_WIDE): digits are single tokens, and with only k in
{2..6} the tokens "7", "8" and "9" were never a target anywhere in the training answers, so no amount
of reading could make the model write them (its logits were only ever pushed down). Constants such as
18 and 39 make every digit a copied target while the held-out constants 7, 8 and 9 stay unseen.

The hidden-constant set (hidden_train / hidden_test) is for the feedback demonstration: its statements
leave the constant out ("... plus a secret constant"), and the first public test reveals it verbatim (n = 0
for `n + k` and `k - n`, n = 1 for `n * k`: the expected output is k itself, one digit, so reading it is
copying one token, not counting). A first answer can only guess k; an answer after the
execution feedback can read it, so using the feedback is exactly the skill that pays. Every problem of a
family has the same statement, so nothing but the feedback tells problems apart.

Tests are drawn from a fixed seed, so the files are reproducible:

    python -m swerl.data.rlef_problems.generate      # rewrites every split's .jsonl next to this file
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
TRAIN_KS = (2, 3, 4, 5, 6)
TRAIN_KS_WIDE = (10, 18, 23, 29, 34, 47, 56, 65, 71, 82, 93, 99)
VALID_KS = (7,)
TEST_KS = (8, 9)
PUBLIC_TESTS = 2
PRIVATE_TESTS = 4
WORDS = ("apple", "stone", "river", "cloud", "tiger", "lemon", "piano", "robot", "grass", "honey")


@dataclass(frozen=True)
class Family:
    """One template: statement and reference solution (formatted with k), a random input, its answer."""

    name: str
    statement: str
    solution: str
    make_input: Callable[[random.Random, int], str]
    answer: Callable[[str, int], str]
    takes_k: bool = True


def _int(rng: random.Random, k: int) -> str:
    return str(rng.randint(-50, 99))


def _nat(rng: random.Random, k: int) -> str:
    return str(rng.randint(1, 99))


def _ints(rng: random.Random, k: int) -> str:
    return " ".join(str(rng.randint(-20, 30)) for _ in range(rng.randint(2, 6)))


def _word(rng: random.Random, k: int) -> str:
    return rng.choice(WORDS)


def _words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))


def _nums(line: str) -> list[int]:
    return [int(x) for x in line.split()]


FAMILIES = (
    Family(
        "add",
        "Read an integer n. Print n + {k}.",
        "n = int(input())\nprint(n + {k})",
        _int,
        lambda s, k: str(int(s) + k),
    ),
    Family(
        "sub",
        "Read an integer n. Print n - {k}.",
        "n = int(input())\nprint(n - {k})",
        _int,
        lambda s, k: str(int(s) - k),
    ),
    Family(
        "mul",
        "Read an integer n. Print n * {k}.",
        "n = int(input())\nprint(n * {k})",
        _int,
        lambda s, k: str(int(s) * k),
    ),
    Family(
        "mod",
        "Read a positive integer n. Print n % {k}.",
        "n = int(input())\nprint(n % {k})",
        _nat,
        lambda s, k: str(int(s) % k),
    ),
    Family(
        "div",
        "Read a positive integer n. Print n // {k}.",
        "n = int(input())\nprint(n // {k})",
        _nat,
        lambda s, k: str(int(s) // k),
    ),
    Family(
        "sum_plus",
        "Read integers on one line. Print their sum plus {k}.",
        "a = list(map(int, input().split()))\nprint(sum(a) + {k})",
        _ints,
        lambda s, k: str(sum(_nums(s)) + k),
    ),
    Family(
        "max_plus",
        "Read integers on one line. Print their maximum plus {k}.",
        "a = list(map(int, input().split()))\nprint(max(a) + {k})",
        _ints,
        lambda s, k: str(max(_nums(s)) + k),
    ),
    Family(
        "min_times",
        "Read integers on one line. Print their minimum times {k}.",
        "a = list(map(int, input().split()))\nprint(min(a) * {k})",
        _ints,
        lambda s, k: str(min(_nums(s)) * k),
    ),
    Family(
        "count_gt",
        "Read integers on one line. Print how many are greater than {k}.",
        "a = list(map(int, input().split()))\nprint(sum(1 for x in a if x > {k}))",
        _ints,
        lambda s, k: str(sum(1 for x in _nums(s) if x > k)),
    ),
    Family(
        "scale_list",
        "Read integers on one line. Print each one times {k}, separated by spaces.",
        "a = list(map(int, input().split()))\nprint(*[x * {k} for x in a])",
        _ints,
        lambda s, k: " ".join(str(x * k) for x in _nums(s)),
    ),
    Family(
        "repeat_word",
        "Read a word. Print it {k} times, separated by spaces.",
        "w = input().strip()\nprint(*[w] * {k})",
        _word,
        lambda s, k: " ".join([s] * k),
    ),
    Family(
        "first_chars",
        "Read a word. Print its first {k} characters.",
        "w = input().strip()\nprint(w[:{k}])",
        _word,
        lambda s, k: s[:k],
    ),
    Family(
        "last_chars",
        "Read a word. Print its last {k} characters.",
        "w = input().strip()\nprint(w[-{k}:])",
        _word,
        lambda s, k: s[-k:],
    ),
    Family(
        "pow_mod",
        "Read an integer n. Print n * n % {k}.",
        "n = int(input())\nprint(n * n % {k})",
        _int,
        lambda s, k: str(int(s) * int(s) % k),
    ),
    # Families without a parameter: train only (they teach reading input and printing).
    Family(
        "sum",
        "Read integers on one line. Print their sum.",
        "a = list(map(int, input().split()))\nprint(sum(a))",
        _ints,
        lambda s, k: str(sum(_nums(s))),
        takes_k=False,
    ),
    Family(
        "max",
        "Read integers on one line. Print their maximum.",
        "a = list(map(int, input().split()))\nprint(max(a))",
        _ints,
        lambda s, k: str(max(_nums(s))),
        takes_k=False,
    ),
    Family(
        "min",
        "Read integers on one line. Print their minimum.",
        "a = list(map(int, input().split()))\nprint(min(a))",
        _ints,
        lambda s, k: str(min(_nums(s))),
        takes_k=False,
    ),
    Family(
        "sort",
        "Read integers on one line. Print them in increasing order, separated by spaces.",
        "a = list(map(int, input().split()))\nprint(*sorted(a))",
        _ints,
        lambda s, k: " ".join(map(str, sorted(_nums(s)))),
        takes_k=False,
    ),
    Family(
        "reverse",
        "Read a word. Print it reversed.",
        "w = input().strip()\nprint(w[::-1])",
        _word,
        lambda s, k: s[::-1],
        takes_k=False,
    ),
    Family(
        "upper",
        "Read a word. Print it in upper case.",
        "w = input().strip()\nprint(w.upper())",
        _word,
        lambda s, k: s.upper(),
        takes_k=False,
    ),
    Family(
        "count_words",
        "Read a line of words. Print how many words it has.",
        "print(len(input().split()))",
        _words,
        lambda s, k: str(len(s.split())),
        takes_k=False,
    ),
    Family(
        "length",
        "Read a word. Print its length.",
        "print(len(input().strip()))",
        _word,
        lambda s, k: str(len(s)),
        takes_k=False,
    ),
    Family(
        "abs",
        "Read an integer n. Print its absolute value.",
        "print(abs(int(input())))",
        _int,
        lambda s, k: str(abs(int(s))),
        takes_k=False,
    ),
    Family(
        "double",
        "Read an integer n. Print twice n.",
        "print(2 * int(input()))",
        _int,
        lambda s, k: str(2 * int(s)),
        takes_k=False,
    ),
)


def _tests(family: Family, k: int, rng: random.Random, count: int) -> dict[str, list[str]]:
    inputs = [family.make_input(rng, k) for _ in range(count)]
    return {"input": [i + "\n" for i in inputs], "output": [family.answer(i, k) + "\n" for i in inputs]}


def problem(family: Family, k: int, rng: random.Random) -> dict:
    """One row in the Hub's code_contests schema (the fields `swerl.codecontests.problems` reads)."""
    name = f"{family.name}_{k}" if family.takes_k else family.name
    return {
        "name": name,
        "description": family.statement.format(k=k),
        "public_tests": _tests(family, k, rng, PUBLIC_TESTS),
        "private_tests": _tests(family, k, rng, PRIVATE_TESTS),
        "generated_tests": {"input": [], "output": []},
        "time_limit": {"seconds": 2, "nanos": 0},
        "memory_limit_bytes": 256 * 1024 * 1024,
        "solutions": {"language": [3], "solution": [family.solution.format(k=k) + "\n"]},
    }


@dataclass(frozen=True)
class HiddenFamily:
    """A template whose constant k is left out of the statement; `reveal` is the public input whose
    expected output shows k (the first public test), `make_input` draws the other tests' inputs."""

    name: str
    statement: str
    solution: str
    reveal: str
    make_input: Callable[[random.Random, int], str]
    answer: Callable[[str, int], str]


HIDDEN_KS = tuple(range(2, 10))
"""Single digits: one token each, so reading k from the feedback is copying one token."""
HIDDEN_FAMILIES = (
    HiddenFamily(
        "hidden_add",
        "Read an integer n. Print n plus a secret constant. The example tests show the constant.",
        "n = int(input())\nprint(n + {k})",
        "0",
        _int,
        lambda s, k: str(int(s) + k),
    ),
    HiddenFamily(
        "hidden_mul",
        "Read an integer n. Print n times a secret constant. The example tests show the constant.",
        "n = int(input())\nprint(n * {k})",
        "1",
        _int,
        lambda s, k: str(int(s) * k),
    ),
    HiddenFamily(
        "hidden_sub",
        "Read an integer n. Print a secret constant minus n. The example tests show the constant.",
        "n = int(input())\nprint({k} - n)",
        "0",
        _int,
        lambda s, k: str(k - int(s)),
    ),
)
HIDDEN_COPIES = {"hidden_train": 4, "hidden_test": 9}
"""Problems per (family, k) in each split; copies differ in their other tests' inputs. 216 held-out
problems keep the 95 % bootstrap intervals of a 1@3 figure within about +-4 points."""


def hidden_problem(family: HiddenFamily, k: int, copy: int, split: str, rng: random.Random) -> dict:
    """One hidden-constant problem: public tests = the revealing input, then one random input."""
    public = [family.reveal, family.make_input(rng, k)]
    private = [family.make_input(rng, k) for _ in range(PRIVATE_TESTS)]

    def tests(inputs: list[str]) -> dict[str, list[str]]:
        return {"input": [i + "\n" for i in inputs], "output": [family.answer(i, k) + "\n" for i in inputs]}

    return {
        "name": f"{split}_{family.name}_{k}_{copy}",
        "description": family.statement,
        "public_tests": tests(public),
        "private_tests": tests(private),
        "generated_tests": {"input": [], "output": []},
        "time_limit": {"seconds": 2, "nanos": 0},
        "memory_limit_bytes": 256 * 1024 * 1024,
        "solutions": {"language": [3], "solution": [family.solution.format(k=k) + "\n"]},
    }


def build_hidden(seed: int = 0) -> dict[str, list[dict]]:
    rng = random.Random(seed + 2)
    return {
        split: [
            hidden_problem(family, k, copy, split, rng)
            for family in HIDDEN_FAMILIES
            for k in HIDDEN_KS
            for copy in range(copies)
        ]
        for split, copies in HIDDEN_COPIES.items()
    }


def build(seed: int = 0) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    splits: dict[str, list[dict]] = {"train": [], "valid": [], "test": []}
    for family in FAMILIES:
        if not family.takes_k:
            splits["train"].append(problem(family, 0, rng))
            continue
        for split, ks in (("train", TRAIN_KS), ("valid", VALID_KS), ("test", TEST_KS)):
            splits[split].extend(problem(family, k, rng) for k in ks)
    # Drawn last, from their own generator, so adding them left every other problem's tests unchanged.
    wide_rng = random.Random(seed + 1)
    for family in FAMILIES:
        if family.takes_k:
            splits["train"].extend(problem(family, k, wide_rng) for k in TRAIN_KS_WIDE)
    return splits


def main() -> None:
    for split, rows in {**build(), **build_hidden()}.items():
        with (HERE / f"{split}.jsonl").open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
        print(f"{split}: {len(rows)} problems")


if __name__ == "__main__":
    main()
