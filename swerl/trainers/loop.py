"""The loop every trainer shares (GRPO, RLEF, SFT): resume, log, step, checkpoint, final save.

A trainer subclasses `TrainLoop`, builds its pieces in `__init__` after `super().__init__`, and writes
`train_step()`; what differs in the saved state (GRPO's token count, RLEF's critic) goes in
`trainer_state` / `load` / `save`. Everything else here is the plumbing GRPO and RLEF have in common:
the rollout engine, the pad id, padded micro-batches for ZeRO, and sampling with the full weights.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import Tensor

from swerl.errors import UserError
from swerl.learner import Learner, MetricsLogger, init_distributed
from swerl.learner.checkpoint import load_checkpoint, save_checkpoint, seed_everything
from swerl.learner.dist import all_reduce
from swerl.learner.layout import checkpoint_model_dir
from swerl.learner.learner import AdaptersOff, FrozenModel
from swerl.trainers.common import completion_logprobs, resolve_resume


class TrainLoop:
    """Run to max_steps from a fresh start or a checkpoint; subclasses set `learner`, `sampler`, `desc`."""

    desc = "train"
    learner: Learner
    sampler: Any

    def __init__(self, config: Any, tokenizer: Any, progress: bool = True) -> None:
        self.config = config
        self.dist = init_distributed()
        # RL trainers keep whole prompt groups on one rank; SFT has no groups (no `prompts_per_step`).
        if getattr(config, "prompts_per_step", 0) % self.dist.world_size:
            raise UserError(
                f"prompts_per_step {config.prompts_per_step} must be a multiple of the number of processes "
                f"({self.dist.world_size})"
            )
        seed_everything(config.seed + self.dist.rank)
        self.tokenizer = tokenizer
        self.step = 0
        self.run_dir = Path(config.output_dir)
        self.progress = progress

    def train(
        self,
        *,
        stop: Callable[[TrainLoop], bool] | None = None,
        on_step: Callable[[TrainLoop, dict[str, float]], None] | None = None,
    ) -> list[dict[str, float]]:
        """Run to max_steps (continuing from a checkpoint when configured); returns every step's metrics.

        `stop` is asked before each step, once resume has set `step`: True ends the run there, with the
        same final save and last logged row as at max_steps. It is for limits that are not a step count,
        such as the quickstart's wall-clock budget or a caller's own convergence rule, which otherwise
        need one `train()` call per step (a new logger, resume and final save each time). `max_steps()`
        stays the hard limit. `on_step` sees each step's metrics as soon as the step is done, so such a
        caller can report progress without waiting for the returned rows.
        """
        cfg = self.config
        ckpt = resolve_resume(cfg)
        if ckpt is not None:
            self.load(ckpt)
        total = self.max_steps()
        log = MetricsLogger(
            self.run_dir,
            enabled=self.dist.is_main,
            total_steps=total,
            initial_step=self.step,
            tensorboard=cfg.report_to_tensorboard,
            progress=self.progress,
            desc=self.desc,
            wandb={"project": cfg.wandb_project, "config": cfg.to_dict()} if cfg.report_to_wandb else None,
        )
        history = []
        while self.step < total:
            if stop is not None and stop(self):
                break
            metrics = self.train_step()
            self.step += 1
            history.append(metrics)
            if self.step % cfg.logging_steps == 0:
                log.log(self.step, metrics)
            if cfg.save_steps and self.step % cfg.save_steps == 0:
                self.save(self.run_dir / f"checkpoint-{self.step}")
            if on_step is not None:
                on_step(self, metrics)
        # The run's last row is always in metrics.jsonl, wherever it ended and whatever logging_steps is.
        if history and self.step % cfg.logging_steps:
            log.log(self.step, history[-1])
        # As HF Trainer does, a run that checkpoints also checkpoints where it ended (at max_steps or where
        # `stop` ended it), so `--resume` with a larger max_steps runs on from there instead of repeating.
        if cfg.save_steps and history and self.step % cfg.save_steps:
            self.save(self.run_dir / f"checkpoint-{self.step}")
        self.save_final()
        log.close()
        return history

    def max_steps(self) -> int:
        """Where `train()` stops (SFT also stops at the end of its epochs)."""
        return self.config.max_steps

    def train_step(self) -> dict[str, float]:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------ state
    def trainer_state(self) -> dict[str, Any]:
        return {"step": self.step, "sampler": self.sampler.state_dict()}

    def load(self, ckpt: Path) -> dict[str, Any]:
        """Optimizer, scheduler and RNG into the learner; step and sampler position into the trainer."""
        state = load_checkpoint(ckpt, self.learner, self.dist)
        self.step = state["step"]
        self.sampler.load_state_dict(state["sampler"])
        return state

    def save(self, path: Path) -> Path:
        return save_checkpoint(
            path.parent,
            self.step,
            self.learner,
            self.tokenizer,
            self.trainer_state(),
            self.dist,
            keep=self.config.save_total_limit,
        )

    def save_final(self) -> None:
        """The trained policy in HF form under output_dir/final, ready for `from_pretrained` or serving."""
        self.learner.save_pretrained(self.run_dir / "final", self.tokenizer)

    # ---------------------------------------------------------------------------------- helpers
    def micro_batches(self, n: int) -> list[tuple[list[int] | None, bool]]:
        """This rank's micro-batches of `n` rows as (row indices, whether it is the last), as many as the
        busiest rank runs: ZeRO communicates inside forward and backward, so where this rank has no rows
        left the indices are None and the caller runs `dummy_loss` through each model it would have run."""
        size = self.config.micro_batch_size
        rows = [list(range(lo, min(lo + size, n))) for lo in range(0, n, size)]
        count = int(all_reduce(torch.tensor(len(rows)), op="max").item())
        return [(rows[k] if k < len(rows) else None, k == count - 1) for k in range(count)]

    def dummy_loss(self, learner: Learner | FrozenModel | AdaptersOff | None = None) -> Tensor:
        """A zero loss through a model, for a rank with fewer micro-batches than the others."""
        ids = torch.full((1, 1), self.pad_id, dtype=torch.long, device=self.dist.device)
        out = (learner or self.learner).forward(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            position_ids=torch.zeros_like(ids),
            use_cache=False,
        )
        return (out if isinstance(out, Tensor) else out.logits).sum() * 0.0

    def logprobs(self, forward: Any, mb: dict[str, Any], with_entropy: bool = False) -> tuple[Tensor, Any]:
        """Log-probs (and entropies) of a micro-batch's completion tokens under `forward`, at the sampling
        temperature."""
        return completion_logprobs(
            forward,
            mb["input_ids"],
            mb["attention_mask"],
            mb["completion_ids"],
            self.config.temperature,
            with_entropy=with_entropy,
        )

    @contextmanager
    def sampling(self) -> Iterator[Any]:
        """The policy in eval mode for generation; back to train after.

        An engine that samples with the policy module itself (transformers) needs every parameter, so
        under ZeRO-3 the whole model is gathered around it; vLLM holds its own copy of the weights and
        gets them one parameter at a time in `sync_engine`, so nothing is gathered for it here.
        """
        self.learner.eval()
        try:
            if getattr(self.engine, "model", None) is self.learner.module:
                with torch.no_grad(), self.learner.full_parameters() as module:
                    yield module
            else:
                with torch.no_grad():
                    yield self.learner.module
        finally:
            self.learner.train()

    def rest_engine(self) -> None:
        """Before an update: a colocated vLLM engine sleeps (frees its GPU memory for training); it wakes
        itself for the next weight sync and generation. Engines without sleep mode have nothing to free."""
        sleep = getattr(self.engine, "sleep", None)
        if sleep is not None:
            sleep()

    def sync_engine(self) -> None:
        """After an update: the sampler gets the new weights (per parameter; collective under ZeRO-3)."""
        with torch.no_grad():
            self.engine.sync_weights(self.learner.module)


def build_engine(config: Any, model: Any, tokenizer: Any, dist: Any = None) -> Any:
    """The rollout engine the config names (`rollout_engine`):

    - "hf": transformers generate on the policy module itself (colocated, no copy of the weights);
    - "vllm": vLLM colocated in every rank, as TRL's colocate mode (`swerl.rollout.vllm_engine`);
    - "vllm_server": a `swerl vllm-serve` process on other GPUs, weights pushed over the network
      (`swerl.rollout.vllm_server`).

    vLLM starts from the policy's folder, or the checkpoint's on resume, or the first resumed step would
    sample from the starting model.
    """
    rank, world = (dist.rank, dist.world_size) if dist is not None else (0, 1)
    if config.rollout_engine == "hf":
        from swerl.rollout.hf import HFEngine

        return HFEngine(model, tokenizer, batch_size=config.generation_batch_size)
    if config.rollout_engine == "vllm":
        from swerl.rollout.vllm_engine import colocated_engine

        tp = int(config.rollout_kwargs.get("tensor_parallel_size", 1))
        if tp > 1 and hasattr(config, "episodes_per_problem"):
            raise UserError(
                "rollout_engine vllm with tensor_parallel_size > 1: the ranks of a group must generate in "
                "lockstep, which multi-turn RLEF episodes do not; use rollout_engine vllm_server"
            )
        ckpt = resolve_resume(config)
        path = str(checkpoint_model_dir(ckpt)) if ckpt else config.model_name_or_path
        return colocated_engine(
            path, rank=rank, world_size=world, base_seed=config.seed, **config.rollout_kwargs
        )
    if config.rollout_engine == "vllm_server":
        from swerl.rollout.vllm_server import VLLMServerEngine

        device = dist.device if dist is not None else "cpu"
        return VLLMServerEngine(sender=rank == 0, device=device, **config.rollout_kwargs)
    raise ValueError(f"rollout_engine must be 'hf', 'vllm' or 'vllm_server', got {config.rollout_engine!r}")


def pad_id(tokenizer: Any, model: Any = None) -> int:
    """The tokenizer's pad (else eos) id, then the model config's; 0 when none is set."""
    candidates = [getattr(tokenizer, "pad_token_id", None), getattr(tokenizer, "eos_token_id", None)]
    if model is not None:
        candidates += [
            getattr(model.config, "pad_token_id", None),
            getattr(model.config, "eos_token_id", None),
        ]
    return next((value for value in candidates if isinstance(value, int)), 0)


def load_run(config: Any) -> tuple[Path | None, Any, Any]:
    """The checkpoint to resume from (or None) and the policy and tokenizer: the checkpoint's HF copy when
    resuming, so weights, optimizer and RNG all come from the same step. A LoRA run (`use_peft`) loads
    the start model and puts the checkpoint's adapters (or fresh ones) on it."""
    from swerl.trainers.common import load_policy, with_adapters

    ckpt = resolve_resume(config)
    model, tokenizer = load_policy(_run_source(config, ckpt), config)
    warn_past_context(model, config)
    if config.use_peft:
        return ckpt, with_adapters(model, config, ckpt), tokenizer
    return ckpt, model, tokenizer


def _run_source(config: Any, ckpt: Path | None) -> str:
    """Where `load_run` loads from: the checkpoint's HF copy when resuming a full run; the start model for
    a new run and for a LoRA run (whose checkpoint holds only adapters)."""
    return str(checkpoint_model_dir(ckpt)) if ckpt and not config.use_peft else config.model_name_or_path


def load_run_tokenizer(config: Any) -> Any:
    """The tokenizer `load_run` gives, loaded alone, so the rows are read and measured before the
    weights load."""
    from swerl.models.loading import load_tokenizer

    return load_tokenizer(_run_source(config, resolve_resume(config)), config.trust_remote_code)


def longest_sequence(config: Any) -> tuple[int, str]:
    """The longest sequence a run may give its model, and the options that set it."""
    if hasattr(config, "max_seq_length"):
        return config.max_seq_length, "max_seq_length"
    longest = config.max_prompt_length + getattr(config, "max_completion_length", 0)
    return longest, "max_prompt_length + max_completion_length"


def warn_past_context(model: Any, config: Any) -> None:
    """Say so when the run's sequences may outgrow the model's context (`max_position_embeddings`):
    positions past it were never trained, and a model with learned positions fails on them."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    longest, options = longest_sequence(config)
    if isinstance(limit, int) and longest > limit:
        print(
            f"swerl: warning: {options} allows {longest} tokens, past the model's context of {limit} "
            f"(max_position_embeddings): longer sequences meet positions it was never trained on",
            file=sys.stderr,
        )


def write_config(config: Any) -> Path:
    """output_dir/config.yaml: the run's settings, next to its metrics and checkpoints."""
    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict()), encoding="utf-8")
    return run_dir
