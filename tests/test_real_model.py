"""A real pretrained model through every model path: SmolLM2-135M-Instruct (its own tokenizer, ChatML
template with a default system prompt, eos = pad = `<|im_end|>`, 49k vocabulary, 8k context).

The toy models' tokenizers are trained here and shaped like swerl expects; this one was not, so these
tests catch what the toy hid: prompts and answers under a template that inserts its own system turn,
feedback turns appended token-exactly, stopping on the real end-of-turn token, padding by the same id
as the end of turn (masked by attention, never by id), and the trainers, LoRA and ZeRO-3 on 135 M
parameters. The model is converted once per run (`real_model` in conftest.py); every test keeps to a
few short sequences and one step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from swerl.edit_format import canonical_answer, parse_answer
from swerl.environments.codecontests import ChatRenderer, ContestTask
from swerl.models.gguf import REPORT_FILE
from swerl.models.loading import load_model_and_tokenizer
from swerl.rollout.base import SamplingParams
from swerl.rollout.hf import HFEngine
from swerl.trainers.config import GRPOConfig, RLEFConfig, SFTConfig
from swerl.trainers.data import build_examples
from swerl.trainers.sft import SFTTrainer, answer_suffix

ROOT = Path(__file__).resolve().parents[1]
END = "<|im_end|>"


@pytest.fixture(scope="module")
def loaded(real_model: Path) -> tuple[Any, Any]:
    """One fp32 copy for the tests that only read it (generation, templates)."""
    torch.manual_seed(0)
    return load_model_and_tokenizer(real_model)


def fix_rows(count: int) -> list[dict[str, Any]]:
    """Rows shaped like the data pipeline's: a one-line bug in a small module."""
    rows = []
    for i in range(count):
        old = f"def total_{i}(items):\n    return sum(items) - 1\n"
        rows.append(
            {
                "instance_id": f"real-{i}",
                "problem_statement": f"total_{i} is off by one: it should return the plain sum.",
                "code_context": [{"path": "pkg/calc.py", "content": old}],
                "oracle_new_content": [{"path": "pkg/calc.py", "content": old.replace(" - 1", "")}],
            }
        )
    return rows


def add_task(k: int) -> ContestTask:
    from swerl.codecontests.problems import parse_problem

    return ContestTask(
        parse_problem(
            {
                "name": f"add{k}",
                "description": f"Read n. Print n + {k}.",
                "public_tests": {"input": ["1\n"], "output": [f"{1 + k}\n"]},
                "private_tests": {"input": ["10\n"], "output": [f"{10 + k}\n"]},
            }
        )
    )


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_the_conversion_was_checked_and_the_tokens_are_the_real_ones(real_model: Path, loaded: Any) -> None:
    report = json.loads((real_model / REPORT_FILE).read_text())
    assert report["checks"]["logits"]["max_abs_diff"] == 0.0  # same weights, same dtype: same logits
    assert report["checks"]["logits"]["same_greedy_tokens"]
    assert all(row["same_ids"] and row["round_trip"] for row in report["checks"]["tokenizer"])
    assert "quantization_config" not in json.loads((real_model / "config.json").read_text())
    model, tokenizer = loaded
    assert tokenizer.eos_token == tokenizer.pad_token == END and tokenizer.pad_token_id == 2
    assert len(tokenizer) == model.config.vocab_size == 49152
    assert tokenizer.model_max_length == model.config.max_position_embeddings == 8192
    # No BOS is added by the tokenizer; the repository markers (ids 3-16) are single added tokens, and
    # decoding with skip_special_tokens (what the rollout engine does) drops them from the text.
    assert encode(tokenizer, "x") == tokenizer("x")["input_ids"]
    ids = encode(tokenizer, "<file_sep>a.py")
    assert ids[0] == tokenizer.convert_tokens_to_ids("<file_sep>") and 3 <= ids[0] <= 16
    assert (
        tokenizer.decode(ids) == "<file_sep>a.py"
        and tokenizer.decode(ids, skip_special_tokens=True) == "a.py"
    )


def test_swe_rl_prompt_and_answer_under_the_real_template(loaded: Any) -> None:
    _, tokenizer = loaded
    (example,), skipped = build_examples(fix_rows(1), tokenizer, max_prompt_length=8192)
    text = tokenizer.decode(example.prompt_ids)
    # The template adds its default system turn in front of the SWE-RL prompt's own messages.
    turns = len(example.messages) + (example.messages[0]["role"] != "system")
    assert skipped == 0 and text.startswith("<|im_start|>system\n")
    assert text.count("<|im_start|>") == turns + 1 and text.endswith("<|im_start|>assistant\n")
    assert text.count(tokenizer.bos_token) == turns + 1  # bos is <|im_start|>: none added in front
    answer = canonical_answer(example.code_context, example.oracle_new_content)
    suffix = answer_suffix(tokenizer, example.messages, answer)
    assert suffix == answer + END and parse_answer(suffix.removesuffix(END)).edits
    # Prompt ids + target ids are the whole rendered conversation's ids: what SFT trains on is what the
    # template gives at inference.
    whole = tokenizer.apply_chat_template(
        [*example.messages, {"role": "assistant", "content": answer}], tokenize=False
    )
    assert example.prompt_ids + encode(tokenizer, suffix) == encode(tokenizer, whole.rstrip("\n"))


@pytest.mark.parametrize("system", [None, "You fix programs."])
def test_rlef_feedback_turns_are_appended_token_exactly(loaded: Any, system: str | None) -> None:
    """Turn by turn (prompt, sampled answer with its stop token, feedback ids) equals the whole dialog
    rendered at once by the real template, with its default system prompt or a given one."""
    _, tokenizer = loaded
    renderer = ChatRenderer(tokenizer, system_prompt=system)
    task = add_task(3)
    answers = ["```python\nprint(int(input()) + 2)\n```", "```python\nprint(int(input()) + 3)\n```"]
    feedback = "Your program printed 3, expected 4.\nFix it."
    ids = renderer.prompt_ids(task)
    first = [*encode(tokenizer, answers[0]), tokenizer.eos_token_id]
    ids += first + renderer.feedback_ids(feedback, first, stopped=True)
    ids += encode(tokenizer, answers[1])
    dialog = [
        *([{"role": "system", "content": system}] if system else []),
        *task.messages(),
        {"role": "assistant", "content": answers[0]},
        {"role": "user", "content": feedback},
        {"role": "assistant", "content": answers[1]},
    ]
    whole = tokenizer.apply_chat_template(dialog, tokenize=False)
    assert ids == encode(tokenizer, whole.removesuffix(f"{END}\n"))
    # An answer cut at the length limit has no end of turn: the feedback ids supply it.
    cut = encode(tokenizer, answers[0])[:5]
    assert renderer.feedback_ids(feedback, cut, stopped=False)[0] == tokenizer.eos_token_id


def test_generation_stops_on_the_end_of_turn_and_padding_is_masked(loaded: Any) -> None:
    """Greedy answers stop on `<|im_end|>` (left out of the text); batched with a longer prompt (padded on
    the left with the same id) each answer equals the one generated alone."""
    model, tokenizer = loaded
    engine = HFEngine(model, tokenizer, batch_size=4)
    questions = ["What is the capital of France?", "Answer yes or no: is 2 bigger than 1? One word."]
    prompts = [
        encode(
            tokenizer,
            tokenizer.apply_chat_template(
                [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
            ),
        )
        for q in questions
    ]
    params = SamplingParams(n=1, max_new_tokens=16, temperature=0.0)
    batched = [group[0] for group in engine.generate(prompts, params)]
    alone = [engine.generate([p], params)[0][0] for p in prompts]
    assert [c.token_ids for c in batched] == [c.token_ids for c in alone]
    for completion in batched:
        assert completion.finish_reason == "stop" and completion.token_ids[-1] == tokenizer.eos_token_id
        assert END not in completion.text
    assert "Paris" in batched[0].text


def sft_config(out: Path, **overrides: Any) -> SFTConfig:
    values: dict[str, Any] = {
        "output_dir": str(out),
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "micro_batch_size": 2,
        "learning_rate": 1e-4,
        "save_steps": 0,
        "max_seq_length": 2048,
        "report_to_tensorboard": False,
    }
    return SFTConfig(**{**values, **overrides})


@pytest.mark.slow
def test_sft_step_then_save_and_reload(real_model: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model_and_tokenizer(real_model)
    examples, _ = build_examples(fix_rows(2), tokenizer, max_prompt_length=2048)
    trainer = SFTTrainer(sft_config(tmp_path), model, tokenizer, examples, progress=False)
    (row,) = trainer.train()
    assert 0 < row["loss"] < 20 and torch.isfinite(torch.tensor(row["grad_norm"]))
    # The trained weights moved away from the start and are what final/ holds, tokenizer and template too.
    reloaded, saved_tokenizer = load_model_and_tokenizer(tmp_path / "final")
    probe = torch.tensor([examples[0].prompt_ids[-32:]])
    with torch.no_grad():
        after = model(input_ids=probe).logits
        again = reloaded(input_ids=probe).logits
        start = load_model_and_tokenizer(real_model)[0](input_ids=probe).logits
    assert torch.equal(after, again) and not torch.equal(after, start)
    assert saved_tokenizer.chat_template == tokenizer.chat_template and saved_tokenizer.pad_token == END


@pytest.mark.slow
def test_grpo_step_with_the_swe_rl_reward(real_model: Path, tmp_path: Path) -> None:
    from swerl.trainers.grpo import GRPOTrainer
    from swerl.trainers.rewards import swe_rl_reward

    model, tokenizer = load_model_and_tokenizer(real_model)
    examples, _ = build_examples(fix_rows(1), tokenizer, max_prompt_length=2048)
    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        num_generations=2,
        prompts_per_step=1,
        max_completion_length=8,
        learning_rate=1e-5,
        micro_batch_size=2,
        report_to_tensorboard=False,
        seed=0,
    )
    trainer = GRPOTrainer(config, model, tokenizer, examples, swe_rl_reward(), progress=False)
    metrics = trainer.train_step()
    # Eight tokens cannot hold a well-formed answer: the reward is the format penalty, and the step runs.
    assert metrics["reward"] == -1.0 and metrics["malformed_rate"] == 1.0
    assert all(torch.isfinite(torch.tensor(float(v))) for v in metrics.values())


@pytest.mark.slow
def test_lora_sft_trains_only_adapters_and_loads_merged(real_model: Path, tmp_path: Path) -> None:
    from swerl.trainers.loop import load_run

    config = sft_config(
        tmp_path,
        model_name_or_path=str(real_model),
        use_peft=True,
        lora_r=4,
        lora_alpha=8.0,
        lora_dropout=0.0,
    )
    _, model, tokenizer = load_run(config)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    examples, _ = build_examples(fix_rows(2), tokenizer, max_prompt_length=2048)
    (row,) = SFTTrainer(config, model, tokenizer, examples, progress=False).train()
    assert torch.isfinite(torch.tensor(row["loss"]))
    final = tmp_path / "final"
    assert (final / "adapter_config.json").exists() and not (final / "model.safetensors").exists()
    merged, _ = load_model_and_tokenizer(final)  # the base named in the adapters, adapters merged in
    probe = torch.tensor([examples[0].prompt_ids[-16:]])
    with torch.no_grad():
        assert torch.allclose(merged(input_ids=probe).logits, model(input_ids=probe).logits, atol=1e-4)


@pytest.mark.slow
def test_rlef_episode_and_ppo_step(real_model: Path, tmp_path: Path) -> None:
    """The real model answers through the real template, the sandbox judges, PPO and the critic step."""
    from swerl.environments.codecontests import sandbox_judge
    from swerl.trainers.rlef import RLEFTrainer

    model, tokenizer = load_model_and_tokenizer(real_model)
    config = RLEFConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        prompts_per_step=1,
        episodes_per_problem=1,
        max_turns=2,
        max_completion_length=8,
        micro_batch_size=4,
        report_to_tensorboard=False,
        seed=0,
    )
    engine = HFEngine(model, tokenizer)
    trainer = RLEFTrainer(
        config, model, tokenizer, [add_task(3)], judge=sandbox_judge(workers=1), engine=engine
    )
    metrics = trainer.train_step()
    assert metrics["turns_per_episode"] >= 1 and metrics["solve_rate"] == 0.0
    assert all(torch.isfinite(torch.tensor(float(v))) for v in metrics.values())


@pytest.mark.slow
def test_zero3_initialisation_on_two_processes(real_model: Path, tmp_path: Path) -> None:
    """The ZeRO-3 worker of test_learner_zero3_init.py on the real model: policy and reference built
    partitioned in bf16 with the checkpoint's weights, and one update with an exact first KL of 0."""
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29643"]
    cmd += [str(ROOT / "tests" / "test_learner_zero3_init.py"), "--model", str(real_model), "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    for name in ("policy", "reference"):
        assert report[name]["all_not_available"] and report[name]["shards_cover_full"], name
        assert report[name]["dtypes"] == ["torch.bfloat16"], name
    assert report["weights_match_checkpoint"] and report["kl"] == 0.0
