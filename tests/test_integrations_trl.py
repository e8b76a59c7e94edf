"""swerl's mined rows and rewards inside TRL's own `GRPOTrainer` (the pinned trl of the dev extra).

The rows are mined by `swerl data mine --local` from a real git history built here; TRL loads the Parquet
as it is (its `prompt` column is TRL's conversational format) and calls the rewards with the rows'
columns as keyword arguments. The execution and hybrid rewards judge answers by the tests of another real
repository built here (calc_repo). What TRL logs must be what `swerl reward score` says of the same answers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from calc_repo import FIXED, ISOLATION, OPS, build_calc
from mined_rows import mine_rows

from swerl.cli.main import main
from swerl.edit_format import canonical_answer
from swerl.execution.instances import instance_to_row
from swerl.integrations.trl import (
    answer_rows,
    completion_text,
    execution_reward_function,
    similarity_reward_function,
    swe_rl_reward,
)
from swerl.paths import row_files
from swerl.reward import RewardConfig
from swerl.reward.batch import coerce_contents

trl = pytest.importorskip("trl")


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mine_rows(tmp_path_factory.mktemp("trl"))


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The calc repository's clones folder and its instance as a row with what the model saw."""
    root = tmp_path_factory.mktemp("calc")
    _, instance = build_calc(root)
    row = {**instance_to_row(instance), "code_context": [{"path": "calc/ops.py", "content": OPS}]}
    row["oracle_new_content"] = [{"path": "calc/ops.py", "content": FIXED}]
    return root / "clones", row


def score_with_cli(rows: list[dict], tmp: Path, *options: str) -> list[float | None]:
    """`swerl reward score [options]` on `rows`, rewards in row order."""
    (tmp / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = ["reward", "score", "--input", str(tmp / "answers.jsonl"), "--output", str(tmp / "scored.jsonl")]
    assert main([*argv, "--quiet", "--workers", "1", *options]) == 0
    return [json.loads(line)["reward"] for line in (tmp / "scored.jsonl").read_text().splitlines()]


def execution_options(clones: Path, cache: Path, reward: str) -> list[str]:
    """The command's options for the reward `execution_reward_function(cache, clones=clones, ...)` builds."""
    options = ["--reward", reward, "--clones", str(clones), "--offline", "--cache-dir", str(cache)]
    return options + (["--unsafe-no-isolation"] if ISOLATION == "none" else [])


def answers_to(row: dict) -> list[str]:
    """Four answers to a row: its canonical answer (reward 1), the same with a line more (a partial
    similarity; the tests still pass), half of it and a sentence (both malformed, -1)."""
    gold = canonical_answer(
        coerce_contents(row["code_context"], "code_context"),
        coerce_contents(row["oracle_new_content"], "oracle_new_content"),
    )
    return [
        gold,
        gold.replace("=======\n", "=======\n# and one line more\n", 1),
        gold[: len(gold) // 2],
        "no edit here",
    ]


def test_the_reward_takes_trls_calling_convention_and_equals_swerl_reward_score(
    mined: Path, tmp_path: Path
) -> None:
    from datasets import load_dataset

    data = load_dataset("parquet", data_files=[str(p) for p in row_files(mined)])["train"]
    rows = data.to_list()[:4]
    answers = [a for row in rows for a in answers_to(row)]
    # TRL's conversational completions, each row's columns repeated for its 4 answers, and TRL's own
    # keyword arguments, which the reward must take without using.
    completions = [[{"role": "assistant", "content": a}] for a in answers]
    columns = {k: [row[k] for row in rows for _ in range(4)] for k in ("code_context", "oracle_new_content")}
    extra = {"prompts": [row["prompt"] for row in rows for _ in range(4)], "trainer_state": None}
    got = swe_rl_reward(
        completions=completions, **columns, **extra, log_metric=print, completion_ids=[[1]] * 16
    )
    want = score_with_cli(
        [{"output": a, **{k: v[i] for k, v in columns.items()}} for i, a in enumerate(answers)], tmp_path
    )
    assert got == want
    assert got[0::4] == [1.0] * 4 and -1.0 in got and len(set(got)) > 2  # gold, malformed and partial answers
    # Standard (text) completions are read as they are; a row missing its oracle is None, not a fake -1.
    assert swe_rl_reward(completions=answers[:1], **{k: v[:1] for k, v in columns.items()}) == [1.0]
    assert swe_rl_reward(completions=["x"], code_context=[{}], oracle_new_content=[None]) == [None]
    strict = similarity_reward_function(RewardConfig(strict=True), name="strict_swe_rl")
    assert strict.__name__ == "strict_swe_rl"
    with pytest.raises(TypeError, match="string or a list of messages"):
        completion_text(3)


def test_the_execution_reward_equals_swerl_reward_score_execution_on_the_same_answers(
    mined: Path, calc: tuple[Path, dict], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    from swerl.errors import UserError

    pytest.importorskip("swebench")  # the harness's grading
    clones, executable = calc
    similarity_only = pq.read_table(row_files(mined)[0]).to_pylist()[0]  # mined: no FAIL_TO_PASS
    rows = [executable, similarity_only]
    answers = [a for row in rows for a in answers_to(row)]
    # TRL's columns: the union of the rows' columns, each row repeated for its 4 answers. A dataset's
    # model_patch (here the gold patch) must not stand in for the completion being scored.
    names = sorted({k for row in rows for k in row} | {"model_patch"})
    columns = {k: [row.get(k) for row in rows for _ in range(4)] for k in names}
    columns["model_patch"] = [executable["patch"]] * 8
    completions = [[{"role": "assistant", "content": a}] for a in answers]
    cli_rows = [{**rows[i // 4], "output": a} for i, a in enumerate(answers)]
    cache = tmp_path / "cache"
    reward = execution_reward_function(cache, clones=clones, offline=True, isolation=ISOLATION)
    logged: dict[str, float] = {}
    got = reward(completions=completions, **columns, trainer_state=None, log_metric=logged.__setitem__)
    assert got == score_with_cli(cli_rows, tmp_path, *execution_options(clones, cache, "execution"))
    assert got == [1.0, 1.0, -1.0, -1.0] + [None] * 4  # the tests pass a line more; the mined row has none
    assert reward.__name__ == "execution_reward"
    assert logged == {"execution_reward/pass_rate": 0.5, "execution_reward/infra_errors": 0.0}
    with pytest.raises(UserError, match="unknown execution reward 'similarity'"):
        execution_reward_function(cache, reward="similarity")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one value per completion"):
        swe_rl_reward(completions=["x", "y"], code_context=[{}])


def test_trls_grpo_trainer_logs_the_rewards_swerl_reward_score_gives(
    mined: Path, calc: tuple[Path, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two steps, one prompt each: a mined row (similarity only) and the calc instance (its tests).

    An untrained model writes no edit blocks (every reward -1), which would make the check hollow, so
    the completions come through TRL's own rollout hook (`rollout_func`): each prompt's four answers of
    `answers_to`, as token ids that TRL decodes and hands to the rewards as it does with samples."""
    from datasets import Dataset, load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from swerl.models.loading import load_model_and_tokenizer
    from swerl.models.tiny import build_tiny_model

    pytest.importorskip("swebench")  # the harness's grading, for the hybrid reward
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16
    clones, executable = calc
    first = load_dataset("parquet", data_files=[str(p) for p in row_files(mined)])["train"][0]
    assert isinstance(first["prompt"], list) and first["prompt"][-1]["role"] == "user"  # conversational
    prompt = [{"role": "user", "content": executable["problem_statement"]}]
    rows = [first, {**executable, "prompt": prompt}]
    names = sorted({k for row in rows for k in row})
    data = Dataset.from_list([{k: row.get(k) for k in names} for row in rows])
    model, tokenizer = load_model_and_tokenizer(
        build_tiny_model(tmp_path / "tiny", hidden_size=32, intermediate_size=64, num_layers=1)
    )
    scripted = {json.dumps(row["prompt"]): answers_to(row) for row in rows}

    def rollout(prompts: list, trainer: object) -> dict[str, list]:
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        for i, messages in enumerate(prompts):  # a prompt repeated for its generations
            ids = tokenizer(scripted[json.dumps(messages)][i % 4], add_special_tokens=False)["input_ids"]
            template = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
            out["prompt_ids"].append(template)
            out["completion_ids"].append(ids)
            out["logprobs"].append([0.0] * len(ids))
        return out

    seen: list[list[dict]] = []

    def record(completions: list, **kwargs: object) -> list[float]:
        """Weight 0: keeps the rows TRL handed the rewards, step by step, without changing the advantage."""
        seen.append(answer_rows(completions, kwargs))
        return [0.0] * len(completions)

    cache = tmp_path / "cache"
    hybrid = execution_reward_function(
        cache, reward="hybrid", clones=clones, offline=True, isolation=ISOLATION
    )
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        beta=0.0,
        use_cpu=True,
        use_vllm=False,
        bf16=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        dataloader_num_workers=0,
        disable_tqdm=True,
        reward_weights=[1.0, 1.0, 0.0],
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[swe_rl_reward, hybrid, record],
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/swe_rl_reward/mean" in h]
    assert len(logs) == len(seen) == 2 and all(len(step) == 4 for step in seen)
    assert {step[0]["instance_id"] for step in seen} == {first["instance_id"], executable["instance_id"]}
    for step, log in zip(seen, logs, strict=True):
        assert [r["output"] for r in step] == answers_to(step[0])  # the answers survived TRL's decoding
        similarity = score_with_cli(step, tmp_path)
        by_tests = score_with_cli(step, tmp_path, *execution_options(clones, cache, "hybrid"))
        for name, scores in (("swe_rl_reward", similarity), ("hybrid_reward", by_tests)):
            mean = sum(scores) / len(scores)  # type: ignore[arg-type]
            assert math.isclose(log[f"rewards/{name}/mean"], mean, abs_tol=1e-6)  # TRL's float32
        assert similarity[0] == 1.0 and -1.0 < similarity[1] < 1.0 and similarity[2:] == [-1.0, -1.0]
        if step[0]["instance_id"] == executable["instance_id"]:  # the tests pass the answer with a line more
            assert by_tests == [1.0, 1.0, -1.0, -1.0] and log["hybrid_reward/pass_rate"] == 0.5
        else:
            assert by_tests == similarity
