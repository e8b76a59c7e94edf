"""Run configurations as documented dataclasses, loaded from YAML (names follow TRL where they exist).

A YAML file sets any field by name; unknown keys are an error (a typo must not silently fall back to a
default). `--set key=value` on the command line overrides single fields after the file is read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from swerl.learner.config import LearnerConfig

C = TypeVar("C", bound="TrainConfig")


@dataclass
class TrainConfig(LearnerConfig):
    """What every trainer needs besides optimization (inherited from LearnerConfig, flat in YAML).

    Attributes:
        model_name_or_path: HF model id or local save_pretrained directory (also a checkpoint's model/).
        train_file: Parquet or JSONL rows from the data pipeline (problem_statement, code_context,
            oracle_new_content; an optional `prompt` list of chat messages overrides the built prompt).
        eval_file: held-out rows, scored before training and at the end (optional).
        output_dir: run directory: metrics.jsonl, tensorboard/, checkpoint-N/, final/.
        max_steps: optimizer steps (GRPO: rollout batches; each gives num_iterations optimizer steps).
        max_prompt_length: prompts with more tokens are skipped (truncating would cut code out).
        micro_batch_size: sequences per forward/backward; gradients accumulate over the rest.
        logging_steps / save_steps: log every N steps; checkpoint every N steps (0: only at the end).
        save_total_limit: keep the newest N checkpoints.
        resume_from_checkpoint: a checkpoint directory, or "latest" for the newest in output_dir.
        report_to_tensorboard: also write TensorBoard event files (when tensorboard is installed).
        trust_remote_code: passed to from_pretrained.
    """

    model_name_or_path: str = ""
    train_file: str = ""
    eval_file: str | None = None
    output_dir: str = "runs/train"
    max_steps: int = 100
    max_prompt_length: int = 2048
    micro_batch_size: int = 4
    logging_steps: int = 1
    save_steps: int = 0
    save_total_limit: int | None = 2
    resume_from_checkpoint: str | None = None
    report_to_tensorboard: bool = True
    trust_remote_code: bool = False
    max_train_samples: int | None = None
    max_eval_samples: int | None = None

    @classmethod
    def from_yaml(cls: type[C], path: str | Path | None = None, overrides: list[str] | None = None) -> C:
        """Build from a YAML file plus `key=value` overrides (values parsed as YAML scalars)."""
        values: dict[str, Any] = {}
        if path is not None:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
            if not isinstance(loaded, dict):
                raise ValueError(f"{path}: expected a mapping of config fields")
            values.update(loaded)
        for item in overrides or []:
            key, sep, raw = item.partition("=")
            if not sep:
                raise ValueError(f"override {item!r} is not key=value")
            values[key.strip()] = yaml.safe_load(raw)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO on the SWE-RL reward (defaults: the paper's group size, TRL's clipping and std).

    Attributes:
        num_generations: G, answers sampled per prompt; a group always stays on one rank.
        prompts_per_step: prompts in one rollout batch over all ranks (a multiple of the world size).
        max_completion_length: new tokens per answer; longer answers are cut (logged as clipped).
        temperature, top_p, top_k: sampling; log-probs are computed at the same temperature.
        num_iterations: mu, optimizer passes over each rollout batch; passes after the first use the
            log-probs of the policy that sampled (old log-probs) in the clipped ratio.
        epsilon, epsilon_high: clip range [1 - epsilon, 1 + epsilon_high]; epsilon_high None = epsilon.
        beta: weight of the k3 KL to a frozen copy of the initial model; 0 loads no reference model.
        loss_aggregation: "token-mean" over the global batch (default), "seq-mean", "seq-mean-token-sum".
        scale_rewards: advantage std: "group" (per group), "batch" (global batch) or "none".
        drop_zero_std_groups: leave groups whose rewards are all equal out of the update (they carry no
            signal); `frac_reward_zero_std` is logged either way.
        reward: "swe_rl" (similarity reward) or "token:N" / "token:LO-HI" (fraction of answer tokens
            with those ids; a smoke-test reward any model can learn).
        reward_strict: the similarity reward's strict format (off in the paper).
        eval_temperature: sampling temperature for held-out evaluation (0 = greedy).
        generation_batch_size: sequences (prompts x G) the transformers engine decodes together.
        rollout_engine: "hf" (transformers generate in the training process) or "vllm".
        rollout_kwargs: passed to `swerl.rollout.vllm_engine.VLLMEngine` (gpu_memory_utilization,
            tensor_parallel_size, enable_sleep_mode, max_model_len, ...).
    """

    num_generations: int = 16
    prompts_per_step: int = 8
    max_completion_length: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    num_iterations: int = 1
    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.0
    loss_aggregation: str = "token-mean"
    scale_rewards: str = "group"
    drop_zero_std_groups: bool = False
    reward: str = "swe_rl"
    reward_strict: bool = False
    eval_temperature: float = 0.0
    generation_batch_size: int = 64
    rollout_engine: str = "hf"
    rollout_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning on canonical answers (the SWE-RL paper's baseline and a warm-up).

    Attributes:
        per_device_train_batch_size: sequences per rank per optimizer step (micro-batches accumulate).
        max_seq_length: prompt + answer tokens; longer examples are skipped, not truncated.
        num_train_epochs: upper bound on passes over the data (max_steps stops earlier).
        eval_every: sample held-out answers every N steps to report the malformed rate (0: only at end).
        max_completion_length: new tokens when sampling held-out answers.
    """

    per_device_train_batch_size: int = 8
    max_seq_length: int = 4096
    num_train_epochs: int = 1
    eval_every: int = 0
    max_completion_length: int = 1024
    learning_rate: float = 1e-5
