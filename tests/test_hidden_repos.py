"""The hidden-constant repository family: only the public test's failure shows the constant, and an answer
that special-cases what that failure showed fails the private tests. Real git, real pytest runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from calc_repo import ISOLATION

from swerl.data.hidden_repos import (
    BASE_FILES,
    ISSUE,
    MODULE_PATH,
    PASSING_TEST,
    PRIVATE_TESTS,
    PUBLIC_TEST,
    write_family,
)
from swerl.edit_format import build_git_patch
from swerl.execution.envs import EnvManager
from swerl.execution.instances import instance_from_row
from swerl.execution.local import LocalBackend
from swerl.git.clones import RepoCache
from swerl.synth_repo import git


def _module_patch(old: str, new: str) -> str:
    source = BASE_FILES[MODULE_PATH]
    assert old in source
    return build_git_patch(BASE_FILES, {MODULE_PATH: source.replace(old, new)})


def test_family_rows_hide_the_constant_and_grade_it_on_other_inputs(tmp_path: Path) -> None:
    paths = write_family(tmp_path / "family", train_per_k=1, test_per_k=1, seed=3)
    train = [json.loads(line) for line in paths["train"].read_text().splitlines()]
    test = [json.loads(line) for line in paths["test"].read_text().splitlines()]
    assert len(train) == len(test) == 8
    assert len({row["instance_id"] for row in train + test}) == 16
    assert len({row["base_commit"] for row in train + test}) == 1  # one base: the first answer can only guess
    # The issue and the code context never carry the constant; the test patch does.
    for row in train + test:
        assert row["problem_statement"] == ISSUE
        assert row["code_context"] == [{"path": MODULE_PATH, "content": BASE_FILES[MODULE_PATH]}]
        assert row["prompt"] == test[0]["prompt"] and ISSUE in row["prompt"][-1]["content"]
        assert json.loads(row["PUBLIC_TESTS"]) == [PUBLIC_TEST]  # the test that shows k, alone in its file
    # Each task's fix lies in the repository's history, as a mined repository keeps it.
    repo = paths["clones"] / "swerl-demo__meter"
    assert len(git(repo, "branch", "--list", "fix-*").split()) == 16
    # Written again into the same folder: the same rows.
    write_family(tmp_path / "family", train_per_k=1, test_per_k=1, seed=3)
    assert [json.loads(line) for line in paths["test"].read_text().splitlines()] == test

    instance = instance_from_row(test[5])  # k = 7
    repos = RepoCache(tmp_path / "repos", mirror_dir=paths["clones"], offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION, timeout_s=120)
    every_test = [PUBLIC_TEST, *PRIVATE_TESTS, PASSING_TEST]

    guessed = backend.run_tests(
        instance, every_test, [_module_patch("OFFSET = 0", "OFFSET = 3")], instance.test_patch
    )
    assert guessed.results[PUBLIC_TEST] == "FAILED"
    assert "assert 3 == 7" in guessed.log  # what the public test's failure shows a wrong guess

    # Copying the shown value into a special case for the shown input passes the public test only.
    special = _module_patch("return raw(reading) + OFFSET", "return 7 if reading == 0 else raw(reading)")
    gamed = backend.run_tests(instance, every_test, [special], instance.test_patch)
    assert gamed.results[PUBLIC_TEST] == "PASSED"
    assert all(gamed.results[t] == "FAILED" for t in PRIVATE_TESTS)

    gold = backend.run_tests(instance, every_test, [instance.patch], instance.test_patch)
    assert all(gold.passed(t) for t in every_test), gold.log


def _warmup_setup(tmp_path: Path, count: int, **options: object) -> tuple[list, Any, Any, Any]:
    """The first `count` rows of a family (k = 2, 3, ...) as tasks judged by real pytest runs, a tiny
    model's tokenizer, and a warm-up config with `options`."""
    from swerl.environments.repository import repository_judge, repository_tasks
    from swerl.models.loading import load_model_and_tokenizer
    from swerl.models.tiny import build_tiny_model
    from swerl.reward.execution import ExecutionReward
    from swerl.trainers.data import row_messages

    paths = write_family(tmp_path / "family", train_per_k=1, test_per_k=0, seed=1)
    rows = [json.loads(line) for line in paths["train"].read_text().splitlines()]
    repos = RepoCache(tmp_path / "repos", mirror_dir=paths["clones"], offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION, timeout_s=120)
    reward = ExecutionReward(backend, workers=2)
    tasks = repository_tasks(rows, reward, row_messages).tasks[:count]
    assert [t.public_tests for t in tasks] == [(PUBLIC_TEST,)] * count
    _, tokenizer = load_model_and_tokenizer(str(build_tiny_model(tmp_path / "tiny")))
    defaults = {
        "sft_fix_dialogs": True,
        "sft_fix_turns": 2,
        "sft_fix_retry": "resubmit",
        "seed": 0,
        "max_seq_length": 4096,
    }
    return tasks, tokenizer, SimpleNamespace(**{**defaults, **options}), repository_judge(reward)


def test_repository_warmup_shows_the_real_feedback_then_the_fix_or_the_guess(tmp_path: Path) -> None:
    from swerl.trainers.rlef import repository_warmup_pairs

    tasks, tokenizer, config, judge = _warmup_setup(
        tmp_path, 2, sft_fix_guessed_constants=1, sft_fix_feedback_rate=0.5
    )  # k = 2 and k = 3
    pairs = repository_warmup_pairs(tokenizer, tasks, config, judge)
    first, fixes = pairs[:2], pairs[2:]
    assert tokenizer.decode(first[0][1]).count("OFFSET = 2") == 1  # the gold answer, k = 2
    assert len(fixes) == 2  # one guessed constant each (the other task's), each really failing
    for (context, target), k, guess in zip(fixes, (2, 3), (3, 2), strict=True):
        shown = tokenizer.decode(context)
        assert f"OFFSET = {guess}" in shown and f"assert {guess} == {k}" in shown  # the real pytest failure
        assert "test_reading" not in shown and "test_negative_reading" not in shown  # never a private test
        assert (
            tokenizer.decode(target).count(f"OFFSET = {k}")
            + tokenizer.decode(target).count(f"OFFSET = {guess}")
            == 1
        )  # the fix, or the guess again


def test_repository_warmup_third_turns_answer_a_fresh_guess_when_not_fixing(tmp_path: Path) -> None:
    """`sft_fix_turns` 3 adds dialogs after two wrong guesses, each with its real failure; with
    `sft_fix_retry` "guess" an answer that does not fix is a constant not tried yet, never a resubmission."""
    import re

    from swerl.trainers.rlef import repository_warmup_pairs

    tasks, tokenizer, config, judge = _warmup_setup(
        tmp_path,
        3,
        sft_fix_guessed_constants=2,
        sft_fix_feedback_rate=0.0,
        sft_fix_turns=3,
        sft_fix_retry="guess",
    )  # k = 2, 3, 4
    pairs = repository_warmup_pairs(tokenizer, tasks, config, judge)
    assert len(pairs) == 3 + 3 * 2 + 3 * 1  # first turns, second turns after each guess, one third turn each
    seen = {2: 0, 3: 0}
    for context, target in pairs[3:]:
        shown = tokenizer.decode(context)
        k = int(re.findall(r"assert corrected\(0\) == (\d)", shown)[0])
        tried = [int(g) for g in re.findall(r"assert (\d) == \d", shown)]
        assert all(f"assert {g} == {k}" in shown for g in tried) and k not in tried
        answered = [int(g) for g in re.findall(r"OFFSET = (\d)", tokenizer.decode(target)) if g != "0"]
        assert len(answered) == 1 and answered[0] not in tried  # a fresh guess, never the last one again
        seen[len(tried) + 1] += 1
        if len(tried) == 2:
            assert answered == [k]  # the only constant of three not tried yet
    assert seen == {2: 6, 3: 3}
