"""VLLMEngine without vLLM: the import guard, the parameter translation, and colocated training against a
stand-in for vLLM 0.33.0 (tests/fake_vllm): sleep/wake order, per-parameter loads, ZeRO-3, TP groups.

The same file is the worker of the two-rank test: `torchrun ... test_rollout_vllm.py --tp-worker DIR OUT`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_grpo import tiny_grpo, tiny_grpo_config

from swerl.errors import UserError
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.net import free_port
from swerl.rollout import HFEngine, RolloutEngine, SamplingParams
from swerl.rollout.vllm_engine import (
    INSTALL_HINT,
    VLLMEngine,
    colocated_engine,
    completions_from_vllm,
    engine_seed,
    import_vllm,
    tensor_parallel_groups,
    to_vllm_sampling_kwargs,
)
from swerl.trainers.loop import load_run

ROOT = Path(__file__).resolve().parents[1]


def test_missing_vllm_gives_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'swerl\[vllm\]'") as err:
        import_vllm()
    assert "CUDA" in str(err.value) and str(err.value) == INSTALL_HINT
    assert isinstance(err.value, UserError)  # a missing extra is the user's to install, not a bug
    with pytest.raises(ImportError, match="swerl"):
        VLLMEngine("some/model")


def test_importing_swerl_rollout_does_not_import_vllm():
    code = "import sys, swerl.rollout, swerl.rollout.vllm_engine; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sampling_translation():
    kw = to_vllm_sampling_kwargs(SamplingParams(n=4, temperature=0.7, top_p=0.9, max_new_tokens=12))
    assert kw == {
        "n": 4,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": -1,
        "max_tokens": 12,
        "logprobs": 0,
        "skip_special_tokens": True,
    }
    kw = to_vllm_sampling_kwargs(SamplingParams(top_k=20, seed=3, stop_token_ids=(5, 6)))
    assert kw["top_k"] == 20 and kw["seed"] == 3 and kw["stop_token_ids"] == [5, 6]


# --- against the stand-in for vLLM 0.33.0 (tests/fake_vllm) --------------------------------------------

FAKE_VLLM = Path(__file__).resolve().parent / "fake_vllm"


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`import vllm` gives the stand-in (tests/fake_vllm/vllm) for this test only, in the environment a
    one-process torchrun gives (the external launcher reads it; restored afterwards)."""
    for name, value in {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    import vllm

    yield vllm
    sys.modules.pop("vllm", None)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def test_completions_from_vllm_checks(fake_vllm: Any) -> None:
    def output(ids: list[int], logprobs: Any, reason: str) -> Any:
        sample = fake_vllm.CompletionOutput(0, "", ids, None, logprobs, finish_reason=reason)
        return fake_vllm.RequestOutput("0", None, [1], None, [sample], True)

    with pytest.raises(RuntimeError, match="outputs"):
        completions_from_vllm([], [[1]])
    with pytest.raises(RuntimeError, match="log-prob"):
        completions_from_vllm([output([1], None, "stop")], [[1]])
    with pytest.raises(RuntimeError, match="abort"):
        completions_from_vllm([output([1], [{1: fake_vllm.Logprob(0.0)}], "abort")], [[1]])


def test_tensor_parallel_groups_and_their_seeds() -> None:
    """Consecutive ranks share an engine and its seed; different groups sample with different seeds."""
    assert tensor_parallel_groups(4, 2) == [[0, 1], [2, 3]]
    assert tensor_parallel_groups(3, 1) == [[0], [1], [2]]
    assert [engine_seed(7, rank, 2) for rank in range(4)] == [7, 7, 8, 8]
    with pytest.raises(UserError, match="must divide the number of processes"):
        tensor_parallel_groups(3, 2)


def test_colocated_engine_is_built_the_trl_way(fake_vllm: Any, tiny_dir: Path) -> None:
    engine = colocated_engine(str(tiny_dir), rank=0, world_size=1, base_seed=3, gpu_memory_utilization=0.2)
    assert isinstance(engine, RolloutEngine)
    kwargs = engine.llm.kwargs
    assert kwargs["distributed_executor_backend"] == "external_launcher" and kwargs["seed"] == 3
    assert kwargs["enable_sleep_mode"] and kwargs["logprobs_mode"] == "processed_logprobs"
    assert engine.sleep_level == 2 and kwargs["gpu_memory_utilization"] == 0.2
    groups = engine.generate([[5, 6, 7], [8]], SamplingParams(n=3, max_new_tokens=4))
    assert [len(g) for g in groups] == [3, 3] and groups[1][0].prompt_ids == [8]
    assert all(len(c.token_ids) == len(c.logprobs) > 0 for g in groups for c in g)


def test_sleep_wake_and_per_parameter_sync_around_grpo_steps(
    fake_vllm: Any, tiny_dir: Path, tmp_path: Path
) -> None:
    """Each step: sample awake, sleep (level 2) through the optimizer step, wake the weights alone, load
    every parameter one call at a time, reset the prefix cache, wake the KV cache, sample again. After
    training vLLM holds exactly the trainer's weights (level 2 left them NaN, so a skipped one would show)."""
    model, tokenizer = load_model_and_tokenizer(tiny_dir)
    engine = colocated_engine(str(tiny_dir), rank=0, world_size=1, base_seed=0)
    config = tiny_grpo_config(tmp_path, "vllm", learning_rate=1e-2)
    trainer, ids = tiny_grpo(config, model, tokenizer, engine)
    calls = engine.llm.calls
    step = trainer.learner.step

    def logged_step() -> dict[str, float]:
        calls.append(("optimizer_step",))
        return step()

    trainer.learner.step = logged_step  # type: ignore[method-assign]
    history = trainer.train()
    assert all(math.isfinite(row["reward"]) for row in history)
    assert history[-1]["sampling/is_weight/mean"] > 0  # importance sampling is on for vLLM ("auto")

    names = [name for name, _ in model.named_parameters()]
    one_sync = [("load_weights", name, tuple(p.shape)) for name, p in model.named_parameters()]
    one_step = [
        ("generate", 2),
        ("sleep", 2),
        ("optimizer_step",),
        ("wake_up", ["weights"]),
        *one_sync,
        ("reset_prefix_cache",),
    ]
    assert calls == [*one_step, ("wake_up", ["kv_cache"]), *one_step]
    assert len(names) == len(set(names))
    served = dict(
        engine.llm.llm_engine.model_executor.driver_worker.model_runner.model.module.named_parameters()
    )
    for name, param in model.named_parameters():
        assert torch.equal(served[name], param.detach()), name

    greedy = SamplingParams(n=1, temperature=0, max_new_tokens=5)
    ours = HFEngine(model, tokenizer).generate([ids[:6]], greedy)[0][0]
    theirs = engine.generate([ids[:6]], greedy)[0][0]
    assert theirs.token_ids == ours.token_ids
    assert theirs.logprobs == pytest.approx(ours.logprobs, abs=1e-5)


@pytest.mark.slow  # DeepSpeed's first initialization on a machine compiles its shared-memory op
def test_zero3_sync_gathers_one_parameter_at_a_time(fake_vllm: Any, tiny_dir: Path, tmp_path: Path) -> None:
    """Under ZeRO-3 (every parameter partitioned) the sync loads whole parameters, each gathered alone:
    while one is being loaded, no other partitioned parameter is whole."""
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    from swerl.learner import DistInfo, Learner, LearnerConfig

    ds = json.loads((ROOT / "configs" / "deepspeed" / "zero3.json").read_text())
    ds["zero_optimization"]["stage3_param_persistence_threshold"] = 0
    (tmp_path / "zero3.json").write_text(json.dumps(ds))
    model, _ = load_model_and_tokenizer(tiny_dir)
    expected = {name: p.detach().clone() for name, p in model.named_parameters()}
    learner = Learner(model, LearnerConfig(deepspeed=str(tmp_path / "zero3.json"), bf16=False), 1, DistInfo())
    params = dict(learner.module.named_parameters())
    assert all(p.numel() == 0 for p in params.values())  # partitioned: nothing whole before the sync

    engine = VLLMEngine(
        str(tiny_dir), enable_sleep_mode=False, distributed_executor_backend="external_launcher"
    )
    inner = engine.llm.llm_engine.model_executor.driver_worker.model_runner.model
    load = inner.load_weights
    seen: list[tuple[str, int, bool]] = []

    def watching_load(weights: Any) -> Any:
        whole = [n for n, p in params.items() if p.ds_status == ZeroParamStatus.AVAILABLE]
        for name, tensor in weights:
            seen.append((name, len(whole), torch.equal(tensor, expected[name])))
        return load(weights)

    inner.load_weights = watching_load
    engine.sync_weights(learner.module)
    assert [name for name, _, _ in seen] == list(expected)
    assert all(count == 1 and same for _, count, same in seen), seen
    assert all(p.numel() == 0 for p in params.values())  # all partitioned again


def test_a_tensor_parallel_group_samples_together_with_one_seed(tiny_dir: Path, tmp_path: Path) -> None:
    """2 ranks (gloo): with tensor_parallel_size 2 they form one engine: one seed, one generate call over
    both ranks' prompts, each rank getting the answers to its own prompts; with tensor_parallel_size 1
    they are two engines with different seeds, which draw different answers to the same prompt."""
    out = tmp_path / "tp.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_VLLM), str(ROOT)])}
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launch += ["--master_port", str(free_port()), __file__, "--tp-worker", str(tiny_dir), str(out)]
    subprocess.run(launch, check=True, env=env, cwd=tmp_path, capture_output=True, timeout=300)
    ranks = [json.loads(line) for line in out.read_text().splitlines()]
    ranks.sort(key=lambda r: r["rank"])
    assert [r["tp2"]["seed"] for r in ranks] == [0, 0] and [r["tp1"]["seed"] for r in ranks] == [0, 1]
    assert [r["tp2"]["generated"] for r in ranks] == [[3], [3]]  # one call over 1 + 2 prompts, on each rank
    assert [r["tp2"]["prompts"] for r in ranks] == [[[11, 12]], [[11, 12], [13]]]
    assert [len(g) for g in ranks[1]["tp2"]["answers"]] == [4, 4]
    assert ranks[0]["tp2"]["next_draw"] == ranks[1]["tp2"]["next_draw"]  # one engine: the same draws
    assert ranks[0]["tp1"]["next_draw"] != ranks[1]["tp1"]["next_draw"]  # two engines, two seeds


def tp_worker(model_dir: str, out: str) -> None:
    """One torchrun rank of the tensor-parallel test: rank 0 has one prompt, rank 1 two. `next_draw`: what
    the rank's vLLM samples next for one prompt, called directly (the same on ranks with one seed)."""
    import torch.distributed as torch_dist
    import vllm

    torch_dist.init_process_group("gloo")
    rank, world = torch_dist.get_rank(), torch_dist.get_world_size()
    prompts = [[11, 12]] if rank == 0 else [[11, 12], [13]]
    params = SamplingParams(n=4, max_new_tokens=6)
    record: dict[str, Any] = {"rank": rank}
    for tp in (2, 1):
        engine = colocated_engine(
            model_dir, rank=rank, world_size=world, base_seed=0, tensor_parallel_size=tp
        )
        groups = engine.generate(prompts, params)
        record[f"tp{tp}"] = {
            "seed": engine.llm.kwargs["seed"],
            "generated": [c[1] for c in engine.llm.calls if c[0] == "generate"],
            "prompts": [g[0].prompt_ids for g in groups],
            "answers": [[c.token_ids for c in g] for g in groups],
            "next_draw": [
                list(c.token_ids)
                for c in engine.llm.generate(
                    [{"prompt_token_ids": [11, 12]}], vllm.SamplingParams(n=2, max_tokens=6), use_tqdm=False
                )[0].outputs
            ],
        }
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    torch_dist.destroy_process_group()


if __name__ == "__main__" and sys.argv[1:2] == ["--tp-worker"]:
    tp_worker(sys.argv[2], sys.argv[3])


def test_a_lora_policy_reaches_vllm_merged_under_the_base_names(fake_vllm: Any, tiny_dir: Path) -> None:
    """vLLM knows the base architecture only: it gets base + B @ A * scale under the base names and no
    adapter weights, so it computes what the LoRA policy computes; the policy is unmerged again after."""
    peft = pytest.importorskip("peft")
    base, _ = load_model_and_tokenizer(tiny_dir)
    base_names = [name for name, _ in base.named_parameters()]
    torch.manual_seed(0)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    policy = peft.get_peft_model(base, lora)
    prompt = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        want = policy(input_ids=prompt).logits
        with policy.disable_adapter():
            assert not torch.allclose(policy(input_ids=prompt).logits, want, atol=1e-3)  # the adapters matter

    engine = VLLMEngine(
        str(tiny_dir), enable_sleep_mode=False, distributed_executor_backend="external_launcher"
    )
    engine.sync_weights(policy)
    assert [c[1] for c in engine.llm.calls if c[0] == "load_weights"] == base_names
    served = engine.llm.llm_engine.model_executor.driver_worker.model_runner.model.module
    with torch.no_grad():
        assert torch.allclose(served(input_ids=prompt).logits, want, atol=1e-5)
        assert not any(getattr(m, "merged", False) for m in policy.modules())
        assert torch.allclose(policy(input_ids=prompt).logits, want, atol=1e-5)


def test_a_lora_grpo_run_samples_from_its_merged_policy_each_step(
    fake_vllm: Any, tiny_dir: Path, tmp_path: Path
) -> None:
    """`use_peft` with `rollout_engine: vllm`, built as `swerl train grpo` builds it: after every step
    vLLM holds the base weights with the trained adapters merged in, so it samples what the policy would."""
    pytest.importorskip("peft")
    lora = {"use_peft": True, "lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0}
    config = tiny_grpo_config(tmp_path, "vllm", model_name_or_path=str(tiny_dir), beta=0.05, **lora)
    assert [field for field, _ in config.problems()] == ["train_file"]  # given as examples here
    _, policy, tokenizer = load_run(config)
    engine = colocated_engine(str(tiny_dir), rank=0, world_size=1, base_seed=0)
    trainer, ids = tiny_grpo(config, policy, tokenizer, engine)
    history = trainer.train()
    assert history[0]["kl"] == 0.0 and all(math.isfinite(row["reward"]) for row in history)
    prompt = torch.tensor([ids[:6]])
    served = engine.llm.llm_engine.model_executor.driver_worker.model_runner.model.module
    with torch.no_grad():
        want = policy(input_ids=prompt).logits
        with policy.disable_adapter():
            assert not torch.allclose(policy(input_ids=prompt).logits, want, atol=1e-4)  # adapters trained
        assert torch.allclose(served(input_ids=prompt).logits, want, atol=1e-5)
