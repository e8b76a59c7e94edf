"""`RolloutEngine` over vLLM inside the training processes (colocated, as TRL runs it), with sleep mode.

vLLM is an optional, CUDA-only extra: nothing here imports it until an engine is built, so the rest of
swerl imports and tests on CPU machines. Colocated means the trainer's GPUs also hold vLLM, the way TRL's
`vllm_mode="colocate"` does it (`colocated_engine`):

- every torchrun rank takes part, with `distributed_executor_backend="external_launcher"`: vLLM runs in
  the rank's own process, and with tensor parallelism the ranks of a group (ranks r*tp .. r*tp+tp-1)
  form one engine, each holding a shard. A group gathers its ranks' prompts, every rank of it runs the
  same generate call (same inputs, same seed: vLLM's external launcher relies on identical scheduling),
  and each rank keeps the answers to its own prompts;
- each group samples with its own seed (`engine_seed`): groups with one seed would draw the same answers
  to the same prompts;
- sleep mode lets trainer and vLLM take turns with the memory:

    engine.generate(...)          # vLLM awake: weights + KV cache on the GPU
    engine.sleep()                # level 1: weights to CPU RAM, KV cache dropped; level 2: both dropped
    ... optimizer step(s) ...
    engine.sync_weights(model)    # wakes the weights only, loads the new ones one parameter at a time
    engine.generate(...)          # wakes the KV cache and samples from the new policy

  With `sleep_level=2` (the trainer's default, as TRL) the weights are discarded while asleep, so
  `generate` refuses to run until `sync_weights` has put weights back: sampling from garbage memory must
  fail loudly;
- weights go in one parameter at a time (`swerl.rollout.weight_sync.full_parameters`): under ZeRO-3 only
  the parameter being loaded is gathered, never the whole model.

Log-probs: the LLM is created with `logprobs_mode="processed_logprobs"` (vLLM >= 0.10.2), i.e. log-probs
after temperature and after any top-k/top-p truncation. With the RL defaults (top_k 0, top_p 1) that is
log softmax(logits / temperature), the trainer's definition; with truncation on, the reported values
are those of the truncated distribution and the sampler/trainer mismatch metric will show it. vLLM's
own default ("raw_logprobs") ignores temperature, which would make every ratio wrong at T != 1.

The calls used here are those of the vLLM release pinned in the `vllm` extra (0.33.0): `LLM.generate`,
`sleep(level=)`, `wake_up(tags=)`, `reset_prefix_cache()`, `collective_rpc`, and the in-process model at
`llm.llm_engine.model_executor.driver_worker.model_runner.model` (present when the engine core runs in
this process: with the external launcher, or `VLLM_ENABLE_V1_MULTIPROCESSING=0`).
"""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Iterable, Sequence
from typing import Any

from swerl.errors import UserError
from swerl.rollout.base import Completion, FinishReason, SamplingParams
from swerl.rollout.weight_sync import full_parameters


def install_hint(who: str = "VLLMEngine", instead: str = "On CPU machines use rollout_engine: hf.") -> str:
    """What to do when vLLM is missing: `who` needs it, `instead` is the way on without it."""
    return (
        f"{who} needs vLLM, an optional CUDA-only dependency: pip install 'swerl[vllm]' "
        "(with the constraints file that pins your torch build; vLLM pins its own torch and transformers "
        f"versions, see docs/algorithms.md). {instead}"
    )


INSTALL_HINT = install_hint()


def vllm_missing(
    who: str = "VLLMEngine", instead: str = "On CPU machines use rollout_engine: hf."
) -> str | None:
    """`install_hint` when vLLM is not installed, else None, found without importing it (an import loads
    torch's CUDA side): for commands that check their options before anything loads."""
    return install_hint(who, instead) if importlib.util.find_spec("vllm") is None else None


class VLLMMissing(UserError, ImportError):
    """vLLM, an optional extra, is not installed: a setup the user can fix, not a bug."""


def import_vllm() -> Any:
    """Import vLLM on first use, turning a missing install into an ImportError that says what to do."""
    try:
        import vllm
    except ImportError as exc:
        raise VLLMMissing(INSTALL_HINT) from exc
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
    """The torch module inside an in-process vLLM, or None when the engine core runs in another process.

    vLLM's `driver_worker` is a wrapper that forwards attributes to its worker; older releases nest the
    worker one level deeper, so both are tried. Without an in-process module, `collective_rpc` is used.
    """
    executor = getattr(getattr(llm, "llm_engine", None), "model_executor", None)
    worker = getattr(executor, "driver_worker", None)
    for candidate in (worker, getattr(worker, "worker", None)):
        runner = getattr(candidate, "model_runner", None)
        model = getattr(runner, "model", None)
        if model is not None and hasattr(model, "load_weights"):
            return model
    return None


def _load_in_worker(worker: Any, weights: list[tuple[str, Any]]) -> None:
    """Runs inside a vLLM worker (`collective_rpc`): load (name, tensor) pairs into its model."""
    worker.model_runner.model.load_weights(weights=weights)


def engine_seed(base_seed: int, rank: int, tensor_parallel_size: int) -> int:
    """The sampling seed of the engine that `rank` belongs to: one per tensor-parallel group.

    The ranks of a group must share it (they run one engine together and must make the same draws);
    different groups must not, or each would sample the same answers to the same prompts.
    """
    return base_seed + rank // tensor_parallel_size


def tensor_parallel_groups(world_size: int, tensor_parallel_size: int) -> list[list[int]]:
    """Consecutive ranks per group, as vLLM's external launcher forms them: tp 2 of 4 -> [[0, 1], [2, 3]]."""
    if tensor_parallel_size < 1 or world_size % tensor_parallel_size:
        raise UserError(
            f"rollout_kwargs.tensor_parallel_size {tensor_parallel_size} must divide the number of "
            f"processes ({world_size}): each group of that many ranks shares one vLLM engine"
        )
    return [list(range(g, g + tensor_parallel_size)) for g in range(0, world_size, tensor_parallel_size)]


class VLLMEngine:
    """vLLM `LLM` in this process; see the module docstring for the sleep/sync/generate cycle.

    `tp_group`: the torch process group of this rank's tensor-parallel group when it has more than one
    rank (its ranks gather their prompts and run one generate call together); None otherwise.
    """

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
        tp_group: Any = None,
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
        self.tp_group = tp_group
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
        """Wake vLLM if asleep, sample, return grouped completions in prompt order.

        In a tensor-parallel group every rank must call this the same number of times (possibly with no
        prompts): the group's prompts are gathered and sampled together.
        """
        if not self._weights_valid:
            raise RuntimeError("vLLM slept at level 2 and lost its weights; call sync_weights(model) first")
        own = [[int(t) for t in p] for p in prompts]
        shares = [own] if self.tp_group is None else self._gather_group(own)
        every = [p for share in shares for p in share]
        if not every:
            return []
        self.wake_up()
        sampling = self._vllm.SamplingParams(**to_vllm_sampling_kwargs(params))
        inputs = [{"prompt_token_ids": p} for p in every]
        groups = completions_from_vllm(
            self.llm.generate(inputs, sampling_params=sampling, use_tqdm=False), every
        )
        if self.tp_group is None:
            return groups
        import torch.distributed as torch_dist

        mine = torch_dist.get_rank(group=self.tp_group)
        lo = sum(len(share) for share in shares[:mine])
        return groups[lo : lo + len(own)]

    def _gather_group(self, prompts: list[list[int]]) -> list[list[list[int]]]:
        import torch.distributed as torch_dist

        shares: list[Any] = [None] * torch_dist.get_world_size(group=self.tp_group)
        torch_dist.all_gather_object(shares, prompts, group=self.tp_group)
        return shares

    def sync_weights(self, model: Any) -> None:
        """Load `model`'s parameters (HF names; vLLM's `load_weights` maps them) one at a time.

        Under ZeRO-3 each parameter is gathered only while it is loaded (`full_parameters`), so every
        rank must call this, the same number of times. Ends with a prefix-cache reset: cached KV blocks
        were computed by the old weights.
        """
        source = getattr(model, "module", model)
        self.load_weights(full_parameters(source))

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Load (name, tensor) pairs into the running vLLM model one by one, waking only its weights if
        asleep; each tensor is released (and, under ZeRO-3, re-partitioned) before the next is read."""
        if self._asleep and not self._weights_awake:
            self._wake(["weights"])
            self._weights_awake = True
        inner = _inner_model(self.llm)
        for name, tensor in weights:
            if inner is not None:
                inner.load_weights(weights=[(name, tensor)])
            else:
                self.llm.collective_rpc(_load_in_worker, args=([(name, tensor)],))
        self._weights_valid = True
        self.llm.reset_prefix_cache()

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
        else:
            self.llm.wake_up(tags=tags)

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


def colocated_engine(
    model: str, *, rank: int, world_size: int, base_seed: int, **rollout_kwargs: Any
) -> VLLMEngine:
    """The engine of this torchrun rank, built the way TRL's colocate mode builds it (module docstring).

    Every rank must call this (forming the tensor-parallel groups is collective). The external launcher
    reads the rendezvous from the environment, which a single process without torchrun lacks, so loopback
    defaults are set. `sleep_level` defaults to 2: the trainer reloads every weight after each update,
    so keeping a CPU copy of the old ones (level 1) buys nothing.
    """
    from swerl.learner.dist import ensure_single_process_env

    tp = int(rollout_kwargs.get("tensor_parallel_size", 1))
    groups = tensor_parallel_groups(world_size, tp)
    tp_group = None
    if tp > 1:
        import torch.distributed as torch_dist

        tp_group, _ = torch_dist.new_subgroups_by_enumeration(groups)
    ensure_single_process_env()  # under torchrun the launcher's variables stand
    kwargs: dict[str, Any] = {"sleep_level": 2, **rollout_kwargs}
    return VLLMEngine(
        model,
        seed=engine_seed(base_seed, rank, tp),
        distributed_executor_backend="external_launcher",
        tp_group=tp_group,
        **kwargs,
    )
