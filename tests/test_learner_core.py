"""Learner, checkpoints and metrics on the plain-torch path (fast: a 0.1 M-parameter Llama, no DeepSpeed)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from tiny import tiny_llama_config
from transformers import LlamaForCausalLM

from swerl.learner import DistInfo, Learner, LearnerConfig, MetricsLogger, read_metrics
from swerl.learner.checkpoint import load_checkpoint, save_checkpoint, seed_everything
from swerl.learner.layout import latest_checkpoint
from swerl.learner.learner import _lr_lambda, load_deepspeed_config
from swerl.trainers.data import EpochSampler, rank_slice

DIST = DistInfo()


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config())


def lm_loss(learner: Learner, ids: torch.Tensor) -> torch.Tensor:
    return learner.forward(input_ids=ids, labels=ids).loss


def train_steps(learner: Learner, steps: int) -> list[float]:
    """Steps whose data comes from the global RNG, so a resume must restore RNG state to match."""
    losses = []
    for _ in range(steps):
        ids = torch.randint(0, 97, (4, 12))
        loss = lm_loss(learner, ids)
        learner.backward(loss, last=True)
        learner.step()
        losses.append(float(loss.detach()))
    return losses


def test_lr_schedules() -> None:
    linear = _lr_lambda("linear", warmup=2, total=6)
    assert [linear(s) for s in range(7)] == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0])
    cosine = _lr_lambda("cosine", warmup=0, total=4)
    assert [cosine(s) for s in (0, 2, 4)] == pytest.approx([1.0, 0.5, 0.0])
    assert _lr_lambda("constant", 0, 10)(7) == 1.0
    with pytest.raises(ValueError, match="lr_scheduler_type"):
        _lr_lambda("exponential", 0, 1)


def test_accumulated_micro_batches_equal_one_batch() -> None:
    ids = torch.randint(0, 97, (4, 10), generator=torch.Generator().manual_seed(1))
    cfg = LearnerConfig(learning_rate=1e-2, max_grad_norm=0.0)
    whole = Learner(tiny_llama(), cfg, 10, DIST)
    whole.backward(lm_loss(whole, ids), last=True)
    stats_whole = whole.step()
    split = Learner(tiny_llama(), cfg, 10, DIST)
    for k, part in enumerate((ids[:2], ids[2:])):
        split.backward(lm_loss(split, part) / 2, last=k == 1)
    stats_split = split.step()
    assert stats_split["grad_norm"] == pytest.approx(stats_whole["grad_norm"], rel=1e-5)
    for a, b in zip(whole.module.parameters(), split.module.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_clipping_and_schedule_in_step() -> None:
    cfg = LearnerConfig(learning_rate=1e-3, max_grad_norm=1e-3, warmup_steps=2, lr_scheduler_type="linear")
    learner = Learner(tiny_llama(), cfg, total_steps=4, dist=DIST)
    lrs = []
    for _ in range(3):
        learner.backward(lm_loss(learner, torch.randint(0, 97, (2, 8))), last=True)
        stats = learner.step()
        lrs.append(stats["learning_rate"])
        assert stats["grad_norm"] > 1e-3  # reported before clipping
    assert lrs == pytest.approx([5e-4, 1e-3, 1e-3])


def test_resume_reproduces_the_next_steps_exactly(tmp_path: Path) -> None:
    cfg = LearnerConfig(learning_rate=3e-3, weight_decay=0.1, lr_scheduler_type="cosine", warmup_steps=1)
    seed_everything(0)
    learner = Learner(tiny_llama(), cfg, total_steps=6, dist=DIST)
    train_steps(learner, 3)
    ckpt = save_checkpoint(tmp_path, 3, learner, None, {"step": 3}, DIST)
    reference = train_steps(learner, 3)

    random.seed(123)
    torch.manual_seed(123)  # resumed process starts from different RNG state; the checkpoint restores it
    model = LlamaForCausalLM.from_pretrained(ckpt)
    resumed_learner = Learner(model, cfg, total_steps=6, dist=DIST)
    state = load_checkpoint(ckpt, resumed_learner, DIST)
    assert state == {"step": 3}
    assert train_steps(resumed_learner, 3) == reference  # bit for bit
    for a, b in zip(learner.module.parameters(), resumed_learner.module.parameters(), strict=True):
        assert torch.equal(a, b)


def test_checkpoint_rotation_and_latest(tmp_path: Path) -> None:
    learner = Learner(tiny_llama(), LearnerConfig(), total_steps=10, dist=DIST)
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, learner, None, {"step": step}, DIST, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-3"]
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-3"
    assert (tmp_path / "checkpoint-3" / "config.json").exists()
    assert latest_checkpoint(tmp_path / "missing") is None


def test_metrics_logger_jsonl_tensorboard_and_resume(tmp_path: Path) -> None:
    log = MetricsLogger(tmp_path, total_steps=3, progress=False)
    for step in (1, 2, 3):
        log.log(step, {"reward": step / 10, "kl": float("nan")})
    log.close()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[0]["reward"] == 0.1 and rows[0]["kl"] is None
    if (tmp_path / "tensorboard").exists():
        assert any((tmp_path / "tensorboard").iterdir())
    MetricsLogger(tmp_path, initial_step=2, progress=False, tensorboard=False).close()
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    quiet = MetricsLogger(tmp_path / "other", enabled=False)
    quiet.log(1, {"reward": 1.0})
    assert not (tmp_path / "other").exists()


def test_deepspeed_config_fills_auto_and_refuses_optimizer(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "configs" / "deepspeed"
    for path in sorted(root.glob("*.json")):
        ds = load_deepspeed_config(path, LearnerConfig(max_grad_norm=0.5), world_size=4, bf16=False)
        assert ds["train_batch_size"] == 4 and ds["gradient_accumulation_steps"] == 1
        assert ds["gradient_clipping"] == 0.5 and ds["bf16"]["enabled"] is False
        assert "auto" not in json.dumps(ds), path
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"optimizer": {"type": "AdamW"}}))
    with pytest.raises(ValueError, match="client optimizer"):
        load_deepspeed_config(bad, LearnerConfig(), 1, False)


def test_epoch_sampler_is_seeded_resumable_and_splits_over_ranks() -> None:
    a = EpochSampler(5, seed=3)
    first = [a.next_batch(4) for _ in range(3)]
    assert sorted(first[0] + first[1][:1]) == list(range(5))  # one epoch, then a reshuffle
    b = EpochSampler(5, seed=3)
    b.next_batch(4)
    state = b.state_dict()
    c = EpochSampler(5, seed=3)
    c.load_state_dict(state)
    assert [c.next_batch(4) for _ in range(2)] == first[1:]
    assert rank_slice([7, 8, 9, 10], rank=1, world_size=2) == [9, 10]
    with pytest.raises(ValueError):
        rank_slice([1, 2, 3], 0, 2)


def test_a_checkpoints_model_is_found_in_either_layout(tmp_path: Path) -> None:
    """Checkpoints hold the model at their top, as HF Trainer's do; those written before keep it in
    model/, and resuming from one still finds it."""
    from swerl.learner.layout import checkpoint_model_dir

    new, old = tmp_path / "checkpoint-2", tmp_path / "checkpoint-1"
    (new).mkdir()
    (new / "config.json").write_text("{}")
    (old / "model").mkdir(parents=True)
    (old / "model" / "config.json").write_text("{}")
    assert checkpoint_model_dir(new) == new
    assert checkpoint_model_dir(old) == old / "model"
