"""LoRA through peft on a tiny Llama (CPU, seconds): the config's scale, adapters-only training, the
reference as the policy with adapters off, adapter checkpoints that resume exactly, and adapter folders
that load (merged) for evaluation and serving."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from swerl.errors import UserError
from swerl.hub import model_problem
from swerl.models.adapters import is_adapter_dir
from swerl.models.loading import load_model_and_tokenizer, merge_to_folder
from swerl.models.tiny import build_tiny_model
from swerl.trainers.common import lora_config
from swerl.trainers.config import GRPOConfig, SFTConfig
from swerl.trainers.data import Example, build_examples
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.loop import load_run
from swerl.trainers.rewards import token_reward
from swerl.trainers.sft import SFTTrainer

LORA = {"use_peft": True, "lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def grpo_trainer(tiny_dir: Path, out: Path, **overrides: Any) -> GRPOTrainer:
    """A LoRA GRPO run built as `swerl train grpo` builds it (`load_run`: start model + adapters)."""
    values: dict[str, Any] = {
        "model_name_or_path": str(tiny_dir),
        "output_dir": str(out),
        "max_steps": 3,
        "num_generations": 4,
        "prompts_per_step": 2,
        "max_completion_length": 8,
        "learning_rate": 5e-2,
        "micro_batch_size": 8,
        "report_to_tensorboard": False,
        **LORA,
    }
    values.update(overrides)
    config = GRPOConfig(**values)
    _, model, tokenizer = load_run(config)
    ids = tokenizer("def f(x):\n    return x + 1\n\nclass A:\n    pass\n")["input_ids"]
    examples = [Example(prompt_ids=ids[: 6 + i]) for i in range(4)]
    reward = token_reward(range(len(tokenizer) // 8))
    return GRPOTrainer(config, model, tokenizer, examples, reward, progress=False)


def test_lora_scale_is_alpha_over_r_or_over_sqrt_r(tiny_dir: Path) -> None:
    """alpha 8, r 4: scale 2; rank-stabilized: 8 / sqrt(4) = 4. Adapters sit on the chosen modules only."""
    import peft

    for rslora, scale in ((False, 2.0), (True, 4.0)):
        model, _ = load_model_and_tokenizer(tiny_dir)
        config = GRPOConfig(**LORA, use_rslora=rslora, lora_target_modules=["q_proj", "v_proj"])
        wrapped = peft.get_peft_model(model, lora_config(config))
        q_proj = wrapped.base_model.model.model.layers[0].self_attn.q_proj
        assert q_proj.scaling["default"] == scale
        assert tuple(q_proj.lora_A["default"].weight.shape) == (4, 64)  # r x hidden
        assert not hasattr(wrapped.base_model.model.model.layers[0].self_attn.k_proj, "lora_A")
        trainable = {n for n, p in wrapped.named_parameters() if p.requires_grad}
        assert trainable and all("lora_" in n for n in trainable)


def test_lora_grpo_trains_adapters_kl_to_base_and_resumes_exactly(tiny_dir: Path, tmp_path: Path) -> None:
    straight = grpo_trainer(tiny_dir, tmp_path / "a", save_steps=2, beta=0.05)
    history = straight.train()
    # B starts at zero: at step 1 the policy is the base model, so the KL to "adapters off" is exactly 0.
    assert history[0]["kl"] == 0.0 and history[2]["kl"] > 1e-6
    start = load_file(str(tiny_dir / "model.safetensors"))
    base = straight.learner.module.get_base_model()
    q_proj = base.model.layers[0].self_attn.q_proj
    assert torch.equal(q_proj.base_layer.weight, start["model.layers.0.self_attn.q_proj.weight"])
    assert q_proj.lora_B["default"].weight.abs().sum() > 0  # the adapters trained
    ckpt = tmp_path / "a" / "checkpoint-2"
    assert is_adapter_dir(ckpt) and (ckpt / "adapter_model.safetensors").is_file()
    assert not (ckpt / "model.safetensors").exists()  # adapters only, not a second copy of the model

    torch.manual_seed(12345)  # a new process: every RNG elsewhere
    resumed = grpo_trainer(
        tiny_dir, tmp_path / "a", save_steps=2, beta=0.05, resume_from_checkpoint=str(ckpt)
    ).train()
    assert len(resumed) == 1
    for name in ("reward", "loss", "kl", "entropy", "grad_norm"):
        assert resumed[0][name] == pytest.approx(history[2][name], rel=1e-6, abs=1e-9), name


def test_adapter_folder_loads_merged_for_eval_and_serving(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = grpo_trainer(tiny_dir, tmp_path / "run", max_steps=2, learning_rate=0.2)
    trainer.train()
    final = tmp_path / "run" / "final"
    assert is_adapter_dir(final)
    ids = torch.tensor([[5, 9, 17, 33, 2, 8]])
    trainer.learner.eval()
    with torch.no_grad():
        want = trainer.learner.module(input_ids=ids).logits
        base = load_model_and_tokenizer(tiny_dir)[0](input_ids=ids).logits
    # Every command that takes a model accepts the folder (the argument check knows adapters)...
    assert model_problem(str(final)) is None and config_problem(final) == []
    merged, tokenizer = load_model_and_tokenizer(final)  # ...and loads it as `swerl eval --model` does
    assert type(merged).__name__ == "LlamaForCausalLM" and len(tokenizer) == len(trainer.tokenizer)
    with torch.no_grad():
        got = merged(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.allclose(base, want, atol=1e-3)  # the adapters changed the model
    folder = merge_to_folder(final, tmp_path / "merged")  # for engines that load from disk (vLLM)
    assert (folder / "config.json").is_file() and not is_adapter_dir(folder)
    with torch.no_grad():
        assert torch.allclose(load_model_and_tokenizer(folder)[0](input_ids=ids).logits, want, atol=1e-4)
    # A LoRA run can start from another's adapters: merged into its start model, fresh adapters on top.
    config = GRPOConfig(model_name_or_path=str(final), output_dir=str(tmp_path / "next"), **LORA)
    _, chained, _ = load_run(config)
    with torch.no_grad():
        assert torch.allclose(chained(input_ids=ids).logits, want, atol=1e-4)


def config_problem(model: Path) -> list[tuple[str, str]]:
    config = GRPOConfig(model_name_or_path=str(model), train_file=str(model / "adapter_config.json"))
    return [p for p in config.missing_inputs() if p[0] == "model_name_or_path"]


@pytest.mark.parametrize(
    ("field", "names", "typo"),
    [
        ("lora_target_modules", ["q_prj"], "q_prj"),
        # peft would adapt q_proj alone and pass over the typo: fewer layers trained than asked, no word.
        ("lora_target_modules", ["q_proj", "v_prj"], "v_prj"),
        ("lora_modules_to_save", ["lm_haed"], "lm_haed"),
    ],
)
def test_a_module_name_that_matches_nothing_is_a_user_error_naming_the_layers(
    tiny_dir: Path, field: str, names: list[str], typo: str
) -> None:
    config = GRPOConfig(model_name_or_path=str(tiny_dir), output_dir="unused", **{**LORA, field: names})
    with pytest.raises(UserError, match=rf"^{field}: {typo} name no module of .*q_proj.*v_proj") as err:
        load_run(config)
    assert "q_proj," not in str(err.value).split(" name no module")[0]


def test_dotted_module_names_match_as_peft_matches_them(tiny_dir: Path) -> None:
    from swerl.trainers.common import unmatched_module_names

    model = load_run(GRPOConfig(model_name_or_path=str(tiny_dir), output_dir="unused"))[1]
    names = ["self_attn.q_proj", "model.layers.0.mlp.up_proj", "lm_head", "attn.q_proj", "proj"]
    assert unmatched_module_names(model, names) == ["attn.q_proj", "proj"]


def test_lora_fields_without_use_peft_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from swerl.configs import load_config

    path = tmp_path / "run.yaml"
    path.write_text("model_name_or_path: m\ntrain_file: t.parquet\nlora_r: 8\nlora_alpha: 16\n")
    load_config(GRPOConfig, path, ["use_rslora=true"])
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"swerl: warning: {path}: lora_r: has no effect without use_peft: true",
        f"swerl: warning: {path}: lora_alpha: has no effect without use_peft: true",
        "swerl: warning: --set use_rslora: has no effect without use_peft: true",
    ]
    load_config(GRPOConfig, path, ["use_peft=true"])
    assert capsys.readouterr().err == ""


def test_lora_sft_loss_falls_with_the_base_frozen(tiny_dir: Path, tmp_path: Path) -> None:
    from test_trainer_sft import rows

    config = SFTConfig(
        model_name_or_path=str(tiny_dir),
        output_dir=str(tmp_path),
        max_steps=6,
        num_train_epochs=100,
        per_device_train_batch_size=4,
        micro_batch_size=4,
        learning_rate=1e-2,
        report_to_tensorboard=False,
        **LORA,
        lora_target_modules="all-linear",
    )
    _, model, tokenizer = load_run(config)
    examples, _ = build_examples(rows(4), tokenizer, max_prompt_length=4096)
    trainer = SFTTrainer(config, model, tokenizer, examples, progress=False)
    history = trainer.train()
    # Rank-4 adapters on a random tiny model learn slowly (full weights fall >30% in 6 steps): ~0.1 nat/step.
    assert history[-1]["loss"] < history[0]["loss"] - 0.3, [round(h["loss"], 3) for h in history]
    assert all(math.isfinite(h["loss"]) for h in history)
    start = load_file(str(tiny_dir / "model.safetensors"))
    mlp = trainer.learner.module.get_base_model().model.layers[1].mlp.down_proj
    assert torch.equal(mlp.base_layer.weight, start["model.layers.1.mlp.down_proj.weight"])
    assert is_adapter_dir(tmp_path / "final")
