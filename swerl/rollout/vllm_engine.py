"""`RolloutEngine` over vLLM running inside the training process (colocated), with sleep mode.

vLLM is an optional, CUDA-only extra: nothing here imports it until an engine is built, so the rest of
swerl imports and tests on CPU machines. Colocated means one GPU holds both the trainer and vLLM; sleep
mode lets them take turns with the memory:

    engine.generate(...)          # vLLM awake: weights + KV cache on the GPU
    engine.sleep()                # level 1: weights to CPU RAM, KV cache dropped; level 2: both dropped
    ... optimizer step(s) ...
    engine.sync_weights(model)    # wakes the weights only, loads the new ones, resets the prefix cache
    engine.generate(...)          # wakes the KV cache and samples from the new policy

With `sleep_level=2` the weights are discarded while asleep, so `generate` refuses to run until
`sync_weights` has put weights back: sampling from garbage memory must fail loudly.

Log-probs: the LLM is created with `logprobs_mode="processed_logprobs"` (vLLM >= 0.10.2), i.e. log-probs
after temperature and after any top-k/top-p truncation. With the RL defaults (top_k 0, top_p 1) that is
log softmax(logits / temperature), the trainer's definition; with truncation on, the reported values
are those of the truncated distribution and the sampler/trainer mismatch metric will show it. vLLM's
own default ("raw_logprobs") ignores temperature, which would make every ratio wrong at T != 1.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from typing import Any

from swerl.rollout.base import Completion, FinishReason, SamplingParams

INSTALL_HINT = (
    "VLLMEngine needs vLLM, an optional CUDA-only dependency: pip install 'swerl[vllm]' "
    "(with the constraints file that pins your torch build; vLLM pins its own torch and transformers "
    "versions, see docs/algorithms.md). On CPU machines use HFEngine."
)


def import_vllm() -> Any:
    """Import vLLM on first use, turning a missing install into an ImportError that says what to do."""
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return vllm


def to_vllm_sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """Our `SamplingParams` as keyword arguments for `vllm.SamplingParams`.

    `logprobs=0` asks for the sampled token's log-prob only. vLLM's "disabled" top-k is -1 (0 is
    rejected by older releases). Stop tokens are kept in `token_ids` (vLLM always returns the stop
    token id there) but not in `text`, like the other engines.
    """
    kwargs: dict[str, Any] = {
        "n": params.n,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "max_tokens": params.max_new_tokens,
        "logprobs": 0,
        "skip_special_tokens": True,
    }
    if params.seed is not None:
        kwargs["seed"] = params.seed
    if params.stop_token_ids:
        kwargs["stop_token_ids"] = list(params.stop_token_ids)
    return kwargs


def completions_from_vllm(outputs: Sequence[Any], prompts: Sequence[Sequence[int]]) -> list[list[Completion]]:
    """Convert vLLM `RequestOutput`s (one per prompt, in order) to grouped `Completion`s.

    Each sample's `logprobs` is a list (one per sampled token) of {token_id: Logprob}; the entry for
    the sampled id is the one we keep.
    """
    if len(outputs) != len(prompts):
        raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
    groups: list[list[Completion]] = []
    for request_output, prompt in zip(outputs, prompts, strict=True):
        group = []
        for sample in request_output.outputs:
            token_ids = [int(t) for t in sample.token_ids]
            if sample.logprobs is None or len(sample.logprobs) != len(token_ids):
                raise RuntimeError("vLLM returned no log-prob for some sampled tokens (logprobs=0 not set?)")
            logprobs = [float(step[t].logprob) for t, step in zip(token_ids, sample.logprobs, strict=True)]
            reason = sample.finish_reason
            if reason not in ("stop", "length"):
                raise RuntimeError(f"vLLM finished a sample with reason {reason!r}")
            finish: FinishReason = reason
            group.append(
                Completion(
                    prompt_ids=[int(t) for t in prompt],
                    token_ids=token_ids,
                    logprobs=logprobs,
                    finish_reason=finish,
                    text=sample.text or "",
                )
            )
        groups.append(group)
    return groups


def _inner_model(llm: Any) -> Any | None:
    """The torch module inside a single-process vLLM, or None when it lives in worker processes.

    The attribute path differs between vLLM releases (V0 model runner vs V1 worker wrapper); both are
    tried. With multiprocessing workers there is no in-process module and `apply_model` is used.
    """
    executor = getattr(getattr(llm, "llm_engine", None), "model_executor", None)
    worker = getattr(executor, "driver_worker", None)
    for candidate in (worker, getattr(worker, "worker", None)):
        runner = getattr(candidate, "model_runner", None)
        model = getattr(runner, "model", None)
        if model is not None and hasattr(model, "load_weights"):
            return model
    return None


class VLLMEngine:
    """vLLM `LLM` in this process; see the module docstring for the sleep/sync/generate cycle."""

    def __init__(
        self,
        model: str,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.3,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
        enable_sleep_mode: bool = True,
        sleep_level: int = 1,
        enable_prefix_caching: bool = True,
        seed: int = 0,
        logprobs_mode: str | None = "processed_logprobs",
        **llm_kwargs: Any,
    ) -> None:
        if sleep_level not in (1, 2):
            raise ValueError(f"sleep_level must be 1 or 2, got {sleep_level}")
        vllm = import_vllm()
        self._vllm = vllm
        kwargs: dict[str, Any] = {
            "model": model,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "tensor_parallel_size": tensor_parallel_size,
            "enable_sleep_mode": enable_sleep_mode,
            "enable_prefix_caching": enable_prefix_caching,
            "seed": seed,
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if logprobs_mode is not None:
            kwargs["logprobs_mode"] = logprobs_mode
        kwargs.update(llm_kwargs)
        self.llm: Any = vllm.LLM(**kwargs)
        self.enable_sleep_mode = enable_sleep_mode
        self.sleep_level = sleep_level
        self._asleep = False
        self._weights_awake = True
        self._weights_valid = True

    @classmethod
    def from_policy(cls, model: Any, **kwargs: Any) -> VLLMEngine:
        """An engine for the policy being trained: loads its checkpoint folder, then pushes its weights.

        The folder (`config._name_or_path`) gives vLLM the architecture and tokenizer; pushing the
        in-memory weights right away makes a resumed or warmed-up policy, not the folder's, the sampler.
        """
        source = getattr(model, "module", model)
        path = getattr(getattr(source, "config", None), "_name_or_path", "") or getattr(
            source, "name_or_path", ""
        )
        if not path:
            raise ValueError(
                "the policy has no name_or_path; save it with save_pretrained and load it from there"
            )
        engine = cls(str(path), **kwargs)
        engine.sync_weights(source)
        return engine

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        """Wake vLLM if asleep, sample, return grouped completions in prompt order."""
        if not self._weights_valid:
            raise RuntimeError("vLLM slept at level 2 and lost its weights; call sync_weights(model) first")
        self.wake_up()
        sampling = self._vllm.SamplingParams(**to_vllm_sampling_kwargs(params))
        inputs = [{"prompt_token_ids": [int(t) for t in p]} for p in prompts]
        outputs = self.llm.generate(inputs, sampling_params=sampling, use_tqdm=False)
        return completions_from_vllm(outputs, prompts)

    def sync_weights(self, model: Any) -> None:
        """Push `model`'s weights (HF names; vLLM's `load_weights` maps them) and reset the prefix cache.

        Under ZeRO-3 the caller gathers the parameters first (e.g. `deepspeed.zero.GatheredParameters`)
        and calls this on the rank that owns the engine.
        """
        source = getattr(model, "module", model)
        self.load_weights(source.state_dict().items())

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load (name, tensor) pairs into the running vLLM model, waking only its weights if asleep."""
        if self._asleep and not self._weights_awake:
            self._wake(["weights"])
            self._weights_awake = True
        items = list(weights)
        inner = _inner_model(self.llm)
        if inner is not None:
            inner.load_weights(items)
        elif hasattr(self.llm, "apply_model"):
            self.llm.apply_model(lambda m: m.load_weights(items))
        else:
            raise RuntimeError("cannot reach the vLLM model to load weights (unsupported vLLM version)")
        self._weights_valid = True
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()  # cached KV blocks were computed by the old weights

    def sleep(self) -> None:
        """Free the GPU for training (no-op without sleep mode or when already asleep)."""
        if not self.enable_sleep_mode or self._asleep:
            return
        self.llm.sleep(level=self.sleep_level)
        self._asleep = True
        self._weights_awake = False
        if self.sleep_level == 2:
            self._weights_valid = False

    def wake_up(self) -> None:
        """Bring back whatever is still asleep (the KV cache, and the weights unless already woken)."""
        if not self._asleep:
            return
        self._wake(None if not self._weights_awake else ["kv_cache"])
        self._asleep = False
        self._weights_awake = True

    def _wake(self, tags: list[str] | None) -> None:
        if tags is None:
            self.llm.wake_up()
            return
        try:
            self.llm.wake_up(tags=tags)
        except TypeError:  # vLLM before tagged wake-up: wake everything
            self.llm.wake_up()

    def close(self) -> None:
        """Drop the engine and return its GPU memory to the trainer."""
        llm, self.llm = self.llm, None
        del llm
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover - torch is a hard dependency
            pass
