"""A family of repository tasks whose fix needs what only the public test's feedback shows.

The repository analog of the hidden-constant contest problems (`swerl.data.rlef_problems`): a tiny real
git repository, `swerl-demo/meter`, whose `corrected()` adds a calibration `OFFSET` that is still 0. Every
task's issue says the same thing (the offset is missing) and never says its value; the task's hidden
constant k (2..9) lives only in its tests. The public test asserts `corrected(0) == k`, so pytest's
failure on a wrong answer prints `assert 0 == k` (or `assert c == k` after a guessed c): reading k there
is the whole skill. The private tests check the same fix on other readings (drawn per task), so an
answer that copies the assertion's literal into a special case for 0 passes the public test and fails
the grade.

Why one repository and one base commit for every task: the first answer can then only guess k (the
issue and the code are the same for all tasks), and the environment is built once. Each task's fix and
tests lie on a branch of their own, as a mined repository keeps its fixes in its history.

Rows are in SWE-bench's schema, as `swerl data validate` writes them (FAIL_TO_PASS: the public test
first, then the private ones; PASS_TO_PASS: a test that holds before and after), with a mined row's
`code_context` and `prompt` (the compact SWE-RL prompt: a tiny model's context stays short) and a
`PUBLIC_TESTS` column naming the one public FAIL_TO_PASS test. That test is alone in its file
(`tests/test_calibration.py`), so running it never runs a private test.

    python -m swerl.data.hidden_repos OUT [--train-per-k 4] [--test-per-k 9] [--seed 0]

writes OUT/clones/swerl-demo__meter (the repository), OUT/train.jsonl and OUT/test.jsonl.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swerl.edit_format import build_git_patch, build_messages
from swerl.execution.instances import Instance, instance_to_row
from swerl.synth_repo import FastImport

REPO = "swerl-demo/meter"
CONSTANTS = tuple(range(2, 10))
MODULE_PATH = "meter/readings.py"
PUBLIC_TEST_FILE = "tests/test_calibration.py"
PRIVATE_TEST_FILE = "tests/test_readings.py"
PUBLIC_TEST = f"{PUBLIC_TEST_FILE}::test_zero_reading"
PRIVATE_TESTS = (f"{PRIVATE_TEST_FILE}::test_reading", f"{PRIVATE_TEST_FILE}::test_negative_reading")
PASSING_TEST = "tests/test_meter.py::test_raw_reading_is_kept"
PUBLIC_TESTS_COLUMN = "PUBLIC_TESTS"
"""The row's own choice of public FAIL_TO_PASS tests (the RLEF repository task reads it)."""

MODULE = '''\
"""Readings of the plant's flow meter."""

OFFSET = {k}


def raw(reading):
    """The reading as the meter sent it."""
    return reading


def corrected(reading):
    """The reading with the meter's calibration offset added."""
    return raw(reading) + OFFSET
'''

PUBLIC_TESTS = """\
from meter.readings import corrected


def test_zero_reading():
    assert corrected(0) == {k}
"""

PRIVATE_TESTS_SOURCE = """\
from meter.readings import corrected


def test_reading():
    assert corrected({a}) == {a_k}


def test_negative_reading():
    assert corrected(-{b}) == {b_k}
"""

BASE_FILES = {
    "README.md": "# meter\n\nCorrects the plant's flow meter readings.\n",
    "meter/__init__.py": "",
    MODULE_PATH: MODULE.format(k=0),
    "tests/__init__.py": "",
    "tests/test_meter.py": (
        "from meter.readings import raw\n\n\ndef test_raw_reading_is_kept():\n    assert raw(41) == 41\n"
    ),
}

ISSUE = (
    "corrected() returns the raw reading\n\n"
    "Our meter reads low by a fixed amount, but `corrected()` adds nothing: `OFFSET` in "
    "meter/readings.py is still 0. Set it to the meter's real calibration offset so that corrected "
    "readings pass the calibration tests."
)


@dataclass(frozen=True)
class HiddenTask:
    """One task of the family: its hidden constant and the two readings its private tests check."""

    index: int
    k: int
    reading: int
    negative: int

    @property
    def instance_id(self) -> str:
        return f"swerl-demo__meter-{self.index}"


def draw_tasks(per_k: int, rng: random.Random, start: int = 0) -> list[HiddenTask]:
    """`per_k` tasks for each constant, with private readings drawn from `rng`. The constants take turns
    (2, 3, ..., 9, 2, 3, ...), so the first N rows (a config's `max_*_samples`) hold every constant."""
    tasks = []
    for _ in range(per_k):
        for k in CONSTANTS:
            tasks.append(HiddenTask(start + len(tasks), k, rng.randint(3, 99), rng.randint(1, 60)))
    return tasks


def task_files(task: HiddenTask) -> tuple[dict[str, str], dict[str, str]]:
    """(the fixed module, the task's two new test files): what its gold patch and test patch add."""
    tests = {
        PUBLIC_TEST_FILE: PUBLIC_TESTS.format(k=task.k),
        PRIVATE_TEST_FILE: PRIVATE_TESTS_SOURCE.format(
            a=task.reading, a_k=task.reading + task.k, b=task.negative, b_k=task.k - task.negative
        ),
    }
    return {MODULE_PATH: MODULE.format(k=task.k)}, tests


def write_repository(repo: Path, tasks: Sequence[HiddenTask]) -> str:
    """The repository at `repo` (main at the base commit; each task's fix on branch `fix-INDEX`); the
    base commit's sha."""
    history = FastImport(step=60)
    base = history.commit("Initial import\n", BASE_FILES)
    for task in tasks:
        module, tests = task_files(task)
        history.commit(
            f"Set the calibration offset (fix-{task.index})\n",
            {**module, **tests},
            ref=f"refs/heads/fix-{task.index}",
            parent=base,
        )
    return history.write(repo, checkout=True)[0]


def task_row(task: HiddenTask, base_commit: str) -> dict[str, Any]:
    """The task's row in SWE-bench's schema, with the code context a mined row carries."""
    module, tests = task_files(task)
    instance = Instance(
        instance_id=task.instance_id,
        repo=REPO,
        base_commit=base_commit,
        problem_statement=ISSUE,
        patch=build_git_patch(BASE_FILES, module),
        test_patch=build_git_patch(BASE_FILES, tests),
        fail_to_pass=(PUBLIC_TEST, *PRIVATE_TESTS),
        pass_to_pass=(PASSING_TEST,),
        version="0.1",
        environment_setup_commit=base_commit,
    )
    context = {MODULE_PATH: BASE_FILES[MODULE_PATH]}
    return {
        **instance_to_row(instance),
        PUBLIC_TESTS_COLUMN: json.dumps([PUBLIC_TEST]),
        "code_context": [{"path": path, "content": text} for path, text in context.items()],
        "prompt": build_messages(ISSUE, context, style="compact"),
    }


def write_family(out: Path, train_per_k: int = 4, test_per_k: int = 9, seed: int = 0) -> dict[str, Path]:
    """The repository under out/clones and the rows of both splits; their paths by name."""
    rng = random.Random(seed)
    train = draw_tasks(train_per_k, rng)
    test = draw_tasks(test_per_k, rng, start=len(train))
    clones = out / "clones"
    repo = clones / REPO.replace("/", "__")
    shutil.rmtree(repo, ignore_errors=True)  # rewritten whole: the same seed gives the same shas again
    base = write_repository(repo, [*train, *test])
    paths = {"clones": clones}
    for split, tasks in (("train", train), ("test", test)):
        paths[split] = out / f"{split}.jsonl"
        lines = [json.dumps(task_row(task, base)) + "\n" for task in tasks]
        paths[split].write_text("".join(lines), encoding="utf-8")
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for clones/ and the rows (train.jsonl, test.jsonl)")
    parser.add_argument("--train-per-k", type=int, default=4, help="training tasks per constant (default 4)")
    parser.add_argument("--test-per-k", type=int, default=9, help="held-out tasks per constant (default 9)")
    parser.add_argument("--seed", type=int, default=0, help="draws the private tests' readings")
    args = parser.parse_args(argv)
    for name, path in write_family(args.out, args.train_per_k, args.test_per_k, args.seed).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
