"""The small GRPO run the rollout-engine tests train through an engine (colocated vLLM, a vLLM server):
two steps over four prefixes of one line of code, rewarded per token, so each test states only what it
varies (the engine, the learning rate, LoRA) and checks what the engine did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.rewards import token_reward


def tiny_grpo_config(output_dir: str | Path, rollout_engine: str, **overrides: Any) -> GRPOConfig:
    values: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 2,
        "num_generations": 4,
        "prompts_per_step": 2,
        "max_completion_length": 6,
        "learning_rate": 5e-2,
        "micro_batch_size": 8,
        "report_to_tensorboard": False,
        "rollout_engine": rollout_engine,
    }
    return GRPOConfig(**{**values, **overrides})


def tiny_grpo(config: GRPOConfig, model: Any, tokenizer: Any, engine: Any) -> tuple[GRPOTrainer, list[int]]:
    """The trainer, and the token ids of the line whose prefixes are the prompts."""
    prompt = tokenizer("def f(x):\n    return x + 1\n")["input_ids"]
    examples = [Example(prompt_ids=prompt[: 5 + i]) for i in range(4)]
    reward = token_reward(range(64))
    return GRPOTrainer(config, model, tokenizer, examples, reward, engine=engine, progress=False), prompt
