"""GRPO trainer end to end on a tiny Llama (CPU, seconds): learning, exact resume, options, metrics."""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from swerl.errors import UserError
from swerl.learner import read_metrics
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.reward import RewardResult
from swerl.rollout.hf import HFEngine
from swerl.trainers.common import completion_logprobs, pack_sequences
from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.rewards import reward_from_name, token_reward


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def prompts(tokenizer: Any, count: int) -> list[Example]:
    ids = tokenizer("def f(x):\n    return x + 1\n\nclass A:\n    pass\n")["input_ids"]
    return [Example(prompt_ids=ids[: 6 + i]) for i in range(count)]


def make_trainer(
    tiny_dir: Path, out: Path, reward: Any = None, reference: Any = None, **overrides: Any
) -> GRPOTrainer:
    model, tokenizer = load_model_and_tokenizer(tiny_dir)
    values = {
        "output_dir": str(out),
        "max_steps": 3,
        "num_generations": 4,
        "prompts_per_step": 2,
        "max_completion_length": 8,
        "learning_rate": 5e-2,
        "micro_batch_size": 8,
        "report_to_tensorboard": False,
        "seed": 0,
    }
    values.update(overrides)
    config = GRPOConfig(**values)
    reward = reward or token_reward(range(len(tokenizer) // 8))
    return GRPOTrainer(
        config, model, tokenizer, prompts(tokenizer, 4), reward, reference=reference, progress=False
    )


def test_grpo_raises_a_simple_reward(tiny_dir: Path, tmp_path: Path) -> None:
    """Reward = share of tokens among the first eighth of the vocabulary: ~0.16 at random init, ~1 after."""
    trainer = make_trainer(
        tiny_dir,
        tmp_path,
        max_steps=8,
        num_generations=8,
        prompts_per_step=2,
        max_completion_length=12,
        micro_batch_size=16,
        learning_rate=0.1,
    )
    history = trainer.train()
    first, last = history[0]["reward"], (history[-1]["reward"] + history[-2]["reward"]) / 2
    assert first < 0.3
    assert last > first + 0.4, [round(h["reward"], 3) for h in history]
    assert history[-1]["entropy"] < history[0]["entropy"]
    # The trainer's log-probs of the sampled tokens are the sampler's, to float rounding.
    assert all(h["sampling/sampling_logp_difference/max"] < 1e-3 for h in history)
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == list(range(1, 9))
    for name in (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "completions/mean_length",
        "completions/clipped_ratio",
        "entropy",
        "clip_ratio/region_mean",
        "step_time",
        "tokens_per_second",
        "malformed_rate",
        "grad_norm",
    ):
        assert name in rows[0], name
    assert (tmp_path / "final" / "config.json").exists()
    from swerl.cli.plot import plot_run

    plots = plot_run(tmp_path, metrics=["reward", "entropy"])
    assert [p.name for p in plots] == ["overview.png", "reward.png", "entropy.png"]
    with pytest.raises(UserError, match=r"rewrd was not logged; rewrd: did you mean reward\? \(it has: "):
        plot_run(tmp_path, metrics=["reward", "rewrd", "entropy"])  # one typo among several


def test_resume_gives_the_same_next_steps(tiny_dir: Path, tmp_path: Path) -> None:
    straight = make_trainer(tiny_dir, tmp_path / "a", save_steps=2, max_steps=4).train()
    ckpt = tmp_path / "a" / "checkpoint-2"
    assert (ckpt / "trainer_state.json").exists()
    # A new process would load the model from the checkpoint; so do we, after disturbing every RNG.
    torch.manual_seed(12345)
    resumed = make_trainer(ckpt, tmp_path / "b", max_steps=4, resume_from_checkpoint=str(ckpt))
    tail = resumed.train()
    assert len(tail) == 2
    for want, got in zip(straight[2:], tail, strict=True):
        for name in ("reward", "loss", "entropy", "grad_norm", "completions/mean_length"):
            assert got[name] == pytest.approx(want[name], rel=1e-6, abs=1e-9), name


def test_resume_keeps_the_start_model_as_the_kl_anchor(tiny_dir: Path, tmp_path: Path) -> None:
    """With beta > 0 the resumed steps log the uninterrupted KL: rho is the start model, loaded afresh
    (`load_reference`), not a copy of the checkpoint's policy (which logged kl 0 at the first resumed
    step)."""
    from swerl.trainers.common import load_reference

    straight = make_trainer(tiny_dir, tmp_path / "a", save_steps=2, max_steps=3, beta=0.05).train()
    ckpt = tmp_path / "a" / "checkpoint-2"
    resumed = make_trainer(
        ckpt,
        tmp_path / "b",
        reference=load_reference(str(tiny_dir), GRPOConfig()),
        max_steps=3,
        beta=0.05,
        resume_from_checkpoint=str(ckpt),
    ).train()
    assert straight[2]["kl"] > 1e-4
    assert resumed[0]["kl"] == pytest.approx(straight[2]["kl"], rel=1e-6)
    assert resumed[0]["loss"] == pytest.approx(straight[2]["loss"], rel=1e-6, abs=1e-9)


def test_reference_runs_in_the_policys_precision(tiny_dir: Path, tmp_path: Path) -> None:
    """Under bf16 the reference runs under the policy's autocast, so at the first step (identical weights)
    the KL is exactly 0; a float32 reference beside a bf16-autocast policy logged ~1e-7 here."""
    trainer = make_trainer(tiny_dir, tmp_path, max_steps=2, beta=0.1, bf16=True)
    history = trainer.train()
    assert history[0]["kl"] == 0.0
    assert history[1]["kl"] > 0.0  # the policy moved; the reference did not


def test_stop_ends_the_run_early_like_max_steps(tiny_dir: Path, tmp_path: Path) -> None:
    # logging_steps 2 would skip step 3, the last one: it must be logged all the same.
    trainer = make_trainer(tiny_dir, tmp_path, max_steps=10, logging_steps=2)
    asked: list[int] = []
    seen: list[tuple[int, dict[str, float]]] = []

    def stop(loop: Any) -> bool:
        asked.append(loop.step)
        return loop.step >= 3

    history = trainer.train(stop=stop, on_step=lambda loop, row: seen.append((loop.step, row)))
    assert trainer.step == 3 and len(history) == 3
    assert asked == [0, 1, 2, 3]  # before every step, and once more to end the run
    assert [step for step, _ in seen] == [1, 2, 3]
    assert [row for _, row in seen] == history
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [2, 3]
    assert rows[-1]["reward"] == pytest.approx(history[-1]["reward"])
    assert (tmp_path / "final" / "config.json").exists()


def test_mu_beta_and_dropping(tiny_dir: Path, tmp_path: Path) -> None:
    """mu = 2 uses old log-probs (the ratio moves on pass 2), beta > 0 logs a KL, zero-std groups drop."""
    constant = reward_from_name("token:0-0")  # almost never emitted: every group has zero std
    trainer = make_trainer(
        tiny_dir,
        tmp_path,
        reward=None,
        num_iterations=2,
        beta=0.1,
        drop_zero_std_groups=True,
        max_steps=2,
        epsilon=0.2,
        epsilon_high=0.28,
    )
    history = trainer.train()
    assert all("kl" in h and h["kl"] >= 0 for h in history)
    assert trainer.learner.scheduler.last_epoch == 4  # 2 rollout batches x mu = 2 optimizer steps
    dropped = make_trainer(
        tiny_dir, tmp_path / "drop", reward=constant, drop_zero_std_groups=True, max_steps=1
    )
    before = [p.detach().clone() for p in dropped.learner.module.parameters()]
    row = dropped.train()[0]
    assert row["frac_reward_zero_std"] == 1.0 and row["loss"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, dropped.learner.module.parameters(), strict=True))


def constant_for_short_prompts(limit: int, inner: Any) -> Any:
    """`inner`'s reward, but 0.5 for every answer to a prompt of at most `limit` tokens (zero std)."""

    def score(example: Example, completions: Any) -> list[RewardResult]:
        if len(example.prompt_ids) <= limit:
            return [RewardResult(reward=0.5) for _ in completions]
        return inner(example, completions)

    return score


def test_dynamic_sampling_refills_zero_std_groups(tiny_dir: Path, tmp_path: Path) -> None:
    """Prompts 0-1 of 4 always give equal rewards: rounds continue until both groups of the step carry
    a signal; with nothing informative the step stops at max_sampling_rounds and trains nothing."""
    _, tokenizer = load_model_and_tokenizer(tiny_dir)
    limit = len(prompts(tokenizer, 4)[1].prompt_ids)
    reward = constant_for_short_prompts(limit, token_reward(range(len(tokenizer) // 8)))
    trainer = make_trainer(
        tiny_dir, tmp_path, reward=reward, dynamic_sampling=True, max_sampling_rounds=10, max_steps=4
    )
    history = trainer.train()
    assert all(h["dynamic_sampling/filled"] == 1.0 for h in history)
    assert max(h["dynamic_sampling/rounds"] for h in history) > 1
    # the logged reward describes the first round, constant groups included
    assert any(h["frac_reward_zero_std"] > 0 for h in history)
    hopeless = make_trainer(
        tiny_dir, tmp_path / "none", reward=reward_from_name("token:0-0"), dynamic_sampling=True, max_steps=1
    )
    before = [p.detach().clone() for p in hopeless.learner.module.parameters()]
    row = hopeless.train()[0]
    assert row["dynamic_sampling/rounds"] == 3.0 and row["dynamic_sampling/filled"] == 0.0
    assert row["loss"] == 0.0 and row["frac_reward_zero_std"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, hopeless.learner.module.parameters(), strict=True))


class WaitsForTheFirstReward(HFEngine):
    """The HF engine, but before handing over its second group it waits (up to 5 s) for the first
    group's reward: `overlapped` says whether that reward ran while generation was still going on."""

    def __init__(self, engine: HFEngine, scored: threading.Event) -> None:
        super().__init__(engine.model, engine.tokenizer, engine.batch_size)
        self.scored = scored
        self.overlapped: bool | None = None

    def generate_groups(self, prompts_: Any, params: Any) -> Any:
        for n, item in enumerate(super().generate_groups(prompts_, params)):
            if n == 1 and self.overlapped is None:
                self.overlapped = self.scored.wait(5)
            yield item


def overlap_run(tiny_dir: Path, out: Path, overlap: bool) -> tuple[list[Any], list[Any], list[Any], Any]:
    """Two steps of four prompts, one prompt of G = 4 per decoding batch (four batches a step): the
    history, each scored group (prompt, completions, rewards, whether on the main thread), the weights
    after, and whether the first reward ran before the second group was handed over (overlap only)."""
    _, tokenizer = load_model_and_tokenizer(tiny_dir)
    inner = token_reward(range(len(tokenizer) // 8))
    scored_groups: list[tuple[Any, ...]] = []
    scored = threading.Event()

    def reward(example: Example, completions: Any) -> list[RewardResult]:
        results = inner(example, completions)
        main = threading.current_thread() is threading.main_thread()
        scored_groups.append(
            (
                tuple(example.prompt_ids),
                [tuple(c.token_ids) for c in completions],
                [r.reward for r in results],
                main,
            )
        )
        scored.set()
        return results

    trainer = make_trainer(
        tiny_dir,
        out,
        reward=reward,
        max_steps=2,
        prompts_per_step=4,
        generation_batch_size=4,
        overlap_rewards=overlap,
    )
    engine = WaitsForTheFirstReward(trainer.engine, scored) if overlap else None
    trainer.engine = engine or trainer.engine
    history = trainer.train()
    weights = [p.detach().clone() for p in trainer.learner.module.parameters()]
    return history, scored_groups, weights, engine and engine.overlapped


def test_overlapped_rewards_give_the_sequential_run(tiny_dir: Path, tmp_path: Path) -> None:
    """Same seed, rewards overlapped with generation or not: the same groups scored to the same rewards
    and the same weights after two steps; overlapped, the first group is scored on the reward thread
    while the next ones are still being sampled (groups are scored in the order they are decoded)."""
    on, on_groups, on_weights, overlapped = overlap_run(tiny_dir, tmp_path / "on", overlap=True)
    off, off_groups, off_weights, _ = overlap_run(tiny_dir, tmp_path / "off", overlap=False)
    assert overlapped is True and not any(main for *_, main in on_groups)
    assert all(main for *_, main in off_groups) and len(on_groups) == 8
    assert sorted(g[:3] for g in on_groups) == sorted(g[:3] for g in off_groups)
    assert all(torch.equal(a, b) for a, b in zip(on_weights, off_weights, strict=True))
    for a, b in zip(on, off, strict=True):
        for name in ("reward", "reward_std", "loss", "entropy", "grad_norm", "completions/mean_length"):
            assert a[name] == b[name], name
        assert a["time/reward"] > 0 and a["time/reward_wait"] >= 0
        assert b["time/reward_wait"] == b["time/reward"] > 0  # sequential: all of it is waited for


def test_a_failing_overlapped_reward_fails_the_step(tiny_dir: Path, tmp_path: Path) -> None:
    """The reward thread's exception is raised by the step once generation has ended; the groups queued
    after the failure are not scored."""
    calls = []

    def reward(example: Example, completions: Any) -> list[RewardResult]:
        calls.append(example.prompt_ids)
        if len(calls) == 2:
            raise RuntimeError("the test harness broke")
        return [RewardResult(reward=0.0) for _ in completions]

    trainer = make_trainer(tiny_dir, tmp_path, reward=reward, prompts_per_step=4, generation_batch_size=4)
    with pytest.raises(RuntimeError, match="the test harness broke"):
        trainer.train_step()
    assert len(calls) == 2


def test_masked_truncated_answers_leave_the_loss(tiny_dir: Path, tmp_path: Path) -> None:
    """A random tiny model almost never stops within 8 tokens: with masking, a step where every answer
    was cut trains nothing; the answers that did stop are trained."""
    trainer = make_trainer(tiny_dir, tmp_path, mask_truncated_completions=True, max_steps=2)
    before = [p.detach().clone() for p in trainer.learner.module.parameters()]
    history = trainer.train()
    unchanged = all(
        torch.equal(a, b) for a, b in zip(before, trainer.learner.module.parameters(), strict=True)
    )
    if all(h["completions/clipped_ratio"] == 1.0 for h in history):
        assert unchanged and all(h["loss"] == 0.0 for h in history)
    else:
        assert not unchanged


class ShiftedSampler:
    """The HF engine, but reporting log-probs ln 3 lower than it computed: a sampler that rates every
    token 3x less likely than the learner, as a mismatched vLLM could."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def generate(self, prompts_: Any, params: Any) -> Any:
        groups = self.engine.generate(prompts_, params)
        return [
            [dataclasses.replace(c, logprobs=[lp - math.log(3) for lp in c.logprobs]) for c in group]
            for group in groups
        ]

    def sync_weights(self, model: Any) -> None:
        self.engine.sync_weights(model)


def test_truncated_importance_sampling_weights_the_loss(tiny_dir: Path, tmp_path: Path) -> None:
    """Weights exp(ln 3) are capped at 2 on every token, so the step's loss is exactly twice the plain one
    (same seed, same samples); the capped share is logged."""
    rows = []
    for correct in (False, True):  # built and run one after the other: each seeds the global RNG
        trainer = make_trainer(
            tiny_dir, tmp_path / str(correct), max_steps=1, importance_sampling_correction=correct
        )
        trainer.engine = ShiftedSampler(trainer.engine)
        rows.append(trainer.train()[0])
    row_plain, row = rows
    assert "sampling/is_weight/mean" not in row_plain
    assert row["sampling/is_weight/mean"] == pytest.approx(2.0)
    assert row["sampling/is_weight/capped_frac"] == 1.0
    assert row["loss"] == pytest.approx(2 * row_plain["loss"], rel=1e-5, abs=1e-7)
    assert GRPOConfig(rollout_engine="vllm").corrects_sampler()
    assert not GRPOConfig().corrects_sampler()


def test_dr_grpo_gspo_and_overlong_penalty_train(tiny_dir: Path, tmp_path: Path) -> None:
    """The options run together; with the penalty buffer the whole budget, each answer loses len/8, so
    the logged reward (constant 0.5 otherwise) is 0.5 - mean length / 8."""
    constant = constant_for_short_prompts(10**6, None)
    trainer = make_trainer(
        tiny_dir,
        tmp_path,
        reward=constant,
        loss_aggregation="seq-mean-token-sum-norm",
        importance_sampling_level="sequence",
        num_iterations=2,
        overlong_buffer_length=8,
        max_steps=2,
    )
    for row in trainer.train():
        assert row["reward"] == pytest.approx(0.5 - row["completions/mean_length"] / 8)
        assert math.isfinite(row["loss"])


class FakeWandb:
    """Records what `wandb.init` / `run.log` / `run.finish` receive (wandb's API as of 0.31: `init` returns
    a run with `log(dict, step=)` and `finish()`); CI has no wandb and no network."""

    def __init__(self) -> None:
        self.inits: list[dict[str, Any]] = []
        self.logged: list[tuple[int, dict[str, float]]] = []
        self.finished = 0

    def init(self, **kwargs: Any) -> FakeWandb:
        self.inits.append(kwargs)
        return self

    def log(self, data: dict[str, float], step: int) -> None:
        self.logged.append((step, data))

    def finish(self) -> None:
        self.finished += 1


def test_report_to_wandb_logs_every_row_and_resumes_the_same_run(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swerl.errors import UserError
    from swerl.learner import MetricsLogger

    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    trainer = make_trainer(tiny_dir, tmp_path, report_to_wandb=True, wandb_project="p", max_steps=2)
    trainer.train()
    (init,) = fake.inits
    assert init["project"] == "p" and init["config"]["num_generations"] == 4
    assert init["dir"] == str(tmp_path) and init["resume"] == "allow"
    rows = read_metrics(tmp_path)
    assert [step for step, _ in fake.logged] == [r["step"] for r in rows] == [1, 2]
    assert fake.logged[1][1]["reward"] == rows[1]["reward"] and fake.finished == 1
    MetricsLogger(tmp_path, initial_step=2, progress=False, tensorboard=False, wandb={}).close()
    assert fake.inits[1]["id"] == init["id"]  # a resumed run continues the same W&B run
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed
    with pytest.raises(UserError, match="pip install wandb"):
        MetricsLogger(tmp_path / "x", progress=False, tensorboard=False, wandb={})


def test_vllm_engine_starts_from_the_checkpoint_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run's vLLM engine loads the checkpoint's model, not model_name_or_path (the base)."""
    import swerl.rollout.vllm_engine as vllm_engine
    from swerl.trainers.loop import build_engine

    built: list[str] = []
    monkeypatch.setattr(vllm_engine, "VLLMEngine", lambda path, **kwargs: built.append(path))
    config = GRPOConfig(model_name_or_path="base/model", output_dir=str(tmp_path), rollout_engine="vllm")
    build_engine(config, None, None)
    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text("{}")
    config.resume_from_checkpoint = "latest"
    build_engine(config, None, None)
    assert built == ["base/model", str(ckpt)]


def test_packed_log_probs_ignore_padding(tiny_dir: Path) -> None:
    """Left-padded prompts and right-padded completions score each row as if it were alone."""
    model, _ = load_model_and_tokenizer(tiny_dir)
    model.eval()
    prompts_, completions = [[5, 6, 7, 8, 9], [10, 11]], [[12, 13], [14, 15, 16, 17]]
    batch = pack_sequences(prompts_, completions, pad_id=0, device="cpu")
    with torch.no_grad():
        both, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_ids)
        for i in range(2):
            alone = pack_sequences([prompts_[i]], [completions[i]], pad_id=0, device="cpu")
            single, _ = completion_logprobs(
                model, alone.input_ids, alone.attention_mask, alone.completion_ids
            )
            n = len(completions[i])
            torch.testing.assert_close(both[i, :n], single[0, :n], rtol=1e-4, atol=1e-5)


def test_config_yaml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "model_name_or_path: m\ntrain_file: t.jsonl\nnum_generations: 4\nlearning_rate: 1.0e-5\nbeta: 0.04\n"
    )
    config = GRPOConfig.from_yaml(path, ["max_steps=7", "deepspeed=null"])
    assert (config.num_generations, config.learning_rate, config.beta, config.max_steps) == (4, 1e-5, 0.04, 7)
    assert dataclasses.asdict(config)["deepspeed"] is None
    path.write_text("num_generation: 4\n")
    with pytest.raises(ValueError, match="num_generation"):
        GRPOConfig.from_yaml(path)


def test_every_shipped_config_loads() -> None:
    from swerl.trainers.config import SFTConfig

    root = Path(__file__).resolve().parents[1] / "configs"
    for path in sorted(root.glob("*.yaml")):
        from swerl.trainers.rlef import RLEFConfig

        cls = (
            SFTConfig
            if path.name.startswith("sft")
            else RLEFConfig
            if path.name.startswith("rlef")
            else GRPOConfig
        )
        config = cls.from_yaml(path)
        if config.deepspeed:
            assert (root.parent / config.deepspeed).exists(), path
