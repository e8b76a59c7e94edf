"""RLEF on a repository row: a real git repository whose tests run through the execution reward.

The calc repository (tests/calc_repo.py): `add` subtracts; FAIL_TO_PASS test_add (add(2, 2) == 4) and
test_add_neg (add(-1, 1) == 0), PASS_TO_PASS test_sub. The row shows test_add and keeps test_add_neg
private, so `a * b` (right for 2 + 2 only: an answer that special-cases what the feedback showed) passes
the public tests and fails the grade.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from calc_repo import ISOLATION, OPS, build_calc

from swerl.edit_format import SearchReplace, edits_to_text
from swerl.environments.dialog import Answer, ChatRenderer, EpisodeConfig, evaluate_dialogs, run_episodes
from swerl.environments.repository import (
    NEXT_ANSWER,
    RepoJob,
    public_fail_to_pass,
    render_test_feedback,
    repository_judge,
    repository_tasks,
)
from swerl.execution.instances import Instance, instance_to_row
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.reward.execution import ExecutionResult
from swerl.rollout.base import Completion, SamplingParams
from swerl.trainers.data import row_messages

PUBLIC = "tests/test_ops.py::test_add"
PRIVATE = "tests/test_ops.py::test_add_neg"


def answer(body: str, search: str = "    return a - b\n\n\ndef sub") -> str:
    edit = SearchReplace("calc/ops.py", search, f"    return {body}\n\n\ndef sub")
    return f"<think>\nfix add\n</think>\n<solution>\n{edits_to_text([edit])}\n</solution>"


GOLD, WRONG, SPECIAL = answer("a + b"), answer("a"), answer("a * b")
NOT_FOUND = answer("a + b", search="    return a + 0")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)
    return load_model_and_tokenizer(path)[1]


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Instance, dict[str, object]]:
    reward, instance = build_calc(tmp_path_factory.mktemp("calc"))
    reward.workers = 2
    row = instance_to_row(instance) | {
        "code_context": {"calc/ops.py": OPS},
        "PUBLIC_TESTS": json.dumps([PUBLIC]),
    }
    return reward, instance, row


class Scripted:
    """Each episode follows the script whose first answer its dialog holds (the first turn: by position)."""

    def __init__(self, tokenizer: object, scripts: Sequence[Sequence[str]]) -> None:
        self.tokenizer, self.scripts, self.contexts = tokenizer, scripts, []

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        del params
        out = []
        for p, prompt in enumerate(prompts):
            seen = self.tokenizer.decode(list(prompt))
            self.contexts.append(seen)
            turn = seen.count("<|im_start|>assistant") - 1
            script = self.scripts[p] if turn == 0 else next(s for s in self.scripts if s[0] in seen)
            ids = self.tokenizer(script[turn], add_special_tokens=False)["input_ids"]
            ids = [*ids, self.tokenizer.eos_token_id]
            out.append([Completion(list(prompt), ids, [-0.5] * len(ids), "stop", script[turn])])
        return out


def test_the_split_is_stable_shows_some_and_keeps_some() -> None:
    tests = tuple(f"t.py::test_{i}" for i in range(5))
    instance = Instance("o__r-1", "o/r", "abc", "issue", fail_to_pass=tests)
    shown = public_fail_to_pass(instance, 0.5)
    assert len(shown) == 2 and set(shown) < set(tests) and shown == public_fail_to_pass(instance, 0.5)
    assert len(public_fail_to_pass(instance, 1.0)) == 4 and len(public_fail_to_pass(instance, 0.0)) == 1
    assert public_fail_to_pass(Instance("o__r-2", "o/r", "abc", "issue", fail_to_pass=tests[:1])) == ()


def test_rows_name_their_public_tests_and_one_test_rows_are_left_out(calc: tuple) -> None:
    reward, instance, row = calc
    one = instance_to_row(instance) | {"instance_id": "acme__calc-2", "FAIL_TO_PASS": json.dumps([PUBLIC])}
    found = repository_tasks([row, one], reward, row_messages)
    assert [t.name for t in found.tasks] == ["acme__calc-1"] and found.skipped == {"one_fail_to_pass": 1}
    task = found.tasks[0]
    assert task.public_tests == (PUBLIC,) and task.private_tests == (PRIVATE,)
    assert "add subtracts" in task.messages()[-1]["content"]
    with pytest.raises(ValueError, match="some but not all"):
        repository_tasks([row | {"PUBLIC_TESTS": json.dumps([PUBLIC, PRIVATE])}], reward, row_messages)


def test_feedback_shows_public_failures_only_and_is_bounded() -> None:
    log = "\n".join(
        [
            "=================================== FAILURES ===================================",
            "___________________________________ test_add ___________________________________",
            "    def test_add():",
            ">       assert add(2, 2) == 4",
            "E       assert 0 == 4",
            *[f"frame line {i}" for i in range(400)],
            "tests/test_ops.py:9: AssertionError",
            "_________________________________ test_add_neg _________________________________",
            "    def test_add_neg():",
            ">       assert add(-1, 1) == 0",
            "=========================== short test summary info ============================",
            f"FAILED {PUBLIC} - assert 0 == 4",
            f"FAILED {PRIVATE} - assert -2 == 0",
        ]
    )
    result = ExecutionResult(0.0, "unresolved", log=log, statuses={PUBLIC: "FAILED", PRIVATE: "FAILED"})
    job = RepoJob(Instance("a__b-1", "a/b", "c", "i"), "patch", (PUBLIC,), (PRIVATE,))
    text = render_test_feedback(result, job, max_chars=1200)
    assert f"FAILED {PUBLIC}" in text and "tests/test_ops.py:9: AssertionError" in text
    assert "test_add_neg" not in text and "add(-1, 1)" not in text
    assert len(text) <= 1200 + len(NEXT_ANSWER) + 1  # the budget holds, the closing instruction aside


def test_feedback_on_many_long_failures_stays_within_its_budget() -> None:
    # As on pallets/itsdangerous-153 with a patch that changes nothing: 26 public tests fail with long
    # reports, and ids, titles and fences once took the text 19 % past the budget.
    tests = [f"tests/test_jws.py::TestJWSSerializer::test_algorithm[HS{i:03d}]" for i in range(26)]
    sections = [
        f"{'_' * 20} TestJWSSerializer.test_algorithm[HS{i:03d}] {'_' * 20}\n"
        + "\n".join(f"frame {i} line {j}" for j in range(80))
        + f"\nE       Failed: DID NOT WARN {i}\ntests/test_jws.py:21: Failed"
        for i in range(26)
    ]
    banner = "=" * 20
    log = f"{banner} FAILURES {banner}\n" + "\n".join(sections) + f"\n{banner} end {banner}"
    result = ExecutionResult(0.0, "unresolved", log=log, statuses=dict.fromkeys(tests, "FAILED"))
    job = RepoJob(Instance("a__b-1", "a/b", "c", "i"), "patch", tuple(tests), ())
    text = render_test_feedback(result, job, max_chars=2400)
    assert len(text) <= 2400 + len(NEXT_ANSWER) + 1
    assert "26 of 26 public tests fail:" in text and "... and 16 more" in text
    for i in range(3):  # three reports, each cut at its head and keeping its exception and location
        assert f"DID NOT WARN {i}\ntests/test_jws.py:21: Failed\n```" in text
    cut = [line for line in text.splitlines() if line.endswith("characters before)")]
    assert len(cut) == 3


def test_repository_episodes_end_to_end(tokenizer: object, calc: tuple) -> None:
    reward, _, row = calc
    (task,) = repository_tasks([row], reward, row_messages).tasks
    scripts = [[GOLD], [WRONG, GOLD], [SPECIAL], [NOT_FOUND, "no edits"]]
    policy = Scripted(tokenizer, scripts)
    config = EpisodeConfig(max_turns=2)
    gold, fixed, special, broken = run_episodes(
        policy, ChatRenderer(tokenizer), [task] * 4, config, repository_judge(reward)
    )
    # The gold patch ends the episode at turn 1 with +1.
    assert len(gold.turns) == 1 and gold.rewards == [1.0] and gold.turns[0].seconds["judge"] > 0
    # A wrong patch gets the real pytest report of the public test, then the fix: 0, then +1.
    feedback = fixed.turns[0].feedback or ""
    assert fixed.rewards == [0.0, 1.0]
    assert f"FAILED {PUBLIC}" in feedback and "assert 2 == 4" in feedback, feedback
    assert any(feedback in context for context in policy.contexts)
    # Special-casing what the public test showed passes it and fails the grade.
    assert len(special.turns) == 1 and special.turns[0].public_passed and special.rewards == [-1.0]
    # A SEARCH text that is not in the file: said so, -0.2, then the final answer fails.
    assert "does not match" in (broken.turns[0].feedback or "") and "return a + 0" in broken.turns[0].feedback
    assert broken.rewards == [-0.2, -1.0]
    for ep in (fixed, broken):
        assert all("test_add_neg" not in (turn.feedback or "") for turn in ep.turns)


def test_an_empty_patch_gets_the_failing_tests_and_random_feedback_is_another_rows(calc: tuple) -> None:
    reward, _, row = calc
    other = row | {"instance_id": "acme__calc-3", "PUBLIC_TESTS": json.dumps([PRIVATE])}
    first, second = repository_tasks([row, other], reward, row_messages).tasks
    judge = repository_judge(reward)
    job = first.public_job("")
    outcome = first.outcome(Answer(""), job, judge([job])[0])
    assert outcome.passed is False and f"FAILED {PUBLIC}" in (outcome.feedback or "")
    unrelated = first.unrelated_job(task_patch := "diff", second)
    said = second.outcome(Answer(task_patch), unrelated, judge([unrelated])[0]).feedback or ""
    assert f"FAILED {PRIVATE}" in said and f"FAILED {PUBLIC}\n" not in said


def test_a_run_that_cannot_happen_is_no_verdict(tokenizer: object, calc: tuple) -> None:
    reward, _, row = calc
    (task,) = repository_tasks([row], reward, row_messages).tasks

    def broken_judge(jobs: Sequence[RepoJob]) -> list[ExecutionResult]:
        return [ExecutionResult(None, "infra_error", "harness_raised") for _ in jobs]

    policy = Scripted(tokenizer, [[WRONG]] * 2)
    report = evaluate_dialogs(
        policy,
        ChatRenderer(tokenizer),
        [task],
        EpisodeConfig(max_turns=2),
        broken_judge,
        samples=2,
        nk=((1, 1),),
    )
    assert report.unjudged == 2 and report.rates[0].problems == 0


def test_train_rlef_on_repository_rows(tmp_path: Path, calc: tuple) -> None:
    """`swerl train rlef` with task_source: repository, end to end on the calc row (one step)."""

    from swerl.trainers.rlef import RLEFConfig, run

    reward, _, row = calc
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    model = build_tiny_model(tmp_path / "model", seed=0)
    clones = reward.backend.repos.mirror_dir
    overrides = [
        f"model_name_or_path={model}",
        f"output_dir={tmp_path / 'run'}",
        f"train_file={rows}",
        f"execution_clones={clones}",
        f"execution_cache_dir={tmp_path / 'cache'}",
        "execution_offline=true",
        f"execution_isolation={ISOLATION}",
        "max_steps=1",
        "prompts_per_step=1",
        "max_completion_length=8",
    ]
    config = RLEFConfig.from_yaml(root / "configs/rlef_repo_tiny_cpu.yaml", overrides)
    result = run(config, progress=False)
    assert result["train_problems"] == 1 and len(result["history"]) == 1
    assert {"reward", "solve_rate", "unjudged"} <= set(result["history"][0])


def test_a_public_test_sharing_a_private_tests_method_name_is_still_shown() -> None:
    public, private = "t.py::TestB::test_x[1]", "t.py::TestA::test_x[1]"
    log = "\n".join(
        ["____ TestB.test_x[1] ____", "E   assert 1 == 2", "____ TestA.test_x[1] ____", "E   hidden"]
    )
    result = ExecutionResult(0.0, "unresolved", log=log, statuses={public: "FAILED", private: "FAILED"})
    job = RepoJob(Instance("a__b-1", "a/b", "c", "i"), "patch", (public,), (private,))
    text = render_test_feedback(result, job, max_chars=1200)
    assert f"FAILED {public}" in text and "assert 1 == 2" in text
    assert "TestA" not in text and "hidden" not in text


def test_eval_repository_cli(tmp_path: Path, calc: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    """`swerl eval repository`: 1@3 with feedback and with independent answers, rows left out counted."""
    import argparse

    from swerl.cli import eval as eval_cli

    reward, instance, row = calc
    one = instance_to_row(instance) | {"instance_id": "acme__calc-9", "FAIL_TO_PASS": json.dumps([PUBLIC])}
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in (row, one)), encoding="utf-8")
    model = build_tiny_model(tmp_path / "model", seed=0)
    common = ["eval", "repository", "--model", str(model), "--data", str(rows), "--offline"]
    common += ["--clones", str(reward.backend.repos.mirror_dir), "--cache-dir", str(tmp_path / "cache")]
    common += ["--samples", "3", "--max-new-tokens", "8", "--quiet"]
    if ISOLATION == "none":
        common.append("--unsafe-no-isolation")
    for flag in ([], ["--no-feedback"]):
        parser = argparse.ArgumentParser()
        eval_cli.register(parser.add_subparsers(dest="group"))
        out = tmp_path / f"report{len(flag)}.json"
        args = parser.parse_args([*common, *flag, "--output", str(out)])
        assert args.run(args) == 0
        report = json.loads(out.read_text())
        assert report["rates"][0]["k"] == 3 and report["rates"][0]["problems"] == 1
        assert report["episodes"] == 3 and report["feedback"] == ("none" if flag else "execution")
    assert "1 repository tasks; left out: 1 one_fail_to_pass" in capsys.readouterr().err


def test_eval_repository_can_keep_pass_to_pass_private(tmp_path: Path, calc: tuple) -> None:
    """`--private-pass-to-pass` leaves the repository's existing tests out of the public run (and in the
    grade); by default they are public, as in `swerl train rlef`'s `public_pass_to_pass`."""
    import argparse

    from swerl.cli import eval as eval_cli

    reward, instance, row = calc
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")  # the model is never loaded here
    parser = argparse.ArgumentParser()
    eval_cli.register(parser.add_subparsers(dest="group"))
    common = ["eval", "repository", "--model", str(tmp_path), "--data", str(rows)]
    for flag, public in (([], instance.pass_to_pass), (["--private-pass-to-pass"], ())):
        (task,) = eval_cli._repository_tasks(parser.parse_args([*common, *flag]), reward)
        assert task.public_instance.pass_to_pass == tuple(public)
        assert task.public_instance.fail_to_pass == (PUBLIC,)
    assert instance.pass_to_pass


def test_third_turn_and_fresh_guess_warmups_are_for_repository_rows_only() -> None:
    from swerl.trainers.config import RLEFConfig

    contest = RLEFConfig(sft_fix_turns=3, sft_fix_retry="guess")
    assert {name for name, _ in contest.problems()} >= {"sft_fix_turns", "sft_fix_retry"}
    repository = RLEFConfig(task_source="repository", sft_fix_turns=3, sft_fix_retry="guess")
    assert not {name for name, _ in repository.problems()} & {"sft_fix_turns", "sft_fix_retry"}
    longer = RLEFConfig(task_source="repository", sft_fix_turns=4)
    assert ("sft_fix_turns", "must be at most max_turns (3)") in longer.problems()
    one_turn = RLEFConfig(max_turns=1).problems()
    assert not [name for name, _ in one_turn if name.startswith("sft")]  # the default warm-up stays valid
