"""Plumbing both trainers share: loading the policy, per-token log-probs, held-out evaluation, resume."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from swerl.algorithms import entropy_from_logits, token_logprobs
from swerl.errors import UserError
from swerl.learner.layout import latest_checkpoint
from swerl.models.adapters import require_peft
from swerl.rollout.base import SamplingParams
from swerl.trainers.config import LoRAConfig, TrainConfig
from swerl.trainers.data import Example
from swerl.trainers.rewards import GroupReward


def load_policy(name_or_path: str, config: TrainConfig) -> tuple[Any, Any]:
    """Model and tokenizer through the project's loader, built the way the run holds the model.

    `swerl.models.loading.load_model_and_tokenizer` knows the tokenizer quirks of locally built tiny models
    and loads any HF id or directory the same way. Under ZeRO-3 the model is created partitioned
    (`swerl.learner.learner.model_construction`), in the run's dtype (`weights_dtype`: bf16 under
    DeepSpeed with bf16, float32 otherwise, where the plain path autocasts).
    """
    from swerl.learner import init_distributed
    from swerl.learner.learner import model_construction, weights_dtype
    from swerl.models.loading import load_model_and_tokenizer

    dist = init_distributed()
    extra = {"trust_remote_code": True} if config.trust_remote_code else {}
    if Path(name_or_path).is_dir():  # LoRA adapters record their base by this name: make it absolute
        name_or_path = str(Path(name_or_path).resolve())
    with model_construction(config, dist):
        return load_model_and_tokenizer(name_or_path, dtype=weights_dtype(config, dist), device=None, **extra)


def load_reference(name_or_path: str, config: TrainConfig) -> Any:
    """rho, the KL anchor: the run's start model loaded afresh from `name_or_path`, frozen.

    Why a fresh load and not a copy of the policy handed to the trainer: on resume that policy is the
    checkpoint's, and a copy of it would move the anchor to wherever training had got (KL 0 at the first
    resumed step, a different objective from then on). The start model on disk never moves, so a
    resumed run penalises exactly what the uninterrupted one does. Under ZeRO-3 a copy is impossible
    anyway: the policy is partitioned, and the reference is built partitioned the same way.
    """
    model, _ = load_policy(name_or_path, config)
    return model.eval().requires_grad_(False)


def copy_model(model: Any) -> Any:
    """A frozen copy of a whole (unpartitioned) model: the reference of a fresh start given a model."""
    import copy

    from swerl.learner.learner import is_partitioned

    if is_partitioned(model):
        raise ValueError(
            "a ZeRO-3 partitioned model cannot be copied: load the reference with load_reference"
        )
    return copy.deepcopy(model).eval().requires_grad_(False)


def lora_config(config: LoRAConfig) -> Any:
    """peft's `LoraConfig` of the run's LoRA fields, for a causal LM."""
    peft = require_peft()
    return peft.LoraConfig(
        task_type="CAUSAL_LM",
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=config.lora_target_modules,
        modules_to_save=config.lora_modules_to_save,
        use_rslora=config.use_rslora,
    )


def with_adapters(model: Any, config: TrainConfig, ckpt: Path | None) -> Any:
    """The policy of a LoRA run: `model` (the start model, frozen) with fresh adapters, or on resume with
    the checkpoint's adapters, trainable, so weights and optimizer state come from the same step."""
    peft = require_peft()
    if ckpt is not None:
        return peft.PeftModel.from_pretrained(model, str(ckpt), is_trainable=True)
    linear = sorted(
        {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if hasattr(m, "in_features")}
    )
    for field_name in ("lora_target_modules", "lora_modules_to_save"):
        names = getattr(config, field_name)
        unmatched = unmatched_module_names(model, names if isinstance(names, list) else [])
        if unmatched:
            raise UserError(
                f"{field_name}: {', '.join(unmatched)} name no module of {config.model_name_or_path} (its "
                f"linear layers: {', '.join(linear)}; lora_target_modules may also be all-linear)"
            )
    try:
        return peft.get_peft_model(model, lora_config(config))
    except ValueError as err:  # peft's NoMatchingPeftModuleError: no module has a target's name
        raise UserError(
            f"lora_target_modules {config.lora_target_modules} match no layer of {config.model_name_or_path} "
            f"(its linear layers: {', '.join(linear)}; or use all-linear): {str(err).splitlines()[0]}"
        ) from None


def unmatched_module_names(model: Any, names: list[str]) -> list[str]:
    """The entries of `names` that name no module of `model` by peft's rule for a list (the whole dotted
    name, or its last parts after a dot). peft adapts the layers any entry matches and passes over the
    rest, so one typo among several targets would train fewer layers than asked, without a word."""
    modules = [name for name, _ in model.named_modules() if name]
    return [n for n in names if not any(m == n or m.endswith("." + n) for m in modules)]


def resolve_resume(config: TrainConfig) -> Path | None:
    """The checkpoint to continue from: an explicit path, the newest in output_dir ("latest"), or none."""
    if not config.resume_from_checkpoint:
        return None
    if config.resume_from_checkpoint == "latest":
        return latest_checkpoint(Path(config.output_dir))
    path = Path(config.resume_from_checkpoint)
    if not (path / "trainer_state.json").exists():
        raise FileNotFoundError(f"{path} is not a checkpoint (no trainer_state.json)")
    return path


def completion_logprobs(
    forward: Callable[..., Any],
    input_ids: Tensor,
    attention_mask: Tensor,
    completion_ids: Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Log-probs (and entropies) of the completion tokens at the end of each row.

    Rows are [left-padded prompt | right-padded completion], so every completion starts in the same
    column and `logits_to_keep` computes the LM head only over the completion. Position ids come from
    the attention mask, as in generation, or left padding would shift positions and the log-probs would
    not be those of the sampler. Both log-probs and entropies are computed a chunk of positions at a time
    (`swerl.algorithms.losses`), so no float32 [batch, length, vocabulary] copy of the logits exists.
    """
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    c = completion_ids.shape[1]
    out = forward(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        logits_to_keep=c + 1,
        use_cache=False,
    )
    logits = out.logits[:, :-1, :]
    logp = token_logprobs(logits, completion_ids, temperature)
    entropy = entropy_from_logits(logits.detach(), temperature) if with_entropy else None
    return logp, entropy


@dataclass
class PackedBatch:
    """Sequences as padded tensors: rows are [left-padded prompt | right-padded completion].

    Every completion starts in the same column, so one `logits_to_keep` covers all of them. GRPO fills
    `advantages` (and old/reference log-probs when it needs them); SFT uses the same layout for targets.
    """

    input_ids: Tensor  # [N, P + C]
    attention_mask: Tensor  # [N, P + C]
    completion_ids: Tensor  # [N, C]
    completion_mask: Tensor  # [N, C], 1 on completion tokens
    prompt_lens: list[int]
    completion_lens: list[int]
    advantages: Tensor | None = None  # [N]
    sampler_logp: Tensor | None = None  # [N, C], the rollout engine's log-probs
    old_logp: Tensor | None = None  # [N, C], only for mu > 1
    ref_logp: Tensor | None = None  # [N, C], only for beta > 0

    def __len__(self) -> int:
        return len(self.prompt_lens)

    def micro_batch(self, rows: list[int]) -> dict[str, Tensor | None]:
        """Rows `rows`, trimmed to their own longest prompt and completion (less padding to compute)."""
        p_total = self.input_ids.shape[1] - self.completion_ids.shape[1]
        p = max(self.prompt_lens[i] for i in rows)
        c = max(1, max(self.completion_lens[i] for i in rows))
        idx = torch.tensor(rows, device=self.input_ids.device)

        def cut(t: Tensor | None) -> Tensor | None:
            return None if t is None else t[idx, :c]

        return {
            "input_ids": self.input_ids[idx, p_total - p : p_total + c],
            "attention_mask": self.attention_mask[idx, p_total - p : p_total + c],
            "completion_ids": cut(self.completion_ids),
            "completion_mask": cut(self.completion_mask),
            "advantages": None if self.advantages is None else self.advantages[idx],
            "sampler_logp": cut(self.sampler_logp),
            "old_logp": cut(self.old_logp),
            "ref_logp": cut(self.ref_logp),
        }


def pack_sequences(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad_id: int,
    device: str,
    *,
    advantages: Tensor | None = None,
    sampler_logp: Sequence[Sequence[float] | None] | None = None,
) -> PackedBatch:
    """Pack prompt and completion token ids (as sampled, never re-tokenized) into a `PackedBatch`."""
    n = len(completions)
    p_max = max(len(p) for p in prompts)
    c_max = max(1, max(len(c) for c in completions))
    input_ids = torch.full((n, p_max + c_max), pad_id, dtype=torch.long)
    attention = torch.zeros((n, p_max + c_max), dtype=torch.long)
    has_logp = sampler_logp is not None and all(lp is not None for lp in sampler_logp)
    logp = torch.zeros((n, c_max)) if has_logp else None
    for i, (prompt, comp) in enumerate(zip(prompts, completions, strict=True)):
        p, c = len(prompt), len(comp)
        input_ids[i, p_max - p : p_max] = torch.tensor(list(prompt), dtype=torch.long)
        input_ids[i, p_max : p_max + c] = torch.tensor(list(comp), dtype=torch.long)
        attention[i, p_max - p : p_max + c] = 1
        if logp is not None and c:
            logp[i, :c] = torch.tensor(list(sampler_logp[i]), dtype=torch.float32)
    return PackedBatch(
        input_ids=input_ids.to(device),
        attention_mask=attention.to(device),
        completion_ids=input_ids[:, p_max:].to(device),
        completion_mask=attention[:, p_max:].to(device),
        prompt_lens=[len(p) for p in prompts],
        completion_lens=[len(c) for c in completions],
        advantages=None if advantages is None else advantages.to(device),
        sampler_logp=None if logp is None else logp.to(device),
    )


@dataclass
class EvalReport:
    """Held-out quality: mean reward, malformed rate, and the count of each malformation kind."""

    mean_reward: float
    malformed_rate: float
    errors: dict[str, int]
    samples: list[dict[str, Any]]
    seconds: float

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())) or "none"
        return f"mean reward {self.mean_reward:.3f}, malformed {self.malformed_rate:.0%} ({kinds})"


def evaluate(
    engine: Any,
    examples: Sequence[Example],
    reward_fn: GroupReward,
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    batch_size: int = 16,
) -> EvalReport:
    """One answer per held-out prompt (greedy by default), scored with the training reward."""
    start = time.perf_counter()
    rewards: list[float] = []
    errors: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    params = SamplingParams.from_known(
        n=1, max_tokens=max_new_tokens, max_new_tokens=max_new_tokens, temperature=temperature
    )
    for lo in range(0, len(examples), batch_size):
        chunk = examples[lo : lo + batch_size]
        groups = engine.generate([e.prompt_ids for e in chunk], params)
        for example, group in zip(chunk, groups, strict=True):
            result = reward_fn(example, group)[0]
            rewards.append(result.reward)
            if result.error:
                errors[result.error] += 1
            samples.append(
                {
                    "instance_id": example.instance_id,
                    "reward": result.reward,
                    "error": result.error,
                    "text": group[0].text,
                }
            )
    n = max(1, len(rewards))
    return EvalReport(
        mean_reward=sum(rewards) / n,
        malformed_rate=sum(errors.values()) / n,
        errors=dict(errors),
        samples=samples,
        seconds=time.perf_counter() - start,
    )
