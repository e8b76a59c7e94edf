"""VLLMEngine without vLLM: the import guard, the parameter translation, and the engine logic on a fake."""

from __future__ import annotations

import subprocess
import sys
import types
from dataclasses import dataclass, field

import pytest
import torch

from swerl.rollout import RolloutEngine, SamplingParams
from swerl.rollout.vllm_engine import (
    INSTALL_HINT,
    VLLMEngine,
    completions_from_vllm,
    import_vllm,
    to_vllm_sampling_kwargs,
)


def test_missing_vllm_gives_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'swerl\[vllm\]'") as err:
        import_vllm()
    assert "CUDA" in str(err.value) and str(err.value) == INSTALL_HINT
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


# --- a fake vllm module --------------------------------------------------------------------------------


@dataclass
class Logprob:
    logprob: float


@dataclass
class Sample:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str
    text: str


@dataclass
class RequestOutput:
    outputs: list[Sample]


@dataclass
class FakeModel:
    loaded: list[tuple[str, torch.Tensor]] = field(default_factory=list)

    def load_weights(self, weights):
        self.loaded.extend(weights)


class FakeLLM:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple] = []
        self.model = FakeModel()
        runner = types.SimpleNamespace(model=self.model)
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(
                driver_worker=types.SimpleNamespace(worker=types.SimpleNamespace(model_runner=runner))
            )
        )

    def generate(self, inputs, sampling_params, use_tqdm):
        self.calls.append(("generate", sampling_params.kwargs))
        outs = []
        for inp in inputs:
            p = inp["prompt_token_ids"]
            samples = []
            for j in range(sampling_params.kwargs["n"]):
                ids = [p[-1] + j, 2]
                lps = [{ids[0]: Logprob(-0.5), 777: Logprob(-3.0)}, {2: Logprob(-0.1)}]
                samples.append(Sample(ids, lps, "stop", f"s{j}"))
            outs.append(RequestOutput(samples))
        return outs

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_engine_cycle_on_fake_vllm(fake_vllm):
    engine = VLLMEngine(
        "m", gpu_memory_utilization=0.5, max_model_len=1024, sleep_level=2, enforce_eager=True
    )
    assert isinstance(engine, RolloutEngine)
    llm = engine.llm
    assert llm.kwargs["enable_sleep_mode"] and llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert llm.kwargs["max_model_len"] == 1024 and llm.kwargs["enforce_eager"]

    groups = engine.generate([[1, 5], [7]], SamplingParams(n=2, top_k=3))
    assert [[c.token_ids for c in g] for g in groups] == [[[5, 2], [6, 2]], [[7, 2], [8, 2]]]
    assert groups[0][0].logprobs == [-0.5, -0.1] and groups[1][1].text == "s1"
    assert groups[0][0].prompt_ids == [1, 5]
    assert llm.calls[0] == ("generate", to_vllm_sampling_kwargs(SamplingParams(n=2, top_k=3)))

    engine.sleep()
    engine.sleep()  # idempotent
    with pytest.raises(RuntimeError, match="sync_weights"):
        engine.generate([[1]], SamplingParams())  # level 2 dropped the weights
    weights = torch.nn.Linear(2, 2)
    engine.sync_weights(weights)
    assert [name for name, _ in llm.model.loaded] == ["weight", "bias"]
    engine.generate([[1]], SamplingParams())
    names = [c[0] if c[0] != "wake_up" else c for c in llm.calls]
    assert names == [
        "generate",
        "sleep",
        ("wake_up", ["weights"]),
        "reset_prefix_cache",
        ("wake_up", ["kv_cache"]),
        "generate",
    ]
    engine.close()
    assert engine.llm is None


def test_from_policy_uses_checkpoint_path_and_pushes_weights(fake_vllm):
    policy = torch.nn.Linear(2, 1)
    with pytest.raises(ValueError, match="name_or_path"):
        VLLMEngine.from_policy(policy)
    policy.name_or_path = "/ckpt/policy"
    engine = VLLMEngine.from_policy(policy, gpu_memory_utilization=0.2)
    assert engine.llm.kwargs["model"] == "/ckpt/policy" and engine.llm.kwargs["gpu_memory_utilization"] == 0.2
    assert [name for name, _ in engine.llm.model.loaded] == ["weight", "bias"]


def test_completions_from_vllm_checks():
    with pytest.raises(RuntimeError, match="outputs"):
        completions_from_vllm([], [[1]])
    bad = RequestOutput([Sample([1], None, "stop", "")])
    with pytest.raises(RuntimeError, match="log-prob"):
        completions_from_vllm([bad], [[1]])
    aborted = RequestOutput([Sample([1], [{1: Logprob(0.0)}], "abort", "")])
    with pytest.raises(RuntimeError, match="abort"):
        completions_from_vllm([aborted], [[1]])
