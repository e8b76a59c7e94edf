"""SFT on canonical answers: targets, loss masking, and that the loss falls (tiny Llama, CPU)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from swerl.edit_format import canonical_answer, parse_answer
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import EOS_TOKEN, build_tiny_model
from swerl.trainers.config import SFTConfig
from swerl.trainers.data import build_examples, read_rows
from swerl.trainers.sft import SFTTrainer, answer_suffix, build_sft_examples


def rows(count: int) -> list[dict]:
    """Rows shaped like the data pipeline's (contents as lists of {path, content} records)."""
    out = []
    for i in range(count):
        old = f"def add_{i}(a, b):\n    return a - b\n\n\nLIMIT = {i}\n"
        new = old.replace("a - b", "a + b")
        out.append(
            {
                "instance_id": f"demo-{i}",
                "problem_statement": f"add_{i} subtracts instead of adding",
                "code_context": [{"path": "pkg/m.py", "content": old}],
                "oracle_new_content": [{"path": "pkg/m.py", "content": new}],
            }
        )
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=1)


def test_targets_are_the_canonical_answer_and_end_of_turn(tiny: Path) -> None:
    _, tokenizer = load_model_and_tokenizer(tiny)
    examples, skipped = build_examples(rows(3), tokenizer, max_prompt_length=4096)
    assert skipped == 0 and examples[0].code_context == {"pkg/m.py": rows(1)[0]["code_context"][0]["content"]}
    sft, skipped = build_sft_examples(examples, tokenizer, max_seq_length=4096)
    assert skipped == 0 and len(sft) == 3
    answer = canonical_answer(examples[0].code_context, examples[0].oracle_new_content)
    suffix = answer_suffix(tokenizer, examples[0].messages, answer)
    assert suffix == answer + EOS_TOKEN
    text = tokenizer.decode(sft[0].target_ids)
    assert text == suffix and parse_answer(text.removesuffix(EOS_TOKEN)).edits
    _, too_long = build_sft_examples(examples, tokenizer, max_seq_length=10)
    assert too_long == 3


def test_sft_loss_falls_and_resumes(tiny: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model_and_tokenizer(tiny)
    examples, _ = build_examples(rows(4), tokenizer, max_prompt_length=4096)
    config = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=6,
        num_train_epochs=100,
        per_device_train_batch_size=2,
        micro_batch_size=1,
        learning_rate=1e-2,
        save_steps=3,
        report_to_tensorboard=False,
    )
    history = SFTTrainer(config, model, tokenizer, examples, progress=False).train()
    assert history[-1]["loss"] < 0.7 * history[0]["loss"], [round(h["loss"], 3) for h in history]
    assert (tmp_path / "final" / "tokenizer.json").exists()
    ckpt = tmp_path / "checkpoint-3"
    assert (tmp_path / "checkpoint-6" / "trainer_state.json").exists()  # the last step is checkpointed too
    model, tokenizer = load_model_and_tokenizer(ckpt)
    config.resume_from_checkpoint = str(ckpt)
    config.output_dir = str(tmp_path)
    resumed = SFTTrainer(config, model, tokenizer, examples, progress=False).train()
    assert [h["loss"] for h in resumed] == pytest.approx([h["loss"] for h in history[3:]], rel=1e-6)


def test_cosine_schedule_spans_the_epochs_not_max_steps(tiny: Path, tmp_path: Path) -> None:
    """4 examples, batch 2, 2 epochs: the run is 4 steps although max_steps is 100, and the cosine decays
    over those 4: 0.5 (1 + cos(pi s / 4)) = 1, 0.854, 0.5, 0.146 of the peak."""
    model, tokenizer = load_model_and_tokenizer(tiny)
    examples, _ = build_examples(rows(4), tokenizer, max_prompt_length=4096)
    config = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=100,
        num_train_epochs=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        lr_scheduler_type="cosine",
        report_to_tensorboard=False,
    )
    history = SFTTrainer(config, model, tokenizer, examples, progress=False).train()
    expected = [1e-3 * 0.5 * (1 + math.cos(math.pi * s / 4)) for s in range(4)]
    assert [h["learning_rate"] for h in history] == pytest.approx(expected)


def test_read_rows_jsonl_and_parquet(tmp_path: Path) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows(2)
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    pq.write_table(pa.Table.from_pylist(data), tmp_path / "r.parquet")
    assert read_rows(tmp_path / "r.jsonl") == data
    assert read_rows(tmp_path / "r.parquet", limit=1) == data[:1]
    with pytest.raises(ValueError):
        read_rows(tmp_path / "r.csv")


def test_no_row_that_fits_names_the_limit_to_raise(tiny: Path, tmp_path: Path) -> None:
    import json

    from swerl.errors import UserError
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.data import train_and_eval_examples

    _, tokenizer = load_model_and_tokenizer(tiny)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows(3)))
    grpo = GRPOConfig(model_name_or_path=str(tiny), train_file=str(path), max_prompt_length=5)
    with pytest.raises(UserError, match=r"every row \(3\) is longer than max_prompt_length \(5 tokens\)"):
        train_and_eval_examples(grpo, tokenizer, grpo.max_prompt_length)
    sft = SFTConfig(model_name_or_path=str(tiny), train_file=str(path), max_seq_length=5)
    with pytest.raises(UserError, match=r"raise max_seq_length"):
        train_and_eval_examples(sft, tokenizer, sft.max_seq_length, "max_seq_length")


def test_sequences_past_the_models_context_are_warned_of(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.loop import warn_past_context

    model, _ = load_model_and_tokenizer(tiny)
    limit = model.config.max_position_embeddings
    capsys.readouterr()  # transformers' loading bar
    warn_past_context(model, SFTConfig(max_seq_length=limit))
    warn_past_context(model, GRPOConfig(max_prompt_length=limit - 100, max_completion_length=100))
    assert capsys.readouterr().err == ""
    warn_past_context(model, SFTConfig(max_seq_length=limit + 1))
    assert (
        f"max_seq_length allows {limit + 1} tokens, past the model's context of {limit}"
        in capsys.readouterr().err
    )
    warn_past_context(model, GRPOConfig(max_prompt_length=limit, max_completion_length=100))
    assert "max_prompt_length + max_completion_length allows" in capsys.readouterr().err
