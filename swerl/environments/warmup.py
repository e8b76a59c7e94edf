"""Warm-up dialogs for any RLEF task: a wrong first answer, its real feedback, then the fix (or not).

RLEF amplifies what the start policy already does sometimes: a policy that never reads the feedback
never samples an answer that shows reading it pays. The warm-up before RL therefore shows second turns:
the task's prompt, a wrong answer, exactly the feedback the episode loop would add after it (the task's
own judge and `Task.outcome`, rendered by `ChatRenderer.feedback_ids`), and as target the reference
answer in a share of them and in the rest the wrong answer again (or, for repository rows, a fresh
guess, and third turns too: `guess_cases`). Written over the `Task` protocol, so a contest problem and a
repository row get their warm-up from the same code.

For contest problems the reference is the problem's first solution, and the wrong answers its
corruptions (`feedback_fix_dialogs`). For repository rows the reference is the gold patch as the
SEARCH/REPLACE answer a model writes (`repository_reference`), and a wrong answer one that writes another
constant (`with_constant`): the repository analog of a guessed constant in a contest program.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from swerl.edit_format import apply_patch_to_contents, canonical_answer
from swerl.environments.codecontests import (
    ContestTask,
    corrupted_solutions,
    last_constants,
    last_integer,
    with_constant,
)
from swerl.environments.dialog import ChatRenderer, Judge, Task
from swerl.environments.repository import RepositoryTask

REFERENCE_THOUGHT = "The issue names what is wrong; change it."

WarmupPair = tuple[list[int], list[int]]
"""(context ids, target ids): only the target is trained on."""


def repository_reference(task: RepositoryTask, thought: str = REFERENCE_THOUGHT) -> str:
    """The row's gold patch as an answer: `canonical_answer` over the files the prompt shows."""
    new = apply_patch_to_contents(task.code_context, task.instance.patch)
    changed = {path: text for path, text in new.items() if text is not None}
    return canonical_answer(task.code_context, changed, thought=thought)


def guessed_answers(reference: str, constants: Sequence[int]) -> list[str]:
    """The reference with each of `constants` other than its own in place of its constant."""
    own = last_integer(reference)
    return [with_constant(reference, c) for c in dict.fromkeys(constants) if c != own]


@dataclass(frozen=True)
class FixCase:
    """One warm-up dialog: wrong answers in order, each followed by its real feedback, then the target."""

    task: Task
    tries: tuple[str, ...]
    reference: str
    """The target when the dialog shows the fix."""
    retry: str
    """The target when it does not: the last try again, or a fresh guess (`guess_cases`)."""


def fix_dialogs(
    renderer: ChatRenderer,
    cases: Sequence[FixCase],
    judge: Judge,
    answer_ids: Callable[[Task, str], list[int]],
    feedback_rate: float = 1.0,
    rng: random.Random | None = None,
) -> list[WarmupPair]:
    """Later-turn examples: each case's wrong answers, each followed by its real feedback, then a target.

    Each wrong answer is read by its task (`extract`), run on the public tests by `judge` (once, however
    many cases show it), and its outcome's feedback follows it, as `run_episodes` would write it; a case
    with a wrong answer that passes the public tests, or whose run gave no verdict, makes no example. The
    target is the reference in a share `feedback_rate` of the examples (drawn by `rng`; at 1 nothing is
    drawn) and the case's `retry` in the rest: a start policy that uses the feedback sometimes, which RL
    can amplify.
    """
    rng = rng or random.Random(0)
    tried: dict[tuple[int, str], tuple[Task, Any]] = {}
    for case in cases:
        for wrong in case.tries:
            tried.setdefault((id(case.task), wrong), (case.task, case.task.extract(wrong)))
    jobs = [task.public_job(answer.code) for task, answer in tried.values()]
    results = judge(jobs) if jobs else []
    outcomes = {
        key: task.outcome(answer, job, result)
        for (key, (task, answer)), job, result in zip(tried.items(), jobs, results, strict=True)
    }
    out = []
    for case in cases:
        shown = [outcomes[(id(case.task), wrong)] for wrong in case.tries]
        if any(outcome.passed is not False for outcome in shown):
            continue
        context = renderer.prompt_ids(case.task)
        for wrong, outcome in zip(case.tries, shown, strict=True):
            wrong_ids = answer_ids(case.task, wrong)
            context += wrong_ids + renderer.feedback_ids(outcome.feedback or "", wrong_ids, True)
        fixed = feedback_rate >= 1.0 or rng.random() < feedback_rate
        out.append((context, answer_ids(case.task, case.reference if fixed else case.retry)))
    return out


def guess_cases(
    task: Task,
    reference: str,
    guesses: Sequence[int],
    pool: Sequence[int],
    turns: int = 2,
    retry: Literal["resubmit", "guess"] = "resubmit",
    rng: random.Random | None = None,
) -> list[FixCase]:
    """The warm-up dialogs of a row whose constant no first answer can know: `reference` with each of
    `guesses` in place of its constant as wrong answers (`guessed_answers`).

    Second turns after each guess; with `turns` 3 also third turns after each two guesses in a row, so
    the start policy has seen the context of every turn an episode has. When a dialog does not show the
    fix its target is the last guess again (`retry` "resubmit") or, with "guess", a fresh one: a constant
    of `pool` not tried in the dialog, drawn by `rng`, the right one included, as a policy blind to the
    feedback would answer. Why fresh guesses: a start policy that resubmits leaves a gain that needs no
    feedback (of 8 constants, a fresh guess after a wrong one is right 1 time in 7), which training with
    random feedback finds as readily as training with real feedback; a start policy that already
    guesses anew leaves only reading the feedback to learn.
    """
    rng = rng or random.Random(0)
    wrong = guessed_answers(reference, guesses)
    cases = []
    for shown in range(1, turns):
        for first in range(len(wrong) - shown + 1):
            tries = tuple(wrong[first : first + shown])
            again = tries[-1]
            if retry == "guess":
                used = {last_integer(t) for t in tries}
                again = with_constant(reference, rng.choice([c for c in pool if c not in used]))
            cases.append(FixCase(task, tries, reference, again))
    return cases


def program_answer(code: str) -> str:
    """A program as a contest answer: one ```python block, which `ContestTask.extract` reads back."""
    return f"```python\n{code.rstrip()}\n```"


def feedback_fix_dialogs(
    renderer: ChatRenderer,
    tasks: Sequence[ContestTask],
    judge: Judge,
    answer_ids: Callable[[Task, str], list[int]],
    constant: bool = True,
    guesses: int = 0,
    feedback_rate: float = 1.0,
    rng: random.Random | None = None,
) -> list[WarmupPair]:
    """`fix_dialogs` of contest problems: each task's first reference solution corrupted
    (`corrupted_solutions`; with `guesses` > 0 also with that many other tasks' constants, drawn by
    `rng`), as answers (`program_answer`) whose ids `answer_ids(task, text)` gives with their end of turn.

    Why a share `feedback_rate` below 1: a warm-up that always shows the fix teaches the skill outright,
    so RL has nothing left to add; one that never shows it leaves a tiny model a behaviour it may never
    find by sampling. In between, the start policy uses the feedback sometimes, and RL, rewarded by the
    private tests only, can amplify it. `rng` draws the guessed constants task by task, then the targets
    in `fix_dialogs`, in that order: the same seed gives the same examples."""
    rng = rng or random.Random(0)
    solutions = [task.problem.python_solutions[:1] for task in tasks]
    pool = last_constants([code for codes in solutions for code in codes])
    cases = []
    for task, codes in zip(tasks, solutions, strict=True):
        for solution in codes:
            others = [g for g in pool if g not in last_constants([solution])]
            drawn = rng.sample(others, min(guesses, len(others)))
            for w in corrupted_solutions(solution, constant, drawn):
                cases.append(FixCase(task, (program_answer(w),), program_answer(solution), program_answer(w)))
    return fix_dialogs(renderer, cases, judge, answer_ids, feedback_rate, rng)
