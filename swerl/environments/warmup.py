"""Warm-up dialogs for any RLEF task: a wrong first answer, its real feedback, then the fix (or not).

RLEF amplifies what the start policy already does sometimes: a policy that never reads the feedback
never samples an answer that shows reading it pays. The warm-up before RL therefore shows second turns:
the task's prompt, a wrong answer, exactly the feedback the episode loop would add after it (the task's
own judge and `Task.outcome`, rendered by `ChatRenderer.feedback_ids`), and as target the reference
answer in a share of them and the wrong answer again in the rest. Written over the `Task` protocol, so a
contest problem and a repository row get their warm-up from the same code.

For contest problems the reference is the problem's first solution, and the wrong answers its
corruptions (`feedback_fix_dialogs`). For repository rows the reference is the gold patch as the
SEARCH/REPLACE answer a model writes (`repository_reference`), and a wrong answer one that writes another
constant (`with_constant`): the repository analog of a guessed constant in a contest program.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

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


def fix_dialogs(
    renderer: ChatRenderer,
    cases: Sequence[tuple[Task, str, str]],
    judge: Judge,
    answer_ids: Callable[[Task, str], list[int]],
    feedback_rate: float = 1.0,
    rng: random.Random | None = None,
) -> list[WarmupPair]:
    """Second-turn examples from (task, wrong answer text, reference answer text) cases.

    Each wrong answer is read by its task (`extract`), run on the public tests by `judge`, and its
    outcome's feedback follows it, as `run_episodes` would write it; a wrong answer that passes the public
    tests, or whose run gave no verdict, makes no example. The target is the reference in a share
    `feedback_rate` of the examples (drawn by `rng`; at 1 nothing is drawn) and the wrong answer again
    in the rest: a start policy that uses the feedback sometimes, which RL can amplify.
    """
    rng = rng or random.Random(0)
    answers = [task.extract(wrong) for task, wrong, _ in cases]
    jobs = [task.public_job(answer.code) for (task, _, _), answer in zip(cases, answers, strict=True)]
    results = judge(jobs) if jobs else []
    out = []
    for (task, wrong, reference), answer, job, result in zip(cases, answers, jobs, results, strict=True):
        outcome = task.outcome(answer, job, result)
        if outcome.passed is not False:
            continue
        wrong_ids = answer_ids(task, wrong)
        context = (
            renderer.prompt_ids(task)
            + wrong_ids
            + renderer.feedback_ids(outcome.feedback or "", wrong_ids, True)
        )
        fixed = feedback_rate >= 1.0 or rng.random() < feedback_rate
        out.append((context, answer_ids(task, reference) if fixed else wrong_ids))
    return out


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
            wrong = corrupted_solutions(solution, constant, drawn)
            cases += [(task, program_answer(w), program_answer(solution)) for w in wrong]
    return fix_dialogs(renderer, cases, judge, answer_ids, feedback_rate, rng)
