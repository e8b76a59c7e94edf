"""swerl's mined rows and SWE-RL reward inside TRL's own `GRPOTrainer` (the pinned trl of the dev extra).

The rows are mined by `swerl data mine --local` from a real git history built here; TRL loads the Parquet
as it is (its `prompt` column is TRL's conversational format) and calls `swe_rl_reward` with the rows'
columns as keyword arguments. What TRL logs must be what `swerl reward score` says of the same answers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from mined_rows import mine_rows

from swerl.cli.main import main
from swerl.edit_format import canonical_answer
from swerl.integrations.trl import completion_text, similarity_reward_function, swe_rl_reward
from swerl.paths import row_files
from swerl.reward import RewardConfig
from swerl.reward.batch import coerce_contents

trl = pytest.importorskip("trl")


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mine_rows(tmp_path_factory.mktemp("trl"))


def score_with_cli(rows: list[dict], tmp: Path) -> list[float | None]:
    """`swerl reward score` on `rows` (output, code_context, oracle_new_content), rewards in row order."""
    (tmp / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = ["reward", "score", "--input", str(tmp / "answers.jsonl"), "--output", str(tmp / "scored.jsonl")]
    assert main([*argv, "--quiet", "--workers", "1"]) == 0
    return [json.loads(line)["reward"] for line in (tmp / "scored.jsonl").read_text().splitlines()]


def test_the_reward_takes_trls_calling_convention_and_equals_swerl_reward_score(
    mined: Path, tmp_path: Path
) -> None:
    from datasets import load_dataset

    data = load_dataset("parquet", data_files=[str(p) for p in row_files(mined)])["train"]
    rows = data.to_list()[:4]
    answers = []
    for row in rows:
        old = coerce_contents(row["code_context"], "code_context")
        new = coerce_contents(row["oracle_new_content"], "oracle_new_content")
        gold = canonical_answer(old, new)
        answers += [
            gold,
            gold.replace("=======\n", "=======\n# and one line more\n", 1),
            gold[: len(gold) // 2],
            "no edit here",
        ]
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


def test_trls_grpo_trainer_logs_the_rewards_swerl_reward_score_gives(mined: Path, tmp_path: Path) -> None:
    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from swerl.models.loading import load_model_and_tokenizer
    from swerl.models.tiny import build_tiny_model

    data = load_dataset("parquet", data_files=[str(p) for p in row_files(mined)])["train"]
    assert isinstance(data[0]["prompt"], list) and data[0]["prompt"][-1]["role"] == "user"  # conversational
    model, tokenizer = load_model_and_tokenizer(
        build_tiny_model(tmp_path / "tiny", hidden_size=32, intermediate_size=64, num_layers=1)
    )
    seen: list[list[dict]] = []

    def record(completions, code_context, oracle_new_content, **kwargs):
        """Weight 0: keeps what TRL handed the reward, step by step, without changing the advantage."""
        seen.append(
            [
                {"output": completion_text(c), "code_context": x, "oracle_new_content": o}
                for c, x, o in zip(completions, code_context, oracle_new_content, strict=True)
            ]
        )
        return [0.0] * len(completions)

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
        reward_weights=[1.0, 0.0],
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[swe_rl_reward, record],
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
    )
    trainer.train()
    logged = [
        h["rewards/swe_rl_reward/mean"]
        for h in trainer.state.log_history
        if "rewards/swe_rl_reward/mean" in h
    ]
    assert len(logged) == len(seen) == 2 and all(len(step) == 4 for step in seen)
    for step, mean in zip(seen, logged, strict=True):
        scores = score_with_cli(step, tmp_path)
        assert all(s is not None for s in scores)
        assert math.isclose(mean, sum(scores) / len(scores), rel_tol=1e-6, abs_tol=1e-6)  # TRL's float32
