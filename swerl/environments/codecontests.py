"""RLEF tasks of programming problems: a program answers, the sandbox runs it on stdin/stdout tests.

`ContestTask` wraps a CodeContests-shaped `Problem`, `HumanEvalTask` a HumanEval problem; both are
`swerl.environments.dialog.Task`s, so the shared episode loop, trainer and evaluation run them. The
answer is the last fenced Python block; the feedback is the sandbox's report on the first failed public
test (input, expected and actual output, or the traceback's end). Also here: the SFT warm-up's
second-turn dialogs built from corrupted reference solutions.

The episode loop and its records used to live here and are still importable from this module.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from swerl.codecontests.checker import outputs_match
from swerl.codecontests.extract import extract_answer
from swerl.codecontests.feedback import render_feedback, render_syntax_error
from swerl.codecontests.humaneval import HumanEvalProblem
from swerl.codecontests.humaneval import job as humaneval_job
from swerl.codecontests.problems import Problem
from swerl.environments.dialog import (
    FEEDBACK_MODES,
    RENDER_SENTINEL,
    Answer,
    ChatRenderer,
    DialogEval,
    Episode,
    EpisodeConfig,
    Judge,
    Outcome,
    Task,
    TurnRecord,
    evaluate_dialogs,
    run_episodes,
    task_reward,
)
from swerl.sandbox import Job, Limits, SandboxConfig, TestCase, TestResult, run_batch

__all__ = [
    "FEEDBACK_MODES",
    "INSTRUCTIONS",
    "RENDER_SENTINEL",
    "ChatRenderer",
    "ContestTask",
    "DialogEval",
    "Episode",
    "EpisodeConfig",
    "HumanEvalTask",
    "Judge",
    "ProgramTask",
    "Task",
    "TurnRecord",
    "corrupted_solutions",
    "docstring_examples",
    "evaluate_dialogs",
    "last_constants",
    "run_episodes",
    "sandbox_judge",
    "task_reward",
]

INSTRUCTIONS = (
    "Write a Python 3 program that reads from standard input and writes to standard output. "
    "Answer with the complete program in one ```python code block."
)


# ----------------------------------------------------------------------------------------------- tasks
class ProgramTask:
    """What the programming tasks share: the answer is the last fenced Python block, jobs are sandbox
    `Job`s, the feedback is the sandbox's report on the first failed public test."""

    def extract(self, text: str) -> Answer:
        """The program; a block that does not parse is no program, with the interpreter's report."""
        found = extract_answer(text)
        return Answer(found.code, found.syntax_error)

    def unrelated_job(self, code: str | None, other: Task) -> Job:
        """The same program on the other problem's public tests (the paper's random feedback)."""
        return other.public_job(code)

    def outcome(self, answer: Answer, job: Job, result: Sequence[TestResult]) -> Outcome:
        """Passed when there is a program and every test of the job passed; the feedback: the syntax
        error of a program that does not parse, else the sandbox's report (for no program at all: its
        "no code found")."""
        if answer.code is not None and all(r.passed for r in result):
            return Outcome(True)
        if answer.error is not None:
            return Outcome(False, render_syntax_error(answer.error))
        return Outcome(False, render_feedback(job.tests, result) or "")


@dataclass(frozen=True)
class ContestTask(ProgramTask):
    """A CodeContests-shaped problem: stdin/stdout tests, the problem's own time and memory limits."""

    problem: Problem
    limits: Limits = field(default_factory=Limits)

    @property
    def name(self) -> str:
        return self.problem.name

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{self.problem.description.strip()}\n\n{INSTRUCTIONS}"}]

    def public_job(self, code: str | None) -> Job:
        return Job(code, self.problem.public_tests, self.problem.limits(self.limits))

    def private_job(self, code: str | None) -> Job:
        # "All public and private tests": the public ones are re-checked so a final answer that was never
        # judged on them (the last turn) cannot be counted as solved without passing them.
        tests = self.problem.public_tests + self.problem.held_out_tests
        return Job(code, tests, self.problem.limits(self.limits))


@dataclass(frozen=True)
class HumanEvalTask(ProgramTask):
    """A HumanEval problem; the answer is the whole function.

    HumanEval has no public tests, so the examples in the docstring (`>>> f(x)` then the expected value)
    play that role: the public job asserts them, the private job runs the official `check`. Problems
    without docstring examples get a public job that only imports the answer (it catches crashes).
    """

    problem: HumanEvalProblem

    @property
    def name(self) -> str:
        return self.problem.task_id

    def messages(self) -> list[dict[str, str]]:
        return [
            {
                "role": "user",
                "content": "Complete this Python function. Answer with the whole function (imports "
                f"included) in one ```python code block.\n\n```python\n{self.problem.prompt}```",
            }
        ]

    def public_job(self, code: str | None) -> Job:
        if code is None:
            return Job(None, (TestCase(""),))
        checks = "\n".join(
            f"assert {call} == {want}, {call!r}" for call, want in docstring_examples(self.problem)
        )
        return Job(f"{code}\n\n{checks}\n", (TestCase(""),))

    def private_job(self, code: str | None) -> Job:
        return humaneval_job(self.problem, code, include_prompt=False)


def docstring_examples(problem: HumanEvalProblem) -> list[tuple[str, str]]:
    """(call, expected) pairs from `>>> entry_point(...)` lines followed by a one-line expected value."""
    lines = problem.prompt.splitlines()
    pairs = []
    for i, line in enumerate(lines[:-1]):
        call = line.strip().removeprefix(">>>").strip()
        want = lines[i + 1].strip()
        is_example = line.strip().startswith(">>>") and call.startswith(problem.entry_point)
        if is_example and want and not want.startswith(">>>"):
            pairs.append((call, want))
    return pairs


# ------------------------------------------------------------------------------------------- judging
def sandbox_judge(config: SandboxConfig | None = None, workers: int | None = None) -> Judge:
    """The real judge: the sandbox pool with the CodeContests output checker."""

    def judge(jobs: Sequence[Job]) -> list[list[TestResult]]:
        return run_batch(jobs, checker=outputs_match, config=config, workers=workers)

    return judge


# ------------------------------------------------------------------------------------ SFT warm-up
def corrupted_solutions(code: str, constant: bool = True, guesses: Sequence[int] = ()) -> list[str]:
    """Wrong variants of a correct program, as a model gets them wrong: a stray extra output line, a
    crash (a name that does not exist) before any output, and, when the program has an integer literal
    and `constant` is set, its last one off by one (a constant not copied right from the statement, the
    commonest miss of a small model on the bundled problems; the feedback's expected output then points
    at the fix). The first two keep the program's constant, so a fix never has to read it elsewhere.

    `guesses`: also the last literal replaced by each of these values other than its own, the constant a
    model writes when the statement leaves it out. Why not only off by one: when every wrong constant is
    k + 1, "subtract one" fixes it without reading the feedback; with wrong constants spread over the
    range, the feedback's expected output is the only way to the fix."""
    body = code.rstrip()
    variants = [f"{body}\nprint(0)\n", f"answer = solve_input()\n{body}\n"]
    own = last_integer(body)
    if own is None:
        return variants
    wrong = ([own + 1] if constant else []) + [g for g in dict.fromkeys(guesses) if g != own]
    variants += [f"{with_constant(body, value)}\n" for value in wrong]
    return variants


_INTEGER = re.compile(r"\d+")


def with_constant(text: str, value: int) -> str:
    """`text` with its last integer literal replaced by `value` (unchanged when it has none): a
    hidden-constant answer with another constant, for contest programs and repository answers alike."""
    literals = list(_INTEGER.finditer(text))
    if not literals:
        return text
    last = literals[-1]
    return f"{text[: last.start()]}{value}{text[last.end() :]}"


def last_integer(text: str) -> int | None:
    """The last integer literal of `text`: a hidden-constant answer's constant."""
    literals = _INTEGER.findall(text)
    return int(literals[-1]) if literals else None


def last_constants(codes: Sequence[str]) -> list[int]:
    """The distinct last integer literals of these programs, in order: the constants a model has seen
    written, hence the ones it guesses."""
    found = (last_integer(code) for code in codes)
    return list(dict.fromkeys(value for value in found if value is not None))
