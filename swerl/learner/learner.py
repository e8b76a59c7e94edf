"""`Learner`: the policy, its optimizer and schedule, and optionally a DeepSpeed engine, behind one API.

A trainer step is always the same three calls whatever the backend:

    for i, batch in enumerate(micro_batches):
        loss = compute_loss(learner.forward(**batch), ...)
        learner.backward(loss, last=i == len(micro_batches) - 1)
    stats = learner.step()

Gradients are *averaged* over ranks (DeepSpeed's convention, followed by the plain path too), so a
trainer that wants a token-mean over the global batch scales its local loss sum by
`world_size / global_tokens`.

The optimizer is always a client torch AdamW (or DeepSpeedCPUAdam when the DeepSpeed config offloads the
optimizer to CPU, which DeepSpeed requires): a config-level optimizer would JIT-compile FusedAdam on
first use, and keeping one optimizer makes the plain and DeepSpeed paths numerically comparable.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from swerl.learner.config import LearnerConfig
from swerl.learner.dist import DistInfo, all_reduce, ensure_single_process_env


def resolve_bf16(setting: bool | str, device: str) -> bool:
    """bf16 where it pays: "auto" means a CUDA device that supports it; True/False force the choice."""
    if isinstance(setting, str):
        if setting != "auto":
            raise ValueError(f"bf16 must be true, false or 'auto', got {setting!r}")
        return device.startswith("cuda") and torch.cuda.is_bf16_supported()
    return bool(setting)


def _lr_lambda(kind: str, warmup: int, total: int) -> Callable[[int], float]:
    """Multiplier of the peak LR at optimizer step `s`: linear warmup, then constant/linear/cosine."""
    if kind not in {"constant", "linear", "cosine"}:
        raise ValueError(f"lr_scheduler_type must be constant, linear or cosine, got {kind!r}")

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if kind == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 1.0 - progress if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def load_deepspeed_config(path: str | Path, config: LearnerConfig, world_size: int, bf16: bool) -> dict:
    """Read a DeepSpeed JSON config and fill its "auto" values from the learner's own settings.

    The learner drives gradient accumulation itself (micro-batch counts vary when groups are dropped), so
    DeepSpeed always sees one micro-batch per step with the boundary set explicitly.
    """
    ds = json.loads(Path(path).read_text(encoding="utf-8"))
    if "optimizer" in ds or "scheduler" in ds:
        raise ValueError(
            f"{path}: remove the 'optimizer'/'scheduler' blocks; set learning_rate, lr_scheduler_type etc. "
            "in the run config (the learner passes a client optimizer)"
        )
    ds["train_micro_batch_size_per_gpu"] = 1
    ds["gradient_accumulation_steps"] = 1
    ds["train_batch_size"] = world_size
    if ds.get("gradient_clipping", "auto") == "auto":
        ds["gradient_clipping"] = config.max_grad_norm
    bf16_block = ds.setdefault("bf16", {})
    if bf16_block.get("enabled", "auto") == "auto":
        bf16_block["enabled"] = bf16
    ds.setdefault("steps_per_print", 10**9)
    ds.setdefault("wall_clock_breakdown", False)
    return ds


def resolved_deepspeed_config(config: LearnerConfig, dist: DistInfo) -> dict | None:
    """The run's DeepSpeed config with its "auto" values filled (None without DeepSpeed)."""
    if not config.deepspeed:
        return None
    return load_deepspeed_config(
        config.deepspeed, config, dist.world_size, resolve_bf16(config.bf16, dist.device)
    )


def zero_stage(ds: dict | None) -> int:
    """The ZeRO stage of a DeepSpeed config; -1 without DeepSpeed."""
    return int(ds.get("zero_optimization", {}).get("stage", 0)) if ds else -1


def is_partitioned(model: nn.Module) -> bool:
    """Whether ZeRO-3 owns the model's parameters (built under `zero.Init` or wrapped by an engine)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


def weights_dtype(config: LearnerConfig, dist: DistInfo) -> torch.dtype:
    """The dtype models are built in: bf16 under DeepSpeed with bf16 (its engine holds bf16 weights and
    keeps float32 masters in the optimizer), float32 otherwise (the plain path autocasts instead)."""
    ds = resolved_deepspeed_config(config, dist)
    return torch.bfloat16 if ds and ds.get("bf16", {}).get("enabled") else torch.float32


@contextlib.contextmanager
def model_construction(config: LearnerConfig, dist: DistInfo) -> Iterator[None]:
    """Models loaded with `from_pretrained` inside are built the way the run holds them.

    Under ZeRO-3 that is partitioned from the first parameter: a live `HfDeepSpeedConfig` makes
    transformers create the model under `deepspeed.zero.Init` (each rank allocates only its shard, in the
    config's dtype) and copy the checkpoint in one module at a time, which only rank 0 reads, so no rank
    ever holds the whole model. The config object is dropped on exit: transformers also consults it in
    `generate` (to sync ranks step by step), which would hang a rank that has nothing to sample, whereas
    the trainers generate with the parameters gathered. Other stages build whole models, as before.
    """
    ds = resolved_deepspeed_config(config, dist)
    if zero_stage(ds) != 3:
        yield
        return
    import deepspeed
    from transformers.integrations.deepspeed import HfDeepSpeedConfig, unset_hf_deepspeed_config

    ensure_single_process_env()
    deepspeed.init_distributed(dist_backend="nccl" if dist.device.startswith("cuda") else "gloo")
    live = HfDeepSpeedConfig(ds)
    try:
        yield
    finally:
        del live
        unset_hf_deepspeed_config()


def frozen_deepspeed_config(ds: dict) -> dict:
    """A training config turned into one for a model that only runs forward passes (a reference).

    ZeRO-3 keeps partitioning the parameters (the reference is sharded like the policy); stages 1-2 only
    partition optimizer state and gradients, which a frozen model has none of, so they become stage 0.
    Precision settings stay, so the reference computes in the policy's dtype.
    """
    frozen = json.loads(json.dumps(ds))
    zero = frozen.setdefault("zero_optimization", {})
    if zero.get("stage", 0) != 3:
        frozen["zero_optimization"] = {"stage": 0}
    else:
        zero.pop("offload_optimizer", None)
    return frozen


class FrozenModel:
    """A model that only runs forward passes beside a `Learner` (GRPO's and RLEF's reference rho).

    It is held exactly like the learner's policy, so that identical weights give identical log-probs:
    under DeepSpeed it is wrapped in its own engine without an optimizer (ZeRO-3 shards it, bf16 casts
    it), otherwise it sits on the learner's device and runs under the learner's autocast.
    """

    def __init__(self, model: nn.Module, learner: Learner) -> None:
        model.eval().requires_grad_(False)
        self.autocast = learner.autocast
        self.module = model
        self.model: Any = model
        if learner.ds_config is not None:
            import deepspeed

            self.model, _, _, _ = deepspeed.initialize(
                model=model, config=frozen_deepspeed_config(learner.ds_config)
            )
            self.model.eval()
        else:
            model.to(learner.dist.device)

    def forward(self, **inputs: torch.Tensor) -> Any:
        """A forward pass without gradients (every rank must call as often under ZeRO-3: it gathers)."""
        with torch.no_grad(), self.autocast():
            return self.model(**inputs)

    __call__ = forward


def _offloads_optimizer(ds: dict) -> bool:
    offload = ds.get("zero_optimization", {}).get("offload_optimizer", {})
    return offload.get("device", "none") not in {"none", None}


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """No decay on biases and norms (1-D tensors), as in HF Trainer: decaying them only hurts.

    A ZeRO-3 parameter built partitioned is an empty 1-D placeholder; its real shape is `ds_shape`.
    Empty groups are left out: DeepSpeed drops them, and the LR schedule must see the groups it keeps.
    """
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decay if len(getattr(param, "ds_shape", param.shape)) >= 2 else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]


class Learner:
    """Owns the trainable model, the optimizer, the LR schedule and the DeepSpeed engine (when used)."""

    def __init__(self, model: nn.Module, config: LearnerConfig, total_steps: int, dist: DistInfo) -> None:
        self.config = config
        self.dist = dist
        self.bf16 = resolve_bf16(config.bf16, dist.device)
        self.total_steps = total_steps
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if not is_partitioned(model):  # a ZeRO-3 model built partitioned is already where DeepSpeed wants it
            model.to(dist.device)
        self.ds_config = resolved_deepspeed_config(config, dist)
        self.zero_stage = zero_stage(self.ds_config)
        groups = _param_groups(model, config.weight_decay)
        adam = {
            "lr": config.learning_rate,
            "betas": (config.adam_beta1, config.adam_beta2),
            "eps": config.adam_epsilon,
        }
        if self.ds_config and _offloads_optimizer(self.ds_config):
            from deepspeed.ops.adam import DeepSpeedCPUAdam  # compiles its C++ op on first use

            optimizer: torch.optim.Optimizer = DeepSpeedCPUAdam(groups, adamw_mode=True, **adam)
        else:
            optimizer = torch.optim.AdamW(groups, **adam)
        self.optimizer = optimizer
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, _lr_lambda(config.lr_scheduler_type, config.warmup_steps, total_steps)
        )
        self.engine: Any = None
        self.model = model
        if self.ds_config is not None:
            import deepspeed

            ensure_single_process_env()
            self.engine, _, _, _ = deepspeed.initialize(
                model=model, optimizer=optimizer, config=self.ds_config
            )
            self.model = self.engine

    # ----------------------------------------------------------------------------------------- compute
    @property
    def module(self) -> nn.Module:
        """The bare HF model (inside the DeepSpeed engine, if any): for generation and save_pretrained."""
        return self.engine.module if self.engine is not None else self.model

    def autocast(self) -> contextlib.AbstractContextManager:
        """The precision context of every forward pass: DeepSpeed casts its modules to bf16 itself; the
        plain path keeps float32 weights and autocasts (a frozen model runs under the same context)."""
        if self.bf16 and self.engine is None:
            return torch.autocast(device_type=self.dist.device.split(":")[0], dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward(self, **inputs: torch.Tensor) -> Any:
        """Run the training model (the engine under DeepSpeed, so ZeRO-3 gathers parameters)."""
        with self.autocast():
            return self.model(**inputs)

    def backward(self, loss: torch.Tensor, *, last: bool) -> None:
        """Accumulate gradients of `loss`; `last` marks the final micro-batch before `step()`.

        Every rank must make the same number of calls (ZeRO reduces gradients inside backward), which
        trainers guarantee by padding with zero-weight micro-batches.
        """
        if self.engine is not None:
            self.engine.set_gradient_accumulation_boundary(last)
            self.engine.backward(loss)
        else:
            loss.backward()

    def step(self) -> dict[str, float]:
        """Apply the accumulated gradients: average over ranks, clip, AdamW, LR schedule, zero grads."""
        lr = self.scheduler.get_last_lr()[0]
        if self.engine is not None:
            self.engine.step()
            norm = self.engine.get_global_grad_norm()
            grad_norm = float(norm) if norm is not None else float("nan")
        else:
            params = [p for p in self.model.parameters() if p.grad is not None]
            if self.dist.world_size > 1:
                for p in params:
                    all_reduce(p.grad).div_(self.dist.world_size)
            if self.config.max_grad_norm > 0:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm))
            else:
                grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return {"grad_norm": grad_norm, "learning_rate": lr}

    def train(self) -> None:
        self.model.train()

    def eval(self) -> None:
        self.model.eval()

    @contextlib.contextmanager
    def full_parameters(self) -> Iterator[nn.Module]:
        """The bare model with every parameter materialized: ZeRO-3 partitions them, generation needs all.

        Gathering the whole model on each rank is what TRL does by default for generation; a model too
        large for that generates in a separate engine (vLLM) that receives the weights instead.
        """
        if self.zero_stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.module.parameters())):
                yield self.module
        else:
            yield self.module

    # ----------------------------------------------------------------------------------------- state
    def save_pretrained(self, out_dir: Path, tokenizer: Any = None) -> None:
        """Write the policy in HF form (rank 0 writes; every rank must call, ZeRO-3 gathers collectively)."""
        with self.full_parameters() as module:
            if self.dist.is_main:
                module.save_pretrained(out_dir, safe_serialization=True)
                if tokenizer is not None:
                    tokenizer.save_pretrained(out_dir)

    def save_state(self, out_dir: Path) -> None:
        """Optimizer and scheduler state (and, under DeepSpeed, its sharded model/optimizer checkpoint)."""
        if self.engine is not None:
            self.engine.save_checkpoint(str(out_dir / "deepspeed"), tag="state")
        elif self.dist.is_main:
            torch.save(self.optimizer.state_dict(), out_dir / "optimizer.pt")
        if self.dist.is_main:
            torch.save(self.scheduler.state_dict(), out_dir / "scheduler.pt")

    def load_state(self, ckpt_dir: Path) -> None:
        """Restore what `save_state` wrote; the model weights come from the HF copy (or DeepSpeed's own)."""
        if self.engine is not None:
            path, _ = self.engine.load_checkpoint(
                str(ckpt_dir / "deepspeed"),
                tag="state",
                load_optimizer_states=True,
                load_lr_scheduler_states=False,
            )
            if path is None:
                raise FileNotFoundError(f"no DeepSpeed state under {ckpt_dir / 'deepspeed'}")
        else:
            state = torch.load(ckpt_dir / "optimizer.pt", map_location=self.dist.device, weights_only=True)
            self.optimizer.load_state_dict(state)
        self.scheduler.load_state_dict(torch.load(ckpt_dir / "scheduler.pt", weights_only=True))


class AdaptersOff:
    """The reference of a LoRA run: the learner's own model with its adapters switched off, as TRL does.

    The base weights never train, so with the adapters off the model is the start model, on every step
    and after every resume, without a second copy in memory; it runs through the learner's engine, in the
    policy's dtype and autocast (and gathers like the policy under ZeRO-3).
    """

    def __init__(self, learner: Learner) -> None:
        self.learner = learner

    def forward(self, **inputs: torch.Tensor) -> Any:
        with torch.no_grad(), self.learner.module.disable_adapter():
            return self.learner.forward(**inputs)

    __call__ = forward
