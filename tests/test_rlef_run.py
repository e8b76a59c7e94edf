"""The bundled problems, the eval CLI and a short CPU learning run (the CI version of docs/rlef.md's run)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from swerl.codecontests.humaneval import load_humaneval
from swerl.codecontests.problems import load_problems
from swerl.data.rlef_problems import SPLITS, bundled_path
from swerl.environments.codecontests import ContestTask, HumanEvalTask, docstring_examples, sandbox_judge
from swerl.errors import UserError
from swerl.models.tiny import build_tiny_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def test_bundled_problems_are_solvable_and_held_out() -> None:
    splits = {split: load_problems(bundled_path(split)) for split in SPLITS}
    assert all(not report.dropped for report in splits.values())
    names = {split: {p.name for p in report.problems} for split, report in splits.items()}
    assert len(names["train"]) >= 60 and len(names["valid"]) >= 10 and len(names["test"]) >= 20
    assert not names["train"] & names["test"] and not names["train"] & names["valid"]
    tasks = [ContestTask(p) for report in splits.values() for p in report.problems]
    judge = sandbox_judge()
    results = judge([t.private_job(t.problem.python_solutions[0]) for t in tasks])
    failed = [t.name for t, res in zip(tasks, results, strict=True) if not all(r.passed for r in res)]
    assert failed == []


def test_humaneval_tasks_accept_the_canonical_solution() -> None:
    problems = load_humaneval()[:3]
    assert docstring_examples(problems[0])[0] == ("has_close_elements([1.0, 2.0, 3.0], 0.5)", "False")
    tasks = [HumanEvalTask(p) for p in problems]
    judge = sandbox_judge()
    good = [p.prompt + p.canonical_solution for p in problems]
    for results in judge([t.public_job(c) for t, c in zip(tasks, good, strict=True)]):
        assert all(r.passed for r in results)
    for results in judge([t.private_job(c) for t, c in zip(tasks, good, strict=True)]):
        assert all(r.passed for r in results)
    bad = judge([tasks[0].private_job(problems[0].prompt + "    return None\n")])
    assert not bad[0][0].passed


def _eval(argv: list[str]) -> int:
    from swerl.cli import eval as eval_cli

    parser = argparse.ArgumentParser()
    eval_cli.register(parser.add_subparsers(dest="group"))
    args = parser.parse_args(["eval", *argv])
    return args.run(args)


def test_eval_cli_with_and_without_feedback(
    tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = [
        "codecontests",
        "--model",
        str(tiny_dir),
        "--data",
        "bundled:valid",  # as train_file names it; `--data bundled --split valid` is the same set
        "--limit",
        "2",
    ]
    # 6 dialogs: enough one-answer dialogs (--no-feedback) to fill the larger budget, k = 6.
    common += ["--samples", "6", "--nk", "1@3,2@6", "--max-new-tokens", "8"]
    for flag in ([], ["--no-feedback"], ["--random-feedback"]):
        out = tmp_path / f"report{len(flag)}{''.join(flag)}.json"
        assert _eval([*common, *flag, "--output", str(out)]) == 0
        report = json.loads(out.read_text())
        assert [(r["n"], r["k"]) for r in report["rates"]] == [(1, 3), (2, 6)]
        assert report["episodes"] == 12
        assert (report["feedback"] == "none") == (flag == ["--no-feedback"])
    # A context too short for a second answer is said: feedback would silently never be used.
    capsys.readouterr()
    assert _eval([*common, "--max-context", "64"]) == 0
    assert "--max-context 64 leaves no room for a second answer on 2 of 2 problems" in capsys.readouterr().err
    # Too few dialogs for a budget is refused, not reported as a rate nothing measured.
    with pytest.raises(UserError, match="cannot fill the budget of 10@100"):
        _eval([*common[:-6], "--samples", "2", "--nk", "10@100"])
    from swerl.cli.eval import parse_nk

    assert parse_nk("1@3, 10@100") == [(1, 3), (10, 100)]
    for bad in ("3", "3@1", "0@2", "a@b"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_nk(bad)


def test_wrong_constant_variant_changes_only_the_last_literal() -> None:
    """The off-by-one variant is the constant copied wrong from the statement; other literals stay."""
    from swerl.environments.codecontests import corrupted_solutions

    code = "a = list(map(int, input().split()))\nprint(sum(1 for x in a if x > 9))\n"
    assert corrupted_solutions(code)[-1] == code.replace("> 9", "> 10")
    assert all("> 9" in variant for variant in corrupted_solutions(code, constant=False))
    assert len(corrupted_solutions("print(len(input().split()))")) == 2  # no literal, no third variant


def test_fix_dialogs_show_real_feedback_then_the_reference(tiny_dir: Path) -> None:
    """Multi-turn warm-up examples: a wrong answer, the sandbox's feedback on it, the reference as target."""
    from swerl.environments.codecontests import ChatRenderer, corrupted_solutions
    from swerl.environments.warmup import feedback_fix_dialogs
    from swerl.models.loading import load_model_and_tokenizer

    _, tokenizer = load_model_and_tokenizer(str(tiny_dir))
    tasks = [ContestTask(p) for p in load_problems(bundled_path("train")).problems[:3]]
    renderer = ChatRenderer(tokenizer)

    def answer_ids(task: ContestTask, text: str) -> list[int]:
        return list(tokenizer(f"{text}<|im_end|>", add_special_tokens=False)["input_ids"])

    pairs = feedback_fix_dialogs(renderer, tasks, sandbox_judge(), answer_ids)
    variants = [t for t in tasks for _ in corrupted_solutions(t.problem.python_solutions[0])]
    assert len(variants) == 3 * len(tasks)  # "print(n + k)": the off-by-one constant is a third variant
    assert len(pairs) == len(variants)  # every corrupted variant really fails its public tests
    for (context, target), task in zip(pairs, variants, strict=True):
        prompt = renderer.prompt_ids(task)
        assert context[: len(prompt)] == prompt
        dialog = tokenizer.decode(context[len(prompt) :])
        assert any(wrong in dialog for wrong in corrupted_solutions(task.problem.python_solutions[0]))
        assert "public tests" in dialog and dialog.rstrip().endswith("assistant")
        assert task.problem.python_solutions[0].strip() in tokenizer.decode(target)


def test_guessed_constant_fixes_read_the_feedback_and_some_resubmit(tiny_dir: Path) -> None:
    """The hidden-constant warm-up: wrong constants are other problems' (not k + 1, which "subtract one"
    would fix blind), each one's feedback shows the right k, and at feedback_rate 0.25 about a quarter of
    the targets are the fix, the rest the wrong answer resubmitted."""
    import random

    from swerl.environments.codecontests import ChatRenderer, last_constants
    from swerl.environments.warmup import feedback_fix_dialogs, program_answer
    from swerl.models.loading import load_model_and_tokenizer

    _, tokenizer = load_model_and_tokenizer(str(tiny_dir))
    tasks = [ContestTask(p) for p in load_problems(bundled_path("hidden_train")).problems[::4]]
    renderer = ChatRenderer(tokenizer)

    def answer_ids(task: ContestTask, text: str) -> list[int]:
        return list(tokenizer(f"{text}<|im_end|>", add_special_tokens=False)["input_ids"])

    args = (renderer, tasks, sandbox_judge(), answer_ids, False)
    pairs = feedback_fix_dialogs(*args, guesses=3, feedback_rate=0.25, rng=random.Random(0))
    assert len(pairs) == 5 * len(tasks)  # stray line, crash, three guessed constants: all fail
    fixed = 0
    wrong_by_k: dict[int, set[int]] = {}
    for i, (context, target) in enumerate(pairs):
        task = tasks[i // 5]
        k = last_constants(task.problem.python_solutions)[0]
        dialog = tokenizer.decode(context[len(renderer.prompt_ids(task)) :])
        code = dialog.split("```python\n")[1].split("```")[0]
        if i % 5 >= 2:  # a guessed constant: never k, and the feedback shows k as the expected output
            guess = last_constants([code])[0]
            assert guess != k and f"Expected output:\n```\n{k}\n```" in dialog
            wrong_by_k.setdefault(k, set()).add(guess)
        is_fix = target == answer_ids(task, program_answer(task.problem.python_solutions[0]))
        assert is_fix or target == answer_ids(task, program_answer(code))
        fixed += is_fix
    assert 0.15 < fixed / len(pairs) < 0.35
    assert all(len(guesses) >= 4 for guesses in wrong_by_k.values())  # spread, not one shortcut
    always = feedback_fix_dialogs(*args, guesses=3, rng=random.Random(0))
    assert [t for _, t in always] == [
        answer_ids(task, program_answer(task.problem.python_solutions[0])) for task in tasks for _ in range(5)
    ]


class TextRenderer:
    """A renderer of characters (no tokenizer): the dialogs' texts themselves, pinned below."""

    def prompt_ids(self, task: ContestTask) -> list[int]:
        return [ord(c) for c in task.messages()[0]["content"]]

    def feedback_ids(self, feedback: str, answer_ids: list[int], stopped: bool) -> list[int]:
        return [ord(c) for c in f"<user>{feedback}<assistant>"]


def test_contest_fix_dialogs_on_a_fixed_seed_are_pinned() -> None:
    """The contest warm-up's dialogs on seed 0 (guessed constants drawn, a share of fixes drawn): the
    same, text for text, as when the contest code had its own copy of the dialog builder, so the
    contests demo's warm-up (and what it learns) does not move."""
    import hashlib
    import random

    from swerl.environments.warmup import feedback_fix_dialogs, program_answer

    tasks = [ContestTask(p) for p in load_problems(bundled_path("hidden_train")).problems[::8]]

    def answer_ids(task: ContestTask, text: str) -> list[int]:
        return [ord(c) for c in f"{text}<end>"]

    args = (TextRenderer(), tasks, sandbox_judge(), answer_ids)
    pairs = feedback_fix_dialogs(*args, guesses=3, feedback_rate=0.5, rng=random.Random(0))  # type: ignore[arg-type]
    text = "\n".join("".join(map(chr, c)) + "=>" + "".join(map(chr, t)) for c, t in pairs)
    fixes = {tuple(answer_ids(task, program_answer(task.problem.python_solutions[0]))) for task in tasks}
    assert (len(pairs), sum(tuple(t) in fixes for _, t in pairs)) == (72, 50)
    assert hashlib.sha256(text.encode()).hexdigest() == (
        "e6d4811233692b518fdc7333d92a69012bdb7e9f3ae49f0a0aa53f5410fb236f"
    )


def test_short_learning_run(tiny_dir: Path, tmp_path: Path) -> None:
    """SFT warm-up then RLEF steps on the bundled set, end to end, with the before/after report."""
    from swerl.trainers.rlef import RLEFConfig, run

    root = Path(__file__).resolve().parents[1]
    overrides = [
        f"model_name_or_path={tiny_dir}",
        f"output_dir={tmp_path / 'run'}",
        "eval_file=bundled:valid",
        "max_train_samples=16",
        "max_eval_samples=2",
        "eval_samples=2",
        "sft_warmup_steps=4",
        "max_steps=2",
        "prompts_per_step=2",
        "episodes_per_problem=2",
        "max_completion_length=12",
        "save_steps=1",
    ]
    config = RLEFConfig.from_yaml(root / "configs/rlef_tiny_cpu.yaml", overrides)
    result = run(config, progress=False)
    assert len(result["history"]) == 2 and len(result["sft"]) == 4
    report = json.loads((tmp_path / "run/eval.json").read_text())
    assert {"eval_before", "eval_after"} <= set(report)
    assert report["eval_after"]["rates"][0]["k"] == 3
    assert (tmp_path / "run/final/config.json").exists()
    assert (tmp_path / "run/checkpoint-1/critic/value_head.pt").exists()
    rows = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert {"reward", "solve_rate", "kl", "value_loss", "fixed_after_feedback"} <= set(rows[-1])
    # Resume from checkpoint-1: policy, critic and optimizers come back; only step 2 runs again.
    import dataclasses

    checkpoint = str(tmp_path / "run/checkpoint-1")
    resumed = run(dataclasses.replace(config, resume_from_checkpoint=checkpoint), progress=False)
    assert len(resumed["history"]) == 1 and "eval_before" not in resumed
    # The resumed run evaluates only after training; the first start's "before" stays in eval.json.
    again = json.loads((tmp_path / "run/eval.json").read_text())
    assert again["eval_before"] == report["eval_before"] and "eval_after" in again


def test_a_resumed_run_logs_what_the_uninterrupted_run_logs(tiny_dir: Path, tmp_path: Path) -> None:
    """Stop after step 2 and resume: steps 3 and 4 log exactly the uninterrupted run's metrics.

    That needs rho to be the start model (the SFT warm-up's output) on resume, not the checkpoint's policy
    (the KL term would then start again from 0), the critic and both optimizers from the checkpoint, and
    the sampling RNG where the run left it.
    """
    import dataclasses

    from swerl.trainers.rlef import RLEFConfig, run

    root = Path(__file__).resolve().parents[1]
    overrides = [
        f"model_name_or_path={tiny_dir}",
        "eval_file=null",
        "max_train_samples=8",
        "sft_warmup_steps=3",
        "max_steps=4",
        "save_steps=2",
        "prompts_per_step=2",
        "episodes_per_problem=2",
        "max_completion_length=12",
        "learning_rate=1.0e-3",
    ]
    config = RLEFConfig.from_yaml(root / "configs/rlef_tiny_cpu.yaml", overrides)

    def timeless(rows: list[dict[str, float]]) -> list[dict[str, float]]:
        return [{k: v for k, v in row.items() if "time" not in k} for row in rows]

    whole = run(dataclasses.replace(config, output_dir=str(tmp_path / "whole")), progress=False)
    parts = dataclasses.replace(config, output_dir=str(tmp_path / "parts"))
    first = run(parts, progress=False, stop=lambda trainer: trainer.step >= 2)
    second = run(dataclasses.replace(parts, resume_from_checkpoint="latest"), progress=False)
    assert len(first["history"]) == 2 and len(second["history"]) == 2 and "sft" not in second
    assert timeless(first["history"]) == timeless(whole["history"][:2])
    assert timeless(second["history"]) == timeless(whole["history"][2:])
    assert whole["history"][2]["kl"] != 0.0  # the policy has moved from rho: the check has teeth


def test_hidden_constant_problems_need_the_feedback() -> None:
    """The statement never holds k; the first public test's expected output is k itself (n = 0 for n + k
    and k - n, n = 1 for n * k), so only the feedback on a failed answer tells problems apart."""
    from swerl.data.rlef_problems.generate import HIDDEN_KS

    for split in ("hidden_train", "hidden_test"):
        problems = load_problems(bundled_path(split)).problems
        by_family: dict[str, set[str]] = {}
        for problem in problems:
            k = int(problem.name.split("_")[-2])
            assert k in HIDDEN_KS and str(k) not in problem.description
            revealed = problem.public_tests[0].output.split()
            assert revealed == [str(k)]
            by_family.setdefault(problem.name.split("_")[3], set()).add(problem.description)
        assert len(by_family) == 3 and all(len(statements) == 1 for statements in by_family.values())
    train = {p.name for p in load_problems(bundled_path("hidden_train")).problems}
    test = {p.name for p in load_problems(bundled_path("hidden_test")).problems}
    assert len(train) == 96 and len(test) == 216 and not train & test


def test_hidden_constant_run_reports_real_and_random_feedback(tiny_dir: Path, tmp_path: Path) -> None:
    """The CI version of docs/rlef.md's demonstration: the shipped config's pipeline (warm-up with guessed
    constants and their fixes, 1@3 with real and random feedback before and after RLEF), shrunk to
    seconds. Its invariants, not the effect: the four reports over the same problems, one RLEF step
    logged with a finite KL, and `swerl plot` drawing the n@k bars from eval.json."""
    import math

    from swerl.cli import plot
    from swerl.trainers.rlef import RLEFConfig, run

    root = Path(__file__).resolve().parents[1]
    overrides = [
        f"model_name_or_path={tiny_dir}",
        f"output_dir={tmp_path / 'run'}",
        "max_train_samples=8",
        "max_eval_samples=2",
        "eval_samples=1",
        "sft_warmup_steps=2",
        "max_steps=1",
        "prompts_per_step=2",
        "episodes_per_problem=2",
        "max_completion_length=12",
    ]
    config = RLEFConfig.from_yaml(root / "configs/rlef_hidden_cpu.yaml", overrides)
    assert config.sft_fix_constant is False and config.eval_random_feedback is True
    assert config.sft_fix_guessed_constants > 0 and 0 < config.sft_fix_feedback_rate <= 1
    out = run(config, progress=False)
    assert len(out["history"]) == 1 and math.isfinite(out["history"][0]["kl"])
    report = json.loads((tmp_path / "run/eval.json").read_text())
    expected = {"eval_before", "eval_after", "eval_before_random_feedback", "eval_after_random_feedback"}
    assert set(report) == expected
    for entry in report.values():
        rate = entry["rates"][0]
        assert rate["k"] == 3 and rate["problems"] == 2 and entry["episodes"] == 2
        assert 0.0 <= rate["low"] <= rate["rate"] <= rate["high"] <= 1.0

    parser = argparse.ArgumentParser()
    plot.register(parser.add_subparsers(dest="group"))
    args = parser.parse_args(["plot", str(tmp_path / "run"), "--out", str(tmp_path / "plots")])
    assert args.run(args) == 0
    assert (tmp_path / "plots/eval.png").read_bytes()[:4] == b"\x89PNG"
