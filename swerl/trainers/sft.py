"""Supervised fine-tuning on canonical answers: the SWE-RL paper's baseline, and the tiny model's warm-up.

The prompt is exactly what GRPO samples from (the row's messages through the chat template); the target
is `canonical_answer(code_context, oracle_new_content)`: a well-formed `<think>/<solution>` answer
whose SEARCH/REPLACE edits reproduce the developers' change, followed by the template's end-of-turn.
The loss is the negative log-likelihood of the target tokens only, a token mean over the global batch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from swerl.edit_format import canonical_answer
from swerl.errors import UserError
from swerl.learner import Learner
from swerl.learner.dist import all_reduce
from swerl.trainers.common import completion_logprobs, evaluate, pack_sequences
from swerl.trainers.config import SFTConfig
from swerl.trainers.data import EpochSampler, Example, rank_slice
from swerl.trainers.loop import TrainLoop, load_run, load_run_tokenizer, pad_id, write_config
from swerl.trainers.rewards import GroupReward


@dataclass
class SFTExample:
    """Prompt ids (as GRPO sees them) and the target ids (answer + end of turn)."""

    prompt_ids: list[int]
    target_ids: list[int]


def answer_suffix(tokenizer: Any, messages: list[dict[str, str]], answer: str) -> str:
    """The text the chat template puts after the generation prompt for `answer`, end-of-turn included.

    Rendering the whole conversation and cutting off the prompt keeps whatever the template adds around
    an assistant turn (e.g. ChatML's `<|im_end|>`), which is what teaches the model to stop. Trailing
    newlines after the end-of-turn are dropped: generation stops before them.
    """
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        [*messages, {"role": "assistant", "content": answer}], tokenize=False, add_generation_prompt=False
    )
    if not full.startswith(prompt):
        eos = tokenizer.eos_token or ""
        return answer + eos
    return full[len(prompt) :].rstrip("\n")


def build_sft_examples(
    examples: Sequence[Example], tokenizer: Any, max_seq_length: int, *, context_lines: int = 1
) -> tuple[list[SFTExample], int]:
    """Targets for examples that have a representable canonical answer and fit; returns (kept, skipped).

    `context_lines` is the canonical answer's minimum context around each change (more is added where a
    search would not be unique); 0 gives the shortest answers, which suits a tiny model's warm-up.
    """
    out, skipped = [], 0
    for ex in examples:
        try:
            answer = canonical_answer(ex.code_context, ex.oracle_new_content, context_lines=context_lines)
        except ValueError:
            skipped += 1
            continue
        target = tokenizer(answer_suffix(tokenizer, ex.messages, answer), add_special_tokens=False)[
            "input_ids"
        ]
        if len(ex.prompt_ids) + len(target) > max_seq_length:
            skipped += 1
            continue
        out.append(SFTExample(ex.prompt_ids, list(target)))
    return out, skipped


class SFTTrainer(TrainLoop):
    """`train()` runs the shared loop (resume, logging, checkpoints); `evaluate()` samples held-out answers
    to measure the malformed rate."""

    desc = "sft"

    def __init__(
        self,
        config: SFTConfig,
        model: Any,
        tokenizer: Any,
        train_examples: Sequence[Example],
        *,
        eval_examples: Sequence[Example] = (),
        reward_fn: GroupReward | None = None,
        engine: Any = None,
        progress: bool = True,
        context_lines: int = 1,
    ) -> None:
        super().__init__(config, tokenizer, progress)
        self.examples, self.skipped = build_sft_examples(
            train_examples, tokenizer, config.max_seq_length, context_lines=context_lines
        )
        if not self.examples:
            raise UserError(
                f"no SFT example fits max_seq_length {config.max_seq_length} (or has an answer that "
                f"SEARCH/REPLACE edits can express): raise max_seq_length or check train_file"
            )
        if self.skipped and self.dist.is_main:
            print(
                f"swerl: {self.skipped} of {len(train_examples)} SFT rows left out: no SEARCH/REPLACE answer "
                f"expresses their change, or prompt and answer exceed max_seq_length {config.max_seq_length}",
                file=sys.stderr,
            )
        self.eval_examples = list(eval_examples)
        self.reward_fn = reward_fn
        self.pad_id = pad_id(tokenizer, model)
        # The LR schedule spans the steps the run will really take: epochs may end it before max_steps.
        self.learner = Learner(model, config, self.max_steps(), self.dist)
        self._engine = engine
        self.sampler = EpochSampler(len(self.examples), config.seed)

    def max_steps(self) -> int:
        """`max_steps`, or fewer when `num_train_epochs` over the examples ends first."""
        cfg = self.config
        batch_size = cfg.per_device_train_batch_size * self.dist.world_size
        steps_per_epoch = max(1, len(self.examples) // batch_size)
        return min(cfg.max_steps, cfg.num_train_epochs * steps_per_epoch)

    def train_step(self) -> dict[str, float]:
        cfg, dist = self.config, self.dist
        t0 = time.perf_counter()
        batch_size = cfg.per_device_train_batch_size * dist.world_size
        rows = rank_slice(self.sampler.next_batch(batch_size), dist.rank, dist.world_size)
        metrics = self.train_on([self.examples[i] for i in rows])
        metrics["epoch"] = self.sampler.epoch + self.sampler.position / len(self.examples)
        metrics["step_time"] = time.perf_counter() - t0
        metrics["tokens_per_second"] = metrics["num_tokens_step"] / metrics["step_time"]
        if cfg.eval_every and self.eval_examples and (self.step + 1) % cfg.eval_every == 0:
            metrics.update(self.eval_metrics())
        return metrics

    def train_on(self, examples: list[SFTExample]) -> dict[str, float]:
        """One optimizer step: NLL of the target tokens, token-mean over every rank's examples."""
        cfg, dist = self.config, self.dist
        batch = pack_sequences(
            [e.prompt_ids for e in examples], [e.target_ids for e in examples], self.pad_id, dist.device
        )
        local_tokens = float(batch.completion_mask.sum())
        global_tokens = float(all_reduce(torch.tensor(local_tokens, dtype=torch.float64)))
        normalizer = global_tokens / dist.world_size  # ranks' gradients are averaged
        rows = [
            list(range(lo, min(lo + cfg.micro_batch_size, len(batch))))
            for lo in range(0, len(batch), cfg.micro_batch_size)
        ]
        loss_sum = 0.0
        for k, r in enumerate(rows):
            mb = batch.micro_batch(r)
            logp, _ = completion_logprobs(
                self.learner.forward, mb["input_ids"], mb["attention_mask"], mb["completion_ids"]
            )
            mask = mb["completion_mask"].float()
            loss = -(logp * mask).sum() / normalizer
            self.learner.backward(loss, last=k == len(rows) - 1)
            loss_sum += float(loss.detach()) / dist.world_size
        stats = self.learner.step()
        totals = all_reduce(
            torch.tensor(
                [loss_sum, float(sum(len(e.prompt_ids) + len(e.target_ids) for e in examples))],
                dtype=torch.float64,
            )
        )
        return {"loss": float(totals[0]), "num_tokens_step": float(totals[1]), **stats}

    @property
    def engine(self) -> Any:
        if self._engine is None:
            from swerl.rollout.hf import HFEngine

            self._engine = HFEngine(self.learner.module, self.tokenizer)
        return self._engine

    def eval_metrics(self) -> dict[str, float]:
        report = self.evaluate()
        return {"eval/reward": report.mean_reward, "eval/malformed_rate": report.malformed_rate}

    def evaluate(self, examples: Sequence[Example] | None = None) -> Any:
        """Greedy answers to held-out prompts, scored with `reward_fn` (default: the SWE-RL reward)."""
        from swerl.trainers.rewards import swe_rl_reward

        self.learner.eval()
        with torch.no_grad(), self.learner.full_parameters():
            report = evaluate(
                self.engine,
                list(examples if examples is not None else self.eval_examples),
                self.reward_fn or swe_rl_reward(),
                max_new_tokens=self.config.max_completion_length,
                temperature=0.0,
            )
        self.learner.train()
        return report


def run(config: SFTConfig, progress: bool = True) -> dict[str, Any]:
    """Everything `swerl train sft` does: load model and rows, evaluate, train, evaluate.

    The held-out evaluation before training (skipped on resume, as GRPO's) is the start model's figure,
    so one run gives the before/after comparison of the same greedy decoding and reward."""
    from swerl.trainers.data import train_and_eval_examples

    examples, _, eval_examples = train_and_eval_examples(
        config, load_run_tokenizer(config), config.max_seq_length, "max_seq_length"
    )
    ckpt, model, tokenizer = load_run(config)
    trainer = SFTTrainer(config, model, tokenizer, examples, eval_examples=eval_examples, progress=progress)
    if trainer.dist.is_main:
        write_config(config)
    out: dict[str, Any] = {"train_examples": len(trainer.examples), "skipped": trainer.skipped}
    if eval_examples and ckpt is None:
        out["eval_before"] = trainer.evaluate()
    out["history"] = trainer.train()
    if eval_examples:
        out["eval_after"] = trainer.evaluate()
    return out
