"""A stand-in for vLLM 0.33.0 (the release pinned in swerl's `vllm` extra), for machines without a GPU.

vLLM's wheel is CUDA-only and pins its own torch, so it cannot be installed next to the CPU stack the
tests run on. This package has the names and signatures swerl calls, taken from vLLM 0.33.0's source
(`vllm/entrypoints/llm.py`, `sampling_params.py`, `outputs.py`, `logprobs.py`, `v1/executor/
uniproc_executor.py`, `v1/worker/worker_base.py`, `v1/worker/gpu_worker.py`), and behaves as they do
where swerl depends on it:

- the engine core is in this process (`llm.llm_engine.model_executor.driver_worker.model_runner.model`)
  only with `distributed_executor_backend="external_launcher"` (which needs RANK and LOCAL_RANK in the
  environment) or `VLLM_ENABLE_V1_MULTIPROCESSING=0`; otherwise only `collective_rpc` reaches the worker,
  and its arguments are pickled as they would be on their way to another process;
- `worker_extension_cls` (a qualified name) is mixed into the worker class, refusing clashing names;
- sleep level 1 keeps a CPU copy of the weights, level 2 discards them (here: NaN) and keeps only the
  buffers; `wake_up(tags)` with a tag that is not asleep wakes nothing; generating or loading weights
  into memory that is asleep fails (on a GPU it would read or write unmapped memory);
- unknown engine arguments are refused, as `EngineArgs` refuses them.

What it does not imitate: speed, CUDA, tensor-parallel sharding. Decoding is swerl's transformers
engine on the model folder (so log-probs are the processed ones: log softmax(logits / temperature)),
seeded from the engine's seed when a request has none, as vLLM's engine-level generator is.
Every call is appended to `LLM.calls`, for tests of the order of sleep, wake, load and generate.
"""

from __future__ import annotations

import importlib
import os
import pickle
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__version__ = "0.33.0"

# The EngineArgs fields swerl may pass (all of them exist in vLLM 0.33.0's vllm/engine/arg_utils.py).
ENGINE_ARGS = frozenset(
    {
        "distributed_executor_backend",
        "enable_prefix_caching",
        "enable_sleep_mode",
        "logprobs_mode",
        "max_model_len",
        "max_num_batched_tokens",
        "max_num_seqs",
        "worker_extension_cls",
        "disable_log_stats",
    }
)
SLEEP_TAGS = ("weights", "kv_cache")


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: Sequence[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    routed_experts: Any = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class RequestOutput:
    def __init__(
        self,
        request_id: str,
        prompt: str | None,
        prompt_token_ids: list[int] | None,
        prompt_logprobs: Any,
        outputs: list[CompletionOutput],
        finished: bool,
        **kwargs: Any,
    ) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop_token_ids: list[int] | None = None
    max_tokens: int | None = 16
    logprobs: int | None = None
    skip_special_tokens: bool = True
    ignore_eos: bool = False

    def __post_init__(self) -> None:  # the checks of vLLM's SamplingParams._verify_args that apply here
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < -1:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")


class FakeModel:
    """What `model_runner.model` is: the architecture's module, with vLLM's `load_weights`."""

    def __init__(self, module: torch.nn.Module, llm: LLM) -> None:
        self.module = module
        self._llm = llm

    def load_weights(self, weights: Any) -> set[str]:
        if "weights" in self._llm.sleeping:
            raise RuntimeError("load_weights into weights that are asleep (unmapped GPU memory)")
        params = dict(self.module.named_parameters())
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor)  # a KeyError for a name the model lacks, as in vLLM
                self._llm.calls.append(("load_weights", name, tuple(tensor.shape)))
                loaded.add(name)
        return loaded


@dataclass
class ModelRunner:
    model: FakeModel


class Worker:
    """The GPU worker's attributes that worker extensions use."""

    def __init__(self, rank: int, model: FakeModel) -> None:
        self.rank = rank
        self.local_rank = rank
        self.device = torch.device("cpu")
        self.model_runner = ModelRunner(model)


class WorkerWrapper:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def __getattr__(self, name: str) -> Any:
        return getattr(self.worker, name)


@dataclass
class Executor:
    driver_worker: WorkerWrapper


@dataclass
class LLMEngine:
    model_executor: Executor | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _worker_class(qualname: str | None) -> type:
    if not qualname:
        return Worker
    module_name, _, attr = qualname.rpartition(".")
    extension = getattr(importlib.import_module(module_name), attr)
    for name in dir(extension):
        if not name.startswith("__") and hasattr(Worker, name):
            raise AssertionError(f"Worker class already has an attribute {name}")
    return type("ExtendedWorker", (Worker, extension), {})


class LLM:
    def __init__(
        self,
        model: str,
        *,
        tokenizer: str | None = None,
        trust_remote_code: bool = False,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.92,
        enforce_eager: bool = False,
        **kwargs: Any,
    ) -> None:
        unknown = set(kwargs) - ENGINE_ARGS
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {sorted(unknown)}")
        from swerl.models.loading import load_model_and_tokenizer

        backend = kwargs.get("distributed_executor_backend")
        rank = 0
        if backend == "external_launcher":
            rank = int(os.environ["RANK"])
            int(os.environ["LOCAL_RANK"])
        self.kwargs = {
            "model": model,
            "tensor_parallel_size": tensor_parallel_size,
            "seed": seed,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enforce_eager": enforce_eager,
            **kwargs,
        }
        self.calls: list[tuple[Any, ...]] = []
        self.sleeping: set[str] = set()
        self.enable_sleep_mode = bool(kwargs.get("enable_sleep_mode", False))
        module, self.tokenizer = load_model_and_tokenizer(model)
        module.eval()
        self._generator = torch.Generator().manual_seed(seed)
        self._saved: dict[str, torch.Tensor] = {}
        self._worker = _worker_class(kwargs.get("worker_extension_cls"))(rank, FakeModel(module, self))
        in_process = backend == "external_launcher" or os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
        self.llm_engine = LLMEngine(Executor(WorkerWrapper(self._worker)) if in_process else None)
        if not in_process:
            del self.llm_engine.model_executor  # the V1 engine has it only when the core is in-process

    def get_world_size(self, include_dp: bool = True) -> int:
        return int(self.kwargs["tensor_parallel_size"])

    @property
    def _module(self) -> torch.nn.Module:
        return self._worker.model_runner.model.module

    def generate(
        self,
        prompts: Any,
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        *,
        use_tqdm: bool | Callable[..., Any] = True,
        lora_request: Any = None,
        priority: Any = None,
        tokenization_kwargs: dict[str, Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
    ) -> list[RequestOutput]:
        if self.sleeping:
            raise RuntimeError(f"generate while asleep ({sorted(self.sleeping)})")
        from swerl.rollout.base import SamplingParams as Ours
        from swerl.rollout.hf import HFEngine

        params = sampling_params or SamplingParams()
        if not isinstance(params, SamplingParams):
            raise NotImplementedError("the fake takes one SamplingParams for all prompts")
        ids = [list(p["prompt_token_ids"]) for p in prompts]
        self.calls.append(("generate", len(ids)))
        seed = params.seed
        if seed is None:
            seed = int(torch.randint(0, 2**62, (), generator=self._generator))
        ours = Ours(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=max(0, params.top_k),
            max_new_tokens=params.max_tokens or 16,
            seed=seed,
            stop_token_ids=tuple(params.stop_token_ids or ()),
        )
        groups = HFEngine(self._module, self.tokenizer, batch_size=64).generate(ids, ours)
        outputs = []
        for i, (prompt, group) in enumerate(zip(ids, groups, strict=True)):
            samples = [
                CompletionOutput(
                    index=j,
                    text=c.text,
                    token_ids=list(c.token_ids),
                    cumulative_logprob=float(sum(c.logprobs)),
                    logprobs=None
                    if params.logprobs is None
                    else [{t: Logprob(lp, rank=1)} for t, lp in zip(c.token_ids, c.logprobs, strict=True)],
                    finish_reason=c.finish_reason,
                )
                for j, c in enumerate(group)
            ]
            outputs.append(RequestOutput(str(i), None, prompt, None, samples, True))
        return outputs

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        if not self.enable_sleep_mode:
            raise ValueError("Sleep mode is not enabled (enable_sleep_mode=True)")
        self.calls.append(("sleep", level))
        if "weights" in self.sleeping:
            warnings.warn("Executor is already sleeping.", stacklevel=2)
            return
        with torch.no_grad():
            params = dict(self._module.named_parameters())
            self._saved = {n: p.detach().clone() for n, p in params.items()} if level == 1 else {}
            for p in params.values():
                p.fill_(float("nan"))
        self.sleeping = set(SLEEP_TAGS)

    def wake_up(self, tags: list[str] | None = None) -> bool:
        self.calls.append(("wake_up", None if tags is None else list(tags)))
        if not self.sleeping:
            warnings.warn("Executor is not sleeping.", stacklevel=2)
            return True
        wanted = set(SLEEP_TAGS) if tags is None else {t for t in tags if t != "scheduling"}
        if not wanted <= self.sleeping:
            warnings.warn(f"Tag {sorted(wanted - self.sleeping)} is not in sleeping tags", stacklevel=2)
            return False
        if "weights" in wanted and self._saved:
            with torch.no_grad():
                for name, param in self._module.named_parameters():
                    param.copy_(self._saved[name])
            self._saved = {}
        self.sleeping -= wanted
        return not self.sleeping

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self.calls.append(("reset_prefix_cache",))
        return True

    def collective_rpc(
        self,
        method: str | Callable[..., Any],
        timeout: float | None = None,
        args: tuple = (),
        kwargs: dict[str, Any] | None = None,
    ) -> list[Any]:
        if getattr(self.llm_engine, "model_executor", None) is None:  # to another process: pickled
            args, kwargs = pickle.loads(pickle.dumps((args, kwargs or {})))
        call = getattr(self._worker, method) if isinstance(method, str) else method.__get__(self._worker)
        return [call(*args, **(kwargs or {}))]

    def apply_model(self, func: Callable[[Any], Any]) -> list[Any]:
        return [func(self._worker.model_runner.model)]
